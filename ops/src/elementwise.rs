//! Elementwise and row-wise kernels with their backward: ReLU, LeakyReLU, sigmoid, ELU,
//! dropout (mask kept for backward), bias add, row-wise L2 normalisation.
//!
//! Generic over `f32` (the engine) and `f64` (the finite-difference reference path of the
//! tests). Every backward takes the upstream gradient `dy` and writes `dx`; each states
//! what its forward must save (save only what the gradient needs). Large inputs run in
//! parallel chunks on the caller's rayon pool.

use num_traits::Float;
use rayon::prelude::*;

use crate::{check_len, KernelError};

/// Elements per parallel chunk: 64 KiB of f32, enough to amortise a task.
const CHUNK: usize = 1 << 14;

fn map2<T: Float + Send + Sync>(
    kernel: &'static str,
    a: &[T],
    b: &[T],
    out: &mut [T],
    f: impl Fn(T, T) -> T + Sync,
) -> Result<(), KernelError> {
    check_len(kernel, "second input", a.len(), b.len())?;
    check_len(kernel, "output", a.len(), out.len())?;
    out.par_chunks_mut(CHUNK)
        .zip(a.par_chunks(CHUNK))
        .zip(b.par_chunks(CHUNK))
        .for_each(|((o, a), b)| {
            for i in 0..o.len() {
                o[i] = f(a[i], b[i]);
            }
        });
    Ok(())
}

fn map1<T: Float + Send + Sync>(
    kernel: &'static str,
    a: &[T],
    out: &mut [T],
    f: impl Fn(T) -> T + Sync,
) -> Result<(), KernelError> {
    check_len(kernel, "output", a.len(), out.len())?;
    out.par_chunks_mut(CHUNK)
        .zip(a.par_chunks(CHUNK))
        .for_each(|(o, a)| {
            for i in 0..o.len() {
                o[i] = f(a[i]);
            }
        });
    Ok(())
}

/// y = max(x, 0). Saves: y (or x).
pub fn relu<T: Float + Send + Sync>(x: &[T], y: &mut [T]) -> Result<(), KernelError> {
    map1("relu", x, y, |v| v.max(T::zero()))
}

/// dx = dy · [y > 0] (the subgradient 0 at 0).
pub fn relu_backward<T: Float + Send + Sync>(
    y: &[T],
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    map2("relu_backward", y, dy, dx, |y, d| {
        if y > T::zero() {
            d
        } else {
            T::zero()
        }
    })
}

/// y = x if x > 0 else α·x. Saves: x.
pub fn leaky_relu<T: Float + Send + Sync>(
    x: &[T],
    alpha: T,
    y: &mut [T],
) -> Result<(), KernelError> {
    map1("leaky_relu", x, y, |v| {
        if v > T::zero() {
            v
        } else {
            alpha * v
        }
    })
}

/// dx = dy if x > 0 else α·dy.
pub fn leaky_relu_backward<T: Float + Send + Sync>(
    x: &[T],
    alpha: T,
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    map2("leaky_relu_backward", x, dy, dx, |x, d| {
        if x > T::zero() {
            d
        } else {
            alpha * d
        }
    })
}

/// y = 1 / (1 + e^−x), evaluated without overflow for large |x|. Saves: y.
pub fn sigmoid<T: Float + Send + Sync>(x: &[T], y: &mut [T]) -> Result<(), KernelError> {
    map1("sigmoid", x, y, stable_sigmoid)
}

/// The logistic function, stable for both signs (e^−|x| never overflows).
#[inline]
pub fn stable_sigmoid<T: Float>(x: T) -> T {
    let e = (-x.abs()).exp();
    if x >= T::zero() {
        T::one() / (T::one() + e)
    } else {
        e / (T::one() + e)
    }
}

/// dx = dy · y (1 − y).
pub fn sigmoid_backward<T: Float + Send + Sync>(
    y: &[T],
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    map2("sigmoid_backward", y, dy, dx, |y, d| d * y * (T::one() - y))
}

/// y = x if x > 0 else α (e^x − 1). Saves: x and y.
pub fn elu<T: Float + Send + Sync>(x: &[T], alpha: T, y: &mut [T]) -> Result<(), KernelError> {
    map1("elu", x, y, |v| {
        if v > T::zero() {
            v
        } else {
            alpha * v.exp_m1()
        }
    })
}

/// dx = dy if x > 0 else dy · (y + α)   (d/dx α(e^x − 1) = α e^x = y + α).
pub fn elu_backward<T: Float + Send + Sync>(
    x: &[T],
    y: &[T],
    alpha: T,
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    check_len("elu_backward", "y", x.len(), y.len())?;
    check_len("elu_backward", "dy", x.len(), dy.len())?;
    check_len("elu_backward", "dx", x.len(), dx.len())?;
    for i in 0..x.len() {
        dx[i] = if x[i] > T::zero() {
            dy[i]
        } else {
            dy[i] * (y[i] + alpha)
        };
    }
    Ok(())
}

