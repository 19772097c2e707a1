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
//! Files, as BLIS and faer lay a GEMM out: this one the public entry points and the choice
//! of path ([`plan`], [`Precision`]); `blocking.rs` the block sizes and the k split;
//! `pack.rs` the packing of op(A)'s and op(B)'s panels; `driver.rs` the loops around the
//! tile routines (the macro-kernel, two halves of k, the thread-local scratch); `packed.rs`
//! op(B) packed once for several products ([`PackedB`]); `kernel.rs`, `bf16.rs`, `amx.rs`
//! and `narrow.rs` the tile routines.
//!
//! Arithmetic: each element is Σ over k in order, one FMA per step within a KC block,
//! blocks added in order; the thread count and the split never change a bit, and the two
//! x86 paths give the same bits.

pub mod amx;
pub mod bf16;
mod kernel;
mod narrow;

use std::cell::RefCell;

use rayon::prelude::*;

use self::kernel::{ARows, CTile, MicroKernel};
pub use crate::isa::Isa;
use crate::view::{MatMut, MatRef};
use crate::{check_len, AlignedVec, KernelError};

/// How an operand enters a product: as stored, or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trans {
    /// op(X) = X.
    N,
    /// op(X) = Xᵀ.
    T,
}

/// The arithmetic of a product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 operands, f32 multiply-adds (the default).
    #[default]
    F32,
    /// Operands rounded to bfloat16 as they are packed, products accumulated in f32 with
    /// AVX512_BF16's dot product ([`bf16`]); only on CPUs that have it, on the AVX-512
    /// path (a 6×64 tile, or 6×16 where [`plan`] narrows the f32 one), and on the AMX
    /// tiles in place of the 6×64 one where the CPU has them ([`amx`]).
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
    /// The AMX tiles, 32×32 ([`amx`]).
    Amx,
}

