//! Row-wise L2 normalisation (`l2norm`): y_i = x_i / max(‖x_i‖₂, ε). GraphSAINT's SAGE
//! models normalise each node's embedding before the classifier.

use saintflow_ops::elementwise::{l2_normalize_rows, l2_normalize_rows_backward};

use crate::ir::{Fact, NodeId};
use crate::op::util::{block, block_mut};
use crate::op::{GradBuilder, MatMut, MatRef, OpError, RowWise};

use super::same_shape;

/// The floor ε of a row norm (PyTorch's `F.normalize` default): a zero row stays zero.
pub const L2_EPS: f32 = 1e-12;

/// y and the row norms of a block of x's rows (`f` columns, f > 0) into `y`, `norms`.
fn normalize(x: &[f32], f: usize, y: &mut [f32], norms: &mut [f32]) -> Result<(), OpError> {
    Ok(l2_normalize_rows(x, f, L2_EPS, y, norms)?)
}

/// y_i = x_i / max(‖x_i‖₂, ε) for every row i: a row-wise op (`l2norm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2Norm;

impl RowWise for L2Norm {
    fn name(&self) -> &str {
        "l2norm"
    }
    /// A multiply-add for the norm and a divide per element.
    fn flops_per_element(&self) -> f64 {
        3.0
    }
    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        let f = x[0].n_cols();
        if f == 0 {
            return Ok(());
        }
        let mut norms = vec![0.0f32; x[0].n_rows()];
        let y = block_mut(&mut y, "l2norm")?;
        normalize(block(&x[0], "l2norm")?, f, y, &mut norms)
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

/// ∂x of [`L2Norm`] from x and ∇y: a row-wise op (`l2norm_backward`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2NormBackward;

impl RowWise for L2NormBackward {
    fn name(&self) -> &str {
        "l2norm_backward"
    }
    fn arity(&self) -> usize {
        2
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        same_shape(self.name(), "x", inputs[0], "∇y", inputs[1])
    }
    /// Recomputing y (3) plus the dot product and the update (4).
    fn flops_per_element(&self) -> f64 {
        7.0
    }
    fn rows(&self, x: &[MatRef<'_>], mut dx: MatMut<'_>) -> Result<(), OpError> {
        let (f, rows) = (x[0].n_cols(), x[0].n_rows());
        if f == 0 {
            return Ok(());
        }
        let mut y = vec![0.0f32; rows * f];
        let mut norms = vec![0.0f32; rows];
        normalize(block(&x[0], "l2norm_backward")?, f, &mut y, &mut norms)?;
        let dx = block_mut(&mut dx, "l2norm_backward")?;
        Ok(l2_normalize_rows_backward(
            &y,
            &norms,
            f,
            L2_EPS,
            block(&x[1], "l2norm_backward")?,
            dx,
        )?)
    }
}
