//! Dense f32 GEMM, written here (issue 33): C (m×n) = op(A)·op(B), or C += it, on
//! strided views, op = as stored or transposed, so C can be a column block of a wider
//! matrix (a block of a concatenation written in place) and A or B a column block of one
//! (the backward of a concatenation reads its gradient's blocks). One code path,
//! [`gemm_view`]; `gemm_nn` / `gemm_nt` / `gemm_tn` on contiguous slices wrap it:
//!
//! * `gemm_nn`: C (m×n) = A (m×k) · B (k×n)        — forward X·W
//! * `gemm_nt`: C (m×n) = A (m×k) · Bᵀ, B is n×k    — ∇X = ∇Y·Wᵀ
//! * `gemm_tn`: C (m×n) = Aᵀ · B, A is k×m, B k×n   — ∇W = Xᵀ·∇Y
//!
//! The method is BLIS's (Goto's) with the roles of the caches set for row-major C and
//! the step's shapes: for each block of NC columns and KC steps of k, op(B)'s block is
//! packed once into NR-column panels (KC·NC floats sized to half the L2, shared by every
//! thread); the threads then take MR-row panels of op(A), pack each (MR·KC floats, in L1)
//! and sweep it across all of B's panels, which stream from L2 in memory order. A product
//! of long k (∇W over a subgraph's nodes) runs as two halves of k side by side, added at
//! the end, and a thread that sweeps every row panel of a transposed op(A) packs eight at
//! a time (see `run` and `block`). A C of one or two columns from a row-major op(A) (a
//! classifier's logits) skips the tiles: `narrow.rs` streams op(A) once, its rows as
//! vector lanes, with the tiles' bits. The tile routines are in `kernel.rs`: AVX-512 6×64, AVX2 6×16, a portable 4×16, chosen by
//! [`Isa::current`] (`SAINTFLOW_ISA` forces a narrower one) or named in [`gemm_view_isa`].
//!
//! Why not a crate: the `gemm` crate (used before) reached 62–66 % of OpenBLAS on a Zen 3
//! because LLVM, tuned for the repo's `x86-64-v2`, split its unaligned 256-bit loads; a
//! library user's build flags must not decide our speed, the fusion pass needs an epilogue
//! over C tiles, and a weight's packed panels are to be shared across a step. Figures:
//! docs/bench/kernels-gemm.md ("GEMM of our own").
//!
//! Arithmetic: each element is Σ over k in order, one FMA per step within a KC block,
//! blocks added in order; the thread count and the split never change a bit, and the two
//! x86 paths give the same bits.

pub mod bf16;
mod kernel;
mod narrow;

use std::cell::RefCell;

use rayon::prelude::*;

use self::kernel::{ARows, CTile, MicroKernel};
pub use crate::isa::Isa;
use crate::view::{MatMut, MatRef};
use crate::{check_len, AlignedVec, KernelError};

/// Below this many multiply-adds a product runs on the calling thread: forking costs more.
const PARALLEL_MIN_MACS: usize = 1 << 18;

/// Steps of k per packed block. A's panel is MR·KC floats (6·256·4 = 6 KiB, in L1) while
/// B's panels stream from L2 in memory order; a C tile is read and written once per KC
/// steps (24 vector loads and stores per 6144 vector FMAs on AVX-512). The same on every
/// path, so the two x86 paths round alike.
const KC: usize = 256;

/// Columns of op(B) per packed block: KC·NC floats in half the L2 (the other half for the
/// A panels and C tiles passing through), a multiple of every NR (64), at least one panel.
/// 1 MiB of L2 (Zen 4) gives 512; 2 MiB (Sapphire/Emerald Rapids) 1024.
fn nc_block() -> usize {
    let l2 = crate::cache::l2_bytes();
    let nc = (l2 / 2) / (KC * 4);
    (nc / 64 * 64).clamp(64, 4096)
}

/// How an operand enters a product: as stored, or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trans {
    /// op(X) = X.
    N,
    /// op(X) = Xᵀ.
    T,
}

/// A strided matrix: element (i, j) at `ptr + i·rs + j·cs`. Serves op(A) and op(B) (a
/// transposed operand is the same storage with the strides swapped; they are only read,
/// through `at(..).cast_const()`) and C (row-major C has cs 1, the transposed problem's Cᵀ
/// rs 1).
#[derive(Clone, Copy)]
struct Strided {
    ptr: *mut f32,
    rs: usize,
    cs: usize,
}

impl Strided {
    /// Element (i, j). A method, so closures capture the whole (Sync) value.
    ///
    /// # Safety
    /// (i, j) is inside the matrix.
    unsafe fn at(&self, i: usize, j: usize) -> *mut f32 {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.add(i * self.rs + j * self.cs) }
    }

    /// The transpose: the same storage, strides swapped.
    fn t(self) -> Strided {
        Strided {
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

// SAFETY: the operands are borrowed (MatRef) and only read, C is borrowed uniquely
// (MatMut) and the threads write disjoint tiles of it (see `block`), all for the call's
// duration.
unsafe impl Send for Strided {}
unsafe impl Sync for Strided {}

/// Shape and operand of op(X) for a stored view X.
fn operand(x: MatRef<'_>, t: Trans) -> (usize, usize, Strided) {
    let (ptr, rs) = (x.as_ptr().cast_mut(), x.row_stride());
    let stored = Strided { ptr, rs, cs: 1 };
    match t {
        Trans::N => (x.n_rows(), x.n_cols(), stored),
        Trans::T => (x.n_cols(), x.n_rows(), stored.t()),
    }
}

/// The arithmetic of a product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 operands, f32 multiply-adds (the default).
    #[default]
    F32,
    /// Operands rounded to bfloat16 as they are packed, products accumulated in f32 with
    /// AVX512_BF16's dot product ([`bf16`]); only on CPUs that have it, on the AVX-512
    /// path (a 6×64 tile, or 6×16 where [`plan`] narrows the f32 one).
    Bf16,
}

impl Precision {
    /// The name a plan file gives it.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        }
    }

    /// Whether products of this precision run here; for bf16 an error saying what the CPU
    /// (or `SAINTFLOW_ISA`) lacks.
    pub fn check(self) -> Result<(), String> {
        match self {
            Precision::F32 => Ok(()),
            Precision::Bf16 if !bf16::available() => Err(
                "bf16 needs a CPU with AVX512_BF16 (Intel Cooper Lake, Sapphire Rapids or \
                 later; AMD Zen 4 or later), and this one has none: use precision f32"
                    .into(),
            ),
            Precision::Bf16 if Isa::current() != Isa::Avx512 => Err(format!(
                "bf16 runs on the AVX-512 path (with AVX512_BF16), and {}={} forces {}: \
                 unset it or use precision f32",
                crate::isa::ISA_ENV,
                std::env::var(crate::isa::ISA_ENV).unwrap_or_default(),
                Isa::current().name()
            )),
            Precision::Bf16 => Ok(()),
        }
    }
}

/// A tile routine: one of the f32 instruction sets, or a bf16 one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kern {
    F32(Isa),
    /// 6×64.
    Bf16,
    /// 6×16.
    Bf16Narrow,
}

impl Kern {
    /// The routine for a product that [`plan`] put on `isa`, at `precision`: for bf16,
    /// the tile of the f32 one's width (AVX-512's 64 columns, or 16 where the plan took
    /// AVX2's narrow tile for a C of few columns).
    fn of(precision: Precision, isa: Isa) -> Kern {
        match (precision, isa) {
            (Precision::Bf16, Isa::Avx512) => Kern::Bf16,
            (Precision::Bf16, Isa::Avx2) => Kern::Bf16Narrow,
            _ => Kern::F32(isa),
        }
    }
}

