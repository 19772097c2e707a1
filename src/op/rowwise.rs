//! The row-wise adapter: an op whose output row i is a function of row i of each input
//! (a normalisation, an activation, a per-row gate, a sum, a concatenation). Its author
//! writes one function over a block of rows ([`RowWise::rows`]); every [`RowWise`] type is
//! then an [`Op`] (a blanket implementation) with
//! * the forward (the whole matrix as one block),
//! * the partitioned forward (row blocks, about two per worker, run at once by the
//!   executor; each row is computed alone, so any split gives the same bits),
//! * row locality (so out-of-core inference runs it block by block),
//! * row blocks for the fusion pass (unless [`RowWise::fusible`] says no),
//! * a cost (streaming plus [`RowWise::flops_per_element`], or [`RowWise::cost`]).
//!
//! The built-in arithmetic, dropout, concatenation, slices and head means are row-wise ops
//! of this kind, so every built-in of this shape runs the path a user's op runs.
//!
//! Every input is a dense matrix with the output's row count (input 0's rows), except that
//! an input of one row where input 0 has more is passed whole (a broadcast row: a bias), as
//! the fusion pass and out-of-core inference pass inputs that are not per-node. The default
//! [`RowWise::infer`] wants every input of input 0's shape; override it for other column
//! counts. The backward is the author's, as for any op.
//!
//! ```
//! use saintflow::op::{row_wise, MatMut, MatRef, OpError, RowWise};
//!
//! /// y = a·b − 1 per element, for two inputs of one shape.
//! #[derive(Clone, Debug)]
//! struct MulMinusOne;
//!
//! impl RowWise for MulMinusOne {
//!     fn name(&self) -> &str {
//!         "user.mul_minus_one"
//!     }
//!     fn arity(&self) -> usize {
//!         2
//!     }
//!     fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
//!         for i in 0..y.n_rows() {
//!             let (a, b) = (x[0].row(i), x[1].row(i));
//!             for ((y, a), b) in y.row_mut(i).iter_mut().zip(a).zip(b) {
//!                 *y = a * b - 1.0;
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let op = row_wise(MulMinusOne);
//! assert_eq!(op.name(), "user.mul_minus_one");
//! assert!(op.as_partitioned().is_some() && op.as_row_blocks().is_some());
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::ir::{Bindings, Dim, Fact, Kind, NodeId, Tensor, Value};

use super::util::{dense, elementwise_cost, row_block, row_split, same_shape};
use super::{
    Arity, ColumnSlice, Cost, Ctx, GradBuilder, MatMut, MatRef, Op, OpError, Partitioned,
    PartitionedDyn, RowBlocks, RowBlocksDyn, RowLocal, Split, Stage,
};

/// What a row-wise op's author writes (see the module header); the type is then an [`Op`].
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

    /// The arguments taken. Default: [`RowWise::arity`] dense matrices; a variadic op
    /// (`concat`, `add_n`) says [`Arity::Variadic`].
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense; self.arity()])
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

    /// A block of rows: `x[k]` is input k's rows (or the whole input, for a broadcast
    /// row) and `y` the output's same rows, all row-major and contiguous (`as_slice` gives
    /// the whole block). Every element of `y` must be written (it is not zeroed first).
    /// Called on any block, from any worker.
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError>;

    /// [`RowWise::rows`] for the block whose first row is row `r0` of the output, in the
    /// step of `ctx` (`ctx.node` the op's node): for an op whose rows depend on their
    /// position or the step (dropout's mask is keyed by the node, the step and the element
    /// index). Default: `rows`, which such an op writes as it computes outside a step.
    fn rows_at(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError> {
        let _ = (r0, ctx);
        self.rows(x, y)
    }

    /// Arithmetic per output element, for the cost model. Default: 1.
    fn flops_per_element(&self) -> f64 {
        1.0
    }

    /// Estimated cost for one step. Default: streaming plus
    /// [`RowWise::flops_per_element`] per output element.
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        elementwise_cost(inputs, output, b, self.flops_per_element())
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

    /// As [`Op::pure`]. Default: true (false for an op with randomness of its own).
    fn pure(&self) -> bool {
        true
    }

    /// The stage its time is reported under. Default: other.
    fn stage(&self) -> Stage {
        Stage::Other
    }

    /// Whether the fusion pass may chain this op's blocks with its neighbours', as
    /// [`RowBlocks::fusible`]. Default: always.
    fn fusible(&self, inputs: &[&Fact]) -> bool {
        let _ = inputs;
        true
    }

    /// As [`Op::as_column_slice`] (`slice`). Default: `None`.
    fn as_column_slice(&self) -> Option<&dyn ColumnSlice> {
        None
    }

    /// As [`Op::dropout`] (`dropout`). Default: `None`.
    fn dropout(&self) -> Option<f64> {
        None
    }

    /// Whether, in the step of `ctx`, the output is input 0 unchanged (dropout outside
    /// training, or at p = 0): `forward` then returns input 0 itself, shared, instead of a
    /// copy, and the executor does not split it. Blocks of rows (a fused chain) still copy.
    /// Default: never.
    fn passes_through(&self, ctx: &Ctx<'_>) -> bool {
        let _ = ctx;
        false
    }
}

