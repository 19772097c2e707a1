//! GEMM micro-kernels: one MR×NR tile of C from a packed MR-row panel of op(A) and a
//! packed NR-column panel of op(B), both k-major (`a[k·MR + i]`, `b[k·NR + j]`, B's panel
//! 64-byte aligned so its vector loads are aligned ones).
//!
//! Register budget (why these tiles): per k step the kernel loads NR/L vectors of B
//! (L lanes), broadcasts MR scalars of A and issues MR·NR/L FMAs into MR·NR/L accumulators.
//! * AVX2, 16 ymm registers: 6×16 = 12 accumulators + 2 B vectors + 1 broadcast. 12 FMAs
//!   per step keep two FMA pipes of latency 4 busy (8 independent chains needed).
//! * AVX-512, 32 zmm registers: 6×64 = 24 accumulators + 4 B vectors + 1 broadcast; 10
//!   loads per 24 FMAs. 14×32 (28 accumulators, 16 loads per 28 FMAs: twice the
//!   broadcasts per FMA) was 4 % slower on a Zen 4 (its 512-bit FMAs take both 256-bit
//!   pipes, so a step is 24 cycles either way and the extra broadcasts are what costs).
//!
//! Every element is accumulated in k order with one fused multiply-add per step from
//! zero, then written (`overwrite`) or added to C: AVX2 and AVX-512 compute the same bits
//! (same KC, same order; tested). The generic tile multiplies and adds (no FMA in plain
//! Rust), so it differs from them by rounding only.
//!
//! Loads of the packed panels are aligned (B) or scalar broadcasts (A), so LLVM keeps them
//! whole under any tuning: with `-C target-cpu=x86-64-v2` it splits every *unaligned*
//! 256-bit load in two (`slow-unaligned-mem-32`), which is what slowed the `gemm` crate's
//! AVX2 kernels by a third on a Zen 3 (issue 33). Only the tile's C rows are unaligned,
//! once per KC steps.

/// Where a tile reads its rows of op(A).
#[derive(Clone, Copy)]
pub(crate) enum ARows {
    /// A packed k-major panel: element (i, k) at `ptr + k·MR + i`, kc·MR floats.
    Packed(*const f32),
    /// op(A) in place, row-major: element (i, k) at `ptr + i·lda + k`, rows ≥ the tile's
    /// `rows` never read. For products whose few B panels would not repay packing A (a C
    /// of a few columns: packing is a gather of all of X for a handful of multiply-adds
    /// per element). Same bits as packing first.
    InPlace { ptr: *const f32, lda: usize },
}

/// The C tile a kernel call writes: element (i, j) at `ptr + i·rs + j·cs` for i < rows,
/// j < cols (rows ≤ MR, cols ≤ NR), overwritten or added to.
#[derive(Clone, Copy)]
pub(crate) struct CTile {
    pub ptr: *mut f32,
    pub rs: usize,
    pub cs: usize,
    pub rows: usize,
    pub cols: usize,
    pub overwrite: bool,
}

impl CTile {
    /// Tile q of this row of tiles `nr` columns wide (its `cols` the row's): q·nr columns
    /// on, min(nr, cols − q·nr) of them.
    #[inline(always)]
    pub(crate) fn nth(self, q: usize, nr: usize) -> CTile {
        CTile {
            ptr: self.ptr.wrapping_add(q * nr * self.cs),
            cols: nr.min(self.cols - q * nr),
            ..self
        }
    }
}

/// A micro-kernel: its tile shape and the tile routine.
pub(crate) trait MicroKernel {
    /// Rows of the tile (rows of op(A) per packed panel).
    const MR: usize;
    /// Columns of the tile (columns of op(B) per packed panel).
    const NR: usize;
    /// Elements of k per packed step: 1 for f32 panels, 2 for bf16 pairs (a step's lane
    /// is the 32 bits of two consecutive k elements, which one `vdpbf16ps` lane folds).
    const K_STEP: usize = 1;

    /// Packed steps of a panel holding `kc` elements of k: ⌈kc / K_STEP⌉, or more where
    /// the tile routine reads k in whole chunks (the AMX tiles: 16 pairs), the steps past
    /// ⌈kc / K_STEP⌉ zero in both panels.
    #[inline(always)]
    fn steps(kc: usize) -> usize {
        kc.div_ceil(Self::K_STEP)
    }

