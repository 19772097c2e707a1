//! Skip-gram with negative sampling (SGNS): the SGD step of node embedding (DeepWalk, LINE,
//! node2vec as GraphVite trains them) on one vertex row `u` and the context rows of one
//! positive sample and its negatives.
//!
//! For each term (context row c, label y ∈ {1 positive, 0 negative}, weight w):
//! s = u·c, g = lr·w·(y − σ(s)), acc += g·c, c += g·u — the context row is updated with the
//! vertex row *before* the vertex row moves, as word2vec and GraphVite do; after all terms
//! of the sample, [`sgns_apply`] adds acc to u. Each call touches only its own rows, so a
//! caller may run calls on disjoint rows at once (the partition grid guarantees that).
//!
//! Vectorised: the dot product sums in 16 independent lanes, and the fused update is one
//! pass over acc, c and u, compiled for AVX-512F or AVX2 when the CPU has it (chosen per
//! call); the naive oracle is [`crate::naive::sgns`].

use crate::isa::Isa;
use crate::simd::{dot, wide, LANES};

/// Logits beyond ±this saturate σ: 1/(1+e^15) < 3.1e-7, below an f32 step of 1.0, so the
/// gradient is the one at the clamp. Keeps `exp` finite.
pub const MAX_LOGIT: f32 = 15.0;

/// σ(s) = 1/(1+e^−s) with s clamped to ±[`MAX_LOGIT`]. (libm's `expf`: a Taylor
/// polynomial inlined here was slower end to end, its longer dependency chain sitting
/// between the dot product and the update.)
#[inline]
pub fn sigmoid(s: f32) -> f32 {
    let s = s.clamp(-MAX_LOGIT, MAX_LOGIT);
    1.0 / (1.0 + (-s).exp())
}

/// One SGNS term on `u` (read) and `c` (updated), accumulating the vertex gradient in `acc`:
/// s = u·c, g = lr·weight·(y − σ(s)) with y = 1 if `positive`, acc += g·c, c += g·u.
/// Returns s (the caller computes a loss from it when it wants one). The three rows have
/// the same length (the embedding dim); a shorter one bounds the loop.
#[inline]
pub fn sgns_term(
    u: &[f32],
    c: &mut [f32],
    acc: &mut [f32],
    positive: bool,
    weight: f32,
    lr: f32,
) -> f32 {
    let d = u.len().min(c.len()).min(acc.len());
    let (u, c, acc) = (&u[..d], &mut c[..d], &mut acc[..d]);
    // Written with the vector unit's intrinsics: LLVM compiled the generic body's
    // 16-lane dot product into 4-wide pieces and scalar adds even inside a function
    // compiled for AVX-512 (perf annotate: `vaddss` chains hottest). The lanes are the
    // generic body's, so every path gives the same bits.
    #[cfg(target_arch = "x86_64")]
    {
        match Isa::current() {
            // SAFETY: `Isa::current` is capped to what the CPU has; the rows have length d.
            Isa::Avx512 => return unsafe { x86::term_avx512(u, c, acc, positive, weight, lr) },
            // SAFETY: as above (AVX2 and FMA).
            Isa::Avx2 => return unsafe { x86::term_avx2(u, c, acc, positive, weight, lr) },
            Isa::Generic => {}
        }
    }
    term_with(u, c, acc, positive, weight, lr, dot, update)
}

/// A term from a dot product and an update (one vector unit's pair).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn term_with(
    u: &[f32],
    c: &mut [f32],
    acc: &mut [f32],
    positive: bool,
    weight: f32,
    lr: f32,
    dot: impl Fn(&[f32], &[f32]) -> f32,
    update: impl Fn(&[f32], &mut [f32], &mut [f32], f32),
) -> f32 {
    let s = dot(u, c);
    let y = if positive { 1.0 } else { 0.0 };
    let g = lr * weight * (y - sigmoid(s));
    update(u, c, acc, g);
    s
}

