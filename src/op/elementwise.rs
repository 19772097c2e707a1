//! The elementwise adapter: y = f(x) element by element, and its gradient ∂x = ∇y · f′.
//! The author gives `f` and `f′` ([`Elementwise`]); [`elementwise`] makes the op, which is
//! row-wise (see [`super::rowwise`]: partitioned, row-local, costed) and whose backward is
//! a second row-wise op, `NAME_backward(saved, ∇y)`. The backward reads x, or y when
//! [`Elementwise::saves_output`] says f′ is written in terms of y (σ′ = y(1 − y)): the
//! planner's liveness then keeps only what the formula needs. Two inputs of one shape,
//! y = f(a, b), with the author's backward: [`Binary`].
//!
//! ```
//! use saintflow::op::{elementwise, Elementwise};
//!
//! /// softplus(x) = ln(1 + eˣ), f′ = σ(x).
//! #[derive(Clone, Debug)]
//! struct Softplus;
//!
//! impl Elementwise for Softplus {
//!     fn name(&self) -> &str {
//!         "user.softplus"
//!     }
//!     fn f(&self, x: f32) -> f32 {
//!         x.max(0.0) + (-x.abs()).exp().ln_1p()
//!     }
//!     fn df(&self, x: f32) -> f32 {
//!         1.0 / (1.0 + (-x).exp())
//!     }
//! }
//!
//! let op = elementwise(Softplus);
//! assert_eq!(op.name(), "user.softplus");
//! # saintflow::testing::check_op_gradients(op, &[saintflow::testing::Arg::Nodes(3)]).unwrap();
//! ```

use std::fmt;
use std::sync::Arc;

use crate::ir::{Fact, NodeId};

use super::rowwise::{row_wise, RowWise};
use super::util::{block, block_mut, same_shape};
use super::{GradBuilder, MatMut, MatRef, Op, OpError};

/// What an elementwise op's author writes (see the module header).
pub trait Elementwise: fmt::Debug + Clone + Send + Sync + 'static {
    /// The name plan files use; the backward is `NAME_backward`.
    fn name(&self) -> &str;

    /// Attributes as `explain` prints them (display only; CSE keys on the `Debug` text).
    fn attrs(&self) -> String {
        String::new()
    }

    /// y = f(x).
    fn f(&self, x: f32) -> f32;

    /// f′ at the value the backward saves: x, or y when [`Elementwise::saves_output`].
    fn df(&self, saved: f32) -> f32;

    /// Whether `df` is written in terms of the output y (then the backward keeps y alive,
    /// not x). Default: false (x).
    fn saves_output(&self) -> bool {
        false
    }

    /// Arithmetic per element of the forward, for the cost model. Default: 1.
    fn flops_per_element(&self) -> f64 {
        1.0
    }

    /// y = f(x) over a slice. Default: `f` element by element; override with a vector
    /// kernel (it must give what `f` gives).
    fn forward_slice(&self, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
        y.iter_mut().zip(x).for_each(|(y, &x)| *y = self.f(x));
        Ok(())
    }

    /// ∂x = ∇y · f′(saved) over a slice. Default: `df` element by element.
    fn backward_slice(&self, saved: &[f32], dy: &[f32], dx: &mut [f32]) -> Result<(), OpError> {
        for ((dx, &s), &dy) in dx.iter_mut().zip(saved).zip(dy) {
            *dx = dy * self.df(s);
        }
        Ok(())
    }
}

/// `e` as an op (see the module header).
pub fn elementwise<E: Elementwise>(e: E) -> Arc<dyn Op> {
    row_wise(Map(e))
}

/// The forward of an [`Elementwise`], as a [`RowWise`].
#[derive(Clone, Debug, PartialEq)]
pub struct Map<E>(pub E);

/// The backward of an [`Elementwise`]: ∂x from the saved value and ∇y.
#[derive(Clone, Debug, PartialEq)]
pub struct MapGrad<E> {
    /// The function.
    pub f: E,
    /// `NAME_backward`.
    pub name: String,
}

