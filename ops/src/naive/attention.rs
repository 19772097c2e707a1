//! Naive edge softmax and its backward: per row and head, the max, the sum of exponentials,
//! the quotient; the row dot product of α and dα.

use num_traits::Float;

/// α = softmax of e over each row's entries, per head; entry-major `e[k·heads + h]`.
pub fn edge_softmax<T: Float>(offsets: &[u32], heads: usize, e: &[T], alpha: &mut [T]) {
    for u in 0..offsets.len() - 1 {
        let (lo, hi) = (offsets[u] as usize, offsets[u + 1] as usize);
        for h in 0..heads {
            let mut max = T::neg_infinity();
            for k in lo..hi {
                max = max.max(e[k * heads + h]);
            }
            let mut sum = T::zero();
            for k in lo..hi {
                sum = sum + (e[k * heads + h] - max).exp();
            }
            for k in lo..hi {
                alpha[k * heads + h] = (e[k * heads + h] - max).exp() / sum;
            }
        }
    }
}

/// de = ∂L/∂e from dα: de_k = α_k (dα_k − Σ_{j ∈ row} α_j dα_j), per head.
pub fn edge_softmax_backward<T: Float>(
    offsets: &[u32],
    heads: usize,
    alpha: &[T],
    dalpha: &[T],
    de: &mut [T],
) {
    for u in 0..offsets.len() - 1 {
        let (lo, hi) = (offsets[u] as usize, offsets[u + 1] as usize);
        for h in 0..heads {
            let mut dot = T::zero();
            for k in lo..hi {
                dot = dot + alpha[k * heads + h] * dalpha[k * heads + h];
            }
            for k in lo..hi {
                de[k * heads + h] = alpha[k * heads + h] * (dalpha[k * heads + h] - dot);
            }
        }
    }
}
