//! Elementwise and row-wise kernels with their backward: ReLU, LeakyReLU, sigmoid, ELU,
//! dropout (mask kept for backward), bias add, row-wise L2 normalisation.
//!
//! Generic over `f32` (the engine) and `f64` (the finite-difference reference path of the
//! tests). Every backward takes the upstream gradient `dy` and writes `dx`; each states
//! what its forward must save (save only what the gradient needs). Large inputs run in
//! parallel chunks on the caller's rayon pool.

use crate::real::Real;
use rayon::prelude::*;

use crate::simd::{dot, wide};
use crate::{check_len, KernelError};

/// Elements per parallel chunk: 64 KiB of f32, enough to amortise a task.
const CHUNK: usize = 1 << 14;

/// out[i] = f(a[i], b[i]), in parallel chunks.
fn map2<T: Real>(
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
        .for_each(|((o, a), b)| wide(|| apply2(o, a, b, &f)));
    Ok(())
}

/// out[i] = f(a[i]), in parallel chunks.
fn map1<T: Real>(
    kernel: &'static str,
    a: &[T],
    out: &mut [T],
    f: impl Fn(T) -> T + Sync,
) -> Result<(), KernelError> {
    check_len(kernel, "output", a.len(), out.len())?;
    out.par_chunks_mut(CHUNK)
        .zip(a.par_chunks(CHUNK))
        .for_each(|(o, a)| wide(|| apply1(o, a, &f)));
    Ok(())
}

/// One chunk of [`map1`]. A function of its own, and iterators rather than indices, so the
/// loop vectorises: as a parameter, `o: &mut [T]` is known to alias neither `a` nor what
/// `f` captured, whereas written inline in the rayon closure LLVM reloaded each capture
/// (α of LeakyReLU) per element through two pointers and kept the loop scalar and
/// branchy — 20× slower than the naive loop (BENCHMARKS.md, 2026-11-22).
#[inline]
fn apply1<T: Copy>(o: &mut [T], a: &[T], f: &impl Fn(T) -> T) {
    for (o, &a) in o.iter_mut().zip(a) {
        *o = f(a);
    }
}

/// One chunk of [`map2`] (see [`apply1`]).
#[inline]
fn apply2<T: Copy>(o: &mut [T], a: &[T], b: &[T], f: &impl Fn(T, T) -> T) {
    for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
        *o = f(a, b);
    }
}

/// y = max(x, 0), NaN staying NaN (as PyTorch's `relu`; `Float::max` would return 0 for a
/// NaN and hide it, issue 55 item 7). Saves: y (or x).
pub fn relu<T: Real>(x: &[T], y: &mut [T]) -> Result<(), KernelError> {
    // `v < 0` is false for NaN, so NaN passes through; a select, so the loop vectorises.
    map1("relu", x, y, |v| if v < T::zero() { T::zero() } else { v })
}

/// dx = dy · \[y > 0\] (the subgradient 0 at 0).
pub fn relu_backward<T: Real>(y: &[T], dy: &[T], dx: &mut [T]) -> Result<(), KernelError> {
    map2("relu_backward", y, dy, dx, |y, d| {
        if y > T::zero() {
            d
        } else {
            T::zero()
        }
    })
}

/// y = x if x > 0 else α·x. Saves: x.
pub fn leaky_relu<T: Real>(x: &[T], alpha: T, y: &mut [T]) -> Result<(), KernelError> {
    map1("leaky_relu", x, y, move |v| {
        if v > T::zero() {
            v
        } else {
            alpha * v
        }
    })
}

/// dx = dy if x > 0 else α·dy.
pub fn leaky_relu_backward<T: Real>(
    x: &[T],
    alpha: T,
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    map2("leaky_relu_backward", x, dy, dx, move |x, d| {
        if x > T::zero() {
            d
        } else {
            alpha * d
        }
    })
}

/// y = 1 / (1 + e^−x), evaluated without overflow for large |x|. Saves: y.
pub fn sigmoid<T: Real>(x: &[T], y: &mut [T]) -> Result<(), KernelError> {
    map1("sigmoid", x, y, stable_sigmoid)
}

