//! `psum(x, q)`: MixHop's output layer (Abu-El-Haija et al., ICML 2019, the authors'
//! `psum_output_layer`): x holds S column blocks of equal width C side by side (one per
//! adjacency power), q is a learnable `[1, S]` row, and
//!
//! ```text
//! y = Σ_s p_s · x[:, s·C .. (s+1)·C],   p = softmax(q)
//! ```
//!
//! With q = 0 it is `mean_heads(x, heads=S)`. Backward: ∂x's block s = p_s · ∇y, and with
//! u_s = Σ_{i,c} ∇y[i, c] · x[i, s·C + c], ∂q_s = p_s · (u_s − Σ_t p_t u_t) (the softmax's
//! Jacobian applied to u). Row-local given q, so blocked inference runs it block by block.

use rayon::prelude::*;

use crate::ir::{Dim, Fact, Kind, NodeId, Tensor, Value};
use crate::op::RowLocal;
use crate::op::{Arity, Ctx, GradBuilder, Op, OpError};

use super::dense;
use super::structure::{spread_blocks, sum_blocks};

/// `psum(x, q)`: the softmax(q)-weighted sum of x's S column blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Psum;

/// Which gradient a [`PsumGrad`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsumWrt {
    /// ∂x: inputs (q, ∇y).
    X,
    /// ∂q: inputs (x, q, ∇y).
    Q,
}

/// The backward of [`Psum`] with respect to x or q.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PsumGrad(pub PsumWrt);

/// `[n, S·C]` and `[1, S]`: C, or an error naming `op`.
fn block_width(op: &str, x: &Fact, q: &Fact) -> Result<(Dim, usize, usize), OpError> {
    let bad = || {
        OpError::args(format!(
            "{op}: x {x} and q {q}: expected q a [1, S] row and x of a known width that is a multiple of S"
        ))
    };
    let (rows, cols) = x.matrix().ok_or_else(bad)?;
    let (q_rows, s) = q.matrix().ok_or_else(bad)?;
    let (Some(cols), Some(1), Some(s)) = (cols.as_known(), q_rows.as_known(), s.as_known()) else {
        return Err(bad());
    };
    if s == 0 || cols % s != 0 {
        return Err(bad());
    }
    Ok((rows, s, cols / s))
}

/// softmax(q) in f64 (q's maximum subtracted first).
fn weights(q: &[f32]) -> Vec<f64> {
    let m = q.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let e: Vec<f64> = q.iter().map(|&v| f64::from(v - m).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.into_iter().map(|v| v / sum).collect()
}

/// The `[1, S]` row q of a value, checked against S blocks.
fn row<'a>(inputs: &'a [&Value], k: usize, s: usize, op: &str) -> Result<&'a [f32], OpError> {
    let q = dense(inputs, k, op)?;
    if q.rows != 1 || q.cols != s {
        return Err(OpError::args(format!(
            "{op}: q is {} × {}, expected 1 × {s}",
            q.rows, q.cols
        )));
    }
    Ok(&q.data)
}

impl Op for Psum {
    fn name(&self) -> &str {
        "psum"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (rows, _, c) = block_width("psum", inputs[0], inputs[1])?;
        Ok(Fact::dense(rows, Dim::known(c)))
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, "psum")?;
        let s = dense(inputs, 1, "psum")?.cols;
        if s == 0 || x.cols % s != 0 {
            return Err(OpError::args(format!(
                "psum: x's {} columns are not {s} equal blocks",
                x.cols
            )));
        }
        let p: Vec<f32> = weights(row(inputs, 1, s, "psum")?)
            .into_iter()
            .map(|v| v as f32)
            .collect();
        Ok(Value::dense(sum_blocks(x, &p)))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (x, q) = (g.input(0), g.input(1));
        let dx = match g.needs_grad(0) {
            true => Some(g.add(PsumGrad(PsumWrt::X), &[q, grad])?),
            false => None,
        };
        let dq = match g.needs_grad(1) {
            true => Some(g.add(PsumGrad(PsumWrt::Q), &[x, q, grad])?),
            false => None,
        };
        Ok(vec![dx, dq])
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
}