/// `t` as an op for a [`Registry`](super::Registry) or a [`GradBuilder`] (`t` is an
/// [`Op`] itself; this shares it).
pub fn row_wise<T: RowWise>(t: T) -> Arc<dyn Op> {
    Arc::new(t)
}

impl<T: RowWise> Op for T {
    fn name(&self) -> &str {
        RowWise::name(self)
    }
    fn attrs(&self) -> String {
        RowWise::attrs(self)
    }
    fn args(&self) -> Arity {
        RowWise::args(self)
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        RowWise::infer(self, inputs)
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        RowWise::cost(self, inputs, output, b)
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let name = RowWise::name(self);
        if RowWise::passes_through(self, ctx) {
            dense(inputs, 0, name)?;
            return Ok(inputs[0].clone());
        }
        let rows = dense(inputs, 0, name)?.rows;
        let cols = output_cols(self, inputs, ctx)?;
        let mut y = Tensor::scratch(rows, cols);
        let x = blocks(inputs, 0..rows, name)?;
        self.rows_at(0, &x, MatMut::row_major(&mut y.data, rows, cols)?, ctx)?;
        Ok(Value::dense(y))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        RowWise::backward(self, g, grad)
    }
    fn pure(&self) -> bool {
        RowWise::pure(self)
    }
    fn stage(&self) -> Stage {
        RowWise::stage(self)
    }
    fn as_column_slice(&self) -> Option<&dyn ColumnSlice> {
        RowWise::as_column_slice(self)
    }
    fn dropout(&self) -> Option<f64> {
        RowWise::dropout(self)
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        Some(self)
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
    fn as_row_blocks(&self) -> Option<&dyn RowBlocksDyn> {
        Some(self)
    }
}

/// The output's columns: the fact's, resolved (the default `infer` makes it input 0's).
fn output_cols<T: RowWise>(op: &T, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<usize, OpError> {
    let name = RowWise::name(op);
    let facts: Vec<Fact> = inputs
        .iter()
        .map(|v| {
            let t = dense(std::slice::from_ref(v), 0, name)?;
            Ok(Fact::dense(Dim::known(t.rows), Dim::known(t.cols)))
        })
        .collect::<Result<_, OpError>>()?;
    let refs: Vec<&Fact> = facts.iter().collect();
    let out = RowWise::infer(op, &refs)?;
    let (_, c) = out
        .matrix()
        .ok_or_else(|| OpError::args(format!("{name}: the output is not a matrix")))?;
    Ok(c.resolve(&ctx.bindings))
}

/// Rows `r` of every input as contiguous views, except a broadcast row (one row where
/// input 0 has more), passed whole. A per-node input shorter than `r.end` is an error
/// naming `op` and the argument.
fn blocks<'v>(inputs: &[&'v Value], r: Range<usize>, op: &str) -> Result<Vec<MatRef<'v>>, OpError> {
    let n = dense(inputs, 0, op)?.rows;
    (0..inputs.len())
        .map(|k| {
            let x = dense(inputs, k, op)?;
            if x.rows == 1 && n > 1 {
                return Ok(MatRef::row_major(&x.data, 1, x.cols)?);
            }
            row_block(inputs, k, r.clone(), op)
        })
        .collect()
}

impl<T: RowWise> Partitioned for T {
    type Prepared = ();
    /// Row blocks, about two per worker (none for small outputs or one worker).
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        ctx: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        let rows = dense(inputs, 0, RowWise::name(self))?.rows;
        if RowWise::passes_through(self, ctx) {
            return Ok(None);
        }
        Ok(row_split(rows, output_cols(self, inputs, ctx)?, threads))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let r = split.ranges[part].clone();
        let x = blocks(inputs, r.clone(), RowWise::name(self))?;
        self.rows_at(r.start, &x, out, ctx)
    }
}

impl<T: RowWise> RowLocal for T {}

impl<T: RowWise> RowBlocks for T {
    type Prepared = ();
    /// The fusion pass passes the blocks of per-node inputs and the others whole, as the
    /// adapter's own forward does.
    fn rows_at(
        &self,
        r0: usize,
        x: &[MatRef<'_>],
        y: MatMut<'_>,
        ctx: &Ctx<'_>,
    ) -> Result<(), OpError> {
        RowWise::rows_at(self, r0, x, y, ctx)
    }
    fn fusible(&self, inputs: &[&Fact]) -> bool {
        RowWise::fusible(self, inputs)
    }
}
