//! Naive Adam step: the update written out per parameter.

use num_traits::Float;

use crate::optim::Adam;

/// One Adam step `t` (1-based): g' = g + wd·p; m ← β1 m + (1−β1) g';
/// v ← β2 v + (1−β2) g'²; p ← p − lr · (m / (1−β1^t)) / (√(v / (1−β2^t)) + ε).
pub fn adam_step<T: Float>(
    adam: &Adam,
    t: u64,
    params: &mut [T],
    grads: &[T],
    m: &mut [T],
    v: &mut [T],
) {
    let c = |x: f64| T::from(x).unwrap();
    for i in 0..params.len() {
        let g = grads[i] + c(adam.weight_decay) * params[i];
        m[i] = c(adam.beta1) * m[i] + (T::one() - c(adam.beta1)) * g;
        v[i] = c(adam.beta2) * v[i] + (T::one() - c(adam.beta2)) * g * g;
        let m_hat = m[i] / (T::one() - c(adam.beta1).powi(t as i32));
        let v_hat = v[i] / (T::one() - c(adam.beta2).powi(t as i32));
        params[i] = params[i] - c(adam.lr) * m_hat / (v_hat.sqrt() + c(adam.eps));
    }
}
