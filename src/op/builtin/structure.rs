//! Column structure: `concat` (column blocks side by side), `slice` (one column block, the
//! backward of concat), its backward `slice_backward` (the block placed in zero columns),
//! and `mean_heads` (the average of H equal column blocks — GAT's last layer) with its
//! backward. Pure data movement: their cost is the bytes they move. All are row-wise ops
//! on the adapter users get ([`RowWise`]).

use std::ops::Range;

use rayon::prelude::*;

use crate::ir::{Bindings, Dim, Fact, Kind, NodeId, Tensor};
use crate::op::{Arity, ColumnSlice, Cost, GradBuilder, MatMut, MatRef, OpError, RowWise};

/// y's rows = the inputs' same rows side by side (y's width is the sum of theirs).
fn concat_rows(parts: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
    for i in 0..y.n_rows() {
        let out = y.row_mut(i);
        let mut at = 0;
        for p in parts {
            out[at..at + p.n_cols()].copy_from_slice(p.row(i));
            at += p.n_cols();
        }
    }
    Ok(())
}

/// y's rows = columns `start..start + y.n_cols()` of x's same rows.
fn slice_rows(x: &MatRef<'_>, start: usize, mut y: MatMut<'_>) -> Result<(), OpError> {
    let len = y.n_cols();
    if start + len > x.n_cols() {
        return Err(OpError::args(format!(
            "slice: expected at least {} columns, got {}",
            start + len,
            x.n_cols()
        )));
    }
    for i in 0..y.n_rows() {
        y.row_mut(i).copy_from_slice(&x.row(i)[start..start + len]);
    }
    Ok(())
}

/// A dense fact's (rows, cols).
fn shape(f: &Fact) -> (Dim, Dim) {
    f.matrix().expect("arity checked: dense")
}

/// [a | b | …]: column concatenation of matrices with equal row counts.
#[derive(Clone, Copy, Debug)]
pub struct Concat;

impl RowWise for Concat {
    fn name(&self) -> &str {
        "concat"
    }
    fn args(&self) -> Arity {
        Arity::Variadic {
            kind: Kind::Dense,
            min: 1,
        }
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (rows, mut cols) = shape(inputs[0]);
        for (i, f) in inputs.iter().enumerate().skip(1) {
            let (r, c) = shape(f);
            if r != rows {
                return Err(OpError::args(format!(
                    "concat argument {}: expected {rows} rows like argument 1, got {f}",
                    i + 1
                )));
            }
            cols = cols.plus(c);
        }
        Ok(Fact::dense(rows, cols))
    }
    /// Pure data movement: no arithmetic counted.
    fn flops_per_element(&self) -> f64 {
        0.0
    }
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError> {
        concat_rows(x, y)
    }
    /// y = [a₁ | … | a_k]: ∂a_i = ∇y[:, start_i .. start_i + width_i], a `slice`. Needs
    /// widths known at load (feature and hidden widths always are).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let mut start = 0;
        let mut out = Vec::with_capacity(g.arity());
        for i in 0..g.arity() {
            let f = g.fact(g.input(i)).clone();
            let len = shape(&f).1.as_known().ok_or_else(|| {
                OpError::args(format!(
                    "concat backward: argument {} is {f}, expected a width known when the plan is loaded",
                    i + 1
                ))
            })?;
            out.push(if g.needs_grad(i) {
                Some(g.add(Slice { start, len }, &[grad])?)
            } else {
                None
            });
            start += len;
        }
        Ok(out)
    }
}

/// x[:, start .. start + len]: one column block (the backward of `concat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// First column.
    pub start: usize,
    /// Columns taken.
    pub len: usize,
}

