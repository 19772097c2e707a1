//! Row-wise L2 normalisation (`l2norm`): y_i = x_i / max(‖x_i‖₂, ε). GraphSAINT's SAGE
//! models normalise each node's embedding before the classifier.

use crate::ir::{Bindings, Fact, Kind, NodeId, Tensor, Value};
use crate::op::{Arity, Cost, Ctx, GradBuilder, MatMut, Op, OpError, Split};

use super::{dense, elementwise_cost, row_split_of, rows_part, same_shape};

/// The floor ε of a row norm (PyTorch's `F.normalize` default): a zero row stays zero.
pub const L2_EPS: f32 = 1e-12;

/// y and the row norms of x.
fn normalize(x: &Tensor) -> Result<(Tensor, Vec<f32>), OpError> {
    // The kernel writes every row of y (and y is empty when there are no columns).
    let mut y = Tensor::scratch(x.rows, x.cols);
    let mut norms = vec![0.0f32; x.rows];
    if x.cols > 0 {
        saintflow_ops::elementwise::l2_normalize_rows(
            &x.data,
            x.cols,
            L2_EPS,
            &mut y.data,
            &mut norms,
        )?;
    } else {
        norms.fill(L2_EPS);
    }
    Ok((y, norms))
}

/// y_i = x_i / max(‖x_i‖₂, ε) for every row i.
#[derive(Clone, Copy, Debug)]
pub struct L2Norm;

impl Op for L2Norm {
    fn name(&self) -> &str {
        "l2norm"
    }
    fn row_local(&self, _: &[&Fact]) -> bool {
        true
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // A multiply-add for the norm and a divide per element.
        elementwise_cost(inputs, output, b, 3.0)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        Ok(Value::dense(normalize(dense(inputs, 0, "l2norm")?)?.0))
    }
    /// Row blocks (each row is normalised alone: bit-identical to `forward`).
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        row_split_of(inputs, self.name(), threads)
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let x = dense(inputs, 0, "l2norm")?;
        let mut norm = [0.0f32];
        rows_part(split, part, x.cols, out, |r, y| {
            saintflow_ops::elementwise::l2_normalize_rows(
                &x.data[r], x.cols, L2_EPS, y, &mut norm,
            )?;
            Ok(())
        })
    }
    /// ∂x_i = (∇y_i − y_i ⟨y_i, ∇y_i⟩) / ‖x_i‖ (∇y_i / ε below the floor). Saves x only:
    /// the backward recomputes y and the norms (one pass over x, the cost of reading a
    /// saved y) instead of keeping a second n-vector alive.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let x = g.input(0);
        Ok(vec![Some(g.add(L2NormBackward, &[x, grad])?)])
    }
}

/// ∂x of [`L2Norm`] from x and ∇y.
#[derive(Clone, Copy, Debug)]
pub struct L2NormBackward;

impl Op for L2NormBackward {
    fn name(&self) -> &str {
        "l2norm_backward"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        same_shape(self.name(), "x", inputs[0], "∇y", inputs[1])
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // Recomputing y (3) plus the dot product and the update (4).
        elementwise_cost(inputs, output, b, 7.0)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (x, dy) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        let (y, norms) = normalize(x)?;
        // The kernel writes every row of dx (and dx is empty when there are no columns).
        let mut dx = Tensor::scratch(x.rows, x.cols);
        if x.cols > 0 {
            saintflow_ops::elementwise::l2_normalize_rows_backward(
                &y.data,
                &norms,
                x.cols,
                L2_EPS,
                &dy.data,
                &mut dx.data,
            )?;
        }
        Ok(Value::dense(dx))
    }
    /// Row blocks (each row alone: bit-identical to `forward`).
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        row_split_of(inputs, self.name(), threads)
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        _: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let (x, dy) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        let f = x.cols;
        let mut y = vec![0.0f32; f];
        let mut norm = [0.0f32];
        rows_part(split, part, f, out, |r, dx| {
            let e = saintflow_ops::elementwise::l2_normalize_rows(
                &x.data[r.clone()],
                f,
                L2_EPS,
                &mut y,
                &mut norm,
            );
            e?;
            saintflow_ops::elementwise::l2_normalize_rows_backward(
                &y,
                &norm,
                f,
                L2_EPS,
                &dy.data[r],
                dx,
            )?;
            Ok(())
        })
    }
}
