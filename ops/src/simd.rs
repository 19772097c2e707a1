//! Runs a loop body compiled for the widest vector unit the CPU has. The crate is built
//! for x86-64-v2 (4-float SSE vectors), so a generic elementwise loop vectorises 4 wide;
//! [`wide`] calls its closure from a function compiled with AVX-512F (16 floats) or AVX2
//! (8) when the CPU has it, where LLVM inlines the closure and vectorises it again. Same
//! operations otherwise (no FMA contraction: Rust never fuses a·b + c by itself), so the
//! results are bit-identical on every path. The check is one cached load per call; call it
//! once per chunk, not per element. LLVM does not always inline the closure (it kept
//! `sgns_term`'s out of line, even as a one-line call of an `#[inline(always)]` body, and
//! compiled it for SSE with a scalar dot product); a kernel where that shows in a profile
//! defines its own target-feature functions around an `#[inline(always)]` body, as
//! `sgns::sgns_term` does. Measured (sigmoid over 4 M floats, one thread, Zen 5):
//! SSE 6.7 ms, AVX2 4.0 ms, AVX-512 2.7 ms. Also: reductions with lanes, which vectorise.

use crate::isa::Isa;
use crate::real::Real;

/// Calls `f`, compiled for AVX-512F or AVX2 when the CPU has it (and `SAINTFLOW_ISA`
/// does not force a narrower path: [`Isa::current`]).
#[inline(always)]
pub(crate) fn wide<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        match Isa::current() {
            // SAFETY: `Isa::current` is capped to what the CPU has.
            Isa::Avx512 => return unsafe { avx512(f) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2(f) },
            Isa::Generic => {}
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Running sums in reductions: 16 independent lanes (lane l takes elements ≡ l mod 16),
/// combined pairwise at the end. A single running sum is a chain of dependent adds (4
/// cycles each, 2 ms for the norms of 8000 rows of 512); lanes vectorise, and pairwise
/// combination is at least as accurate. The order is fixed by the slice alone, so results
/// do not depend on threads or vector width.
pub(crate) const LANES: usize = 16;

/// Combines lane accumulators pairwise: ((a0 + a8) + (a4 + a12)) + … .
#[inline(always)]
pub(crate) fn combine<T: Real>(mut acc: [T; LANES], op: impl Fn(T, T) -> T) -> T {
    let mut w = LANES / 2;
    while w > 0 {
        for l in 0..w {
            acc[l] = op(acc[l], acc[l + w]);
        }
        w /= 2;
    }
    acc[0]
}

/// Σ a_i·b_i over the shorter of the two (see [`LANES`]).
#[inline(always)]
pub(crate) fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::zero(); LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        let (x, y): (&[T; LANES], &[T; LANES]) = (x.try_into().unwrap(), y.try_into().unwrap());
        for l in 0..LANES {
            acc[l] = acc[l] + x[l] * y[l];
        }
    }
    for (l, (&x, &y)) in ar.iter().zip(br).enumerate() {
        acc[l] = acc[l] + x * y;
    }
    combine(acc, |p, q| p + q)
}

/// Σ a_i (see [`LANES`]).
#[inline(always)]
pub(crate) fn sum<T: Real>(a: &[T]) -> T {
    let mut acc = [T::zero(); LANES];
    let chunks = a.chunks_exact(LANES);
    let rest = chunks.remainder();
    for x in chunks {
        let x: &[T; LANES] = x.try_into().unwrap();
        for l in 0..LANES {
            acc[l] = acc[l] + x[l];
        }
    }
    for (l, &x) in rest.iter().enumerate() {
        acc[l] = acc[l] + x;
    }
    combine(acc, |p, q| p + q)
}

/// max_i a_i (−∞ for an empty slice; exact in any order).
#[inline(always)]
pub(crate) fn max<T: Real>(a: &[T]) -> T {
    let mut acc = [T::neg_infinity(); LANES];
    let chunks = a.chunks_exact(LANES);
    let rest = chunks.remainder();
    for x in chunks {
        let x: &[T; LANES] = x.try_into().unwrap();
        for l in 0..LANES {
            acc[l] = acc[l].max(x[l]);
        }
    }
    for (l, &x) in rest.iter().enumerate() {
        acc[l] = acc[l].max(x);
    }
    combine(acc, |p, q| p.max(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_reductions_equal_the_plain_ones_on_exact_data() {
        // Small integers: every partial sum is exact, so any order gives the same value
        // and a lane that is dropped or counted twice shows.
        for n in [0usize, 1, 15, 16, 17, 33, 100, 512] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
            let want_dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert_eq!(dot(&a, &b), want_dot, "dot, n={n}");
            assert_eq!(sum(&a), a.iter().sum::<f32>(), "sum, n={n}");
            let want_max = a.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            assert_eq!(max(&a), want_max, "max, n={n}");
        }
        // The maximum in the remainder, and in the last lane of a full chunk.
        let mut a = vec![0f32; 40];
        a[39] = 5.0;
        assert_eq!(max(&a), 5.0);
        a[31] = 7.0;
        assert_eq!(max(&a), 7.0);
    }
}
