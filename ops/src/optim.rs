//! Optimisers, in place on flat parameter slices: Adam (bias-corrected, L2 weight decay
//! added to the gradient as in Kipf & Welling's GCN and GraphSAINT) and SGD (momentum
//! optional).

use crate::real::Real;
use rayon::prelude::*;

use crate::simd::wide;
use crate::{check_len, KernelError};

/// Parameters per parallel task: 64 KiB of f32 per array.
const CHUNK: usize = 1 << 14;

/// Adam's hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adam {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay β1.
    pub beta1: f64,
    /// Second-moment decay β2.
    pub beta2: f64,
    /// ε added to √v̂.
    pub eps: f64,
    /// L2 weight decay: g ← g + wd·p before the moments.
    pub weight_decay: f64,
}

impl Default for Adam {
    fn default() -> Self {
        Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
}

impl Adam {
    /// Step `t` (1-based) on `params` with gradient `grads` and moment buffers `m`, `v`:
    /// g' = g + wd·p; m ← β1 m + (1−β1) g'; v ← β2 v + (1−β2) g'²;
    /// p ← p − lr · (m / (1−β1^t)) / (√(v / (1−β2^t)) + ε).
    pub fn step<T: Real>(
        &self,
        t: u64,
        params: &mut [T],
        grads: &[T],
        m: &mut [T],
        v: &mut [T],
    ) -> Result<(), KernelError> {
        check_len("adam", "grads", params.len(), grads.len())?;
        check_len("adam", "m", params.len(), m.len())?;
        check_len("adam", "v", params.len(), v.len())?;
        if t == 0 {
            return Err(KernelError::Sparse {
                kernel: "adam",
                what: "step t is 1-based, got 0".into(),
            });
        }
        let c = |x: f64| T::from(x).unwrap();
        let (b1, b2) = (c(self.beta1), c(self.beta2));
        let bc1 = c(1.0 - self.beta1.powi(t.min(i32::MAX as u64) as i32));
        let bc2 = c(1.0 - self.beta2.powi(t.min(i32::MAX as u64) as i32));
        let (lr, eps, wd) = (c(self.lr), c(self.eps), c(self.weight_decay));
        params
            .par_chunks_mut(CHUNK)
            .zip(grads.par_chunks(CHUNK))
            .zip(m.par_chunks_mut(CHUNK))
            .zip(v.par_chunks_mut(CHUNK))
            .for_each(|(((p, g), m), v)| {
                wide(|| adam_chunk([b1, b2, bc1, bc2, lr, eps, wd], p, g, m, v))
            });
        Ok(())
    }
}

/// One chunk of [`Adam::step`], constants [β1, β2, 1−β1^t, 1−β2^t, lr, ε, wd]. A function
/// of its own so the four slices are known not to alias and the loop vectorises (inline in
/// the rayon closure, each captured constant was reloaded per element).
fn adam_chunk<T: Real>(k: [T; 7], p: &mut [T], g: &[T], m: &mut [T], v: &mut [T]) {
    let [b1, b2, bc1, bc2, lr, eps, wd] = k;
    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        let g = g + wd * *p;
        *m = b1 * *m + (T::one() - b1) * g;
        *v = b2 * *v + (T::one() - b2) * g * g;
        *p = *p - lr * (*m / bc1) / ((*v / bc2).sqrt() + eps);
    }
}

/// SGD's hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f64,
    /// Momentum μ (0: plain SGD).
    pub momentum: f64,
    /// L2 weight decay.
    pub weight_decay: f64,
}

impl Sgd {
    /// g' = g + wd·p; buf ← μ·buf + g'; p ← p − lr·buf.
    pub fn step<T: Real>(
        &self,
        params: &mut [T],
        grads: &[T],
        buf: &mut [T],
    ) -> Result<(), KernelError> {
        check_len("sgd", "grads", params.len(), grads.len())?;
        check_len("sgd", "momentum buffer", params.len(), buf.len())?;
        let c = |x: f64| T::from(x).unwrap();
        let (lr, mu, wd) = (c(self.lr), c(self.momentum), c(self.weight_decay));
        for i in 0..params.len() {
            let g = grads[i] + wd * params[i];
            buf[i] = mu * buf[i] + g;
            params[i] = params[i] - lr * buf[i];
        }
        Ok(())
    }
}
