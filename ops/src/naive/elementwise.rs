//! Naive elementwise and row-wise forwards and backwards: one serial indexed loop per
//! definition, the textbook formula (no stabilising rewrite where the formula needs none),
//! written into a caller's buffer so a bench times the arithmetic, not an allocation.

use num_traits::Float;

/// y = max(x, 0); NaN stays NaN (PyTorch's convention).
pub fn relu<T: Float>(x: &[T], y: &mut [T]) {
    for i in 0..x.len() {
        y[i] = if x[i].is_nan() || x[i] > T::zero() {
            x[i]
        } else {
            T::zero()
        };
    }
}

/// y = x if x > 0 else α·x.
pub fn leaky_relu<T: Float>(x: &[T], alpha: T, y: &mut [T]) {
    for i in 0..x.len() {
        y[i] = if x[i] > T::zero() { x[i] } else { alpha * x[i] };
    }
}

/// y = 1 / (1 + e^−x) (e^−x = ∞ for very negative x gives the right limit, 0).
pub fn sigmoid<T: Float>(x: &[T], y: &mut [T]) {
    for i in 0..x.len() {
        y[i] = T::one() / (T::one() + (-x[i]).exp());
    }
}

/// y = x if x > 0 else α (e^x − 1).
pub fn elu<T: Float>(x: &[T], alpha: T, y: &mut [T]) {
    for i in 0..x.len() {
        y[i] = if x[i] > T::zero() {
            x[i]
        } else {
            alpha * (x[i].exp() - T::one())
        };
    }
}

/// Inverted dropout: element i is kept iff the i-th draw of `random` is ≥ p·(2⁶⁴ − 1),
/// kept elements scaled by 1/(1 − p); `mask[i]` = 1 when kept.
pub fn dropout<T: Float>(
    x: &[T],
    p: f64,
    mut random: impl FnMut() -> u64,
    y: &mut [T],
    mask: &mut [u8],
) {
    let threshold = (p * u64::MAX as f64) as u64;
    for i in 0..x.len() {
        let keep = p == 0.0 || random() >= threshold;
        mask[i] = u8::from(keep);
        y[i] = if keep {
            x[i] / T::from(1.0 - p).unwrap()
        } else {
            T::zero()
        };
    }
}

/// y\[i\]\[j\] += b\[j\] over the rows of y (width = |b|).
pub fn bias_add<T: Float>(y: &mut [T], b: &[T]) {
    let f = b.len();
    for i in 0..y.len().checked_div(f).unwrap_or(0) {
        for j in 0..f {
            y[i * f + j] = y[i * f + j] + b[j];
        }
    }
}

/// y_i = x_i / max(‖x_i‖₂, ε), norms\[i\] = max(‖x_i‖₂, ε), rows of width f.
pub fn l2_normalize_rows<T: Float>(x: &[T], f: usize, eps: T, y: &mut [T], norms: &mut [T]) {
    for i in 0..norms.len() {
        let mut s = T::zero();
        for j in 0..f {
            s = s + x[i * f + j] * x[i * f + j];
        }
        norms[i] = s.sqrt().max(eps);
        for j in 0..f {
            y[i * f + j] = x[i * f + j] / norms[i];
        }
    }
}

/// dx = dy where y > 0, else 0.
pub fn relu_backward<T: Float>(y: &[T], dy: &[T], dx: &mut [T]) {
    for i in 0..y.len() {
        dx[i] = if y[i] > T::zero() { dy[i] } else { T::zero() };
    }
}

/// dx = dy where x > 0, else α·dy.
pub fn leaky_relu_backward<T: Float>(x: &[T], alpha: T, dy: &[T], dx: &mut [T]) {
    for i in 0..x.len() {
        dx[i] = if x[i] > T::zero() {
            dy[i]
        } else {
            alpha * dy[i]
        };
    }
}

/// dx = dy · σ(x)(1 − σ(x)), from the saved y = σ(x).
pub fn sigmoid_backward<T: Float>(y: &[T], dy: &[T], dx: &mut [T]) {
    for i in 0..y.len() {
        dx[i] = dy[i] * y[i] * (T::one() - y[i]);
    }
}

/// dx = dy where x > 0, else dy · α e^x.
pub fn elu_backward<T: Float>(x: &[T], alpha: T, dy: &[T], dx: &mut [T]) {
    for i in 0..x.len() {
        dx[i] = if x[i] > T::zero() {
            dy[i]
        } else {
            dy[i] * alpha * x[i].exp()
        };
    }
}

/// dx = dy / (1 − p) where kept, else 0.
pub fn dropout_backward<T: Float>(mask: &[u8], p: f64, dy: &[T], dx: &mut [T]) {
    for i in 0..mask.len() {
        dx[i] = if mask[i] == 1 {
            dy[i] / T::from(1.0 - p).unwrap()
        } else {
            T::zero()
        };
    }
}

/// For y_i = x_i / n_i (n_i = max(‖x_i‖, ε)): dx_i = (dy_i − y_i (y_i · dy_i)) / n_i when
/// ‖x_i‖ > ε, else dy_i / ε.
pub fn l2_normalize_rows_backward<T: Float>(
    y: &[T],
    norms: &[T],
    f: usize,
    eps: T,
    dy: &[T],
    dx: &mut [T],
) {
    for i in 0..norms.len() {
        let mut dot = T::zero();
        for j in 0..f {
            dot = dot + y[i * f + j] * dy[i * f + j];
        }
        for j in 0..f {
            dx[i * f + j] = if norms[i] > eps {
                (dy[i * f + j] - y[i * f + j] * dot) / norms[i]
            } else {
                dy[i * f + j] / eps
            };
        }
    }
}