impl Kern {
    /// The routine for a product of k that [`plan`] put on `isa`, at `precision`: for
    /// bf16, the tile of the f32 one's width (AVX-512's 64 columns, or 16 where the plan
    /// took AVX2's narrow tile for a C of few columns), or the AMX tiles in place of the
    /// wide one: as `tiles` names, or where the CPU has them ([`amx::enabled`]) and k
    /// fills at least one of their chunks ([`amx::K_MIN`]).
    fn of(precision: Precision, isa: Isa, tiles: Option<Bf16Tiles>, k: usize) -> Kern {
        let amx = tiles.map_or_else(
            || amx::enabled() && k >= amx::K_MIN,
            |t| t == Bf16Tiles::Amx,
        );
        match (precision, isa) {
            (Precision::Bf16, Isa::Avx512) if amx => Kern::Amx,
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
            $crate::gemm::Kern::Bf16 => {
                type $k = $crate::gemm::bf16::Avx512Bf16;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            $crate::gemm::Kern::Amx => {
                type $k = $crate::gemm::amx::AmxBf16;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            $crate::gemm::Kern::Bf16Narrow => {
                type $k = $crate::gemm::bf16::Avx512Bf16Narrow;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            $crate::gemm::Kern::F32($crate::isa::Isa::Avx512) => {
                type $k = $crate::gemm::kernel::Avx512;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            $crate::gemm::Kern::F32($crate::isa::Isa::Avx2) => {
                type $k = $crate::gemm::kernel::Avx2;
                $body
            }
            _ => {
                type $k = $crate::gemm::kernel::Generic;
                $body
            }
        }
    };
}

// After `with_kernel!`, which they expand.
mod blocking;
mod driver;
mod pack;
mod packed;

use self::blocking::*;
use self::driver::*;
use self::pack::*;
pub use self::packed::{gemm_packed, gemm_packed_half, KHalf, PackedB};

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
    product(
        kernel,
        isa,
        precision,
        a,
        ta,
        b,
        tb,
        c,
        false,
        Some(half),
        None,
    )
}

/// Whether an m×n product of k (the columns of op(A)) at `precision` runs as two halves
/// of k ([`gemm_view_half`], [`gemm_packed_half`]).
pub fn k_splits(precision: Precision, (m, n): (usize, usize), k: usize) -> bool {
    let narrow = narrow_path(precision, m, n);
    k_blocks_of(k, k_step(precision, Isa::current(), None, narrow, k))
        .1
        .is_some()
}

/// Elements of k a packed step of a product of k holds: its tile routine's
/// [`MicroKernel::K_STEP`], or 1 on the narrow path (f32 blocks of k, bf16 too).
fn k_step(
    precision: Precision,
    isa: Isa,
    tiles: Option<Bf16Tiles>,
    narrow: bool,
    k: usize,
) -> usize {
    if narrow {
        return 1;
    }
    with_kernel!(Kern::of(precision, isa, tiles, k), K => K::K_STEP)
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
    product(
        "gemm_view_isa",
        isa,
        f32,
        a,
        ta,
        b,
        tb,
        c,
        accumulate,
        None,
        None,
    )
}

/// Which tiles a bf16 product runs on ([`gemm_view_bf16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Tiles {
    /// AVX512_BF16's `vdpbf16ps` ([`bf16`]): Cooper Lake, Sapphire Rapids and later Xeons,
    /// Zen 4 and later.
    Avx512Bf16,
    /// AMX's `tdpbf16ps` ([`amx`]): Sapphire Rapids and later Xeons.
    Amx,
}

/// [`gemm_view_with`] at bf16 on the named tiles, whatever [`amx::enabled`] says (the
/// tests and benchmarks compare the two in one process); an error where the CPU lacks
/// them. Where the plan narrows a product to the 6×16 tile, that tile runs either way.
pub fn gemm_view_bf16(
    tiles: Bf16Tiles,
    a: MatRef<'_>,
    ta: Trans,
    b: MatRef<'_>,
    tb: Trans,
    c: MatMut<'_>,
    accumulate: bool,
) -> Result<(), KernelError> {
    let kernel = "gemm_view_bf16";
    require_precision(Precision::Bf16, kernel)?;
    if tiles == Bf16Tiles::Amx && !amx::available() {
        return Err(KernelError::View {
            kernel,
            what: "this CPU (or its kernel) cannot run the AMX tiles".into(),
        });
    }
    let bf16 = Precision::Bf16;
    let isa = Isa::current();
    product(
        kernel,
        isa,
        bf16,
        a,
        ta,
        b,
        tb,
        c,
        accumulate,
        None,
        Some(tiles),
    )
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
    tiles: Option<Bf16Tiles>,
) -> Result<(), KernelError> {
    let (m, k, a) = operand(a, ta);
    let (kb, n, b) = operand(b, tb);
    check_len(kernel, "rows of op(B) (columns of op(A))", k, kb)?;
    // A bf16 product that names its tiles (`gemm_view_bf16`) runs on them.
    let narrow = tiles.is_none() && narrow::applies(precision, isa, (m, n), a.cs == 1 || a.rs == 1);
    // One half of k (`gemm_view_half`): its range in the whole's blocking, on this thread.
    let half = only
        .map(|h| half_range(kernel, k, k_step(precision, isa, tiles, narrow, k), h))
        .transpose()?;
    let what = "columns of C (columns of op(B))";
    let Some(out) = target(kernel, what, (m, n, k), &mut c, accumulate)? else {
        return Ok(());
    };
    let parallel = only.is_none() && forks(m, n, k);
    if narrow {
        let bf16 = precision == Precision::Bf16;
        // SAFETY: as below (the views' bounds, C a unique borrow); a.cs or a.rs is 1;
        // `isa` is an x86 FMA path the CPU has (checked or current), and both have AVX2
        // and FMA; bf16 only where the caller checked `precision` (AVX-512F and
        // AVX512_BF16, which the bf16 stripes use); with `only`, k splits (checked).
        unsafe { narrow::product((m, n, k), a, b, out, accumulate, parallel, only, bf16) };
        return Ok(());
    }
    let ta_of = if a.cs == 1 { Trans::N } else { Trans::T };
    let (isa, transposed) = plan(isa, m, n, ta_of);
    let kern = Kern::of(precision, isa, tiles, k);
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

/// One row of [`add_half`], in the widest vectors the CPU has (one f32 addition per
/// element whatever the width: the same bits).
fn add_row(c: &mut [f32], h: &[f32]) {
    crate::simd::wide(|| c.iter_mut().zip(h).for_each(|(x, y)| *x += y));
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