/// acc += g·c, then c += g·u, elementwise (the generic body).
#[inline(always)]
fn update(u: &[f32], c: &mut [f32], acc: &mut [f32], g: f32) {
    for ((a, ci), &ui) in acc.iter_mut().zip(c.iter_mut()).zip(u) {
        *a += g * *ci;
        *ci += g * ui;
    }
}

/// Ends a sample: u += acc, then acc = 0 for the next sample.
#[inline]
pub fn sgns_apply(u: &mut [f32], acc: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if Isa::current() == Isa::Avx512 {
            // SAFETY: `Isa::current` is capped to what the CPU has.
            return unsafe { x86::apply_avx512(u, acc) };
        }
    }
    wide(|| apply(u, acc))
}

/// u += acc, acc = 0 (the generic body).
#[inline(always)]
fn apply(u: &mut [f32], acc: &mut [f32]) {
    for (ui, a) in u.iter_mut().zip(acc.iter_mut()) {
        *ui += *a;
        *a = 0.0;
    }
}

/// The x86-64 kernels: the generic bodies' operations in the same order (no FMA; the dot
/// product in [`LANES`] lanes, the tail added to lanes 0.., combined pairwise), so their
/// results are bit-identical to the generic path's.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{apply, term_with, update, LANES};
    use crate::simd::combine;

    /// `$name`: [`super::sgns_term`] compiled for `$feature` from that unit's dot product
    /// and update (which inline into it).
    macro_rules! term_for {
        ($name:ident, $feature:literal, $dot:ident, $update:ident) => {
            #[doc = concat!("[`super::sgns_term`] for ", $feature, ".")]
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $name(
                u: &[f32],
                c: &mut [f32],
                acc: &mut [f32],
                positive: bool,
                weight: f32,
                lr: f32,
            ) -> f32 {
                // SAFETY (each closure): the CPU has the feature, as this function requires.
                let dot = |u: &[f32], c: &[f32]| unsafe { $dot(u, c) };
                let update =
                    |u: &[f32], c: &mut [f32], a: &mut [f32], g| unsafe { $update(u, c, a, g) };
                term_with(u, c, acc, positive, weight, lr, dot, update)
            }
        };
    }
    term_for!(term_avx512, "avx512f", dot_avx512, update_avx512);
    term_for!(term_avx2, "avx2", dot_avx2, update_avx2);

    /// Σ u_i·c_i in 16 lanes (one 512-bit register), rows of equal length.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dot_avx512(u: &[f32], c: &[f32]) -> f32 {
        let d = u.len().min(c.len());
        let full = d / LANES * LANES;
        let mut v = _mm512_setzero_ps();
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ the rows' length.
            let (a, b) = unsafe {
                (
                    _mm512_loadu_ps(u.as_ptr().add(k)),
                    _mm512_loadu_ps(c.as_ptr().add(k)),
                )
            };
            v = _mm512_add_ps(v, _mm512_mul_ps(a, b));
            k += LANES;
        }
        let mut lanes = [0f32; LANES];
        // SAFETY: `lanes` holds 16 floats.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), v) };
        tail(lanes, &u[full..d], &c[full..d])
    }

    /// Σ u_i·c_i in 16 lanes (two 256-bit registers: lanes 0–7 and 8–15).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dot_avx2(u: &[f32], c: &[f32]) -> f32 {
        let d = u.len().min(c.len());
        let full = d / LANES * LANES;
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ the rows' length.
            unsafe {
                let (u, c) = (u.as_ptr().add(k), c.as_ptr().add(k));
                lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(u), _mm256_loadu_ps(c)));
                hi = _mm256_add_ps(
                    hi,
                    _mm256_mul_ps(_mm256_loadu_ps(u.add(8)), _mm256_loadu_ps(c.add(8))),
                );
            }
            k += LANES;
        }
        let mut lanes = [0f32; LANES];
        // SAFETY: `lanes` holds 16 floats.
        unsafe {
            _mm256_storeu_ps(lanes.as_mut_ptr(), lo);
            _mm256_storeu_ps(lanes.as_mut_ptr().add(8), hi);
        }
        tail(lanes, &u[full..d], &c[full..d])
    }

    /// Adds the tail (fewer than 16 elements) to lanes 0.. and combines the lanes.
    #[inline(always)]
    fn tail(mut lanes: [f32; LANES], u: &[f32], c: &[f32]) -> f32 {
        for ((l, &a), &b) in lanes.iter_mut().zip(u).zip(c) {
            *l += a * b;
        }
        combine(lanes, |p, q| p + q)
    }

    /// acc += g·c, then c += g·u, 16 elements at a time. (The generic body compiled for
    /// AVX-512 in its place: `cargo bench --bench sgns` d128_neg1 1.84 ms against 1.34 ms.)
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn update_avx512(u: &[f32], c: &mut [f32], acc: &mut [f32], g: f32) {
        let d = u.len().min(c.len()).min(acc.len());
        let full = d / LANES * LANES;
        let gv = _mm512_set1_ps(g);
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ every row's length.
            unsafe {
                let (up, cp, ap) = (
                    u.as_ptr().add(k),
                    c.as_mut_ptr().add(k),
                    acc.as_mut_ptr().add(k),
                );
                let cv = _mm512_loadu_ps(cp);
                _mm512_storeu_ps(
                    ap,
                    _mm512_add_ps(_mm512_loadu_ps(ap), _mm512_mul_ps(gv, cv)),
                );
                _mm512_storeu_ps(
                    cp,
                    _mm512_add_ps(cv, _mm512_mul_ps(gv, _mm512_loadu_ps(up))),
                );
            }
            k += LANES;
        }
        update(&u[full..d], &mut c[full..d], &mut acc[full..d], g);
    }

    /// acc += g·c, then c += g·u, 8 elements at a time.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn update_avx2(u: &[f32], c: &mut [f32], acc: &mut [f32], g: f32) {
        let d = u.len().min(c.len()).min(acc.len());
        let full = d / 8 * 8;
        let gv = _mm256_set1_ps(g);
        let mut k = 0;
        while k < full {
            // SAFETY: k + 8 ≤ full ≤ every row's length.
            unsafe {
                let (up, cp, ap) = (
                    u.as_ptr().add(k),
                    c.as_mut_ptr().add(k),
                    acc.as_mut_ptr().add(k),
                );
                let cv = _mm256_loadu_ps(cp);
                _mm256_storeu_ps(
                    ap,
                    _mm256_add_ps(_mm256_loadu_ps(ap), _mm256_mul_ps(gv, cv)),
                );
                _mm256_storeu_ps(
                    cp,
                    _mm256_add_ps(cv, _mm256_mul_ps(gv, _mm256_loadu_ps(up))),
                );
            }
            k += 8;
        }
        update(&u[full..d], &mut c[full..d], &mut acc[full..d], g);
    }

    /// u += acc, acc = 0, 16 elements at a time.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn apply_avx512(u: &mut [f32], acc: &mut [f32]) {
        let d = u.len().min(acc.len());
        let full = d / LANES * LANES;
        let zero = _mm512_setzero_ps();
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 ≤ full ≤ both rows' length.
            unsafe {
                let (up, ap) = (u.as_mut_ptr().add(k), acc.as_mut_ptr().add(k));
                _mm512_storeu_ps(up, _mm512_add_ps(_mm512_loadu_ps(up), _mm512_loadu_ps(ap)));
                _mm512_storeu_ps(ap, zero);
            }
            k += LANES;
        }
        apply(&mut u[full..d], &mut acc[full..d]);
    }
}

/// The loss of one term with logit `s`: −weight·log σ(s) if positive, −weight·log σ(−s)
/// otherwise (stable for large |s|).
pub fn sgns_loss(s: f32, positive: bool, weight: f32) -> f64 {
    let z = f64::from(if positive { s } else { -s });
    // −log σ(z) = log(1 + e^−z) = max(−z, 0) + log(1 + e^−|z|).
    f64::from(weight) * ((-z).max(0.0) + (-z.abs()).exp().ln_1p())
}