impl<E: Elementwise> RowWise for Map<E> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn attrs(&self) -> String {
        self.0.attrs()
    }
    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        let x = block(&x[0], self.0.name())?;
        let y = block_mut(&mut y, self.0.name())?;
        self.0.forward_slice(x, y)
    }
    fn flops_per_element(&self) -> f64 {
        self.0.flops_per_element()
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let saved = if self.0.saves_output() {
            g.node()
        } else {
            g.input(0)
        };
        let back = MapGrad {
            f: self.0.clone(),
            name: format!("{}_backward", self.0.name()),
        };
        Ok(vec![Some(g.add(back, &[saved, grad])?)])
    }
}

impl<E: Elementwise> RowWise for MapGrad<E> {
    fn name(&self) -> &str {
        &self.name
    }
    fn attrs(&self) -> String {
        self.f.attrs()
    }
    fn arity(&self) -> usize {
        2
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let saved = if self.f.saves_output() { "y" } else { "x" };
        same_shape(&self.name, saved, inputs[0], "∇y", inputs[1])
    }
    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        let (saved, dy) = (block(&x[0], &self.name)?, block(&x[1], &self.name)?);
        let dx = block_mut(&mut y, &self.name)?;
        self.f.backward_slice(saved, dy, dx)
    }
}

/// What a binary elementwise op's author writes: y = f(a, b) element by element over two
/// inputs of one shape (`sub`, `mul`). The type is then a [`RowWise`] op (partitioned,
/// row-local, fusible, costed); the backward is the author's, since the gradient of an
/// operand is often another op of the graph (∂a of `a − b` is ∇y itself).
///
/// ```
/// use saintflow::op::{Binary, GradBuilder, NodeId, Op, OpError};
///
/// /// y = max(a, b); ∂ goes to the larger operand (a on ties).
/// #[derive(Clone, Debug)]
/// struct Max;
///
/// impl Binary for Max {
///     fn name(&self) -> &str {
///         "user.max"
///     }
///     fn f(&self, a: f32, b: f32) -> f32 {
///         a.max(b)
///     }
/// }
///
/// let op: std::sync::Arc<dyn Op> = std::sync::Arc::new(Max);
/// assert_eq!(op.name(), "user.max");
/// assert!(op.as_row_blocks().is_some());
/// ```
pub trait Binary: fmt::Debug + Send + Sync + 'static {
    /// The name plan files use.
    fn name(&self) -> &str;

    /// Attributes as `explain` prints them (display only; CSE keys on the `Debug` text).
    fn attrs(&self) -> String {
        String::new()
    }

    /// y = f(a, b).
    fn f(&self, a: f32, b: f32) -> f32;

    /// Arithmetic per element, for the cost model. Default: 1.
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
}

impl<B: Binary> RowWise for B {
    fn name(&self) -> &str {
        Binary::name(self)
    }
    fn attrs(&self) -> String {
        Binary::attrs(self)
    }
    fn arity(&self) -> usize {
        2
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        same_shape(Binary::name(self), "a", inputs[0], "b", inputs[1])
    }
    fn rows(&self, x: &[MatRef<'_>], y: MatMut<'_>) -> Result<(), OpError> {
        zip_rows(x, y, Binary::name(self), |a, b| self.f(a, b))
    }
    fn flops_per_element(&self) -> f64 {
        Binary::flops_per_element(self)
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        Binary::backward(self, g, grad)
    }
}

/// y = f(a, b) element by element over blocks `x[0]`, `x[1]` of y's shape.
pub(crate) fn zip_rows(
    x: &[MatRef<'_>],
    mut y: MatMut<'_>,
    op: &str,
    f: impl Fn(f32, f32) -> f32,
) -> Result<(), OpError> {
    let (a, b) = (block(&x[0], op)?, block(&x[1], op)?);
    let y = block_mut(&mut y, op)?;
    if a.len() != y.len() || b.len() != y.len() {
        return Err(OpError::args(format!("{op}: blocks of unequal shapes")));
    }
    y.iter_mut()
        .zip(a.iter().zip(b))
        .for_each(|(y, (&a, &b))| *y = f(a, b));
    Ok(())
}
