//! A custom op written against saintflow's public API only: swish(x) = x·σ(βx)
//! (Ramachandran et al.), registered as `user.swish` with attribute `beta`, so a plan file
//! can write `user.swish(A_sym @ x @ W, beta=1.5)`.
//!
//! What a user op needs: a name, its arguments, shape inference, a forward, and a backward
//! that adds gradient nodes through the [`GradBuilder`] (here one op of our own,
//! `user.swish_backward`, which saves only x).

use std::sync::Arc;

mod max_agg;
pub use max_agg::{register_max_agg, MaxAgg, MaxAggBackward};

use saintflow::ir::{Fact, Kind, NodeId, Tensor, Value};
use saintflow::op::{Arity, Attrs, Ctx, GradBuilder, Op, OpError, Registry};

fn sigmoid(z: f32) -> f32 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

fn dense<'v>(v: &'v Value, op: &str) -> Result<&'v Tensor, OpError> {
    v.as_dense()
        .ok_or_else(|| OpError::args(format!("{op}: expected a dense matrix")))
}

/// y = x·σ(βx).
#[derive(Debug, Clone, Copy)]
pub struct Swish {
    /// β.
    pub beta: f32,
}

impl Op for Swish {
    fn name(&self) -> &str {
        "user.swish"
    }
    fn attrs(&self) -> String {
        format!("beta={}", self.beta)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        Ok(inputs[0].clone())
    }
    /// Elementwise, so row i of y is a function of row i of x alone: full-graph inference
    /// may run it on blocks of rows (out of core).
    fn row_local(&self, _: &[&Fact]) -> bool {
        true
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs[0], self.name())?;
        let data = x.data.iter().map(|&v| v * sigmoid(self.beta * v)).collect();
        Ok(Value::dense(
            Tensor::from_vec(x.rows, x.cols, data).expect("same shape"),
        ))
    }
    /// ∂x = ∇y · (σ(βx) + βx·σ(βx)(1 − σ(βx))).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let x = g.input(0);
        Ok(vec![Some(
            g.add(SwishBackward { beta: self.beta }, &[x, grad])?,
        )])
    }
}

/// ∂x of [`Swish`] from x and ∇y.
#[derive(Debug, Clone, Copy)]
pub struct SwishBackward {
    /// β.
    pub beta: f32,
}

impl Op for SwishBackward {
    fn name(&self) -> &str {
        "user.swish_backward"
    }
    fn attrs(&self) -> String {
        format!("beta={}", self.beta)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        if inputs[0] != inputs[1] {
            return Err(OpError::args(format!(
                "user.swish_backward: x is {}, ∇y is {}, expected equal shapes",
                inputs[0], inputs[1]
            )));
        }
        Ok(inputs[0].clone())
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (x, dy) = (
            dense(inputs[0], self.name())?,
            dense(inputs[1], self.name())?,
        );
        let b = self.beta;
        let data = x
            .data
            .iter()
            .zip(&dy.data)
            .map(|(&v, &d)| {
                let s = sigmoid(b * v);
                d * (s + b * v * s * (1.0 - s))
            })
            .collect();
        Ok(Value::dense(
            Tensor::from_vec(x.rows, x.cols, data).expect("same shape"),
        ))
    }
}

/// Registers `user.swish` (attribute `beta`, default 1) and `user.max_agg`.
pub fn register(registry: &mut Registry) -> Result<(), OpError> {
    registry.register(
        "user.swish",
        &["beta"],
        "user.swish(x, beta=1): x·σ(βx)",
        |attrs: &Attrs| {
            let beta = attrs.num("beta", 1.0)? as f32;
            Ok(Arc::new(Swish { beta }) as Arc<dyn Op>)
        },
    )?;
    register_max_agg(registry)
}

/// The built-in ops and this crate's: what the `saintflow-custom-op` binary and a library
/// caller ([`saintflow::train::TrainOptions::registry`]) train with.
pub fn registry() -> Registry {
    let mut registry = Registry::with_builtins();
    register(&mut registry).expect("the example's op names are free in the built-ins");
    registry
}

/// The repository README's Rust blocks, compiled as this crate's doctests (they use this
/// crate's `register`), so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
