//! Activations and their backward ops. Each backward op takes exactly what its gradient
//! formula needs — the forward's output y or its input x — plus ∇y, so the planner's
//! liveness sees what a forward must keep alive for its backward.

use rayon::prelude::*;

use crate::ir::{Bindings, Fact, Kind, NodeId, Tensor, Value};
use crate::op::{Arity, Cost, Ctx, GradBuilder, Op, OpError};

use super::{dense, elementwise_cost, same_shape};

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
        same_shape("relu_backward", "y", inputs[0], "∇y", inputs[1])
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

/// A finite number attribute (a slope, ELU's α).
pub(crate) fn finite(name: &str, x: f64) -> Result<f32, OpError> {
    if x.is_finite() && (x as f32).is_finite() {
        Ok(x as f32)
    } else {
        Err(OpError::Attr {
            name: name.into(),
            what: format!("expected a finite number, got {x}"),
        })
    }
}

/// y = x if x > 0 else slope·x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeakyRelu {
    /// The slope for x ≤ 0 (0.2 in GAT).
    pub slope: f32,
}

impl LeakyRelu {
    /// The op; `slope` must be finite.
    pub fn new(slope: f64) -> Result<LeakyRelu, OpError> {
        Ok(LeakyRelu {
            slope: finite("slope", slope)?,
        })
    }
}

impl Op for LeakyRelu {
    fn name(&self) -> &str {
        "leaky_relu"
    }
    fn attrs(&self) -> String {
        format!("slope={}", self.slope)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        elementwise_cost(inputs, output, b, 1.0)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, "leaky_relu")?;
        let mut y = Tensor::zeros(x.rows, x.cols);
        saintflow_ops::elementwise::leaky_relu(&x.data, self.slope, &mut y.data)?;
        Ok(Value::dense(y))
    }
    /// ∂x = ∇y if x > 0 else slope·∇y; saves x (y has x's sign only when slope > 0).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let x = g.input(0);
        Ok(vec![Some(g.add(
            LeakyReluBackward { slope: self.slope },
            &[x, grad],
        )?)])
    }
}

/// ∂x = ∇y · (1 if x > 0 else slope), from x and ∇y.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeakyReluBackward {
    /// The forward's slope.
    pub slope: f32,
}

impl Op for LeakyReluBackward {
    fn name(&self) -> &str {
        "leaky_relu_backward"
    }
    fn attrs(&self) -> String {
        format!("slope={}", self.slope)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        same_shape(self.name(), "x", inputs[0], "∇y", inputs[1])
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (x, dy) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        let mut dx = Tensor::zeros(x.rows, x.cols);
        saintflow_ops::elementwise::leaky_relu_backward(
            &x.data,
            self.slope,
            &dy.data,
            &mut dx.data,
        )?;
        Ok(Value::dense(dx))
    }
}

/// y = 1 / (1 + e^−x), stable for both signs.
#[derive(Clone, Copy, Debug)]
pub struct Sigmoid;

impl Op for Sigmoid {
    fn name(&self) -> &str {
        "sigmoid"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // exp, abs, add, divide.
        elementwise_cost(inputs, output, b, 4.0)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, "sigmoid")?;
        let mut y = Tensor::zeros(x.rows, x.cols);
        saintflow_ops::elementwise::sigmoid(&x.data, &mut y.data)?;
        Ok(Value::dense(y))
    }
    /// ∂x = ∇y · y (1 − y); saves y (the node's own output).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let y = g.node();
        Ok(vec![Some(g.add(SigmoidBackward, &[y, grad])?)])
    }
}

/// ∂x = ∇y · y (1 − y), from y and ∇y.
#[derive(Clone, Copy, Debug)]
pub struct SigmoidBackward;

impl Op for SigmoidBackward {
    fn name(&self) -> &str {
        "sigmoid_backward"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        same_shape(self.name(), "y", inputs[0], "∇y", inputs[1])
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (y, dy) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        let mut dx = Tensor::zeros(y.rows, y.cols);
        saintflow_ops::elementwise::sigmoid_backward(&y.data, &dy.data, &mut dx.data)?;
        Ok(Value::dense(dx))
    }
}

