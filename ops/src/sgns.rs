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

use crate::simd::{dot, wide};

/// Logits beyond ±this saturate σ: 1/(1+e^15) < 3.1e-7, below an f32 step of 1.0, so the
/// gradient is the one at the clamp. Keeps `exp` finite.
pub const MAX_LOGIT: f32 = 15.0;

/// σ(s) = 1/(1+e^−s) with s clamped to ±[`MAX_LOGIT`].
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
    // Not through `wide`: LLVM kept that closure out of line, compiled for SSE with a
    // scalar dot product (perf annotate: `mulss`/`addss` on 40 % of the embedding run's
    // samples). Functions marked inline(always) are inlined into the target-feature ones.
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { term_avx512(u, c, acc, positive, weight, lr) };
        }
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { term_avx2(u, c, acc, positive, weight, lr) };
        }
    }
    term(u, c, acc, positive, weight, lr)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn term_avx512(
    u: &[f32],
    c: &mut [f32],
    acc: &mut [f32],
    positive: bool,
    weight: f32,
    lr: f32,
) -> f32 {
    term(u, c, acc, positive, weight, lr)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn term_avx2(
    u: &[f32],
    c: &mut [f32],
    acc: &mut [f32],
    positive: bool,
    weight: f32,
    lr: f32,
) -> f32 {
    term(u, c, acc, positive, weight, lr)
}

/// [`sgns_term`]'s body, inlined into each compiled variant.
#[inline(always)]
fn term(u: &[f32], c: &mut [f32], acc: &mut [f32], positive: bool, weight: f32, lr: f32) -> f32 {
    let d = u.len().min(c.len()).min(acc.len());
    let (u, c, acc) = (&u[..d], &mut c[..d], &mut acc[..d]);
    let s = dot(u, c);
    let y = if positive { 1.0 } else { 0.0 };
    let g = lr * weight * (y - sigmoid(s));
    for ((a, ci), &ui) in acc.iter_mut().zip(c.iter_mut()).zip(u) {
        *a += g * *ci;
        *ci += g * ui;
    }
    s
}

/// Ends a sample: u += acc, then acc = 0 for the next sample.
#[inline]
pub fn sgns_apply(u: &mut [f32], acc: &mut [f32]) {
    wide(|| {
        for (ui, a) in u.iter_mut().zip(acc.iter_mut()) {
            *ui += *a;
            *a = 0.0;
        }
    })
}

/// The loss of one term with logit `s`: −weight·log σ(s) if positive, −weight·log σ(−s)
/// otherwise (stable for large |s|).
pub fn sgns_loss(s: f32, positive: bool, weight: f32) -> f64 {
    let z = f64::from(if positive { s } else { -s });
    // −log σ(z) = log(1 + e^−z) = max(−z, 0) + log(1 + e^−|z|).
    f64::from(weight) * ((-z).max(0.0) + (-z.abs()).exp().ln_1p())
}
