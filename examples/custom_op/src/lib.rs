//! Custom ops written against saintflow's public API only, each on one of its adapters:
//!
//! * `user.swish(x, beta=1)` = x·σ(βx) (Ramachandran et al.): elementwise, so f and f′ are
//!   all it takes — the adapter makes the op, its backward, the parallel row split and the
//!   row locality out-of-core inference needs;
//! * `user.max_agg(A, x)` (in `max_agg.rs`): a neighbour aggregation, from a neutral start, a
//!   fold and the gradient's routing.
//!
//! A plan file then writes `user.swish(A_sym @ x @ W, beta=1.5)`.

mod max_agg;
pub use max_agg::{register_max_agg, MaxAgg};

use saintflow::op::{elementwise, Elementwise, OpError, Registry};

/// y = x·σ(βx); f′(x) = σ(βx) + βx·σ(βx)(1 − σ(βx)).
#[derive(Debug, Clone, Copy)]
pub struct Swish {
    /// β.
    pub beta: f32,
}

impl Elementwise for Swish {
    fn name(&self) -> &str {
        "user.swish"
    }
    fn attrs(&self) -> String {
        format!("beta={}", self.beta)
    }
    fn f(&self, x: f32) -> f32 {
        x * sigmoid(self.beta * x)
    }
    fn df(&self, x: f32) -> f32 {
        let s = sigmoid(self.beta * x);
        s + self.beta * x * s * (1.0 - s)
    }
}

/// σ(z), without overflow for either sign.
fn sigmoid(z: f32) -> f32 {
    let e = (-z.abs()).exp();
    if z >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    }
}

/// Registers `user.swish` (attribute `beta`, default 1) and `user.max_agg`.
pub fn register(registry: &mut Registry) -> Result<(), OpError> {
    let doc = "user.swish(x, beta=1): x·σ(βx)";
    registry.register("user.swish", &["beta"], doc, |attrs| {
        let beta = attrs.num("beta", 1.0)? as f32;
        Ok(elementwise(Swish { beta }))
    })?;
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
