//! `softmax_agg(A, x, t)`: per column c, row i the softmax-weighted mean of its neighbours'
//! values, y_ic = Σ_j α_jc·x_jc with α_jc = softmax over j ∈ N(i) of t_c·x_jc — PyG's
//! `SoftmaxAggregation(learn=True)` (Li et al., DeeperGCN 2020): t → 0 is the mean, t → ∞ the
//! maximum, and t is learnt (a `[1, 1]` parameter, or `[1, f]`: one per column, PyG's
//! `channels`). A's pattern only (its values are not read), as PyG's. Stable: the softmax
//! subtracts the row's maximum of t·x first. 0 for a node without neighbours.
//!
//! Gradients (α, y of the row): ∂y_ic/∂x_jc = α_jc·(1 + t_c·(x_jc − y_ic)) and ∂y_ic/∂t_c =
//! Σ_j α_jc·x_jc·(x_jc − y_ic) — two backward ops, each recomputing the row's softmax.
//! A neighbour op: blocked inference computes a block's rows from X read in place.

use rayon::prelude::*;

use crate::ir::{Bindings, Fact, Kind, NodeId, SparseMat, Tensor, Value};
use crate::op::util::dense;
use crate::op::{
    Arity, Cost, Ctx, GradBuilder, MatMut, Neighbour, NeighbourOp, NodeRows, Op, OpError, RowBlock,
    Stage,
};

/// The forward op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxAgg;

/// Which input a [`SoftmaxAggGrad`] differentiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftmaxWrt {
    /// ∂x (`softmax_agg_backward_x`).
    X,
    /// ∂t (`softmax_agg_backward_t`).
    T,
}

/// A backward op: `(A, x, t, ∇y)` → ∂x or ∂t.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxAggGrad(pub SoftmaxWrt);

/// t per column: a `[1, 1]` t repeated, or a `[1, cols]` t as it is.
fn temperatures(t: &Tensor, cols: usize, op: &str) -> Result<Vec<f32>, OpError> {
    match (t.rows, t.cols) {
        (1, 1) => Ok(vec![t.data[0]; cols]),
        (1, c) if c == cols => Ok(t.data.clone()),
        (r, c) => Err(OpError::args(format!(
            "{op}: t is [{r}, {c}], expected [1, 1] or [1, {cols}]"
        ))),
    }
}

/// Checks `[n, n]` sparse, `[n, f]` dense and `[1, 1]` or `[1, f]` t; returns `[n, f]`.
fn check(op: &str, a: &Fact, x: &Fact, t: &Fact) -> Result<Fact, OpError> {
    let Fact::Sparse { rows, .. } = *a else {
        unreachable!("arity checked")
    };
    let (xr, xc) = x.matrix().expect("dense");
    if xr != rows {
        return Err(OpError::args(format!(
            "{op}: x for a [{rows}, {rows}] adjacency, expected [{rows}, {xc}], got {x}"
        )));
    }
    let (tr, tc) = t.matrix().expect("dense");
    let one = crate::ir::Dim::known(1);
    if tr != one || (tc != one && tc != xc) {
        return Err(OpError::args(format!(
            "{op}: t is {t}, expected [1, 1] or [1, {xc}]"
        )));
    }
    Ok(Fact::dense(rows, xc))
}

/// Row i's softmax over its neighbours `idx` (rows of `x`), per column: the maximum m of
/// t·x, the sum s of e^(t·x − m), and y = Σ e·x / s, into the three slices.
fn row_softmax(
    idx: &[u32],
    x: NodeRows<'_>,
    t: &[f32],
    m: &mut [f32],
    s: &mut [f32],
    y: &mut [f32],
) {
    m.fill(f32::NEG_INFINITY);
    for &j in idx {
        for ((m, &v), &tc) in m.iter_mut().zip(x.row(j as usize)).zip(t) {
            *m = m.max(tc * v);
        }
    }
    s.fill(0.0);
    y.fill(0.0);
    for &j in idx {
        for c in 0..t.len() {
            let v = x.row(j as usize)[c];
            let e = (t[c] * v - m[c]).exp();
            s[c] += e;
            y[c] += e * v;
        }
    }
    for (y, &s) in y.iter_mut().zip(s.iter()) {
        *y /= s;
    }
}