impl RowWise for Slice {
    fn name(&self) -> &str {
        "slice"
    }
    fn as_column_slice(&self) -> Option<&dyn ColumnSlice> {
        Some(self)
    }
    fn attrs(&self) -> String {
        format!("start={}, len={}", self.start, self.len)
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (rows, cols) = shape(inputs[0]);
        let end = self.start + self.len;
        match cols.as_known() {
            Some(c) if end <= c => Ok(Fact::dense(rows, Dim::known(self.len))),
            _ => Err(OpError::args(format!(
                "slice: columns {}..{end} of {}, expected a known width ≥ {end}, got {cols}",
                self.start, inputs[0]
            ))),
        }
    }
    fn cost(&self, _: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // Reads only the block it copies.
        let bytes = output.bytes(b) as f64;
        Cost {
            flops: 0.0,
            bytes_read: bytes,
            bytes_written: bytes,
        }
    }
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError> {
        slice_rows(&x[0], self.start, y)
    }
    /// y = x[:, s..s+len]: ∂x = ∇y placed at columns s..s+len of zeros (`slice_backward`).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (_, cols) = shape(g.fact(g.input(0)));
        let cols = cols.as_known().expect("slice infers only on known widths");
        Ok(vec![Some(g.add(
            SliceBackward {
                start: self.start,
                cols,
            },
            &[grad],
        )?)])
    }
}

impl ColumnSlice for Slice {
    fn columns(&self) -> Range<usize> {
        self.start..self.start + self.len
    }
}

/// An n × len block placed at columns start.. of an n × cols zero matrix: the backward of
/// [`Slice`] (and the adjoint of it, so its own backward is a slice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceBackward {
    /// First column of the block.
    pub start: usize,
    /// Width of the output.
    pub cols: usize,
}

impl RowWise for SliceBackward {
    fn name(&self) -> &str {
        "slice_backward"
    }
    fn attrs(&self) -> String {
        format!("start={}, cols={}", self.start, self.cols)
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (rows, len) = shape(inputs[0]);
        match len.as_known() {
            Some(l) if self.start + l <= self.cols => Ok(Fact::dense(rows, Dim::known(self.cols))),
            _ => Err(OpError::args(format!(
                "slice_backward: a block {} at column {} of {} columns, expected a known width ≤ {}, got {len}",
                inputs[0],
                self.start,
                self.cols,
                self.cols.saturating_sub(self.start)
            ))),
        }
    }
    /// Pure data movement: no arithmetic counted.
    fn flops_per_element(&self) -> f64 {
        0.0
    }
    /// Not fused (the planner has never chained it).
    fn fusible(&self, _: &[&Fact]) -> bool {
        false
    }
    /// Each row: zeros, the block's row at columns start...
    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        let (s, len) = (self.start, x[0].n_cols());
        for i in 0..y.n_rows() {
            let out = y.row_mut(i);
            out.fill(0.0);
            out[s..s + len].copy_from_slice(x[0].row(i));
        }
        Ok(())
    }
    /// y = pad(x): ∂x = ∇y[:, s..s+len].
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let len = shape(g.fact(g.input(0))).1.as_known().expect("inferred");
        Ok(vec![Some(g.add(
            Slice {
                start: self.start,
                len,
            },
            &[grad],
        )?)])
    }
}

/// The width f of one of `heads` column blocks of `fact`, or an "expected …, got …" error.
pub(crate) fn head_width(
    op: &str,
    what: &str,
    fact: &Fact,
    heads: usize,
) -> Result<usize, OpError> {
    let (_, cols) = shape(fact);
    match cols.as_known() {
        Some(c) if heads > 0 && c % heads == 0 => Ok(c / heads),
        _ => Err(OpError::args(format!(
            "{op}: {what} {fact} for {heads} heads, expected a known width that is a multiple of {heads}, got {cols}"
        ))),
    }
}

/// y[:, j] = (1/H) Σ_h x[:, h·f + j]: the average of H column blocks of width f.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeanHeads {
    /// H.
    pub heads: usize,
}

impl RowWise for MeanHeads {
    fn name(&self) -> &str {
        "mean_heads"
    }
    fn attrs(&self) -> String {
        format!("heads={}", self.heads)
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let f = head_width("mean_heads", "x", inputs[0], self.heads)?;
        Ok(Fact::dense(shape(inputs[0]).0, Dim::known(f)))
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // One add per input element.
        Cost {
            flops: inputs[0].bytes(b) as f64 / 4.0,
            ..Cost::streaming(inputs, output, b)
        }
    }
    /// Not fused (the planner has never chained it).
    fn fusible(&self, _: &[&Fact]) -> bool {
        false
    }
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError> {
        let h = self.heads;
        sum_block_rows(&x[0], &vec![1.0 / h as f32; h], y);
        Ok(())
    }
    /// y = (1/H) Σ_h x_h: ∂x_h = ∇y / H for every block h (`mean_heads_backward`).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(
            g.add(MeanHeadsBackward { heads: self.heads }, &[grad])?,
        )])
    }
}