/// Inverted dropout: keeps each element with probability 1 − p, scaled by 1/(1 − p), so the
/// expectation is unchanged; `mask` (one byte per element, 1 = kept) is written for the
/// backward. `random` gives one uniform u64 per element in order (a seeded stream, so a
/// step is reproducible). p = 0 keeps everything.
pub fn dropout<T: Float + Send + Sync>(
    x: &[T],
    p: f64,
    mut random: impl FnMut() -> u64,
    y: &mut [T],
    mask: &mut [u8],
) -> Result<(), KernelError> {
    check_len("dropout", "output", x.len(), y.len())?;
    check_len("dropout", "mask", x.len(), mask.len())?;
    if !(0.0..1.0).contains(&p) {
        return Err(KernelError::Sparse {
            kernel: "dropout",
            what: format!("probability expected in [0, 1), got {p}"),
        });
    }
    let threshold = (p * (u64::MAX as f64)) as u64;
    let scale = T::from(1.0 / (1.0 - p)).unwrap();
    for i in 0..x.len() {
        let keep = p == 0.0 || random() >= threshold;
        mask[i] = u8::from(keep);
        y[i] = if keep { x[i] * scale } else { T::zero() };
    }
    Ok(())
}

/// dx = dy · mask / (1 − p).
pub fn dropout_backward<T: Float + Send + Sync>(
    mask: &[u8],
    p: f64,
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    check_len("dropout_backward", "dy", mask.len(), dy.len())?;
    check_len("dropout_backward", "dx", mask.len(), dx.len())?;
    let scale = T::from(1.0 / (1.0 - p)).unwrap();
    for i in 0..mask.len() {
        dx[i] = if mask[i] == 1 {
            dy[i] * scale
        } else {
            T::zero()
        };
    }
    Ok(())
}

/// Checks that `len` elements are whole rows of width `f`; `Ok(true)` when there is
/// nothing to do (f = 0 with an empty matrix).
fn whole_rows(
    kernel: &'static str,
    what: &'static str,
    len: usize,
    f: usize,
) -> Result<bool, KernelError> {
    if f == 0 {
        return check_len(kernel, what, 0, len).map(|()| true);
    }
    check_len(kernel, what, len / f * f, len).map(|()| false)
}

/// y (n×f) = x + b broadcast over rows, in place. Saves: nothing.
pub fn bias_add<T: Float + Send + Sync>(y: &mut [T], b: &[T]) -> Result<(), KernelError> {
    let f = b.len();
    if whole_rows(
        "bias_add",
        "matrix (a multiple of the bias length)",
        y.len(),
        f,
    )? {
        return Ok(());
    }
    y.par_chunks_mut(f * 64.max(CHUNK / f)).for_each(|rows| {
        for row in rows.chunks_exact_mut(f) {
            for (v, &bb) in row.iter_mut().zip(b) {
                *v = *v + bb;
            }
        }
    });
    Ok(())
}

/// db = Σ_rows dy: the bias gradient (dx of a bias add is dy itself).
pub fn bias_add_backward<T: Float + Send + Sync>(
    dy: &[T],
    db: &mut [T],
) -> Result<(), KernelError> {
    let f = db.len();
    db.iter_mut().for_each(|v| *v = T::zero());
    if whole_rows(
        "bias_add_backward",
        "dy (a multiple of the bias length)",
        dy.len(),
        f,
    )? {
        return Ok(());
    }
    for row in dy.chunks_exact(f) {
        for (d, &v) in db.iter_mut().zip(row) {
            *d = *d + v;
        }
    }
    Ok(())
}

/// y_i = x_i / max(‖x_i‖₂, ε) for each row of width f. Saves: y and the norms (`norms`).
pub fn l2_normalize_rows<T: Float + Send + Sync>(
    x: &[T],
    f: usize,
    eps: T,
    y: &mut [T],
    norms: &mut [T],
) -> Result<(), KernelError> {
    check_len("l2_normalize_rows", "output", x.len(), y.len())?;
    let n = x.len().checked_div(f).unwrap_or(0);
    check_len("l2_normalize_rows", "input (n×f)", n * f, x.len())?;
    check_len("l2_normalize_rows", "norms", n, norms.len())?;
    for i in 0..n {
        let row = &x[i * f..(i + 1) * f];
        let norm = row
            .iter()
            .fold(T::zero(), |s, &v| s + v * v)
            .sqrt()
            .max(eps);
        norms[i] = norm;
        for j in 0..f {
            y[i * f + j] = row[j] / norm;
        }
    }
    Ok(())
}

/// dx_i = (dy_i − y_i (y_i · dy_i)) / ‖x_i‖ (when ‖x_i‖ > ε; below it the map is x/ε and
/// dx = dy/ε).
pub fn l2_normalize_rows_backward<T: Float + Send + Sync>(
    y: &[T],
    norms: &[T],
    f: usize,
    eps: T,
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    check_len("l2_normalize_rows_backward", "dy", y.len(), dy.len())?;
    check_len("l2_normalize_rows_backward", "dx", y.len(), dx.len())?;
    check_len(
        "l2_normalize_rows_backward",
        "y (n×f)",
        norms.len() * f,
        y.len(),
    )?;
    for (i, &norm) in norms.iter().enumerate() {
        let (yr, dr) = (&y[i * f..(i + 1) * f], &dy[i * f..(i + 1) * f]);
        let dot = if norm > eps {
            yr.iter().zip(dr).fold(T::zero(), |s, (&a, &b)| s + a * b)
        } else {
            T::zero()
        };
        for j in 0..f {
            dx[i * f + j] = (dr[j] - yr[j] * dot) / norm;
        }
    }
    Ok(())
}