/// Runs `$body` with `$k` the tile routine type of `$kern` (a [`Kern`]).
macro_rules! with_kernel {
    ($kern:expr, $k:ident => $body:expr) => {
        match $kern {
            #[cfg(target_arch = "x86_64")]
            Kern::Bf16 => {
                type $k = bf16::Avx512Bf16;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            Kern::Bf16Narrow => {
                type $k = bf16::Avx512Bf16Narrow;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            Kern::F32(Isa::Avx512) => {
                type $k = kernel::Avx512;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            Kern::F32(Isa::Avx2) => {
                type $k = kernel::Avx2;
                $body
            }
            _ => {
                type $k = kernel::Generic;
                $body
            }
        }
    };
}

/// (MR, NR) of `isa`'s f32 tile routine.
fn tile_shape(isa: Isa) -> (usize, usize) {
    with_kernel!(Kern::F32(isa), K => (K::MR, K::NR))
}

/// An error naming `kernel` when the CPU lacks `isa`.
fn require(isa: Isa, kernel: &'static str) -> Result<(), KernelError> {
    if isa.available() {
        Ok(())
    } else {
        Err(KernelError::View {
            kernel,
            what: format!("this CPU cannot run the {} path", isa.name()),
        })
    }
}

/// C as a strided target once C's shape is checked against (m, n): `None` when nothing
/// is left to do (an empty C, or k = 0, which zeroes C unless accumulating).
fn target(
    kernel: &'static str,
    what_cols: &'static str,
    (m, n, k): (usize, usize, usize),
    c: &mut MatMut<'_>,
    accumulate: bool,
) -> Result<Option<Strided>, KernelError> {
    check_len(kernel, "rows of C (rows of op(A))", m, c.n_rows())?;
    check_len(kernel, what_cols, n, c.n_cols())?;
    if m == 0 || n == 0 {
        return Ok(None);
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return Ok(None);
    }
    Ok(Some(Strided {
        ptr: c.as_mut_ptr(),
        rs: c.row_stride(),
        cs: 1,
    }))
}

/// Whether an m×n×k product forks: below this many multiply-adds, or on one thread, it
/// runs on the calling thread.
fn forks(m: usize, n: usize, k: usize) -> bool {
    m * n * k >= PARALLEL_MIN_MACS && rayon::current_num_threads() > 1
}

/// C = op(A)·op(B), or C += it with `accumulate`. op(A) is m×k, op(B) k×n and C m×n;
/// any of the three may be strided (a column or row block of a wider matrix). Only C's
/// own elements are written. Runs at [`Isa::current`].
pub fn gemm_view(
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    let f32 = Precision::F32;
    product(
        "gemm_view",
        Isa::current(),
        f32,
        a,
        ta,
        b,
        tb,
        c,
        accumulate,
        None,
    )
}

/// [`gemm_view`] at `precision`: for [`Precision::Bf16`] an error where the CPU cannot
/// run it ([`Precision::check`]).
pub fn gemm_view_with(
    precision: Precision,
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    let kernel = "gemm_view_with";
    require_precision(precision, kernel)?;
    product(
        kernel,
        Isa::current(),
        precision,
        a,
        ta,
        b,
        tb,
        c,
        accumulate,
        None,
    )
}

/// One half of k of C = op(A)·op(B) as [`gemm_view_with`] computes it at `precision` (a k
/// of at least 16 KC blocks runs as two halves, [`k_splits`]), written into C (overwritten),
/// on the calling thread: the first half is what [`gemm_view_with`] leaves in C before it
/// adds the second, so the two computed apart and added by [`add_half`] give its bits.
/// What lets a caller run the halves of a product it does not pack for (a C of few rows or
/// columns) as separate tasks. An error when k does not split.
#[allow(clippy::too_many_arguments)]
pub fn gemm_view_half(
    precision: Precision,
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    half: KHalf,
    c: MatMut<'_>,
) -> Result<(), KernelError> {
    let kernel = "gemm_view_half";
    require_precision(precision, kernel)?;
    let isa = Isa::current();
    product(kernel, isa, precision, a, ta, b, tb, c, false, Some(half))
}

/// Whether a product of k (the columns of op(A)) at `precision` runs as two halves of k
/// ([`gemm_view_half`], [`gemm_packed_half`]).
pub fn k_splits(precision: Precision, k: usize) -> bool {
    let kern = Kern::of(precision, Isa::current());
    k_blocks_of(k, with_kernel!(kern, K => K::K_STEP))
        .1
        .is_some()
}

/// An error naming `kernel` when the CPU cannot run products of `precision`.
fn require_precision(precision: Precision, kernel: &'static str) -> Result<(), KernelError> {
    precision
        .check()
        .map_err(|what| KernelError::View { kernel, what })
}

/// [`gemm_view`] on a named instruction set (the tests run every one the CPU has); an
/// error if the CPU lacks it.
pub fn gemm_view_isa(
    isa: Isa,
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    require(isa, "gemm_view_isa")?;
    let f32 = Precision::F32;
    product("gemm_view_isa", isa, f32, a, ta, b, tb, c, accumulate, None)
}

#[allow(clippy::too_many_arguments)]
fn product(
    kernel: &'static str,
    isa: Isa,
    precision: Precision,
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    mut c: MatMut<'_>,
    accumulate: bool,
    only: Option<KHalf>,
) -> Result<(), KernelError> {
    let (m, k, a) = operand(a, ta);
    let (kb, n, b) = operand(b, tb);
    check_len(kernel, "rows of op(B) (columns of op(A))", k, kb)?;
    // One half of k (`gemm_view_half`): its range in the whole's blocking, on this thread.
    let k_step = with_kernel!(Kern::of(precision, isa), K => K::K_STEP);
    let half = only.map(|h| half_range(kernel, k, k_step, h)).transpose()?;
    let what = "columns of C (columns of op(B))";
    let Some(out) = target(kernel, what, (m, n, k), &mut c, accumulate)? else {
        return Ok(());
    };
    let parallel = only.is_none() && forks(m, n, k);
    if narrow::applies(precision, isa, (m, n), a.cs == 1 || a.rs == 1) {
        // SAFETY: as below (the views' bounds, C a unique borrow); a.cs or a.rs is 1;
        // `isa` is an x86 FMA path the CPU has (checked or current), and both have AVX2
        // and FMA; with `only`, k splits (checked).
        unsafe { narrow::product((m, n, k), a, b, out, accumulate, parallel, only) };
        return Ok(());
    }
    let ta_of = if a.cs == 1 { Trans::N } else { Trans::T };
    let (isa, transposed) = plan(isa, m, n, ta_of);
    let kern = Kern::of(precision, isa);
    let (shape, a, b, out) = if transposed {
        ((n, m, k), b.t(), a.t(), out.t())
    } else {
        ((m, n, k), a, b, out)
    };
    // SAFETY: the views' constructors checked that every element (i, j) at
    // i·row_stride + j, i < rows, j < cols, lies in their slices, and the shapes agree
    // (checked above), so the operands' strides reach only in-bounds elements. C is a
    // unique borrow (MatMut): no element of C is an element of A or B. `isa` is
    // available: `gemm_view` takes `Isa::current()`, capped to the CPU; `gemm_view_isa`
    // checked it; `plan` only narrows it to AVX2, which every AVX-512 CPU has; bf16 only
    // where the caller checked `precision` (`gemm_view_with`).
    unsafe {
        match half {
            None => {
                with_kernel!(kern, K => run::<K>(shape, a, BSource::Strided(b), out, accumulate, parallel))
            }
            // A half's range starts on a block of the whole's blocking (the split is a
            // multiple of kc); `kern` has the K_STEP of `k_step` (the same precision).
            Some((ks, kc)) => {
                with_kernel!(kern, K => run_k::<K>(shape, a, BSource::Strided(b), out, accumulate, false, (ks, kc)))
            }
        }
    };
    Ok(())
}

/// Whether [`gemm_view_with`] runs an m×n product at `precision` on the narrow path (C of
/// one or two columns: rows of op(A) as vector lanes, op(A) streamed once and nothing
/// packed, whether op(A) is transposed or not), at [`Isa::current`]. A caller that splits
/// C into row blocks then gives each block to [`gemm_view_with`] rather than packing op(B)
/// for them.
pub fn narrow_path(precision: Precision, m: usize, n: usize) -> bool {
    // A view has unit column stride: op(A) is row-major, or column-major transposed.
    narrow::applies(precision, Isa::current(), (m, n), true)
}

/// How [`gemm_view`] runs an m×n product on `isa` with op(A) as `ta`: the tile routine
/// (a narrower one when C's few columns would pad the wide tile by a third more work: on
/// AVX-512 a 1024→7 classifier computes 64 columns per tile for 7, AVX2's 16) and whether
/// it computes Cᵀ instead (when that pads a quarter less work and op(A) packs as cheaply
/// transposed: for a row-major op(A) each step would gather NR rows, 3 ns an element at
/// NR 64 — 5935×1024·1024×7 took 18.9 ms so, 5.7 on the AVX2 tile; BENCHMARKS.md). Same
/// bits whatever the answer (the FMA paths round alike; a·b and b·a too). A caller that
/// splits C into row blocks shares a [`PackedB`] for the returned path, and only when not
/// transposed (then each block packs its own rows of op(A), and op(B)ᵀ is small).
/// Transposed: n = 2 classes computed 62 of every 64 AVX-512 columns for nothing, ≈ 8 ms
/// per classifier product of a JPDC step; as Cᵀ its 2 rows pad only to MR.
pub fn plan(isa: Isa, m: usize, n: usize, ta: Trans) -> (Isa, bool) {
    let padded = |isa: Isa, rows: usize, cols: usize| {
        let (mr, nr) = tile_shape(isa);
        rows.div_ceil(mr) * mr * cols.div_ceil(nr) * nr
    };
    let work = |(isa, t): (Isa, bool)| {
        if t {
            padded(isa, n, m)
        } else {
            padded(isa, m, n)
        }
    };
    let mut candidates = vec![(isa, false)];
    if ta == Trans::T {
        candidates.push((isa, true));
    }
    if isa == Isa::Avx512 {
        candidates.push((Isa::Avx2, false));
        if ta == Trans::T {
            candidates.push((Isa::Avx2, true));
        }
    }
    // The first (widest, as given) unless a later one pads a quarter less work.
    let mut best = candidates[0];
    for &c in &candidates[1..] {
        if work(c) * 4 < work(best) * 3 {
            best = c;
        }
    }
    best
}

thread_local! {
    /// The calling thread's B-block buffer, kept between calls (up to KC·NC floats). A
    /// worker that steals another product while it waits finds it borrowed and allocates.
    static B_PACK: RefCell<AlignedVec> = const { RefCell::new(AlignedVec::new()) };
    /// The calling thread's buffer for the panels of op(A) it packs when it sweeps every
    /// row panel itself ([`block`]), kept between blocks and calls (up to 8·KC·MR floats):
    /// a block used to allocate and zero its own.
    static A_PACK: RefCell<AlignedVec> = const { RefCell::new(AlignedVec::new()) };
}

/// Scratch buffers up to this many floats (16 MiB) stay with their thread between calls;
/// a larger one (the second half of a long-k product with a large C) is freed after use.
const SCRATCH_KEPT_MAX: usize = 1 << 22;

/// Runs `f` on the calling thread's buffer `key`, grown to at least `len` floats (its
/// contents are whatever the last user left), or on a fresh one where this thread holds it
/// already (a worker that stole another product while it waits inside one) or where `len`
/// exceeds [`SCRATCH_KEPT_MAX`].
fn with_scratch<R>(
    key: &'static std::thread::LocalKey<RefCell<AlignedVec>>,
    len: usize,
    f: impl FnOnce(&mut AlignedVec) -> R,
) -> R {
    key.with(|cell| {
        let mut owned = AlignedVec::new();
        let mut borrowed = cell.try_borrow_mut();
        let buf = match borrowed.as_deref_mut() {
            Ok(buf) if len <= SCRATCH_KEPT_MAX => buf,
            _ => &mut owned,
        };
        if buf.len() < len {
            *buf = AlignedVec::zeroed(len);
        }
        f(buf)
    })
}

/// Where a product's packed op(B) blocks come from.
#[derive(Clone, Copy)]
enum BSource<'b> {
    /// Packed block by block into the calling thread's buffer.
    Strided(Strided),
    /// Packed beforehand ([`PackedB`]), shared by the products that use it.
    Packed(&'b PackedB),
}

/// Products with at least this many packed steps of k run as two halves of k, the second
/// into a buffer then added to C (see [`run`]): 16 KC blocks, which ∇W = Xᵀ·∇Y of a
/// sampled subgraph (k = its 6–8 thousand nodes) passes and no product over features does.
const K_SPLIT_STEPS: usize = 16 * KC;

/// How [`run`] blocks k, in packed steps: (steps per block, the split). Below
/// [`K_SPLIT_STEPS`], blocks of [`KC`] and no split. From there k runs as two halves, each
/// in equal blocks of at most KC: half = ⌈steps/2⌉ in nb = ⌈half/KC⌉ blocks of
/// ⌈half/nb⌉, the split after the first nb. The halves then differ by at most 2·nb steps
/// (k = 8000: 4000 and 4000 in blocks of 250; at a KC-block boundary they were 4096 and
/// 3904, and the thread of the first half set the pace at 2 threads). A function of k
/// alone, so a product's row and column parts (which the executor runs apart) and a
/// [`PackedB`] block k where the whole would, and the thread count never changes a bit.
fn k_blocks(steps: usize) -> (usize, Option<usize>) {
    if steps < K_SPLIT_STEPS {
        return (KC, None);
    }
    let half = steps.div_ceil(2);
    let nb = half.div_ceil(KC);
    let kc = half.div_ceil(nb);
    (kc, Some(nb * kc))
}

/// [`k_blocks`] in elements of k for a tile routine that packs `k_step` elements a step:
/// (elements per block, the split).
fn k_blocks_of(k: usize, k_step: usize) -> (usize, Option<usize>) {
    let (kc, split) = k_blocks(k.div_ceil(k_step));
    (kc * k_step, split.map(|s| s * k_step))
}

/// The range of k that `half` covers in [`k_blocks_of`]'s blocking of k (packing `k_step`
/// elements a step), with the block length: an error naming `kernel` when k does not split.
fn half_range(
    kernel: &'static str,
    k: usize,
    k_step: usize,
    half: KHalf,
) -> Result<(std::ops::Range<usize>, usize), KernelError> {
    let (kc, split) = k_blocks_of(k, k_step);
    let Some(split) = split else {
        return Err(KernelError::View {
            kernel,
            what: format!("k = {k} is below the split ({K_SPLIT_STEPS} packed steps)"),
        });
    };
    let ks = match half {
        KHalf::First => 0..split,
        KHalf::Second => split..k,
    };
    Ok((ks, kc))
}

/// C += H element by element, one f32 addition each: how a long-k product adds its second
/// half of k (computed into H) to the first (in C), so a caller that runs the halves apart
/// ([`gemm_packed_half`]) gets the same bits.
pub fn add_half(mut c: MatMut<'_>, h: MatRef<'_>) -> Result<(), KernelError> {
    check_len("add_half", "rows of H", c.n_rows(), h.n_rows())?;
    check_len("add_half", "columns of H", c.n_cols(), h.n_cols())?;
    for i in 0..h.n_rows() {
        add_row(c.row_mut(i), h.row(i));
    }
    Ok(())
}

/// One row of [`add_half`].
fn add_row(c: &mut [f32], h: &[f32]) {
    c.iter_mut().zip(h).for_each(|(x, y)| *x += y);
}

thread_local! {
    /// The calling thread's buffer for the second half of a k-split product ([`run`]),
    /// kept between calls (m·n floats, up to [`SCRATCH_KEPT_MAX`]).
    static K_HALF: RefCell<AlignedVec> = const { RefCell::new(AlignedVec::new()) };
}

/// The blocked product on tile routine `K`.
///
/// A product of long k (∇W = Xᵀ·∇Y: 512×512 over k = 8000) runs as two halves of k, the
/// first into C and the second into a buffer added to C at the end, side by side on two
/// threads. Each half packs its own rows of op(B) and its own panels of op(A), so the
/// threads meet once, where one sweep of row panels per KC block met 31 times (a barrier
/// per block, with op(B)'s next block packed between): on the forced AVX2 path of a Zen 4
/// those products were 90–93 % of OpenBLAS at 2 threads (BENCHMARKS.md). Where the split
/// falls depends on k alone ([`k_blocks`]), so one thread computes the same bits. On two
/// threads the one done first then helps with the other's remaining blocks
/// ([`run_halves`]); on more, each half forks inside. The buffer is m·n floats, C's size
/// again, for the call.
///
/// # Safety
/// `a` addresses op(A) (m×k) in bounds, and `b` op(B) (k×n) (a `PackedB` for `K`'s NR, of
/// k×n); `c.at(i, j)` is valid for writes for i < m, j < n and aliases neither; the CPU
/// runs `K`.
unsafe fn run<K: MicroKernel>(
    shape: (usize, usize, usize),
    a: Strided,
    b: BSource<'_>,
    c: Strided,
    accumulate: bool,
    parallel: bool,
) {
    let (m, n, k) = shape;
    let (kc, split) = k_blocks_of(k, K::K_STEP);
    let Some(split) = split else {
        // SAFETY: forwarded contract.
        unsafe { run_k::<K>(shape, a, b, c, accumulate, parallel, (0..k, kc)) };
        return;
    };
    with_scratch(&K_HALF, m * n, |buf| {
        let half = Strided {
            ptr: buf.as_mut_slice().as_mut_ptr(),
            rs: n,
            cs: 1,
        };
        // Each half forks inside only when there are threads beyond the two halves.
        let inner = parallel && rayon::current_num_threads() > 2;
        // SAFETY (both halves): forwarded contract for k ranges of op(A) and op(B); the
        // buffer holds m·n floats, written by the second half only, C by the first only.
        let first = || unsafe { run_k::<K>(shape, a, b, c, accumulate, inner, (0..split, kc)) };
        let second = || unsafe { run_k::<K>(shape, a, b, half, false, inner, (split..k, kc)) };
        if inner {
            rayon::join(first, second);
        } else if parallel {
            let halves = [(c, accumulate, 0..split), (half, false, split..k)];
            // SAFETY: as above.
            unsafe { run_halves::<K>(shape, a, b, halves, kc) };
        } else {
            first();
            second();
        }
        let add_rows = |rows: std::ops::Range<usize>| {
            for i in rows {
                // SAFETY: row i < m of the buffer, n floats.
                let h = unsafe { std::slice::from_raw_parts(half.at(i, 0), n) };
                if c.cs == 1 {
                    // SAFETY: row i of C, n contiguous floats (cs 1), this task's only.
                    let row = unsafe { std::slice::from_raw_parts_mut(c.at(i, 0), n) };
                    add_row(row, h);
                } else {
                    for (j, y) in h.iter().enumerate() {
                        // SAFETY: i < m, j < n: inside C.
                        unsafe { *c.at(i, j) += y };
                    }
                }
            }
        };
        if parallel {
            let per = m.div_ceil(4 * rayon::current_num_threads()).max(1);
            (0..m.div_ceil(per))
                .into_par_iter()
                .for_each(|p| add_rows(p * per..m.min((p + 1) * per)));
        } else {
            add_rows(0..m);
        }
    });
}

/// The two halves of k of [`run`] on two threads, each half's blocks in order by its own
/// thread, and each block's row panels claimed [`GROUP`] at a time, so that the thread
/// that finishes its half first computes groups of the other's remaining blocks. Static
/// halves finished apart whenever a neighbour slowed one core: on the forced AVX2 path of
/// a Zen 4, 23–26 ms against 29.4 ms for ∇W of 512×512 over k = 8000, where a quiet
/// minute gave 21.5–22.6 each (BENCHMARKS.md). The owner packs a block's op(B) only after
/// every group of the previous block is done, and a group adds its k block to its rows of
/// C after the previous block's, so each element sums its k blocks in the same order
/// whoever computes them: the same bits as one thread.
///
/// # Safety
/// As [`run`]; each half's C (its (c, accumulate, k range)) is m×n, written by that half
/// only, and its k range starts on a block of `kc_max`.
unsafe fn run_halves<K: MicroKernel>(
    (m, n, _): (usize, usize, usize),
    a: Strided,
    b: BSource<'_>,
    halves: [(Strided, bool, std::ops::Range<usize>); 2],
    kc_max: usize,
) {
    use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
    /// A half's claims: (block + 1) << 32 | the next unclaimed group of that block; 0
    /// before its first block, `DONE` after its last.
    struct Claims {
        state: AtomicU64,
        /// Groups of the current block finished.
        finished: AtomicUsize,
        /// The current block's packed op(B).
        b_blk: AtomicPtr<f32>,
    }
    const DONE: u64 = (u32::MAX as u64) << 32;
    const GROUPS: u64 = u32::MAX as u64;
    let nc_max = nc_block();
    let m_panels = m.div_ceil(K::MR);
    let groups = m_panels.div_ceil(GROUP);
    let claims = [(); 2].map(|()| Claims {
        state: AtomicU64::new(0),
        finished: AtomicUsize::new(0),
        b_blk: AtomicPtr::new(std::ptr::null_mut()),
    });
    let per_column_block = |h: usize| halves[h].2.len().div_ceil(kc_max);
    let blocks = |h: usize| n.div_ceil(nc_max) * per_column_block(h);
    // Block i of half h: (column block index, its columns), its k range.
    let geometry = |h: usize, i: usize| {
        let ks = &halves[h].2;
        let (jb, pc) = (
            i / per_column_block(h),
            ks.start + i % per_column_block(h) * kc_max,
        );
        let jc = jb * nc_max;
        ((jb, jc, nc_max.min(n - jc)), (pc, kc_max.min(ks.end - pc)))
    };
    // Group g of block i of half h against its packed op(B) at `b_blk`.
    let group = |h: usize, i: usize, g: usize, b_blk: *const f32| {
        let ((_, jc, nc), (pc, kc)) = geometry(h, i);
        let len = kc.div_ceil(K::K_STEP) * nc.div_ceil(K::NR) * K::NR;
        let (c, accumulate, ks) = &halves[h];
        // SAFETY: b_blk is the owner's block i, len floats, unchanged until every group of
        // it is finished (the owner waits); the rows of group g are this claim's alone
        // (forwarded contract otherwise).
        unsafe {
            let b_blk = std::slice::from_raw_parts(b_blk, len);
            let ps = g * GROUP..m_panels.min((g + 1) * GROUP);
            let overwrite = pc == ks.start && !accumulate;
            block::<K>(
                m,
                a,
                (jc, nc),
                (pc, kc),
                b_blk,
                *c,
                overwrite,
                Rows::Own(ps),
            )
        }
    };
    // Half h by its owner: each block packed, published, its groups claimed and computed,
    // then every group awaited (the other thread may hold some).
    let own = |h: usize| {
        let sh = &claims[h];
        let b_len = b_scratch_len::<K>(b, halves[h].2.len(), kc_max, n.min(nc_max));
        with_scratch(&B_PACK, b_len, |buf| {
            for i in 0..blocks(h) {
                let ((jb, jc, nc), (pc, kc)) = geometry(h, i);
                // SAFETY: forwarded contract.
                let b_blk = unsafe { b_block::<K>(b, buf, (jb, jc, nc), (pc, kc), kc_max, false) };
                sh.b_blk.store(b_blk.as_ptr().cast_mut(), Relaxed);
                sh.finished.store(0, Relaxed);
                sh.state.store((i as u64 + 1) << 32, Release);
                loop {
                    let g = (sh.state.fetch_add(1, AcqRel) & GROUPS) as usize;
                    if g >= groups {
                        break;
                    }
                    group(h, i, g, b_blk.as_ptr());
                    sh.finished.fetch_add(1, Release);
                }
                while sh.finished.load(Acquire) < groups {
                    std::hint::spin_loop();
                }
            }
            sh.state.store(DONE, Release);
        });
    };
    // Groups of half h by the other thread, while its owner has blocks to come; nothing
    // when it has not started (then it runs on this thread after, `rayon::join`).
    let help = |h: usize| {
        let sh = &claims[h];
        loop {
            let v = sh.state.load(Acquire);
            let i = (v >> 32) as usize;
            if i == 0 || v >= DONE {
                return;
            }
            if (v & GROUPS) as usize >= groups {
                if i == blocks(h) {
                    return;
                }
                std::hint::spin_loop();
                continue;
            }
            let v = sh.state.fetch_add(1, AcqRel);
            let (i, g) = ((v >> 32) as usize, (v & GROUPS) as usize);
            if i == 0 || v >= DONE || g >= groups {
                continue;
            }
            group(h, i - 1, g, sh.b_blk.load(Relaxed));
            #[cfg(test)]
            tests::HELPED.fetch_add(1, Relaxed);
            sh.finished.fetch_add(1, Release);
        }
    };
    rayon::join(
        || {
            own(0);
            help(1)
        },
        || {
            own(1);
            help(0)
        },
    );
}

/// Floats of the B-block buffer that [`b_block`] packs into for `k_len` rows of op(B) in
/// blocks of `kc_max` and blocks of `nc` columns; none for a prepacked op(B).
fn b_scratch_len<K: MicroKernel>(b: BSource<'_>, k_len: usize, kc_max: usize, nc: usize) -> usize {
    match b {
        BSource::Strided(_) => kc_max.min(k_len).div_ceil(K::K_STEP) * nc.div_ceil(K::NR) * K::NR,
        BSource::Packed(_) => 0,
    }
}

/// Block (jc, pc) of op(B) for tile routine `K` (column block jb): packed into `buf` (by
/// the pool's threads with `parallel`), or the prepacked one.
///
/// # Safety
/// The block is inside op(B); `buf` holds its packing; pc is a multiple of `kc_max`.
unsafe fn b_block<'a, K: MicroKernel>(
    b: BSource<'a>,
    buf: &'a mut AlignedVec,
    (jb, jc, nc): (usize, usize, usize),
    (pc, kc): (usize, usize),
    kc_max: usize,
    parallel: bool,
) -> &'a [f32] {
    match b {
        BSource::Strided(b) => {
            let len = kc.div_ceil(K::K_STEP) * nc.div_ceil(K::NR) * K::NR;
            let dst = &mut buf.as_mut_slice()[..len];
            // SAFETY: the block is inside op(B) (the caller's contract).
            unsafe { pack_b_block::<K>(b, (jc, nc), (pc, kc), dst, parallel) };
            dst
        }
        BSource::Packed(p) => p.block(jb, pc / kc_max),
    }
}

/// [`run`] over the rows `ks` of op(B) (columns of op(A)), in blocks of `kc_max` elements
/// from a range that starts on one ([`k_blocks`]): C = (or +=) op(A)[:, ks]·op(B)[ks, :],
/// the blocks added in order.
///
/// # Safety
/// As [`run`].
unsafe fn run_k<K: MicroKernel>(
    (m, n, _): (usize, usize, usize),
    a: Strided,
    b: BSource<'_>,
    c: Strided,
    accumulate: bool,
    parallel: bool,
    (ks, kc_max): (std::ops::Range<usize>, usize),
) {
    let nc_max = nc_block();
    debug_assert_eq!(ks.start % kc_max, 0);
    let b_len = b_scratch_len::<K>(b, ks.len(), kc_max, n.min(nc_max));
    let rows = || match parallel {
        true => Rows::Shared,
        false => Rows::Own(0..m.div_ceil(K::MR)),
    };
    with_scratch(&B_PACK, b_len, |buf| {
        for (jb, jc) in (0..n).step_by(nc_max).enumerate() {
            let nc = nc_max.min(n - jc);
            for pc in ks.clone().step_by(kc_max) {
                let kc = kc_max.min(ks.end - pc);
                // SAFETY: forwarded contract.
                let b_blk =
                    unsafe { b_block::<K>(b, buf, (jb, jc, nc), (pc, kc), kc_max, parallel) };
                // SAFETY: forwarded contract; b_blk is the (jc, pc) block for K's NR.
                unsafe {
                    block::<K>(
                        m,
                        a,
                        (jc, nc),
                        (pc, kc),
                        b_blk,
                        c,
                        pc == ks.start && !accumulate,
                        rows(),
                    )
                };
            }
        }
    });
}

/// Packs op(B)'s rows pc..pc+kc, columns jc..jc+nc into `K::NR`-column panels of
/// ⌈kc/K_STEP⌉ steps, one after another in `dst` (lanes along columns, k along rows).
///
/// # Safety
/// The block is inside op(B); dst holds ⌈kc/K_STEP⌉·⌈nc/NR⌉·NR slots; the CPU runs `K`.
unsafe fn pack_b_block<K: MicroKernel>(
    b: Strided,
    (jc, nc): (usize, usize),
    (pc, kc): (usize, usize),
    dst: &mut [f32],
    parallel: bool,
) {
    let width = K::NR;
    if b.cs == 1 && K::K_STEP == 1 {
        // Rows of op(B) are contiguous: read each row of the block once, in order, and
        // deal it out to the panels. Panel by panel, the reads would be NR floats every
        // row stride — for AVX2 one cache line per 2 KiB, a new strided stream per panel,
        // and ∇Y of ∇W = Xᵀ·∇Y comes from memory: tn on the AVX2 path ran at 80–91 % of
        // OpenBLAS, 27 % slower than the AVX-512 path (4 lines per row) on the same CPU.
        // Threads take groups of whole panels (contiguous in dst), each still reading
        // rows in order.
        let panels = nc.div_ceil(width);
        let groups = if parallel {
            (2 * rayon::current_num_threads()).min(panels)
        } else {
            1
        };
        let per = panels.div_ceil(groups);
        let pack_rows = |(g, dst): (usize, &mut [f32])| {
            let q0 = g * per;
            let n_pan = dst.len() / (kc * width);
            // 8 rows at a time (16 KiB of a 512-column block, kept in L1) dealt panel by
            // panel: one row at a time wrote every panel's stream at once, and the panels
            // lie kc·NR·4 bytes apart (64 KiB on AVX-512), all in one L1 set.
            const ROWS: usize = 8;
            for t0 in (0..kc).step_by(ROWS) {
                let t_n = ROWS.min(kc - t0);
                for q in 0..n_pan {
                    let cols = width.min(nc - (q0 + q) * width);
                    // `pack` copies a whole panel's row at a length the compiler knows
                    // (`K::NR`, a constant here, where the closure's captured `width` is
                    // not): a `memmove` call per 64-byte row took 4.6 % of the samples of
                    // ∇W's 512×512 over k = 8000 on the AVX2 path (perf; BENCHMARKS.md,
                    // twelfth session). A last, narrower panel gets its zero tail there.
                    // SAFETY: rows pc + t0 .. + t_n of op(B), columns jc + (q0 + q)·width
                    // .. + cols, are in bounds (row-contiguous: cs 1); the destination
                    // holds t_n steps of `width` from step t0 of panel q.
                    unsafe {
                        pack(
                            &mut dst[q * kc * width + t0 * width..],
                            b.at(pc + t0, jc + (q0 + q) * width).cast_const(),
                            1,
                            b.rs,
                            cols,
                            t_n,
                            K::NR,
                        )
                    };
                }
            }
        };
        let chunk = per * kc * width;
        if parallel {
            dst.par_chunks_mut(chunk).enumerate().for_each(pack_rows);
        } else {
            dst.chunks_mut(chunk).enumerate().for_each(pack_rows);
        }
        return;
    }
    let pack_b = |(q, dst): (usize, &mut [f32])| {
        let j0 = jc + q * width;
        // SAFETY: rows pc..pc+kc and columns j0..j0+cols of op(B) are in bounds; the CPU
        // runs K (the caller's contract).
        unsafe {
            K::pack(
                dst,
                b.at(pc, j0),
                b.cs,
                b.rs,
                width.min(jc + nc - j0),
                kc,
                width,
            )
        }
    };
    let panel = kc.div_ceil(K::K_STEP) * width;
    if parallel {
        dst.par_chunks_mut(panel).enumerate().for_each(pack_b);
    } else {
        dst.chunks_mut(panel).enumerate().for_each(pack_b);
    }
}

/// Which row panels of a block [`block`] computes, and on which threads.
enum Rows {
    /// Every one, shared by the threads of the pool.
    Shared,
    /// These, on the calling thread alone.
    Own(std::ops::Range<usize>),
}

/// Row panels of op(A) packed together where op(A) is transposed (see [`block`]); also the
/// row panels that a thread claims at a time in a shared half of k ([`run_halves`]), so a
/// claim packs as one thread's sweep would.
const GROUP: usize = 8;

/// One (jc, pc) block: MR-row panels of op(A) (`rows`) against every packed B panel.
///
/// # Safety
/// As [`run`]; `b_blk` holds the block's ⌈nc/NR⌉ panels of kc·NR floats, 64-byte aligned;
/// the panels of `Rows::Own` are below ⌈m/MR⌉.
#[allow(clippy::too_many_arguments)]
unsafe fn block<K: MicroKernel>(
    m: usize,
    a: Strided,
    (jc, nc): (usize, usize),
    (pc, kc): (usize, usize),
    b_blk: &[f32],
    c: Strided,
    overwrite: bool,
    rows: Rows,
) {
    let steps = kc.div_ceil(K::K_STEP);
    let panel_b = steps * K::NR;
    let n_panels = nc.div_ceil(K::NR);
    let b_blk = &b_blk[..n_panels * panel_b];
    // A C of one or two B panels (a few-column classifier) reads a row-major op(A) in
    // place: packing it would gather all of X for that handful of panels (5935×1024·
    // 1024×7: the pack, not the tiles, was the time; BENCHMARKS.md). Not in bf16 pairs.
    let direct = a.cs == 1 && n_panels <= 2 && K::K_STEP == 1;
    // Row panel p of op(A), its rows given as `a_rows`, against B panels `qs`; with
    // `next`, the lines of the next rows of op(A) to pack, brought towards L1 meanwhile
    // (part q of them before tile q).
    let sweep =
        |a_rows: ARows, p: usize, qs: std::ops::Range<usize>, next: Option<(*const f32, usize)>| {
            let i0 = p * K::MR;
            let rows = K::MR.min(m - i0);
            let (first, count) = (qs.start, qs.len());
            let j0 = first * K::NR;
            let tiles = CTile {
                // SAFETY: (i0, jc + j0) is inside C.
                ptr: unsafe { c.at(i0, jc + j0) },
                rs: c.rs,
                cs: c.cs,
                rows,
                cols: (nc - j0).min(count * K::NR),
                overwrite,
            };
            let each = |q: usize| {
                if let Some((src, lanes)) = next {
                    prefetch_part(src, a.rs, a.cs, lanes, kc, q, count);
                }
            };
            // SAFETY: the tiles' rows i0..i0+rows, columns jc+j0.. jc+nc are in C and in
            // this panel's rows only; A's rows are a packed kc·MR panel or op(A) in place
            // (row-major: a.cs is 1); each B panel holds kc·NR floats, 64-byte aligned
            // (AlignedVec, panel_b a multiple of 16 floats); the CPU runs K (the caller's
            // contract).
            unsafe {
                K::row(
                    steps,
                    a_rows,
                    b_blk[first * panel_b..].as_ptr(),
                    panel_b,
                    tiles,
                    each,
                )
            }
        };
    // Row panel p of op(A), packed into `a_buf` (or read in place), against B panels `qs`.
    let row_panel = |a_buf: &mut AlignedVec, p: usize, qs: std::ops::Range<usize>| {
        let i0 = p * K::MR;
        let rows = K::MR.min(m - i0);
        // SAFETY: rows i0..i0+rows, columns pc..pc+kc of op(A) are in bounds.
        let src = unsafe { a.at(i0, pc) }.cast_const();
        let a_rows = if direct {
            ARows::InPlace {
                ptr: src,
                lda: a.rs,
            }
        } else {
            let a_pan = &mut a_buf.as_mut_slice()[..steps * K::MR];
            // SAFETY: as above; the CPU runs K (the caller's contract).
            unsafe { K::pack(a_pan, src, a.rs, a.cs, rows, kc, K::MR) };
            ARows::Packed(a_pan.as_ptr())
        };
        // The next panel's rows, brought towards L1 while this one computes (its packing
        // otherwise waits on memory: X is read once, from DRAM).
        let next = (!direct && i0 + K::MR < m).then(|| {
            let rows = K::MR.min(m - i0 - K::MR);
            // SAFETY: row i0 + MR < m, column pc < k of op(A).
            (unsafe { a.at(i0 + K::MR, pc) }.cast_const(), rows)
        });
        sweep(a_rows, p, qs, next)
    };
    let m_panels = m.div_ceil(K::MR);
    let threads = rayon::current_num_threads();
    let a_buf = || AlignedVec::zeroed(KC * K::MR);
    let own = match rows {
        Rows::Shared if m_panels >= 2 * threads => {
            (0..m_panels)
                .into_par_iter()
                .for_each_init(a_buf, |buf, p| row_panel(buf, p, 0..n_panels));
            return;
        }
        Rows::Shared => None,
        Rows::Own(ps) => Some(ps),
    };
    let Some(ps) = own else {
        // Few row panels (a transposed narrow C: 7 rows are 2 panels): the threads split
        // the B panels instead, each packing the row panels itself (MR·KC floats per
        // group, against MR·NR·KC multiply-adds per tile). 1024×7 over k 5935 on 2
        // threads: 7.0 ms with 2 row-panel tasks, one of 1 row.
        let groups = (2 * threads).min(n_panels);
        (0..groups).into_par_iter().for_each_init(a_buf, |buf, g| {
            for p in 0..m_panels {
                row_panel(buf, p, g * n_panels / groups..(g + 1) * n_panels / groups);
            }
        });
        return;
    };
    if a.rs == 1 && K::K_STEP == 1 {
        // op(A) transposed (Xᵀ of ∇W = Xᵀ·∇Y): a step of a panel is MR floats of one row
        // of X, 24 bytes of a line, and X's rows lie a power of two apart (2 or 4 KiB), so
        // the lines of one panel's 256 rows share a few L1 sets and are gone by the next
        // panel, which reads them again. Panels are packed GROUP at a time instead (48
        // columns of X, three whole lines of each row), ROWS rows of X at a time across
        // the group, then swept one by one. A pack went from 6 % of a 512×512 product over
        // k = 8000 to 3 % (perf, AVX2 path, one thread). Only where one thread sweeps
        // every row panel (one thread, or each half of a split k, `run`) or claims them a
        // group at a time (`run_halves`): threads that share the row panels take them one
        // by one (a group would leave one a group short).
        const ROWS: usize = 8;
        with_scratch(&A_PACK, GROUP * steps * K::MR, |group| {
            for p0 in ps.clone().step_by(GROUP) {
                let panels = GROUP.min(ps.end - p0);
                for t0 in (0..kc).step_by(ROWS) {
                    let t_n = ROWS.min(kc - t0);
                    let bufs = group.as_mut_slice().chunks_exact_mut(steps * K::MR);
                    for (g, a_pan) in bufs.take(panels).enumerate() {
                        let i0 = (p0 + g) * K::MR;
                        let rows = K::MR.min(m - i0);
                        // SAFETY: rows i0..i0+rows, columns pc+t0..+t_n of op(A) are in
                        // bounds; the CPU runs K (the caller's contract).
                        unsafe {
                            K::pack(
                                &mut a_pan[t0 * K::MR..],
                                a.at(i0, pc + t0).cast_const(),
                                a.rs,
                                a.cs,
                                rows,
                                t_n,
                                K::MR,
                            )
                        };
                    }
                }
                // The next group's rows, brought towards L1 while this group's last panel
                // computes, a few lines before each tile. Spread over the whole group they
                // read 1.5–3 points lower (forced AVX2, tn 8000×512, 1 thread; BENCHMARKS.md),
                // probably because the first lines left L2 before their pack: X's rows lie
                // 2 KiB apart, in a few sets, beside the B block.
                let next_i0 = (p0 + panels) * K::MR;
                let next = (p0 + panels < ps.end).then(|| {
                    // SAFETY: row next_i0 < m, column pc < k of op(A).
                    let src = unsafe { a.at(next_i0, pc) }.cast_const();
                    (src, (GROUP * K::MR).min(m - next_i0))
                });
                let bufs = group.as_slice().chunks_exact(steps * K::MR);
                for (g, a_pan) in bufs.take(panels).enumerate() {
                    let next = next.filter(|_| g + 1 == panels);
                    sweep(ARows::Packed(a_pan.as_ptr()), p0 + g, 0..n_panels, next);
                }
            }
        });
    } else {
        with_scratch(&A_PACK, KC * K::MR, |buf| {
            ps.for_each(|p| row_panel(buf, p, 0..n_panels))
        });
    }
}

/// op(B) packed once, for several products that share it: the row parts of one GEMM,
/// which the executor runs as separate tasks (issue 33: each part re-packed all of B, and
/// for ∇W = Xᵀ·∇Y that is all of ∇Y, per part). Holds every (NC, KC) block in the layout
/// the tile routine of `isa` reads; [`gemm_packed`] gives the same bits as [`gemm_view`]
/// (or [`gemm_view_with`] at the precision it was packed for).
pub struct PackedB {
    kern: Kern,
    k: usize,
    n: usize,
    nc_max: usize,
    /// Packed steps per k block ([`k_blocks`] of k).
    kc: usize,
    data: AlignedVec,
}

impl std::fmt::Debug for PackedB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedB")
            .field("kern", &self.kern)
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl PackedB {
    /// Packs op(B) for products on `isa` (an error if the CPU lacks it); parallel on the
    /// current rayon pool.
    pub fn new(isa: Isa, b: MatRef<'_>, tb: Trans) -> Result<PackedB, KernelError> {
        require(isa, "PackedB::new")?;
        // SAFETY: the CPU has `isa` (checked).
        Ok(unsafe { PackedB::pack(Kern::F32(isa), b, tb) })
    }

    /// Packs op(B) for products on `isa` at `precision` (the caller passes the path
    /// [`plan`] chose, as a row-split GEMM does); an error if the CPU lacks either.
    pub fn new_with(
        precision: Precision,
        isa: Isa,
        b: MatRef<'_>,
        tb: Trans,
    ) -> Result<PackedB, KernelError> {
        require(isa, "PackedB::new_with")?;
        require_precision(precision, "PackedB::new_with")?;
        // SAFETY: the CPU has `isa`, and bf16 if asked (checked).
        Ok(unsafe { PackedB::pack(Kern::of(precision, isa), b, tb) })
    }

    /// # Safety
    /// The CPU runs `kern`.
    unsafe fn pack(kern: Kern, b: MatRef<'_>, tb: Trans) -> PackedB {
        let (k, n, op) = operand(b, tb);
        let nc_max = nc_block();
        let (nr, k_step) = with_kernel!(kern, K => (K::NR, K::K_STEP));
        let mut data = AlignedVec::zeroed(k.div_ceil(k_step) * n.div_ceil(nr) * nr);
        let parallel = k * n >= PARALLEL_MIN_MACS / 64 && rayon::current_num_threads() > 1;
        let mut rest = data.as_mut_slice();
        let kc_max = k_blocks_of(k, k_step).0;
        for jc in (0..n).step_by(nc_max) {
            let nc = nc_max.min(n - jc);
            for pc in (0..k).step_by(kc_max) {
                let kc = kc_max.min(k - pc);
                let len = kc.div_ceil(k_step) * nc.div_ceil(nr) * nr;
                let (dst, tail) = rest.split_at_mut(len);
                // SAFETY: the block is inside op(B) (its view's bounds), dst holds it; the
                // CPU runs `kern` (the caller's contract).
                unsafe {
                    with_kernel!(kern, K => pack_b_block::<K>(op, (jc, nc), (pc, kc), dst, parallel))
                };
                rest = tail;
            }
        }
        PackedB {
            kern,
            k,
            n,
            nc_max,
            kc: kc_max / k_step,
            data,
        }
    }

    /// Rows of op(B) (the product's k).
    pub fn rows(&self) -> usize {
        self.k
    }

    /// Columns of op(B) (the product's n).
    pub fn cols(&self) -> usize {
        self.n
    }

    /// Whether a product on this B runs as two halves of k (k of at least 16 KC blocks),
    /// which [`gemm_packed_half`] computes one at a time.
    pub fn splits_k(&self) -> bool {
        let k_step = with_kernel!(self.kern, K => K::K_STEP);
        k_blocks_of(self.k, k_step).1.is_some()
    }

    /// The block of column block `jb` and k block `pb`, as `run` packs it. Blocks lie in
    /// (jc, pc) order; every column block but the last is `nc_max` wide and every k block
    /// but the last `kc` steps deep, so earlier blocks have full sizes.
    fn block(&self, jb: usize, pb: usize) -> &[f32] {
        let (nr, k_step) = with_kernel!(self.kern, K => (K::NR, K::K_STEP));
        let steps = self.k.div_ceil(k_step);
        let jc = jb * self.nc_max;
        let nc = self.nc_max.min(self.n - jc);
        let panels = nc.div_ceil(nr) * nr;
        let start = jb * steps * (self.nc_max.div_ceil(nr) * nr) + pb * self.kc * panels;
        let kc = self.kc.min(steps - pb * self.kc);
        &self.data.as_slice()[start..start + kc * panels]
    }
}

/// C = op(A)·B, or C += it, with B packed beforehand: the same bits as [`gemm_view`] on
/// the B it was packed from, on the packed B's instruction set.
pub fn gemm_packed(
    a: MatRef<'_>,
    ta: Trans,
    b: &PackedB,
    mut c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    let kernel = "gemm_packed";
    let (m, k, a) = operand(a, ta);
    check_len(kernel, "rows of packed B (columns of op(A))", k, b.k)?;
    let what = "columns of C (columns of packed B)";
    let Some(out) = target(kernel, what, (m, b.n, k), &mut c, accumulate)? else {
        return Ok(());
    };
    let (shape, src) = ((m, b.n, k), BSource::Packed(b));
    let parallel = forks(m, b.n, k);
    // SAFETY: as in `product`; b was packed for b.kern, which the CPU runs (checked when
    // it was packed), in that kernel's layout.
    unsafe { with_kernel!(b.kern, K => run::<K>(shape, a, src, out, accumulate, parallel)) };
    Ok(())
}

/// Which half of k [`gemm_packed_half`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KHalf {
    /// The first half, which [`gemm_packed`] computes into C.
    First,
    /// The second half, which [`gemm_packed`] computes into a buffer of C's size and then
    /// adds to C.
    Second,
}