/// [d/H | d/H | … ] (H copies): the backward of [`MeanHeads`] (and its adjoint, so its own
/// backward is `mean_heads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeanHeadsBackward {
    /// H.
    pub heads: usize,
}

impl RowWise for MeanHeadsBackward {
    fn name(&self) -> &str {
        "mean_heads_backward"
    }
    fn attrs(&self) -> String {
        format!("heads={}", self.heads)
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (rows, cols) = shape(inputs[0]);
        let f = cols.as_known().ok_or_else(|| {
            OpError::args(format!(
                "mean_heads_backward: expected a known width, got {}",
                inputs[0]
            ))
        })?;
        Ok(Fact::dense(rows, Dim::known(f * self.heads)))
    }
    /// Pure data movement: no arithmetic counted.
    fn flops_per_element(&self) -> f64 {
        0.0
    }
    /// Not fused (the planner has never chained it).
    fn fusible(&self, _: &[&Fact]) -> bool {
        false
    }
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError> {
        let h = self.heads;
        spread_block_rows(&x[0], &vec![1.0 / h as f32; h], y);
        Ok(())
    }
    /// y_h = d/H for every h: ∂d = (1/H) Σ_h ∇y_h, a `mean_heads`.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Ok(vec![Some(g.add(MeanHeads { heads: self.heads }, &[grad])?)])
    }
}

/// Σ_s w_s · x's column block s (x holds `w.len()` equal blocks): `mean_heads` (w_s = 1/H)
/// and `psum` (w = softmax(q)).
pub(super) fn sum_blocks(x: &Tensor, w: &[f32]) -> Tensor {
    let c = x.cols / w.len().max(1);
    let mut y = Tensor::zeros(x.rows, c);
    if c > 0 {
        y.data.par_chunks_mut(c).enumerate().for_each(|(i, out)| {
            sum_blocks_row(x.row(i), w, out);
        });
    }
    y
}

/// One row of [`sum_blocks`]: `out` (zeros) += w_s · block s of `x`, s in order.
fn sum_blocks_row(x: &[f32], w: &[f32], out: &mut [f32]) {
    let c = out.len();
    for (block, &ws) in x.chunks_exact(c).zip(w) {
        out.iter_mut().zip(block).for_each(|(o, &v)| *o += ws * v);
    }
}

/// [`sum_blocks`] on a block of rows into `y` (every element written).
fn sum_block_rows(x: &MatRef<'_>, w: &[f32], mut y: MatMut<'_>) {
    if y.n_cols() == 0 {
        return;
    }
    for i in 0..y.n_rows() {
        let out = y.row_mut(i);
        out.fill(0.0);
        sum_blocks_row(x.row(i), w, out);
    }
}

/// [w_0·d | w_1·d | …]: the adjoint of [`sum_blocks`] (the backward of both ops).
pub(super) fn spread_blocks(d: &Tensor, w: &[f32]) -> Tensor {
    let c = d.cols;
    let mut y = Tensor::zeros(d.rows, c * w.len());
    if c > 0 {
        y.data
            .par_chunks_mut(c * w.len())
            .enumerate()
            .for_each(|(i, out)| spread_row(d.row(i), w, out));
    }
    y
}

/// One row of [`spread_blocks`]: block s of `out` = w_s · `d`.
fn spread_row(d: &[f32], w: &[f32], out: &mut [f32]) {
    for (block, &ws) in out.chunks_exact_mut(d.len()).zip(w) {
        block.iter_mut().zip(d).for_each(|(o, &v)| *o = ws * v);
    }
}

/// [`spread_blocks`] on a block of rows into `y` (every element written).
fn spread_block_rows(d: &MatRef<'_>, w: &[f32], mut y: MatMut<'_>) {
    if d.n_cols() == 0 {
        return;
    }
    for i in 0..y.n_rows() {
        spread_row(d.row(i), w, y.row_mut(i));
    }
}
