//! A user *neighbour* op: `user.max_agg(A, X)`, row i the element-wise maximum of X's rows
//! at i's neighbours (the pattern of A; its values are not read), 0 for a node without
//! neighbours — GraphSAGE's max aggregator without its inner layer.
//!
//! Beyond a row-local op (see `lib.rs`) it tells the engine two things through the public
//! `Op` trait, so that plans using it are trained, planned and evaluated out of core like
//! plans using the built-in `spmm`:
//!
//! * [`Op::neighbour`]: input 0 is the adjacency it aggregates over, input 1 the per-node X;
//! * [`Op::forward_block`]: a block of output rows from the block's adjacency rows (global
//!   node ids) and X read in place by global id — the same loop as `forward`, so the
//!   blocked result equals the in-memory one bit for bit (a maximum does not round).
//!
//! Backward: ∂X[j, c] = Σ_i ∇Y[i, c] over the rows i whose maximum in column c was taken
//! at neighbour j (the first such neighbour in CSR order on ties). The argmax is not saved:
//! `user.max_agg_backward(A, X, ∇Y)` recomputes it from A and X, which backward keeps alive
//! anyway, trading one more pass over the edges for an n × f index array.

use std::sync::Arc;

use saintflow::ir::{Bindings, Fact, Kind, NodeId, SparseMat, Tensor, Value};
use saintflow::op::{
    Arity, Attrs, Cost, Ctx, GradBuilder, Neighbour, Op, OpError, Registry, RowBlock, Stage,
};

/// The sparse and dense arguments of `op`.
fn operands<'v>(inputs: &[&'v Value], op: &str) -> Result<(&'v SparseMat, &'v Tensor), OpError> {
    let a = inputs[0]
        .as_sparse()
        .ok_or_else(|| OpError::args(format!("{op}: argument 1 is not sparse")))?;
    let x = inputs[1]
        .as_dense()
        .ok_or_else(|| OpError::args(format!("{op}: argument 2 is not dense")))?;
    Ok((a, x))
}

/// For each row of the CSR (`offsets`, `indices`) and column c, the neighbour whose
/// `row(j)[c]` is largest (the first on ties), handed to `visit(i, c, j)`. Rows without
/// neighbours are not visited.
fn argmax<'x>(
    offsets: &[u32],
    indices: &[u32],
    cols: usize,
    row: impl Fn(usize) -> &'x [f32],
    mut visit: impl FnMut(usize, usize, usize),
) {
    let mut best: Vec<(f32, usize)> = vec![(0.0, 0); cols];
    for i in 0..offsets.len().saturating_sub(1) {
        let nbrs = &indices[offsets[i] as usize..offsets[i + 1] as usize];
        let Some((&first, rest)) = nbrs.split_first() else {
            continue;
        };
        for (b, &v) in best.iter_mut().zip(row(first as usize)) {
            *b = (v, first as usize);
        }
        for &j in rest {
            for (b, &v) in best.iter_mut().zip(row(j as usize)) {
                if v > b.0 {
                    *b = (v, j as usize);
                }
            }
        }
        for (c, &(_, j)) in best.iter().enumerate() {
            visit(i, c, j);
        }
    }
}

/// Y = the row-wise maximum of `row(j)` over each CSR row's neighbours j.
fn max_rows<'x>(
    offsets: &[u32],
    indices: &[u32],
    cols: usize,
    row: impl Fn(usize) -> &'x [f32] + Copy,
) -> Tensor {
    let mut y = Tensor::zeros(offsets.len().saturating_sub(1), cols);
    argmax(offsets, indices, cols, row, |i, c, j| {
        y.data[i * cols + c] = row(j)[c];
    });
    y
}

/// Checks `[n, n]` sparse with `[n, f]` dense; returns f.
fn check(op: &str, a: &Fact, x: &Fact) -> Result<Fact, OpError> {
    let (rows, _) = a.matrix().expect("sparse");
    let (xr, xc) = x.matrix().expect("dense");
    if xr != rows {
        return Err(OpError::args(format!(
            "{op}: X for a [{rows}, {rows}] adjacency, expected [{rows}, {xc}], got {x}"
        )));
    }
    Ok(Fact::dense(rows, xc))
}