    /// Whether a row panel's sweep brings the next panel's rows of op(A) towards L1 as it
    /// goes (see `block`): right for panels of a few rows, wrong for the AMX tile's 32
    /// (64 KiB of f32 at k = 512, more than L1, and its prefetches stalled the tiles).
    const PREFETCH_NEXT_A: bool = true;

    /// Packs `lanes` lanes × `kc` elements of k of a strided operand into a panel of
    /// [`MicroKernel::steps`] steps of `width` lanes (see [`super::pack`], which is the f32 one),
    /// lanes past `lanes` and elements past `kc` zero.
    ///
    /// # Safety
    /// As [`super::pack`]; `dst` holds `steps(kc)`·`width` slots; the CPU runs the
    /// kernel.
    #[inline(always)]
    unsafe fn pack(
        dst: &mut [f32],
        src: *const f32,
        lane_stride: usize,
        k_stride: usize,
        lanes: usize,
        kc: usize,
        width: usize,
    ) {
        // SAFETY: forwarded contract.
        unsafe { super::pack(dst, src, lane_stride, k_stride, lanes, kc, width) }
    }

    /// [`MicroKernel::pack`] for a panel of op(A)'s rows (`width` = MR): the same layout
    /// for every tile but the AMX one, whose A tiles read each row's steps contiguously.
    ///
    /// # Safety
    /// As [`MicroKernel::pack`].
    #[inline(always)]
    unsafe fn pack_a(
        dst: &mut [f32],
        src: *const f32,
        lane_stride: usize,
        k_stride: usize,
        lanes: usize,
        kc: usize,
        width: usize,
    ) {
        // SAFETY: forwarded contract.
        unsafe { Self::pack(dst, src, lane_stride, k_stride, lanes, kc, width) }
    }

    /// Elements t0..t0+t_n of k of a panel of op(A)'s rows (the whole panel `steps(kc)`
    /// steps, packed part by part: `block`'s groups of transposed panels), t0 a multiple
    /// of 32; for the k-major panels, [`MicroKernel::pack_a`] from step t0/K_STEP on.
    ///
    /// # Safety
    /// As [`MicroKernel::pack`] for the part; `panel` holds `steps`·`width` slots and the
    /// part's steps end within `steps`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack_a_part(
        panel: &mut [f32],
        steps: usize,
        t0: usize,
        src: *const f32,
        lane_stride: usize,
        k_stride: usize,
        lanes: usize,
        t_n: usize,
        width: usize,
    ) {
        let _ = steps;
        // SAFETY: forwarded contract.
        unsafe {
            Self::pack_a(
                &mut panel[t0 / Self::K_STEP * width..],
                src,
                lane_stride,
                k_stride,
                lanes,
                t_n,
                width,
            )
        }
    }

    /// C[i, j] = (overwrite ? 0 : C[i, j]) + Σ_k A(i, k)·b[k·NR + j] over the tile `c`
    /// (k counts packed steps: `kc` is ⌈elements / K_STEP⌉);
    /// the padding lanes of the B panel (and of a packed A panel) are zeros and nothing
    /// outside the tile's rows×cols corner of C is touched.
    ///
    /// # Safety
    /// The CPU has the kernel's instruction set; `a` addresses kc steps of the tile's rows
    /// (see [`ARows`]); `b` holds kc·NR floats starting on a 64-byte boundary; the tile's
    /// elements are valid for writes and no other thread touches them during the call.
    unsafe fn tile(kc: usize, a: ARows, b: *const f32, c: CTile);

    /// One row panel against consecutive B panels: `c` is the row of tiles (its `cols`
    /// all of theirs, ⌈cols/NR⌉ tiles); tile q reads the B panel at `b + q·panel_b` and
    /// writes `c.nth(q, NR)`; `each(q)` runs before tile q. The x86
    /// tiles run the whole row in one call of their instruction set: a call per tile (its
    /// frame, its set-up) took about 7 % of the AVX2 tile's samples in ∇W of 512×512 over
    /// k = 8000 (perf; BENCHMARKS.md).
    ///
    /// # Safety
    /// As [`MicroKernel::tile`] for every tile: B panels at `b + q·panel_b` for each tile
    /// q, the row's columns inside C.
    #[inline(always)]
    unsafe fn row<F: FnMut(usize)>(
        kc: usize,
        a: ARows,
        b: *const f32,
        panel_b: usize,
        c: CTile,
        mut each: F,
    ) {
        for q in 0..c.cols.div_ceil(Self::NR) {
            each(q);
            // SAFETY: the caller's contract, tile by tile.
            unsafe { Self::tile(kc, a, b.add(q * panel_b), c.nth(q, Self::NR)) }
        }
    }
}