/// One half of k of C = op(A)·B, B packed beforehand and of long k ([`PackedB::splits_k`]),
/// written into C (overwritten), on the calling thread. [`gemm_packed`] computes the first
/// half into C and the second into a buffer, then adds the buffer to C element by element;
/// so the two halves computed apart and added by [`add_half`] give its bits. What lets a
/// caller run the halves as separate tasks (the executor's ∇W parts: each reads half of
/// the packed B, and a step's last part is half as long). An error when B's k does not
/// split.
pub fn gemm_packed_half(
    a: MatRef<'_>,
    ta: Trans,
    b: &PackedB,
    half: KHalf,
    mut c: MatMut<'_>,
) -> Result<(), KernelError> {
    let kernel = "gemm_packed_half";
    let (m, k, a) = operand(a, ta);
    check_len(kernel, "rows of packed B (columns of op(A))", k, b.k)?;
    let (ks, kc) = half_range(kernel, k, with_kernel!(b.kern, K => K::K_STEP), half)?;
    let what = "columns of C (columns of packed B)";
    let Some(out) = target(kernel, what, (m, b.n, k), &mut c, false)? else {
        return Ok(());
    };
    // SAFETY: as in `gemm_packed`; `ks` starts on a block of the whole's blocking (the
    // split is a multiple of kc).
    unsafe {
        with_kernel!(b.kern, K => run_k::<K>((m, b.n, k), a, BSource::Packed(b), out, false, false, (ks, kc)))
    };
    Ok(())
}