/// The logistic function, stable for both signs (e^−|x| never overflows).
#[inline]
pub fn stable_sigmoid<T: Real>(x: T) -> T {
    let e = (-x.abs()).exp_fast();
    if x >= T::zero() {
        T::one() / (T::one() + e)
    } else {
        e / (T::one() + e)
    }
}

/// dx = dy · y (1 − y).
pub fn sigmoid_backward<T: Real>(y: &[T], dy: &[T], dx: &mut [T]) -> Result<(), KernelError> {
    map2("sigmoid_backward", y, dy, dx, |y, d| d * y * (T::one() - y))
}

/// y = x if x > 0 else α (e^x − 1). Saves: x and y.
pub fn elu<T: Real>(x: &[T], alpha: T, y: &mut [T]) -> Result<(), KernelError> {
    map1("elu", x, y, move |v| {
        if v > T::zero() {
            v
        } else {
            alpha * v.exp_m1_fast()
        }
    })
}

/// dx = dy if x > 0 else dy · (y + α)   (d/dx α(e^x − 1) = α e^x = y + α).
pub fn elu_backward<T: Real>(
    x: &[T],
    y: &[T],
    alpha: T,
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    check_len("elu_backward", "y", x.len(), y.len())?;
    check_len("elu_backward", "dy", x.len(), dy.len())?;
    check_len("elu_backward", "dx", x.len(), dx.len())?;
    dx.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .zip(y.par_chunks(CHUNK))
        .zip(dy.par_chunks(CHUNK))
        .for_each(|(((dx, x), y), dy)| wide(|| elu_backward_chunk(x, y, alpha, dy, dx)));
    Ok(())
}

/// One chunk of [`elu_backward`] (a function of its own: see [`apply1`]).
fn elu_backward_chunk<T: Real>(x: &[T], y: &[T], alpha: T, dy: &[T], dx: &mut [T]) {
    for (((dx, &x), &y), &dy) in dx.iter_mut().zip(x).zip(y).zip(dy) {
        *dx = if x > T::zero() { dy } else { dy * (y + alpha) };
    }
}

/// Inverted dropout: keeps each element with probability 1 − p, scaled by 1/(1 − p), so the
/// expectation is unchanged; `mask` (one byte per element, 1 = kept) is written for the
/// backward. `random` gives one uniform u64 per element in order (a seeded stream, so a
/// step is reproducible); element i is kept iff its draw is ≥ p·(2⁶⁴ − 1). p = 0 keeps
/// everything and draws nothing.
///
/// Two passes: the mask from the draws (a serial stream, so serial: one compare and one
/// byte per draw), then y = mask · x / (1 − p) in parallel chunks, which is the backward's
/// own formula. Fused in one serial loop, the keep decision compiled to a branch on a
/// random bit, mispredicted every other element at p = ½ (24.7 ms vs 27 ms naive for 4 M
/// floats, BENCHMARKS.md).
pub fn dropout<T: Real>(
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
    if p == 0.0 {
        mask.fill(1);
        return map1("dropout", x, y, |v| v);
    }
    let threshold = (p * (u64::MAX as f64)) as u64;
    for m in mask.iter_mut() {
        *m = u8::from(random() >= threshold);
    }
    let scale = T::from(1.0 / (1.0 - p)).unwrap();
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .zip(mask.par_chunks(CHUNK))
        .for_each(|((y, x), mask)| wide(|| dropout_backward_chunk(mask, scale, x, y)));
    Ok(())
}

/// dx = dy · mask / (1 − p).
pub fn dropout_backward<T: Real>(
    mask: &[u8],
    p: f64,
    dy: &[T],
    dx: &mut [T],
) -> Result<(), KernelError> {
    check_len("dropout_backward", "dy", mask.len(), dy.len())?;
    check_len("dropout_backward", "dx", mask.len(), dx.len())?;
    let scale = T::from(1.0 / (1.0 - p)).unwrap();
    dx.par_chunks_mut(CHUNK)
        .zip(dy.par_chunks(CHUNK))
        .zip(mask.par_chunks(CHUNK))
        .for_each(|((dx, dy), mask)| wide(|| dropout_backward_chunk(mask, scale, dy, dx)));
    Ok(())
}

