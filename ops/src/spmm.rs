//! CSR × dense SpMM, feature-partitioned (JPDC Algorithm 7, §6.2).
//!
//! out (n×f) = A (n×n_x, CSR, optional edge values) · X (n_x×f), X and out row-major with
//! any row stride ([`spmm_view`]: either may be a column block of a wider matrix).
//!
//! The f feature columns are cut into Q_f blocks of w columns. A task computes one block
//! for every row, so the X rows it gathers at random are only w wide: the block of X (and of
//! out) stays in cache while the index array streams. Q_f = max(p, ⌈8·n·f / S_L2⌉): 8·n·w
//! bytes (X block read + out block written, 4 + 4 bytes per element) fit the L2 of a core.
//! w is rounded up to 16 floats (a cache line), so blocks of a contiguous out never share a
//! line (a column block at an unaligned offset shares one line per row at each boundary).
//! Tasks: p lanes, each taking a contiguous run of blocks, so the blocks that run at the
//! same time are Q_f/p apart (never adjacent when Q_f ≥ 2p). Cost: 2·nnz·f flops; bytes
//! ≈ nnz·(4 + 4)·Q_f (indices and values once per block) + n_x·f·4 + n·f·4.
//!
//! Row stride: with rows of X a multiple of 2 KiB apart (f = 512 or 1024, contiguous), the
//! same panel of every gathered X row maps to the same few L1 sets, and the prefetched
//! panels evict each other. Rows padded by one cache line (row stride f + 16, through
//! [`spmm_view`]) measured 1.6× faster at f = 512 and 2.1× at f = 1024 on one thread
//! (BENCHMARKS.md, "SpMM row stride"): whoever allocates X should pad it.
//!
//! The backward of out = A·X is ∇X = Aᵀ·∇out: call this with the transposed data array of
//! a symmetric pattern (the samplers' Algorithm-6 permutation); no general transpose.

use rayon::prelude::*;

use crate::view::{MatMut, MatRef};
use crate::{cache, check_len, KernelError, CACHE_LINE_F32};

/// A CSR matrix view: `offsets` (n+1, monotone, ending at nnz), `indices` (< n_cols), and
/// optional `values` (absent: all 1).
#[derive(Clone, Copy, Debug)]
pub struct CsrRef<'a> {
    /// Row offsets.
    pub offsets: &'a [u32],
    /// Column indices.
    pub indices: &'a [u32],
    /// Edge values, one per entry.
    pub values: Option<&'a [f32]>,
    /// Number of columns (rows of X).
    pub n_cols: usize,
}

impl CsrRef<'_> {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Checks the structure: O(n + nnz), cheap beside the O(nnz·f) product.
    pub fn validate(&self, kernel: &'static str) -> Result<(), KernelError> {
        validate_offsets(kernel, self.offsets, self.indices.len())?;
        let bad = |what: String| Err(KernelError::Sparse { kernel, what });
        if let Some(k) = self.indices.iter().position(|&j| j as usize >= self.n_cols) {
            return bad(format!(
                "indices[{k}] = {} out of range, expected < {}",
                self.indices[k], self.n_cols
            ));
        }
        if let Some(v) = self.values {
            check_len(kernel, "values", self.indices.len(), v.len())?;
        }
        Ok(())
    }
}

/// Columns of one register panel: 4 × 16 floats (see `block`).
pub const PANEL: usize = 4 * CACHE_LINE_F32;

/// Checks CSR row offsets: n+1 ≥ 1 entries, monotone, from 0 to `nnz`.
pub fn validate_offsets(
    kernel: &'static str,
    offsets: &[u32],
    nnz: usize,
) -> Result<(), KernelError> {
    let bad = |what: String| Err(KernelError::Sparse { kernel, what });
    if offsets.is_empty() {
        return bad("offsets are empty, expected n+1 entries".into());
    }
    if offsets[0] != 0 || offsets[offsets.len() - 1] as usize != nnz {
        return bad(format!("offsets expected to run from 0 to nnz = {nnz}"));
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return bad(format!("offsets decrease at row {i}"));
    }
    Ok(())
}

/// Block width in columns for `n` rows of `f` features on `threads` threads: f/Q_f with
/// Q_f = max(p, ⌈8·n·f / L2⌉), rounded up to whole panels of 64 columns (a block is
/// computed panel by panel anyway, so a narrower block only adds passes over the indices).
pub fn block_width(n: usize, f: usize, threads: usize) -> usize {
    if f <= PANEL {
        return f.max(1);
    }
    let q = threads.max(1).max((8 * n * f).div_ceil(cache::l2_bytes()));
    f.div_ceil(q).div_ceil(PANEL) * PANEL
}