/// Writes an MR×NR tile held in `acc` (row-major, NR = `nr`) to the corner of C `c`
/// names.
///
/// # Safety
/// As [`MicroKernel::tile`] for `c`.
#[inline(always)]
pub(super) unsafe fn store_partial(acc: &[f32], nr: usize, c: CTile) {
    for i in 0..c.rows {
        for (j, &v) in acc[i * nr..i * nr + c.cols].iter().enumerate() {
            // SAFETY: i < rows, j < cols (the caller's contract).
            unsafe {
                let d = c.ptr.add(i * c.rs + j * c.cs);
                *d = if c.overwrite { v } else { *d + v };
            }
        }
    }
}

/// Starts loading the rows of C that an accumulating tile (`overwrite` false, row-major)
/// adds to, at the tile's start: it reads them only after its k steps, and they come
/// from L3 (a C of 512×512 is the whole L2 beside a packed B block, and a long-k ∇W sweeps
/// it once per KC steps), so the tile's end waited on them. Measured: +1.2–4.4 % on the
/// AVX-512 path's ∇W products, the AVX2 path unchanged (BENCHMARKS.md).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn prefetch_c(c: &CTile) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    if c.overwrite || c.cs != 1 {
        return;
    }
    for i in 0..c.rows {
        let row = c.ptr.wrapping_add(i * c.rs).cast::<i8>();
        // From the line that holds the row's first element to the one of its last.
        let skew = row as usize % 64;
        let line = row.wrapping_sub(skew);
        for off in (0..skew + 4 * c.cols).step_by(64) {
            // SAFETY: a prefetch never faults, whatever the address (SSE: every x86-64).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.wrapping_add(off)) };
        }
    }
}

/// Portable tile, 4×16: LLVM vectorises the j loop with whatever the build targets.
pub(crate) struct Generic;

impl MicroKernel for Generic {
    const MR: usize = 4;
    const NR: usize = 16;

    unsafe fn tile(kc: usize, a: ARows, b: *const f32, c: CTile) {
        const MR: usize = Generic::MR;
        const NR: usize = Generic::NR;
        let mut panel = Vec::new();
        let a = match a {
            // SAFETY: the panel holds kc·MR floats (the caller's contract).
            ARows::Packed(p) => unsafe { std::slice::from_raw_parts(p, kc * MR) },
            ARows::InPlace { ptr, lda } => {
                panel.resize(kc * MR, 0.0);
                for i in 0..c.rows {
                    for t in 0..kc {
                        // SAFETY: i < rows, t < kc (the contract).
                        panel[t * MR + i] = unsafe { *ptr.add(i * lda + t) };
                    }
                }
                &panel[..]
            }
        };
        // SAFETY: the B panel holds kc·NR floats (the caller's contract).
        let b = unsafe { std::slice::from_raw_parts(b, kc * NR) };
        let mut acc = [[0f32; NR]; MR];
        for (ak, bk) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
            for i in 0..MR {
                for j in 0..NR {
                    acc[i][j] += ak[i] * bk[j];
                }
            }
        }
        // SAFETY: forwarded contract.
        unsafe { store_partial(acc.as_flattened(), NR, c) }
    }
}

