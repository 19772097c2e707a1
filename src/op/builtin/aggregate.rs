//! Neighbour aggregations other than the weighted sum (`A @ x`, which is `spmm`): the
//! element-wise maximum and minimum over a node's neighbours, on the neighbour-reduce
//! adapter ([`crate::op::NeighbourReduce`]).

use crate::op::{NeighbourReduce, Routing};

/// The built-in `max_agg` and `min_agg` (GraphSAGE's pooling aggregators without their
/// inner layer): the maximum (minimum) of X's rows at the neighbours, 0 without any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extreme {
    /// `max_agg`.
    Max,
    /// `min_agg`.
    Min,
}

impl NeighbourReduce for Extreme {
    fn name(&self) -> &str {
        match self {
            Extreme::Max => "max_agg",
            Extreme::Min => "min_agg",
        }
    }
    fn identity(&self) -> f32 {
        match self {
            Extreme::Max => f32::NEG_INFINITY,
            Extreme::Min => f32::INFINITY,
        }
    }
    fn fold(&self, acc: f32, _: f32, x: f32) -> f32 {
        // A NaN neighbour makes the result NaN (as torch.max and PyG's max aggregation),
        // never skipped: once acc is NaN no comparison is true and it stays.
        let better = x.is_nan()
            || match self {
                Extreme::Max => x > acc,
                Extreme::Min => x < acc,
            };
        if better {
            x
        } else {
            acc
        }
    }
    fn routing(&self) -> Routing {
        Routing::Selected
    }
}