/// Prefetches part `part` of `parts` of the cache lines a [`pack`] of the same arguments
/// reads. Only a hint: addresses are computed, never dereferenced.
#[inline(always)]
fn prefetch_part(
    src: *const f32,
    lane_stride: usize,
    k_stride: usize,
    lanes: usize,
    kc: usize,
    part: usize,
    parts: usize,
) {
    // Lines along the contiguous direction, every element of the other.
    let (outer, inner, o_stride, i_stride) = if k_stride == 1 {
        (lanes, kc, lane_stride, 1)
    } else if lane_stride == 1 {
        (kc, lanes, k_stride, 1)
    } else {
        (lanes, kc, lane_stride, k_stride)
    };
    let step = if i_stride == 1 {
        crate::CACHE_LINE_F32
    } else {
        1
    };
    let per_outer = inner.div_ceil(step);
    let total = outer * per_outer;
    let (lo, hi) = (total * part / parts, total * (part + 1) / parts);
    for idx in lo..hi {
        let (o, i) = (idx / per_outer, (idx % per_outer) * step);
        let p = src.wrapping_add(o * o_stride + i * i_stride);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetch never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }
}

/// Packs `lanes` (≤ `W`) lanes × `kc` steps of a strided operand into a k-major panel:
/// `dst[t·W + l] = src[l·lane_stride + t·k_stride]` (W = `width`, a tile constant that
/// inlining folds), lanes `lanes..W` zero. A's panels
/// take rows as lanes, B's columns. Packing is O(1/NC) (A) and O(1/m) (B) of the work, but
/// a general element loop still cost 10–15 % of a product (perf, 8000×512·512×512): the
/// contiguous case copies whole W-float steps, the transposing case writes whole steps.
///
/// # Safety
/// `src + l·lane_stride + t·k_stride` is readable for l < lanes, t < kc; dst holds
/// kc·W floats.
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
    let w = width;
    assert!(dst.len() >= kc * w && lanes <= w);
    let d = dst.as_mut_ptr();
    if lane_stride == 1 && lanes == w {
        // A step's W lanes are contiguous: one fixed-size copy per step.
        for t in 0..kc {
            // SAFETY: W floats from src + t·k_stride (the contract) into step t of dst.
            unsafe { std::ptr::copy_nonoverlapping(src.add(t * k_stride), d.add(t * w), w) };
        }
        return;
    }
    if lanes < w {
        for step in dst.chunks_exact_mut(w).take(kc) {
            step[lanes..].fill(0.0);
        }
    }
    if lane_stride == 1 {
        for t in 0..kc {
            // SAFETY: as above, `lanes` floats.
            unsafe { std::ptr::copy_nonoverlapping(src.add(t * k_stride), d.add(t * w), lanes) };
        }
    } else if lanes == w {
        // Whole steps (every panel but a last short one): per step, one element of each
        // lane, written contiguously; each lane's reads run along k (a cache line serves
        // 16 steps). `w` is the tile constant here, so the lane loop unrolls.
        for t in 0..kc {
            for l in 0..w {
                // SAFETY: l < lanes, t < kc (the contract); dst holds kc·w.
                unsafe { *d.add(t * w + l) = *src.add(l * lane_stride + t * k_stride) };
            }
        }
    } else {
        for t in 0..kc {
            for l in 0..lanes {
                // SAFETY: l < lanes, t < kc.
                unsafe { *d.add(t * w + l) = *src.add(l * lane_stride + t * k_stride) };
            }
        }
    }
}