/// Elements per parallel task of the loops written here: 64 KiB of f32.
const CHUNK: usize = 1 << 14;

/// y = tanh(x). (No kernel in `saintflow-ops` yet: the loop is here.)
#[derive(Clone, Copy, Debug)]
pub struct Tanh;

impl Op for Tanh {
    fn name(&self) -> &str {
        "tanh"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // Two exponentials' worth, as sigmoid.
        elementwise_cost(inputs, output, b, 4.0)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, "tanh")?;
        let mut y = Tensor::zeros(x.rows, x.cols);
        y.data
            .par_chunks_mut(CHUNK)
            .zip(x.data.par_chunks(CHUNK))
            .for_each(|(y, x)| y.iter_mut().zip(x).for_each(|(y, x)| *y = x.tanh()));
        Ok(Value::dense(y))
    }
    /// ∂x = ∇y · (1 − y²); saves y (the node's own output).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let y = g.node();
        Ok(vec![Some(g.add(TanhBackward, &[y, grad])?)])
    }
}

/// ∂x = ∇y · (1 − y²), from y and ∇y.
#[derive(Clone, Copy, Debug)]
pub struct TanhBackward;

impl Op for TanhBackward {
    fn name(&self) -> &str {
        "tanh_backward"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        same_shape(self.name(), "y", inputs[0], "∇y", inputs[1])
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (y, dy) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        let mut dx = Tensor::zeros(y.rows, y.cols);
        dx.data
            .par_chunks_mut(CHUNK)
            .zip(y.data.par_chunks(CHUNK).zip(dy.data.par_chunks(CHUNK)))
            .for_each(|(dx, (y, dy))| {
                for ((dx, &y), &dy) in dx.iter_mut().zip(y).zip(dy) {
                    *dx = dy * (1.0 - y * y);
                }
            });
        Ok(Value::dense(dx))
    }
}

/// y = x if x > 0 else α (e^x − 1), with α ≥ 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Elu {
    /// α (1 by default).
    pub alpha: f32,
}

impl Elu {
    /// The op; α must be finite and ≥ 0 (then y > 0 exactly when x > 0, which is what
    /// lets the backward save y alone).
    pub fn new(alpha: f64) -> Result<Elu, OpError> {
        let a = finite("alpha", alpha)?;
        if a < 0.0 {
            return Err(OpError::Attr {
                name: "alpha".into(),
                what: format!("expected a number ≥ 0, got {alpha}"),
            });
        }
        Ok(Elu { alpha: a })
    }
}

impl Op for Elu {
    fn name(&self) -> &str {
        "elu"
    }
    fn attrs(&self) -> String {
        format!("alpha={}", self.alpha)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        // exp_m1 and a multiply on the negative side.
        elementwise_cost(inputs, output, b, 3.0)
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, "elu")?;
        let mut y = Tensor::zeros(x.rows, x.cols);
        saintflow_ops::elementwise::elu(&x.data, self.alpha, &mut y.data)?;
        Ok(Value::dense(y))
    }
    /// ∂x = ∇y if x > 0 else ∇y · α e^x = ∇y · (y + α); saves y only (α ≥ 0 makes
    /// [x > 0] = [y > 0]).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let y = g.node();
        Ok(vec![Some(
            g.add(EluBackward { alpha: self.alpha }, &[y, grad])?,
        )])
    }
}

/// ∂x = ∇y if y > 0 else ∇y · (y + α), from y and ∇y.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EluBackward {
    /// The forward's α (≥ 0).
    pub alpha: f32,
}

impl Op for EluBackward {
    fn name(&self) -> &str {
        "elu_backward"
    }
    fn attrs(&self) -> String {
        format!("alpha={}", self.alpha)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        same_shape(self.name(), "y", inputs[0], "∇y", inputs[1])
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (y, dy) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        let mut dx = Tensor::zeros(y.rows, y.cols);
        // The kernel tests the sign of x; with α ≥ 0, y has the same positive set.
        saintflow_ops::elementwise::elu_backward(
            &y.data,
            &y.data,
            self.alpha,
            &dy.data,
            &mut dx.data,
        )?;
        Ok(Value::dense(dx))
    }
}