/// Writes one x86 micro-kernel: the type `$kernel` and its tile routine `$name`, `$mr`
/// rows of `$nv` vectors of `$lanes` floats, under `$feature`, with the given intrinsics
/// for the vector type `$v`.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_tile {
    ($(#[$doc:meta])* $kernel:ident, $row:ident, $feature:literal, $v:ty, $lanes:literal,
     $mr:literal, $nv:literal, $zero:ident, $load:ident, $loadu:ident, $storeu:ident,
     $set1:ident, $fma:ident, $add:ident) => {
        $(#[$doc])*
        pub(crate) struct $kernel;

        impl MicroKernel for $kernel {
            const MR: usize = $mr;
            const NR: usize = $nv * $lanes;

            unsafe fn tile(kc: usize, a: ARows, b: *const f32, c: CTile) {
                // SAFETY: forwarded contract: one tile.
                unsafe { Self::row(kc, a, b, 0, c, |_| {}) }
            }

            unsafe fn row<F: FnMut(usize)>(
                kc: usize,
                a: ARows,
                b: *const f32,
                panel_b: usize,
                c: CTile,
                each: F,
            ) {
                // SAFETY: forwarded contract (the CPU has the kernel's instruction set).
                unsafe {
                    match a {
                        ARows::Packed(p) => $row::<false, F>(kc, p, 1, b, panel_b, c, each),
                        ARows::InPlace { ptr, lda } => $row::<true, F>(kc, ptr, lda, b, panel_b, c, each),
                    }
                }
            }
        }

        /// [`MicroKernel::row`] in the kernel's instruction set: the tiles in one call.
        /// With `DIRECT`, A in place (row i at `a + i·lda`, rows past `rows` read as the
        /// last one and never stored), else the packed panel.
        #[target_feature(enable = $feature)]
        unsafe fn $row<const DIRECT: bool, F: FnMut(usize)>(
            kc: usize,
            a0: *const f32,
            lda: usize,
            b0: *const f32,
            panel_b: usize,
            c0: CTile,
            mut each: F,
        ) {
            use std::arch::x86_64::*;
            const MR: usize = $mr;
            const NV: usize = $nv;
            const NR: usize = $nv * $lanes;
            for q in 0..c0.cols.div_ceil(NR) {
                each(q);
                let c = c0.nth(q, NR);
                // SAFETY: B panel q is inside the block (the caller's contract).
                let b = unsafe { b0.add(q * panel_b) };
                let mut acc: [[$v; NV]; MR] = [[$zero(); NV]; MR];
                let mut off = [0usize; MR];
                for (i, o) in off.iter_mut().enumerate() {
                    *o = if DIRECT { i.min(c.rows.max(1) - 1) * lda } else { i };
                }
                prefetch_c(&c);
                let (mut a, mut b) = (a0, b);
                for _ in 0..kc {
                    // SAFETY: k < kc: b + k·NR .. + NR is inside the B panel, its rows
                    // 64-byte aligned (NR·4 is a multiple of 64); packed, a + k·MR .. + MR is
                    // inside the A panel; direct, a + off[i] is element (min(i, rows−1), k)
                    // of op(A), in bounds (the caller's contract).
                    unsafe {
                        let mut bv: [$v; NV] = [$zero(); NV];
                        for (h, v) in bv.iter_mut().enumerate() {
                            *v = $load(b.add(h * $lanes));
                        }
                        for (i, row) in acc.iter_mut().enumerate() {
                            let ai = $set1(*a.add(off[i]));
                            for (h, r) in row.iter_mut().enumerate() {
                                *r = $fma(ai, bv[h], *r);
                            }
                        }
                        a = a.add(if DIRECT { 1 } else { MR });
                        b = b.add(NR);
                    }
                }
                if c.rows == MR && c.cols == NR && c.cs == 1 {
                    for (i, row) in acc.iter().enumerate() {
                        for (h, r) in row.iter().enumerate() {
                            // SAFETY: the whole tile is inside C (rows = MR, cols = NR, cs = 1).
                            unsafe {
                                let p = c.ptr.add(i * c.rs + h * $lanes);
                                let v = if c.overwrite { *r } else { $add($loadu(p), *r) };
                                $storeu(p, v);
                            }
                        }
                    }
                } else {
                    let mut tmp = [0f32; MR * NR];
                    for (i, row) in acc.iter().enumerate() {
                        for (h, r) in row.iter().enumerate() {
                            // SAFETY: tmp holds MR·NR floats.
                            unsafe { $storeu(tmp.as_mut_ptr().add(i * NR + h * $lanes), *r) };
                        }
                    }
                    // SAFETY: forwarded contract.
                    unsafe { store_partial(&tmp, NR, c) }
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
x86_tile!(
    /// AVX2 + FMA, 6×16.
    Avx2, avx2_6x16_row, "avx2,fma", __m256, 8, 6, 2, _mm256_setzero_ps, _mm256_load_ps,
    _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps
);

#[cfg(target_arch = "x86_64")]
x86_tile!(
    /// AVX-512F, 6×64.
    Avx512, avx512_6x64_row, "avx512f,avx2,fma", __m512, 16, 6, 4, _mm512_setzero_ps,
    _mm512_load_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps,
    _mm512_add_ps
);