/// Checks the slice lengths of a contiguous product (so the errors name the slice) and
/// runs it through [`gemm_view`]'s path.
#[allow(clippy::too_many_arguments)]
fn contiguous(
    kernel: &'static str,
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    ta: Trans,
    b: &[f32],
    tb: Trans,
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    check_len(kernel, "A", m * k, a.len())?;
    check_len(kernel, "B", k * n, b.len())?;
    check_len(kernel, "C", m * n, c.len())?;
    // Stored shapes: a transposed operand is stored as its transpose's shape.
    let a = match ta {
        Trans::N => MatRef::row_major(a, m, k)?,
        Trans::T => MatRef::row_major(a, k, m)?,
    };
    let b = match tb {
        Trans::N => MatRef::row_major(b, k, n)?,
        Trans::T => MatRef::row_major(b, n, k)?,
    };
    let c = MatMut::row_major(c, m, n)?;
    product(
        kernel,
        Isa::current(),
        Precision::F32,
        a,
        ta,
        b,
        tb,
        c,
        accumulate,
        None,
    )
}

/// C (m×n) = A (m×k) · B (k×n), or C += it.
pub fn gemm_nn(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    contiguous(
        "gemm_nn",
        (m, k, n),
        a,
        Trans::N,
        b,
        Trans::N,
        c,
        accumulate,
    )
}