impl RowLocal for Psum {}

impl Op for PsumGrad {
    fn name(&self) -> &str {
        match self.0 {
            PsumWrt::X => "psum_backward_x",
            PsumWrt::Q => "psum_backward_q",
        }
    }
    fn args(&self) -> Arity {
        match self.0 {
            PsumWrt::X => Arity::Exact(vec![Kind::Dense, Kind::Dense]),
            PsumWrt::Q => Arity::Exact(vec![Kind::Dense, Kind::Dense, Kind::Dense]),
        }
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let name = self.name();
        match self.0 {
            PsumWrt::X => {
                let (q, dy) = (inputs[0], inputs[1]);
                let s = q
                    .matrix()
                    .and_then(|(r, s)| match (r.as_known(), s.as_known()) {
                        (Some(1), Some(s)) if s > 0 => Some(s),
                        _ => None,
                    });
                match (s, dy.matrix()) {
                    (Some(s), Some((rows, c))) if c.as_known().is_some() => Ok(Fact::dense(
                        rows,
                        Dim::known(c.as_known().expect("checked") * s),
                    )),
                    _ => Err(OpError::args(format!(
                        "{name}: q {q} and ∇y {dy}: expected a [1, S] row and a known width"
                    ))),
                }
            }
            PsumWrt::Q => {
                let (rows, _, c) = block_width(name, inputs[0], inputs[1])?;
                if inputs[2] != &Fact::dense(rows, Dim::known(c)) {
                    return Err(OpError::args(format!(
                        "{name}: ∇y is {}, expected [{rows}, {c}]",
                        inputs[2]
                    )));
                }
                Ok(inputs[1].clone())
            }
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let name = self.name();
        match self.0 {
            PsumWrt::X => {
                let s = dense(inputs, 0, name)?.cols;
                let p: Vec<f32> = weights(row(inputs, 0, s, name)?)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect();
                let dy = dense(inputs, 1, name)?;
                Ok(Value::dense(spread_blocks(dy, &p)))
            }
            PsumWrt::Q => {
                let x = dense(inputs, 0, name)?;
                let s = dense(inputs, 1, name)?.cols;
                let p = weights(row(inputs, 1, s, name)?);
                let dy = dense(inputs, 2, name)?;
                if s == 0 || x.cols != dy.cols * s || x.rows != dy.rows {
                    return Err(OpError::args(format!(
                        "{name}: x is {} × {}, ∇y {} × {}, for {s} blocks",
                        x.rows, x.cols, dy.rows, dy.cols
                    )));
                }
                let c = dy.cols;
                // u_s = Σ_{i,c} ∇y[i, c] · x[i, s·C + c], summed per row in f64.
                let u = (0..x.rows)
                    .into_par_iter()
                    .fold(
                        || vec![0f64; s],
                        |mut u, i| {
                            if c > 0 {
                                for (us, block) in u.iter_mut().zip(x.row(i).chunks_exact(c)) {
                                    *us += block
                                        .iter()
                                        .zip(dy.row(i))
                                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
                                        .sum::<f64>();
                                }
                            }
                            u
                        },
                    )
                    .reduce(
                        || vec![0f64; s],
                        |mut a, b| {
                            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                            a
                        },
                    );
                let mean: f64 = p.iter().zip(&u).map(|(p, u)| p * u).sum();
                let dq: Vec<f32> = p
                    .iter()
                    .zip(&u)
                    .map(|(p, u)| (p * (u - mean)) as f32)
                    .collect();
                Ok(Value::dense(
                    Tensor::from_vec(1, s, dq).expect("s values for 1 × s"),
                ))
            }
        }
    }
}