/// `user.max_agg(A, X)`: Y[i, :] = max over neighbours j of i of X[j, :] (0 without any).
#[derive(Debug, Clone, Copy)]
pub struct MaxAgg;

impl Op for MaxAgg {
    fn name(&self) -> &str {
        "user.max_agg"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        check(self.name(), inputs[0], inputs[1])
    }
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }
    /// One comparison per entry and column; A's indices and X's rows once per entry.
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        let nnz = match inputs[0] {
            Fact::Sparse { nnz, .. } => nnz.resolve(b) as f64,
            _ => 0.0,
        };
        let f = output.matrix().map_or(0, |(_, c)| c.resolve(b)) as f64;
        Cost {
            flops: nnz * f,
            bytes_read: 4.0 * nnz * (1.0 + f),
            bytes_written: output.bytes(b) as f64,
        }
    }
    /// Not row-local: row i reads X at i's neighbours. A neighbour op instead.
    fn row_local(&self, _: &[&Fact]) -> bool {
        false
    }
    fn neighbour(&self, _: &[&Fact]) -> Option<Neighbour> {
        Some(Neighbour { adjacency: 0, x: 1 })
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, x) = operands(inputs, self.name())?;
        let st = &a.structure;
        Ok(Value::dense(max_rows(
            &st.offsets,
            &st.indices,
            x.cols,
            |j| x.row(j),
        )))
    }
    /// The block's adjacency rows carry global node ids; X is read in place by them.
    fn forward_block(&self, block: &RowBlock<'_>, _: &Ctx<'_>) -> Result<Value, OpError> {
        let st = &block.adjacency.structure;
        let x = block.x;
        Ok(Value::dense(max_rows(
            &st.offsets,
            &st.indices,
            x.cols(),
            |j| x.row(j),
        )))
    }
    /// ∂X through the recomputed argmax (see the file's header); A's values get no
    /// gradient (they are not read).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if g.needs_grad(0) {
            return Err(OpError::args(
                "user.max_agg: the adjacency's values are not differentiable (only its pattern is read)",
            ));
        }
        let (a, x) = (g.input(0), g.input(1));
        let dx = if g.needs_grad(1) {
            Some(g.add(MaxAggBackward, &[a, x, grad])?)
        } else {
            None
        };
        Ok(vec![None, dx])
    }
}

/// `user.max_agg_backward(A, X, ∇Y)` = ∂X of [`MaxAgg`]: ∇Y[i, c] routed to the row of X
/// where row i's maximum in column c was taken.
#[derive(Debug, Clone, Copy)]
pub struct MaxAggBackward;

impl Op for MaxAggBackward {
    fn name(&self) -> &str {
        "user.max_agg_backward"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Sparse, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let y = check(self.name(), inputs[0], inputs[1])?;
        if inputs[2] != &y {
            return Err(OpError::args(format!(
                "{}: ∇Y is {}, expected {y}",
                self.name(),
                inputs[2]
            )));
        }
        Ok(inputs[1].clone())
    }
    fn stage(&self) -> Stage {
        Stage::Aggregation
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, x) = operands(inputs, self.name())?;
        let dy = inputs[2]
            .as_dense()
            .ok_or_else(|| OpError::args("user.max_agg_backward: argument 3 is not dense"))?;
        let st = &a.structure;
        let mut dx = Tensor::zeros(x.rows, x.cols);
        let f = x.cols;
        argmax(
            &st.offsets,
            &st.indices,
            f,
            |j| x.row(j),
            |i, c, j| {
                dx.data[j * f + c] += dy.data[i * f + c];
            },
        );
        Ok(Value::dense(dx))
    }
}

/// Registers `user.max_agg` (no attributes).
pub fn register_max_agg(registry: &mut Registry) -> Result<(), OpError> {
    registry.register(
        "user.max_agg",
        &[],
        "user.max_agg(A, x): row i the element-wise max of x over i's neighbours",
        |_: &Attrs| Ok(Arc::new(MaxAgg) as Arc<dyn Op>),
    )
}