/// out = A·X with the default partition (see [`block_width`]) on the current rayon pool;
/// X (n_x×f) and out (n×f) contiguous row-major slices. A wrapper over [`spmm_view`].
pub fn spmm(a: CsrRef<'_>, x: &[f32], f: usize, out: &mut [f32]) -> Result<(), KernelError> {
    let w = block_width(a.n_cols.max(a.n_rows()), f, rayon::current_num_threads());
    spmm_blocked(a, x, f, out, w)
}

/// out = A·X with feature blocks of `width` columns (`width ≥ f`: unpartitioned), on
/// contiguous slices. A wrapper over [`spmm_view_blocked`].
pub fn spmm_blocked(
    a: CsrRef<'_>,
    x: &[f32],
    f: usize,
    out: &mut [f32],
    width: usize,
) -> Result<(), KernelError> {
    a.validate("spmm")?;
    check_len("spmm", "X", a.n_cols * f, x.len())?;
    check_len("spmm", "out", a.n_rows() * f, out.len())?;
    let x = MatRef::row_major(x, a.n_cols, f)?;
    let out = MatMut::row_major(out, a.n_rows(), f)?;
    run("spmm", a, x, out, width)
}

/// out = A·X with the default partition, X and out strided views (either may be a column
/// block of a wider matrix: out a block of a concatenation written in place, X a block of
/// a concatenation's gradient). Only out's own elements are written.
pub fn spmm_view(a: CsrRef<'_>, x: MatRef<'_>, out: MatMut<'_>) -> Result<(), KernelError> {
    let f = out.n_cols();
    let w = block_width(a.n_cols.max(a.n_rows()), f, rayon::current_num_threads());
    spmm_view_blocked(a, x, out, w)
}

/// [`spmm_view`] with feature blocks of `width` columns.
pub fn spmm_view_blocked(
    a: CsrRef<'_>,
    x: MatRef<'_>,
    out: MatMut<'_>,
    width: usize,
) -> Result<(), KernelError> {
    a.validate("spmm_view")?;
    run("spmm_view", a, x, out, width)
}

/// The one code path: shapes checked against the validated CSR, then lanes of blocks.
fn run(
    kernel: &'static str,
    a: CsrRef<'_>,
    x: MatRef<'_>,
    mut out: MatMut<'_>,
    width: usize,
) -> Result<(), KernelError> {
    check_len(kernel, "rows of X (columns of A)", a.n_cols, x.n_rows())?;
    check_len(kernel, "rows of out (rows of A)", a.n_rows(), out.n_rows())?;
    check_len(
        kernel,
        "columns of out (columns of X)",
        x.n_cols(),
        out.n_cols(),
    )?;
    let f = out.n_cols();
    if f == 0 || a.n_rows() == 0 {
        return Ok(());
    }
    let w = width.clamp(1, f);
    let q = f.div_ceil(w);
    let lanes = rayon::current_num_threads().clamp(1, q);
    let out = Out {
        ptr: out.as_mut_ptr(),
        row_stride: out.row_stride(),
    };
    let kernel = select_kernel();
    (0..lanes).into_par_iter().for_each(|lane| {
        let out = &out;
        for b in lane * q / lanes..(lane + 1) * q / lanes {
            let c0 = b * w;
            let c1 = (c0 + w).min(f);
            // SAFETY: block b covers columns c0..c1 of every row of out; blocks are disjoint
            // and each is computed by exactly one lane, so no element of out is written by
            // two tasks, and out (a unique borrow) outlives the parallel loop. Shapes were
            // checked above against the validated CSR, so every access is in bounds.
            unsafe { kernel(a, x, c0, c1, out) };
        }
    });
    Ok(())
}

/// The output shared by the lanes (disjoint column blocks): element (i, j) at
/// `ptr + i·row_stride + j`.
struct Out {
    ptr: *mut f32,
    row_stride: usize,
}
// SAFETY: lanes write disjoint column blocks (see `run`).
unsafe impl Sync for Out {}

type BlockKernel = unsafe fn(CsrRef<'_>, MatRef<'_>, usize, usize, &Out);

/// Picks the widest vector width the CPU has, once per call (the check is a cached load).
fn select_kernel() -> BlockKernel {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            return block_avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return block_avx2;
        }
    }
    block_plain
}

/// Rows × columns c0..c1 of out. Unsafe: out must hold n_rows rows of X's width that no
/// one else touches in columns c0..c1, and the shapes must have been checked.
///
/// Columns go in panels of up to 4 × 16 floats whose accumulators live in registers for a
/// whole row (16 floats = one AVX-512 vector, two AVX2 ones); a runtime-length inner loop
/// would pay its setup and an accumulator load/store per entry. Measured: 8-chunk panels
/// spill (w = 128: 56 ms vs 11.6 ms at w = 64, BENCHMARKS.md). Strides change nothing here:
/// a panel reads 16·C consecutive floats of one X row and writes as many of one out row.
#[inline(always)]
unsafe fn block(a: CsrRef<'_>, x: MatRef<'_>, c0: usize, c1: usize, out: &Out) {
    let mut c = c0;
    while c1 - c >= PANEL {
        unsafe { panel::<4>(a, x, c, out) };
        c += PANEL;
    }
    for chunks in [2usize, 1] {
        if c1 - c >= 16 * chunks {
            match chunks {
                2 => unsafe { panel::<2>(a, x, c, out) },
                _ => unsafe { panel::<1>(a, x, c, out) },
            }
            c += 16 * chunks;
        }
    }
    if c < c1 {
        unsafe { tail(a, x, c, c1, out) };
    }
}

