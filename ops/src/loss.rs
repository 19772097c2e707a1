//! Losses with their gradient, numerically stable, with per-node weights (GraphSAINT's loss
//! normalisation 1/λ_v; weight 0 masks a node out, e.g. a non-training node).
//!
//! * `softmax_cross_entropy` (single-label): ℓ_i = logsumexp(z_i) − z_i\[y_i\], computed
//!   with the row max subtracted; ∂ℓ_i/∂z_i = softmax(z_i) − e_{y_i}.
//! * `sigmoid_bce` (multi-label): ℓ_i = Σ_c max(z,0) − z·t + log(1 + e^−|z|), which never
//!   overflows; ∂/∂z = σ(z) − t.
//!
//! Both return L = Σ_i w_i ℓ_i and write dz = ∂L/∂z.

use crate::real::Real;
use rayon::prelude::*;

use crate::simd::{combine, max, sum, wide, LANES};
use crate::{check_len, KernelError};

/// Elements per parallel task (64 KiB of f32 logits).
const CHUNK: usize = 1 << 14;

/// Rows per parallel task: fixed by the row width alone, never by the thread count, so the
/// loss (summed within each task, then over tasks in order) is the same on any pool.
fn rows_per_task(c: usize) -> usize {
    (CHUNK / c.max(1)).max(1)
}

/// Single-label softmax cross-entropy over n rows of c logits. `labels[i]` is row i's
/// class (`u32::MAX`: unlabelled, contributes nothing); `weights[i]` its weight.
///
/// One exponential per logit: e^(z − max) is kept in `dlogits`, summed, and then scaled
/// by w / Σ; the max and the sum reduce in 16 lanes (`simd::sum`), so the row's three
/// passes vectorise. In parallel row blocks on the caller's pool.
pub fn softmax_cross_entropy<T: Real>(
    logits: &[T],
    c: usize,
    labels: &[u32],
    weights: &[T],
    dlogits: &mut [T],
) -> Result<T, KernelError> {
    let n = labels.len();
    check_len("softmax_cross_entropy", "logits (n×c)", n * c, logits.len())?;
    check_len("softmax_cross_entropy", "weights", n, weights.len())?;
    check_len("softmax_cross_entropy", "dlogits", n * c, dlogits.len())?;
    let counted = |i: usize| labels[i] != u32::MAX && weights[i] != T::zero();
    if let Some(i) = (0..n).find(|&i| counted(i) && labels[i] as usize >= c) {
        return Err(KernelError::Sparse {
            kernel: "softmax_cross_entropy",
            what: format!("row {i}: label {} out of range, expected < {c}", labels[i]),
        });
    }
    if c == 0 {
        return Ok(T::zero()); // every row is unlabelled or masked (checked above)
    }
    let rows = rows_per_task(c);
    let partial: Vec<T> = dlogits
        .par_chunks_mut(rows * c)
        .zip(logits.par_chunks(rows * c))
        .zip(labels.par_chunks(rows))
        .zip(weights.par_chunks(rows))
        .map(|(((dz, z), labels), weights)| wide(|| softmax_ce_block(z, c, labels, weights, dz)))
        .collect();
    Ok(partial.into_iter().fold(T::zero(), |a, b| a + b))
}

/// Rows of one task of [`softmax_cross_entropy`]; returns their loss. A function of its
/// own so `dz` is known not to alias the inputs (see `elementwise::apply1`).
fn softmax_ce_block<T: Real>(z: &[T], c: usize, labels: &[u32], weights: &[T], dz: &mut [T]) -> T {
    let mut loss = T::zero();
    let rows = dz.chunks_exact_mut(c).zip(z.chunks_exact(c));
    for ((dz, z), (&y, &w)) in rows.zip(labels.iter().zip(weights)) {
        if y == u32::MAX || w == T::zero() {
            dz.fill(T::zero());
            continue;
        }
        let max = max(z);
        for (d, &v) in dz.iter_mut().zip(z) {
            *d = (v - max).exp_fast();
        }
        let sum = sum(dz);
        let scale = w / sum;
        dz.iter_mut().for_each(|d| *d = *d * scale);
        dz[y as usize] = dz[y as usize] - w;
        // ℓ = logsumexp(z) − z_y = (max − z_y) + ln Σ e^(z − max).
        loss = loss + w * ((max - z[y as usize]) + sum.ln());
    }
    loss
}