/// C (m×n) = A (m×k) · Bᵀ where B is stored n×k, or C += it.
pub fn gemm_nt(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    contiguous(
        "gemm_nt",
        (m, k, n),
        a,
        Trans::N,
        b,
        Trans::T,
        c,
        accumulate,
    )
}

/// C (m×n) = Aᵀ · B where A is stored k×m and B is k×n, or C += it.
pub fn gemm_tn(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), KernelError> {
    contiguous(
        "gemm_tn",
        (m, k, n),
        a,
        Trans::T,
        b,
        Trans::N,
        c,
        accumulate,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Groups computed by the thread that is not their half's owner ([`run_halves`]).
    pub(super) static HELPED: AtomicUsize = AtomicUsize::new(0);

    /// A long-k product on two threads: the thread done with its half first computes
    /// groups of the other's blocks (seen within 200 runs; the first to finish helps at
    /// least with the other's last block, unless it finished exactly in step), and every
    /// run gives one thread's bits, on every path the CPU has.
    #[test]
    fn a_thread_done_with_its_half_helps_the_other_with_the_same_bits() {
        let (m, k, n) = (300, 4800, 100);
        let values = |len: usize, seed: usize| -> Vec<f32> {
            let v = |i: usize| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0;
            (0..len).map(v).collect()
        };
        let (a, b) = (values(k * m, 1), values(k * n, 2));
        for isa in Isa::supported() {
            let product = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                let mut c = vec![f32::NAN; m * n];
                pool.unwrap().install(|| {
                    let a = MatRef::row_major(&a, k, m).unwrap();
                    let b = MatRef::row_major(&b, k, n).unwrap();
                    let c = MatMut::row_major(&mut c, m, n).unwrap();
                    gemm_view_isa(isa, a, Trans::T, b, Trans::N, c, false).unwrap()
                });
                c.iter().map(|x| x.to_bits()).collect::<Vec<u32>>()
            };
            let one = product(1);
            let before = HELPED.load(Relaxed);
            for run in 0..200 {
                assert!(
                    product(2) == one,
                    "{isa:?}, run {run}: bits differ from one thread"
                );
                if HELPED.load(Relaxed) > before && run >= 10 {
                    break;
                }
            }
            assert!(
                HELPED.load(Relaxed) > before,
                "{isa:?}: no group was helped"
            );
        }
    }

    /// Every k from the split's threshold to past 64 Ki steps: the halves' blocks are at
    /// most KC, the split falls on a block of the whole's grid (what `PackedB` packs), the
    /// halves differ by at most two steps per block (under 1 %), and neither half has a
    /// block more than KC blocks would need.
    #[test]
    fn long_k_splits_into_balanced_halves_of_equal_blocks() {
        assert_eq!(k_blocks(K_SPLIT_STEPS - 1), (KC, None));
        assert_eq!(k_blocks(8000), (250, Some(4000)));
        for steps in (K_SPLIT_STEPS..70_000)
            .step_by(7)
            .chain([K_SPLIT_STEPS + 1])
        {
            let (kc, split) = k_blocks(steps);
            let split = split.expect("past the threshold");
            assert!(kc <= KC && kc > 0, "{steps}: kc {kc}");
            assert_eq!(split % kc, 0, "{steps}");
            let (first, second) = (split, steps - split);
            assert!(first >= second && second > 0, "{steps}: {first} | {second}");
            let nb = split / kc;
            assert!(first - second <= 2 * nb, "{steps}: {first} | {second}");
            assert_eq!(nb, steps.div_ceil(2).div_ceil(KC), "{steps}");
            assert!(second.div_ceil(kc) <= nb, "{steps}");
        }
    }
}
