//! Activations on the elementwise adapter ([`crate::op::Elementwise`]): each [`Activation`]
//! variant gives f and f′ (and vector kernels for both), and the adapter makes the op
//! `NAME` and its backward `NAME_backward`, row-wise, partitioned and row-local. Each
//! backward takes exactly what its gradient formula needs — the forward's output y or its
//! input x — plus ∇y, so the planner's liveness sees what a forward must keep alive for
//! its backward. A new activation is a variant here, not two new ops.

use rayon::prelude::*;

use saintflow_ops::elementwise as k;

use crate::op::elementwise::Map;
use crate::op::{Elementwise, OpError};

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
    /// y = √max(x, ε); ∂x = ∇y / (2y) where x > ε, else 0 (saves x). A standard deviation
    /// from a variance (PyG's `StdAggregation` takes √ of the variance clamped to 1e-5).
    Sqrt {
        /// ε > 0 (1e-5 by default).
        eps: f32,
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

    /// √max(x, ε); ε must be finite and > 0.
    pub fn sqrt(eps: f64) -> Result<Activation, OpError> {
        let e = finite("eps", eps)?;
        if e <= 0.0 {
            return Err(OpError::Attr {
                name: "eps".into(),
                what: format!("expected a number > 0, got {eps}"),
            });
        }
        Ok(Activation::Sqrt { eps: e })
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
}

/// ReLU, the most used activation, as an op.
pub const RELU: Map<Activation> = Map(Activation::Relu);

impl Elementwise for Activation {
    /// The name plan files use.
    fn name(&self) -> &str {
        match self {
            Activation::Relu => "relu",
            Activation::LeakyRelu { .. } => "leaky_relu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::Elu { .. } => "elu",
            Activation::Sqrt { .. } => "sqrt",
        }
    }

    fn attrs(&self) -> String {
        match self {
            Activation::LeakyRelu { slope } => format!("slope={slope}"),
            Activation::Elu { alpha } => format!("alpha={alpha}"),
            Activation::Sqrt { eps } => format!("eps={eps}"),
            _ => String::new(),
        }
    }

    /// Arithmetic per element of the forward: compare (ReLU, counted as data movement
    /// only), multiply, exp + abs + add + divide (sigmoid; tanh alike), exp_m1 + multiply.
    fn flops_per_element(&self) -> f64 {
        match self {
            Activation::Relu => 0.0,
            Activation::LeakyRelu { .. } => 1.0,
            Activation::Sigmoid | Activation::Tanh => 4.0,
            Activation::Elu { .. } => 3.0,
            Activation::Sqrt { .. } => 2.0,
        }
    }

    /// The backward reads the forward's output y, except LeakyReLU's (y has x's sign only
    /// when slope > 0) and √'s (whose clamp is on x).
    fn saves_output(&self) -> bool {
        !matches!(self, Activation::LeakyRelu { .. } | Activation::Sqrt { .. })
    }

    /// The scalar formula (the slices run the vector kernels, which give the same values).
    fn f(&self, x: f32) -> f32 {
        match *self {
            // NaN passes through, as in the kernel (`f32::max` would give 0).
            Activation::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Activation::LeakyRelu { slope } => {
                if x > 0.0 {
                    x
                } else {
                    slope * x
                }
            }
            Activation::Sigmoid => {
                if x >= 0.0 {
                    1.0 / (1.0 + (-x).exp())
                } else {
                    let e = x.exp();
                    e / (1.0 + e)
                }
            }
            Activation::Tanh => x.tanh(),
            Activation::Elu { alpha } => {
                if x > 0.0 {
                    x
                } else {
                    alpha * x.exp_m1()
                }
            }
            // NaN passes through (`f32::max` would give ε).
            Activation::Sqrt { eps } => {
                if x > eps || x.is_nan() {
                    x.sqrt()
                } else {
                    eps.sqrt()
                }
            }
        }
    }

    /// f′ from the saved value: y, or x for LeakyReLU and √.
    fn df(&self, s: f32) -> f32 {
        match *self {
            Activation::Relu => f32::from(u8::from(s > 0.0)),
            Activation::LeakyRelu { slope } => {
                if s > 0.0 {
                    1.0
                } else {
                    slope
                }
            }
            Activation::Sigmoid => s * (1.0 - s),
            Activation::Tanh => 1.0 - s * s,
            Activation::Elu { alpha } => {
                if s > 0.0 {
                    1.0
                } else {
                    s + alpha
                }
            }
            Activation::Sqrt { eps } => {
                if s > eps {
                    0.5 / s.sqrt()
                } else {
                    0.0
                }
            }
        }
    }

    fn forward_slice(&self, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
        match *self {
            Activation::Relu => k::relu(x, y)?,
            Activation::LeakyRelu { slope } => k::leaky_relu(x, slope, y)?,
            Activation::Sigmoid => k::sigmoid(x, y)?,
            // No kernel in `saintflow-ops` yet: the loop is here.
            Activation::Tanh => y
                .par_chunks_mut(CHUNK)
                .zip(x.par_chunks(CHUNK))
                .for_each(|(y, x)| y.iter_mut().zip(x).for_each(|(y, x)| *y = x.tanh())),
            Activation::Elu { alpha } => k::elu(x, alpha, y)?,
            Activation::Sqrt { .. } => self.scalar_forward(x, y),
        }
        Ok(())
    }

    /// ∂x from the saved value (x or y, see `saves_output`) and ∇y.
    fn backward_slice(&self, saved: &[f32], dy: &[f32], dx: &mut [f32]) -> Result<(), OpError> {
        match *self {
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
            Activation::Sqrt { .. } => dx
                .par_chunks_mut(CHUNK)
                .zip(saved.par_chunks(CHUNK).zip(dy.par_chunks(CHUNK)))
                .for_each(|(dx, (x, dy))| {
                    for ((dx, &x), &dy) in dx.iter_mut().zip(x).zip(dy) {
                        *dx = dy * self.df(x);
                    }
                }),
        }
        Ok(())
    }
}

impl Activation {
    /// y = f(x) element by element, in parallel chunks (an activation without a kernel in
    /// `saintflow-ops`).
    fn scalar_forward(&self, x: &[f32], y: &mut [f32]) {
        y.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(y, x)| y.iter_mut().zip(x).for_each(|(y, &x)| *y = self.f(x)));
    }
}