/// Columns c..c + 16·C for every row, accumulators in registers.
///
/// Tried (third slice, BENCHMARKS.md): two accumulator sets (entries alternating, halving
/// the add chain) with fused multiply-adds: no difference measurable under the shared
/// machine's load, also with X in L1, so the simpler loop stays.
#[inline(always)]
unsafe fn panel<const C: usize>(a: CsrRef<'_>, x: MatRef<'_>, c: usize, out: &Out) {
    for i in 0..a.n_rows() {
        let mut acc = [[0f32; 16]; C];
        let (lo, hi) = (a.offsets[i] as usize, a.offsets[i + 1] as usize);
        for k in lo..hi {
            // The X rows are gathered at random: fetch the panel of the entry PREFETCH
            // ahead (across row boundaries) while this one computes.
            if let Some(&jn) = a.indices.get(k + PREFETCH) {
                prefetch(x, jn as usize, c, C);
            }
            let j = a.indices[k] as usize;
            let v = a.values.map_or(1.0, |vals| vals[k]);
            // SAFETY: j < n_cols of A = rows of X (validated and checked by the caller),
            // and columns c..c + 16·C lie within X's width (caller's contract).
            let xr = unsafe { &*x.row_unchecked(j).as_ptr().add(c).cast::<[[f32; 16]; C]>() };
            for (acc, xs) in acc.iter_mut().zip(xr) {
                for l in 0..16 {
                    acc[l] += v * xs[l];
                }
            }
        }
        // SAFETY: row i's columns c..c+16C lie inside this block (caller's contract).
        let dst = unsafe { out_row(out, i, c, 16 * C) };
        for (ch, acc) in acc.iter().enumerate() {
            dst[ch * 16..ch * 16 + 16].copy_from_slice(acc);
        }
    }
}

/// Columns c..c + len of out's row i. Safety: they lie in out and no one else accesses
/// them while the slice lives.
#[inline(always)]
unsafe fn out_row<'o>(out: &Out, i: usize, c: usize, len: usize) -> &'o mut [f32] {
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts_mut(out.ptr.add(i * out.row_stride + c), len) }
}

/// Entries ahead whose X panel is prefetched: about an L3 latency (≈ 50 ns) of work at a
/// few ns per entry.
const PREFETCH: usize = 12;

/// Hints the `lines` cache lines of X row `j` from column `c` into L1. `j` must be a row of
/// X and c + 16·(lines − 1) a column of it (true in `panel`).
#[inline(always)]
fn prefetch(x: MatRef<'_>, j: usize, c: usize, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let row = x.as_ptr().wrapping_add(j * x.row_stride() + c);
        for l in 0..lines {
            // SAFETY: a prefetch has no architectural effect, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(16 * l) as *const i8) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, j, c, lines);
}

/// Fewer than 16 remaining columns c..c1: plain loops.
#[inline(always)]
unsafe fn tail(a: CsrRef<'_>, x: MatRef<'_>, c: usize, c1: usize, out: &Out) {
    let w = c1 - c;
    for i in 0..a.n_rows() {
        let mut acc = [0f32; 16];
        let acc = &mut acc[..w];
        for k in a.offsets[i] as usize..a.offsets[i + 1] as usize {
            let j = a.indices[k] as usize;
            let v = a.values.map_or(1.0, |vals| vals[k]);
            // SAFETY: as in `panel`.
            let xr = &unsafe { x.row_unchecked(j) }[c..c1];
            for (o, &xv) in acc.iter_mut().zip(xr) {
                *o += v * xv;
            }
        }
        // SAFETY: as in `panel`.
        unsafe { out_row(out, i, c, w) }.copy_from_slice(acc);
    }
}

unsafe fn block_plain(a: CsrRef<'_>, x: MatRef<'_>, c0: usize, c1: usize, out: &Out) {
    // SAFETY: forwarded contract.
    unsafe { block(a, x, c0, c1, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(a: CsrRef<'_>, x: MatRef<'_>, c0: usize, c1: usize, out: &Out) {
    // SAFETY: forwarded contract; selected only when the CPU has AVX2 and FMA.
    unsafe { block(a, x, c0, c1, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_avx512(a: CsrRef<'_>, x: MatRef<'_>, c0: usize, c1: usize, out: &Out) {
    // SAFETY: forwarded contract; selected only when the CPU has AVX-512F.
    unsafe { block(a, x, c0, c1, out) }
}
