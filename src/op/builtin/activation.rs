//! Activations and their backward, as two ops driven by one [`Activation`] value: the
//! forward [`Activate`] and the backward [`ActivateBackward`]. Each backward takes exactly
//! what its gradient formula needs — the forward's output y or its input x — plus ∇y, so
//! the planner's liveness sees what a forward must keep alive for its backward. A new
//! activation is a variant here and its two kernels, not two new ops.

use rayon::prelude::*;

use saintflow_ops::elementwise as k;

use crate::ir::{Bindings, Fact, Kind, NodeId, Tensor, Value};
use crate::op::{Arity, Cost, Ctx, GradBuilder, MatMut, Op, OpError, Split};

use super::{dense, elementwise_cost, row_split_of, rows_part, same_shape};

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

/// An elementwise activation and its parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// y = max(x, 0); ∂x = ∇y · \[y > 0\] (saves y).
    Relu,
    /// y = x if x > 0 else slope·x; ∂x = ∇y · (1 if x > 0 else slope) (saves x: y has x's
    /// sign only when slope > 0).
    LeakyRelu {
        /// The slope for x ≤ 0 (0.2 in GAT).
        slope: f32,
    },
    /// y = 1 / (1 + e^−x), stable for both signs; ∂x = ∇y · y (1 − y) (saves y).
    Sigmoid,
    /// y = tanh(x); ∂x = ∇y · (1 − y²) (saves y).
    Tanh,
    /// y = x if x > 0 else α (e^x − 1), α ≥ 0; ∂x = ∇y if x > 0 else ∇y · α e^x =
    /// ∇y · (y + α) (saves y: α ≥ 0 makes \[x > 0\] = \[y > 0\]).
    Elu {
        /// α (1 by default).
        alpha: f32,
    },
}

/// Elements per parallel task of the loops written here: 64 KiB of f32.
const CHUNK: usize = 1 << 14;

impl Activation {
    /// LeakyReLU; `slope` must be finite.
    pub fn leaky_relu(slope: f64) -> Result<Activation, OpError> {
        Ok(Activation::LeakyRelu {
            slope: finite("slope", slope)?,
        })
    }

    /// ELU; α must be finite and ≥ 0 (then y > 0 exactly when x > 0, which is what lets
    /// the backward save y alone).
    pub fn elu(alpha: f64) -> Result<Activation, OpError> {
        let a = finite("alpha", alpha)?;
        if a < 0.0 {
            return Err(OpError::Attr {
                name: "alpha".into(),
                what: format!("expected a number ≥ 0, got {alpha}"),
            });
        }
        Ok(Activation::Elu { alpha: a })
    }

