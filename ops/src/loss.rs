//! Losses with their gradient, numerically stable, with per-node weights (GraphSAINT's loss
//! normalisation 1/λ_v; weight 0 masks a node out, e.g. a non-training node).
//!
//! * `softmax_cross_entropy` (single-label): ℓ_i = logsumexp(z_i) − z_i[y_i], computed
//!   with the row max subtracted; ∂ℓ_i/∂z_i = softmax(z_i) − e_{y_i}.
//! * `sigmoid_bce` (multi-label): ℓ_i = Σ_c max(z,0) − z·t + log(1 + e^−|z|), which never
//!   overflows; ∂/∂z = σ(z) − t.
//!
//! Both return L = Σ_i w_i ℓ_i and write dz = ∂L/∂z.

use num_traits::Float;

use crate::elementwise::stable_sigmoid;
use crate::{check_len, KernelError};

/// Single-label softmax cross-entropy over n rows of c logits. `labels[i]` is row i's
/// class (`u32::MAX`: unlabelled, contributes nothing); `weights[i]` its weight.
pub fn softmax_cross_entropy<T: Float>(
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
    let mut loss = T::zero();
    for i in 0..n {
        let z = &logits[i * c..(i + 1) * c];
        let dz = &mut dlogits[i * c..(i + 1) * c];
        let (y, w) = (labels[i], weights[i]);
        if y == u32::MAX || w == T::zero() {
            dz.iter_mut().for_each(|v| *v = T::zero());
            continue;
        }
        if y as usize >= c {
            return Err(KernelError::Sparse {
                kernel: "softmax_cross_entropy",
                what: format!("row {i}: label {y} out of range, expected < {c}"),
            });
        }
        let max = z.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
        let sum = z.iter().fold(T::zero(), |s, &v| s + (v - max).exp());
        let lse = max + sum.ln();
        loss = loss + w * (lse - z[y as usize]);
        for j in 0..c {
            dz[j] = w * (z[j] - lse).exp();
        }
        dz[y as usize] = dz[y as usize] - w;
    }
    Ok(loss)
}

/// Multi-label sigmoid binary cross-entropy over n rows of c logits and 0/1 `targets`.
pub fn sigmoid_bce<T: Float>(
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
    let mut loss = T::zero();
    for (i, &w) in weights.iter().enumerate() {
        for j in i * c..(i + 1) * c {
            let (z, t) = (logits[j], targets[j]);
            if w == T::zero() {
                dlogits[j] = T::zero();
                continue;
            }
            loss = loss + w * (z.max(T::zero()) - z * t + (-z.abs()).exp().ln_1p());
            dlogits[j] = w * (stable_sigmoid(z) - t);
        }
    }
    Ok(loss)
}
