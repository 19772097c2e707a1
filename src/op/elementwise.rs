//! The elementwise adapter: y = f(x) element by element, and its gradient ∂x = ∇y · f′.
//! The author gives `f` and `f′` ([`Elementwise`]); [`elementwise`] makes the op, which is
//! row-wise (see [`super::rowwise`]: partitioned, row-local, costed) and whose backward is
//! a second row-wise op, `NAME_backward(saved, ∇y)`. The backward reads x, or y when
//! [`Elementwise::saves_output`] says f′ is written in terms of y (σ′ = y(1 − y)): the
//! planner's liveness then keeps only what the formula needs.
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

use super::rowwise::{row_wise, RowWise, Rows};
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
        Ok(vec![Some(g.add(Rows(back), &[saved, grad])?)])
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
