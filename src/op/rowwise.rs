//! The row-wise adapter: an op whose output row i is a function of row i of each input
//! (a normalisation, an activation, a per-row gate). Its author writes one function over a
//! block of rows ([`RowWise::rows`]); [`row_wise`] turns it into an [`Op`] with
//! * the forward (the whole matrix as one block),
//! * the partitioned forward (row blocks, about two per worker, run at once by the
//!   executor; each row is computed alone, so any split gives the same bits),
//! * row locality (so out-of-core inference runs it block by block),
//! * a cost (streaming plus [`RowWise::flops_per_element`]).
//!
//! Every input is a dense per-node matrix with the output's row count (the default
//! [`RowWise::infer`] also wants every input of the output's shape; override it for other
//! column counts). The backward is the author's, as for any op.

use std::fmt;

use crate::ir::{Bindings, Dim, Fact, Kind, NodeId, Tensor, Value};

use super::util::{dense, elementwise_cost, row_blocks, row_split, same_shape};
use super::{
    Arity, Cost, Ctx, GradBuilder, MatMut, MatRef, Op, OpError, Partitioned, RowBlocks, RowLocal,
    Split, Stage,
};

/// What a row-wise op's author writes (see the module header); [`row_wise`] makes the op.
pub trait RowWise: fmt::Debug + Send + Sync + 'static {
    /// The name plan files use.
    fn name(&self) -> &str;

    /// Attributes as `explain` prints them (display only; CSE keys on the `Debug` text).
    fn attrs(&self) -> String {
        String::new()
    }

    /// The number of dense inputs. Default: 1.
    fn arity(&self) -> usize {
        1
    }

    /// The output's fact. Default: every input has the first one's shape, and so has the
    /// output.
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        for (k, f) in inputs.iter().enumerate().skip(1) {
            same_shape(
                self.name(),
                "argument 1",
                inputs[0],
                &format!("argument {}", k + 1),
                f,
            )?;
        }
        Ok(inputs[0].clone())
    }

    /// A block of rows: `x[k]` is input k's rows and `y` the output's same rows, all
    /// row-major and contiguous (`as_slice` gives the whole block). Every element of `y`
    /// must be written (it is not zeroed first). Called on any block, from any worker.
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError>;

    /// Arithmetic per output element, for the cost model. Default: 1.
    fn flops_per_element(&self) -> f64 {
        1.0
    }

    /// The gradient nodes, as [`Op::backward`]. Default: not differentiable.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let _ = (g, grad);
        Err(OpError::NoBackward {
            op: self.name().to_string(),
        })
    }

    /// The stage its time is reported under. Default: other.
    fn stage(&self) -> Stage {
        Stage::Other
    }
}

/// The op made of a [`RowWise`] (see the module header).
#[derive(Clone, Debug, PartialEq)]
pub struct Rows<T>(pub T);

/// `t` as an op for a [`Registry`](super::Registry) or a
/// [`GradBuilder`].
pub fn row_wise<T: RowWise>(t: T) -> std::sync::Arc<dyn Op> {
    std::sync::Arc::new(Rows(t))
}

impl<T: RowWise> Op for Rows<T> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn attrs(&self) -> String {
        self.0.attrs()
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense; self.0.arity()])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        self.0.infer(inputs)
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        elementwise_cost(inputs, output, b, self.0.flops_per_element())
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let rows = dense(inputs, 0, self.0.name())?.rows;
        let cols = output_cols(self, inputs, ctx)?;
        let mut y = Tensor::scratch(rows, cols);
        let x = row_blocks(inputs, 0..rows, self.0.name())?;
        self.0
            .rows(&x, MatMut::row_major(&mut y.data, rows, cols)?)?;
        Ok(Value::dense(y))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        self.0.backward(g, grad)
    }
    fn stage(&self) -> Stage {
        self.0.stage()
    }
    fn as_partitioned(&self) -> Option<&dyn Partitioned> {
        Some(self)
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
    fn as_row_blocks(&self) -> Option<&dyn RowBlocks> {
        Some(self)
    }
}

/// The output's columns: the fact's, resolved (the default `infer` makes it input 0's).
fn output_cols<T: RowWise>(
    op: &Rows<T>,
    inputs: &[&Value],
    ctx: &Ctx<'_>,
) -> Result<usize, OpError> {
    let facts: Vec<Fact> = inputs
        .iter()
        .map(|v| {
            let t = dense(std::slice::from_ref(v), 0, op.0.name())?;
            Ok(Fact::dense(Dim::known(t.rows), Dim::known(t.cols)))
        })
        .collect::<Result<_, OpError>>()?;
    let refs: Vec<&Fact> = facts.iter().collect();
    let out = op.0.infer(&refs)?;
    let (_, c) = out
        .matrix()
        .ok_or_else(|| OpError::args(format!("{}: the output is not a matrix", op.0.name())))?;
    Ok(c.resolve(&ctx.bindings))
}

impl<T: RowWise> Partitioned for Rows<T> {
    /// Row blocks, about two per worker (none for small inputs or one worker).
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        let rows = dense(inputs, 0, self.0.name())?.rows;
        let mut cols = 0;
        for k in 0..inputs.len() {
            cols = cols.max(dense(inputs, k, self.0.name())?.cols);
        }
        Ok(row_split(rows, cols, threads))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let x = row_blocks(inputs, split.ranges[part].clone(), self.0.name())?;
        self.0.rows(&x, out)
    }
}

impl<T: RowWise> RowLocal for Rows<T> {}

impl<T: RowWise> RowBlocks for Rows<T> {
    /// Every input is per-node (the adapter's contract): the blocks are the same rows.
    fn rows_at(
        &self,
        _: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        _: &Ctx<'_>,
    ) -> Result<(), OpError> {
        self.0.rows(x, y)
    }
}