/// Multi-label sigmoid binary cross-entropy over n rows of c logits and 0/1 `targets`.
///
/// One exponential per logit: e^−|z| serves both the loss's log(1 + e^−|z|) and σ(z);
/// that logarithm by [`Real::ln_1p_unit`] (its argument is in (0, 1]), so the loop has no
/// library call and vectorises (with libm's `ln_1p` it ran slower than the naive loop).
/// In parallel row blocks, the loss summed as in [`softmax_cross_entropy`].
pub fn sigmoid_bce<T: Real>(
    logits: &[T],
    c: usize,
    targets: &[T],
    weights: &[T],
    dlogits: &mut [T],
) -> Result<T, KernelError> {
    let n = weights.len();
    check_len("sigmoid_bce", "logits (n×c)", n * c, logits.len())?;
    check_len("sigmoid_bce", "targets", n * c, targets.len())?;
    check_len("sigmoid_bce", "dlogits", n * c, dlogits.len())?;
    if c == 0 {
        return Ok(T::zero());
    }
    let rows = rows_per_task(c);
    let partial: Vec<T> = dlogits
        .par_chunks_mut(rows * c)
        .zip(logits.par_chunks(rows * c))
        .zip(targets.par_chunks(rows * c))
        .zip(weights.par_chunks(rows))
        .map(|(((dz, z), t), weights)| wide(|| bce_block(z, c, t, weights, dz)))
        .collect();
    Ok(partial.into_iter().fold(T::zero(), |a, b| a + b))
}

/// Rows of one task of [`sigmoid_bce`]; returns their loss.
fn bce_block<T: Real>(z: &[T], c: usize, t: &[T], weights: &[T], dz: &mut [T]) -> T {
    let mut loss = T::zero();
    let rows = dz
        .chunks_exact_mut(c)
        .zip(z.chunks_exact(c))
        .zip(t.chunks_exact(c));
    for (((dz, z), t), &w) in rows.zip(weights) {
        if w == T::zero() {
            dz.fill(T::zero());
            continue;
        }
        // The row's loss in 16 lanes (`simd::sum`'s scheme): one running sum would make
        // the loop a chain of dependent adds and keep it scalar.
        let mut acc = [T::zero(); LANES];
        let (dc, zc, tc) = (
            dz.chunks_exact_mut(LANES),
            z.chunks_exact(LANES),
            t.chunks_exact(LANES),
        );
        let (zr, tr) = (zc.remainder(), tc.remainder());
        for ((d, z), t) in dc.zip(zc).zip(tc) {
            let d: &mut [T; LANES] = d.try_into().unwrap();
            let (z, t): (&[T; LANES], &[T; LANES]) = (z.try_into().unwrap(), t.try_into().unwrap());
            for l in 0..LANES {
                let (term, grad) = bce_term(z[l], t[l], w);
                acc[l] = acc[l] + term;
                d[l] = grad;
            }
        }
        let tail = dz.len() - zr.len();
        for (l, ((d, &z), &t)) in dz[tail..].iter_mut().zip(zr).zip(tr).enumerate() {
            let (term, grad) = bce_term(z, t, w);
            acc[l] = acc[l] + term;
            *d = grad;
        }
        loss = loss + w * combine(acc, |p, q| p + q);
    }
    loss
}

/// One logit's loss term max(z, 0) − z·t + ln(1 + e^−|z|) (unweighted) and its weighted
/// gradient w (σ(z) − t).
#[inline(always)]
fn bce_term<T: Real>(z: T, t: T, w: T) -> (T, T) {
    let e = (-z.abs()).exp_fast();
    let term = z.max(T::zero()) - z * t + e.ln_1p_unit();
    // σ(z) from e = e^−|z|: 1/(1 + e) for z ≥ 0, e/(1 + e) below.
    let s = if z >= T::zero() { T::one() } else { e } / (T::one() + e);
    (term, w * (s - t))
}
