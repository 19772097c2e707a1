//! A user *neighbour* op: `user.max_agg(A, X)`, row i the element-wise maximum of X's rows
//! at i's neighbours (the pattern of A; its values are not read), 0 for a node without
//! neighbours — GraphSAGE's max aggregator without its inner layer.
//!
//! On the neighbour-reduce adapter the op is its fold: start at −∞, keep the larger value,
//! and route ∇Y[i, c] to the neighbour whose value was kept (the first of ties in CSR
//! order). The adapter gives the in-memory forward (split into row blocks), the blocked
//! forward out-of-core inference runs (the same loop, so bit-identical), and the backward
//! (which recomputes the argmax from A and X instead of saving an n × f index array).

use saintflow::op::{neighbour_reduce, NeighbourReduce, OpError, Registry, Routing};

/// `user.max_agg(A, X)`: Y[i, :] = max over neighbours j of i of X[j, :] (0 without any).
#[derive(Debug, Clone, Copy)]
pub struct MaxAgg;

impl NeighbourReduce for MaxAgg {
    fn name(&self) -> &str {
        "user.max_agg"
    }
    fn neutral(&self) -> f32 {
        f32::NEG_INFINITY
    }
    fn fold(&self, acc: f32, _a: f32, x: f32) -> f32 {
        if x > acc {
            x
        } else {
            acc
        }
    }
    fn routing(&self) -> Routing {
        Routing::Selected
    }
}

/// Registers `user.max_agg` (no attributes).
pub fn register_max_agg(registry: &mut Registry) -> Result<(), OpError> {
    let doc = "user.max_agg(A, x): row i the element-wise max of x over i's neighbours";
    registry.register("user.max_agg", &[], doc, |_| Ok(neighbour_reduce(MaxAgg)))
}