/// One chunk of [`dropout_backward`] (see [`apply1`]), and of [`dropout`]'s second pass.
fn dropout_backward_chunk<T: Real>(mask: &[u8], scale: T, dy: &[T], dx: &mut [T]) {
    for ((dx, &dy), &m) in dx.iter_mut().zip(dy).zip(mask) {
        *dx = if m == 1 { dy * scale } else { T::zero() };
    }
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
pub fn bias_add<T: Real>(y: &mut [T], b: &[T]) -> Result<(), KernelError> {
    let f = b.len();
    if whole_rows(
        "bias_add",
        "matrix (a multiple of the bias length)",
        y.len(),
        f,
    )? {
        return Ok(());
    }
    y.par_chunks_mut(f * 64.max(CHUNK / f))
        .for_each(|rows| wide(|| bias_add_rows(rows, b)));
    Ok(())
}

/// Rows of one chunk of [`bias_add`] (see [`apply1`]).
fn bias_add_rows<T: Real>(rows: &mut [T], b: &[T]) {
    for row in rows.chunks_exact_mut(b.len()) {
        for (v, &bb) in row.iter_mut().zip(b) {
            *v = *v + bb;
        }
    }
}

/// db = Σ_rows dy: the bias gradient (dx of a bias add is dy itself).
pub fn bias_add_backward<T: Real>(dy: &[T], db: &mut [T]) -> Result<(), KernelError> {
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

/// Rows per parallel task for rows of width f: about CHUNK elements.
fn rows_per_task(f: usize) -> usize {
    (CHUNK / f.max(1)).max(1)
}

/// y_i = x_i / max(‖x_i‖₂, ε) for each row of width f. Saves: y and the norms (`norms`).
pub fn l2_normalize_rows<T: Real>(
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
    if n == 0 {
        return Ok(());
    }
    let rows = rows_per_task(f);
    y.par_chunks_mut(rows * f)
        .zip(x.par_chunks(rows * f))
        .zip(norms.par_chunks_mut(rows))
        .for_each(|((y, x), norms)| wide(|| l2_normalize_block(x, f, eps, y, norms)));
    Ok(())
}

/// Rows of one task of [`l2_normalize_rows`] (see [`apply1`]).
fn l2_normalize_block<T: Real>(x: &[T], f: usize, eps: T, y: &mut [T], norms: &mut [T]) {
    for ((y, x), norm) in y.chunks_exact_mut(f).zip(x.chunks_exact(f)).zip(norms) {
        *norm = dot(x, x).sqrt().max(eps);
        for (y, &x) in y.iter_mut().zip(x) {
            *y = x / *norm;
        }
    }
}

/// dx_i = (dy_i − y_i (y_i · dy_i)) / ‖x_i‖ (when ‖x_i‖ > ε; below it the map is x/ε and
/// dx = dy/ε).
pub fn l2_normalize_rows_backward<T: Real>(
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
    if f == 0 {
        return Ok(());
    }
    let rows = rows_per_task(f);
    dx.par_chunks_mut(rows * f)
        .zip(y.par_chunks(rows * f))
        .zip(dy.par_chunks(rows * f))
        .zip(norms.par_chunks(rows))
        .for_each(|(((dx, y), dy), norms)| {
            wide(|| l2_normalize_backward_block(y, norms, f, eps, dy, dx))
        });
    Ok(())
}

/// Rows of one task of [`l2_normalize_rows_backward`] (see [`apply1`]).
fn l2_normalize_backward_block<T: Real>(
    y: &[T],
    norms: &[T],
    f: usize,
    eps: T,
    dy: &[T],
    dx: &mut [T],
) {
    let rows = dx
        .chunks_exact_mut(f)
        .zip(y.chunks_exact(f))
        .zip(dy.chunks_exact(f));
    for (((dx, yr), dr), &norm) in rows.zip(norms) {
        let dot = if norm > eps { dot(yr, dr) } else { T::zero() };
        for ((dx, &y), &d) in dx.iter_mut().zip(yr).zip(dr) {
            *dx = (d - y * dot) / norm;
        }
    }
}