/// Rows `first..first + out.n_rows()` of the output; the adjacency's rows are `a`'s rows
/// `first..` with column ids rows of `x`.
fn forward_rows(
    a: &SparseMat,
    first: usize,
    x: NodeRows<'_>,
    t: &[f32],
    mut out: MatMut<'_>,
) -> Result<(), OpError> {
    let st = &a.structure;
    let cols = t.len();
    let (mut m, mut s) = (vec![0f32; cols], vec![0f32; cols]);
    for k in 0..out.n_rows() {
        let idx = &st.indices[st.row(first + k)];
        if let Some(&j) = idx.iter().find(|&&j| j as usize >= x.n_rows()) {
            return Err(OpError::args(format!(
                "softmax_agg: neighbour {j} beyond x's {} rows",
                x.n_rows()
            )));
        }
        let y = out.row_mut(k);
        if idx.is_empty() {
            y.fill(0.0);
        } else {
            row_softmax(idx, x, t, &mut m, &mut s, y);
        }
    }
    Ok(())
}

fn operands<'v>(
    inputs: &[&'v Value],
    op: &str,
) -> Result<(&'v SparseMat, &'v Tensor, &'v Tensor), OpError> {
    let a = inputs[0]
        .as_sparse()
        .ok_or_else(|| OpError::args(format!("{op}: argument 1 is not sparse")))?;
    Ok((a, dense(inputs, 1, op)?, dense(inputs, 2, op)?))
}

/// Rows per parallel task of the forward.
const ROWS_PER_TASK: usize = 256;

impl Op for SoftmaxAgg {
    fn name(&self) -> &str {
        "softmax_agg"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        check(self.name(), inputs[0], inputs[1], inputs[2])
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let nnz = match inputs[0] {
            Fact::Sparse { nnz, .. } => nnz.resolve(b) as f64,
            _ => 0.0,
        };
        let f = output.matrix().map_or(0, |(_, c)| c.resolve(b)) as f64;
        Cost {
            flops: 6.0 * nnz * f,
            bytes_read: 4.0 * nnz * (1.0 + 2.0 * f),
            bytes_written: output.bytes(b) as f64,
        }
    }
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, x, t) = operands(inputs, self.name())?;
        let t = temperatures(t, x.cols, self.name())?;
        let rows = a.structure.n_rows();
        let mut y = Tensor::scratch(rows, x.cols);
        if x.cols == 0 {
            return Ok(Value::dense(y));
        }
        let xr = NodeRows::new(&x.data, x.cols);
        y.data
            .par_chunks_mut(ROWS_PER_TASK * x.cols)
            .enumerate()
            .try_for_each(|(b, chunk)| {
                let n = chunk.len() / x.cols;
                let out = MatMut::row_major(chunk, n, x.cols)?;
                forward_rows(a, b * ROWS_PER_TASK, xr, &t, out)
            })?;
        Ok(Value::dense(y))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if g.needs_grad(0) {
            return Err(OpError::args(
                "softmax_agg: the adjacency's values are not read (its pattern only), so not differentiable",
            ));
        }
        let ins = [g.input(0), g.input(1), g.input(2), grad];
        let dx = match g.needs_grad(1) {
            true => Some(g.add(SoftmaxAggGrad(SoftmaxWrt::X), &ins)?),
            false => None,
        };
        let dt = match g.needs_grad(2) {
            true => Some(g.add(SoftmaxAggGrad(SoftmaxWrt::T), &ins)?),
            false => None,
        };
        Ok(vec![None, dx, dt])
    }
    fn as_neighbour(&self) -> Option<&dyn NeighbourOp> {
        Some(self)
    }
}

