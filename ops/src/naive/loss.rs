//! Naive losses with their gradient: the softmax and the logistic function computed first,
//! then the loss from them, row by row.

use num_traits::Float;

/// L = Σ_i w_i · (−ln softmax(z_i)\[y_i\]) and dz_i = w_i (softmax(z_i) − e_{y_i}); rows with
/// label `u32::MAX` or weight 0 contribute nothing. The softmax subtracts the row max
/// (part of its definition in floating point: e^z overflows f32 at z ≈ 89).
pub fn softmax_cross_entropy<T: Float>(
    logits: &[T],
    c: usize,
    labels: &[u32],
    weights: &[T],
    dlogits: &mut [T],
) -> T {
    let mut loss = T::zero();
    for i in 0..labels.len() {
        let (y, w) = (labels[i], weights[i]);
        if y == u32::MAX || w == T::zero() {
            for j in 0..c {
                dlogits[i * c + j] = T::zero();
            }
            continue;
        }
        let mut max = T::neg_infinity();
        for j in 0..c {
            max = max.max(logits[i * c + j]);
        }
        let mut sum = T::zero();
        for j in 0..c {
            sum = sum + (logits[i * c + j] - max).exp();
        }
        for j in 0..c {
            let p = (logits[i * c + j] - max).exp() / sum;
            let t = if j == y as usize { T::one() } else { T::zero() };
            dlogits[i * c + j] = w * (p - t);
        }
        loss = loss - w * ((logits[i * c + y as usize] - max).exp() / sum).ln();
    }
    loss
}

/// L = Σ_i w_i Σ_c −(t ln σ(z) + (1 − t) ln(1 − σ(z))) with ln σ(z) = −ln(1 + e^−z) and
/// ln(1 − σ(z)) = −z − ln(1 + e^−z), ln(1 + e^u) taken as max(u, 0) + ln(1 + e^−|u|) so
/// neither overflows; dz = w (σ(z) − t).
pub fn sigmoid_bce<T: Float>(
    logits: &[T],
    c: usize,
    targets: &[T],
    weights: &[T],
    dlogits: &mut [T],
) -> T {
    let softplus = |u: T| u.max(T::zero()) + (T::one() + (-u.abs()).exp()).ln();
    let mut loss = T::zero();
    for i in 0..weights.len() {
        for j in i * c..(i + 1) * c {
            let (z, t, w) = (logits[j], targets[j], weights[i]);
            if w == T::zero() {
                dlogits[j] = T::zero();
                continue;
            }
            let log_p = -softplus(-z);
            let log_q = -z - softplus(-z);
            loss = loss - w * (t * log_p + (T::one() - t) * log_q);
            dlogits[j] = w * (T::one() / (T::one() + (-z).exp()) - t);
        }
    }
    loss
}