    /// The name plan files use.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::LeakyRelu { .. } => "leaky_relu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::Elu { .. } => "elu",
        }
    }

    fn backward_name(self) -> &'static str {
        match self {
            Activation::Relu => "relu_backward",
            Activation::LeakyRelu { .. } => "leaky_relu_backward",
            Activation::Sigmoid => "sigmoid_backward",
            Activation::Tanh => "tanh_backward",
            Activation::Elu { .. } => "elu_backward",
        }
    }

    fn attrs(self) -> String {
        match self {
            Activation::LeakyRelu { slope } => format!("slope={slope}"),
            Activation::Elu { alpha } => format!("alpha={alpha}"),
            _ => String::new(),
        }
    }

    /// Arithmetic per element of the forward: compare (ReLU, counted as data movement
    /// only), multiply, exp + abs + add + divide (sigmoid; tanh alike), exp_m1 + multiply.
    fn flops_per_element(self) -> f64 {
        match self {
            Activation::Relu => 0.0,
            Activation::LeakyRelu { .. } => 1.0,
            Activation::Sigmoid | Activation::Tanh => 4.0,
            Activation::Elu { .. } => 3.0,
        }
    }

    /// Whether the backward reads the forward's input x (else its output y).
    fn saves_input(self) -> bool {
        matches!(self, Activation::LeakyRelu { .. })
    }

    fn forward(self, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
        match self {
            Activation::Relu => k::relu(x, y)?,
            Activation::LeakyRelu { slope } => k::leaky_relu(x, slope, y)?,
            Activation::Sigmoid => k::sigmoid(x, y)?,
            // No kernel in `saintflow-ops` yet: the loop is here.
            Activation::Tanh => y
                .par_chunks_mut(CHUNK)
                .zip(x.par_chunks(CHUNK))
                .for_each(|(y, x)| y.iter_mut().zip(x).for_each(|(y, x)| *y = x.tanh())),
            Activation::Elu { alpha } => k::elu(x, alpha, y)?,
        }
        Ok(())
    }

    /// ∂x from the saved value (x or y, see `saves_input`) and ∇y.
    fn backward(self, saved: &[f32], dy: &[f32], dx: &mut [f32]) -> Result<(), OpError> {
        match self {
            Activation::Relu => k::relu_backward(saved, dy, dx)?,
            Activation::LeakyRelu { slope } => k::leaky_relu_backward(saved, slope, dy, dx)?,
            Activation::Sigmoid => k::sigmoid_backward(saved, dy, dx)?,
            Activation::Tanh => dx
                .par_chunks_mut(CHUNK)
                .zip(saved.par_chunks(CHUNK).zip(dy.par_chunks(CHUNK)))
                .for_each(|(dx, (y, dy))| {
                    for ((dx, &y), &dy) in dx.iter_mut().zip(y).zip(dy) {
                        *dx = dy * (1.0 - y * y);
                    }
                }),
            // The kernel tests the sign of x; with α ≥ 0, y has the same positive set.
            Activation::Elu { alpha } => k::elu_backward(saved, saved, alpha, dy, dx)?,
        }
        Ok(())
    }
}

/// y = activation(x), elementwise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activate(pub Activation);

/// ReLU, the most used activation.
pub const RELU: Activate = Activate(Activation::Relu);

impl Op for Activate {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn attrs(&self) -> String {
        self.0.attrs()
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
        elementwise_cost(inputs, output, b, self.0.flops_per_element())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, self.name())?;
        // Every activation writes every element of y.
        let mut y = Tensor::scratch(x.rows, x.cols);
        self.0.forward(&x.data, &mut y.data)?;
        Ok(Value::dense(y))
    }
    /// Row blocks (elementwise: bit-identical to `forward`).
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
        let x = dense(inputs, 0, self.name())?;
        rows_part(split, part, x.cols, out, |r, y| {
            self.0.forward(&x.data[r], y)
        })
    }
    /// The formula is on each [`Activation`] variant; the backward op reads x or y.
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let saved = if self.0.saves_input() {
            g.input(0)
        } else {
            g.node()
        };
        Ok(vec![Some(g.add(ActivateBackward(self.0), &[saved, grad])?)])
    }
}

/// ∂x of an activation, from the value its backward saves (x or y) and ∇y.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActivateBackward(pub Activation);

impl Op for ActivateBackward {
    fn name(&self) -> &str {
        self.0.backward_name()
    }
    fn attrs(&self) -> String {
        self.0.attrs()
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let saved = if self.0.saves_input() { "x" } else { "y" };
        same_shape(self.name(), saved, inputs[0], "∇y", inputs[1])
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (saved, dy) = (
            dense(inputs, 0, self.name())?,
            dense(inputs, 1, self.name())?,
        );
        // Every activation's backward writes every element of dx.
        let mut dx = Tensor::scratch(saved.rows, saved.cols);
        self.0.backward(&saved.data, &dy.data, &mut dx.data)?;
        Ok(Value::dense(dx))
    }
    /// Row blocks (elementwise: bit-identical to `forward`).
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
        let saved = dense(inputs, 0, self.name())?;
        let dy = dense(inputs, 1, self.name())?;
        rows_part(split, part, saved.cols, out, |r, dx| {
            self.0.backward(&saved.data[r.clone()], &dy.data[r], dx)
        })
    }
}
