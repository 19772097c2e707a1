//! Activations and their backward ops.

use crate::ir::{Fact, Kind, NodeId, Tensor, Value};
use crate::op::{Arity, Ctx, GradBuilder, Op, OpError};

use super::dense;

/// y = max(x, 0).
#[derive(Clone, Copy, Debug)]
pub struct Relu;

impl Op for Relu {
    fn name(&self) -> &str {
        "relu"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, "relu")?;
        let mut y = Tensor::zeros(x.rows, x.cols);
        saintflow_ops::elementwise::relu(&x.data, &mut y.data)?;
        Ok(Value::dense(y))
    }
    /// ∂x = ∇y · [y > 0]; saves y (the node's own output).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let y = g.node();
        Ok(vec![Some(g.add(ReluBackward, &[y, grad])?)])
    }
}

/// ∂x = ∇y · [y > 0], from y and ∇y.
#[derive(Clone, Copy, Debug)]
pub struct ReluBackward;

impl Op for ReluBackward {
    fn name(&self) -> &str {
        "relu_backward"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        if inputs[0] != inputs[1] {
            return Err(OpError::args(format!(
                "relu_backward: y {} and ∇y {} differ",
                inputs[0], inputs[1]
            )));
        }
        Ok(inputs[0].clone())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (y, dy) = (
            dense(inputs, 0, "relu_backward")?,
            dense(inputs, 1, "relu_backward")?,
        );
        let mut dx = Tensor::zeros(y.rows, y.cols);
        saintflow_ops::elementwise::relu_backward(&y.data, &dy.data, &mut dx.data)?;
        Ok(Value::dense(dx))
    }
}