impl NeighbourOp for SoftmaxAgg {
    fn neighbour(&self, _: &[&Fact]) -> Neighbour {
        Neighbour { adjacency: 0, x: 1 }
    }
    /// The block's adjacency rows carry global ids; x is read in place by them; t is the
    /// static third input.
    fn any_rows(&self) -> bool {
        true
    }

    fn forward_block(&self, block: &RowBlock<'_>, _: &Ctx<'_>) -> Result<Value, OpError> {
        let t = block
            .inputs
            .get(2)
            .copied()
            .flatten()
            .and_then(Value::as_dense)
            .ok_or_else(|| OpError::args("softmax_agg: t is not a dense value"))?;
        let cols = block.x.cols();
        let t = temperatures(t, cols, self.name())?;
        let rows = block.rows();
        let mut y = Tensor::scratch(rows, cols);
        let out = MatMut::row_major(&mut y.data, rows, cols)?;
        forward_rows(block.adjacency, 0, block.x, &t, out)?;
        Ok(Value::dense(y))
    }
}

impl Op for SoftmaxAggGrad {
    fn name(&self) -> &str {
        match self.0 {
            SoftmaxWrt::X => "softmax_agg_backward_x",
            SoftmaxWrt::T => "softmax_agg_backward_t",
        }
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let y = check(self.name(), inputs[0], inputs[1], inputs[2])?;
        if inputs[3] != &y {
            return Err(OpError::args(format!(
                "{}: ∇y is {}, expected {y}",
                self.name(),
                inputs[3]
            )));
        }
        Ok(match self.0 {
            SoftmaxWrt::X => inputs[1].clone(),
            SoftmaxWrt::T => inputs[2].clone(),
        })
    }
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, x, t_in) = operands(inputs, self.name())?;
        let dy = dense(inputs, 3, self.name())?;
        let cols = x.cols;
        let t = temperatures(t_in, cols, self.name())?;
        let st = &a.structure;
        let n = st.n_rows();
        if dy.rows != n || dy.cols != cols {
            return Err(OpError::args(format!(
                "{}: ∇y is {} × {}, expected {n} × {cols}",
                self.name(),
                dy.rows,
                dy.cols
            )));
        }
        let xr = NodeRows::new(&x.data, cols);
        let (mut m, mut s, mut y) = (vec![0f32; cols], vec![0f32; cols], vec![0f32; cols]);
        let mut dx = Tensor::zeros(x.rows, cols);
        let mut dt = vec![0f32; cols];
        for i in 0..n {
            let idx = &st.indices[st.row(i)];
            if idx.is_empty() {
                continue;
            }
            if let Some(&j) = idx.iter().find(|&&j| j as usize >= x.rows) {
                return Err(OpError::args(format!(
                    "{}: neighbour {j} beyond x's {} rows",
                    self.name(),
                    x.rows
                )));
            }
            row_softmax(idx, xr, &t, &mut m, &mut s, &mut y);
            let g = dy.row(i);
            for &j in idx {
                let xj = xr.row(j as usize);
                for c in 0..cols {
                    let alpha = (t[c] * xj[c] - m[c]).exp() / s[c];
                    let d = xj[c] - y[c];
                    match self.0 {
                        SoftmaxWrt::X => {
                            dx.data[j as usize * cols + c] += g[c] * alpha * (1.0 + t[c] * d)
                        }
                        SoftmaxWrt::T => dt[c] += g[c] * alpha * xj[c] * d,
                    }
                }
            }
        }
        Ok(Value::dense(match self.0 {
            SoftmaxWrt::X => dx,
            SoftmaxWrt::T if t_in.cols == 1 => {
                Tensor::from_vec(1, 1, vec![dt.iter().sum()]).expect("1 × 1")
            }
            SoftmaxWrt::T => Tensor::from_vec(1, cols, dt).expect("1 × cols"),
        }))
    }
}
