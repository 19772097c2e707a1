//! Neighbour aggregations other than the weighted sum (`A @ x`, which is `spmm`): the
//! element-wise maximum and minimum over a node's neighbours, and the power mean, on the
//! neighbour-reduce adapter ([`crate::op::NeighbourReduce`]).

use crate::op::{NeighbourReduce, OpError, Routing};

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
    fn neutral(&self) -> f32 {
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

/// Values of x are clamped to `0..=POWER_MEAN_MAX` before the power, and the mean after it
/// (PyG's `PowerMeanAggregation` clamps both to [0, 100]).
pub const POWER_MEAN_MAX: f32 = 100.0;

/// The built-in `powermean_agg(A, x, p=…)`: (Σ_j a_ij·clamp(x_j)^p)^(1/p) per column, the
/// generalised mean of Li et al. (DeeperGCN, 2020) and PyG's `PowerMeanAggregation` with a
/// fixed p (PyG can learn p; here it is an attribute). With `A_mean` the sum is the mean
/// (p = 1: the mean of the clamped values; larger p leans towards the maximum). A
/// [`Routing::Mapped`] fold: g(x) = clamp(x, 0, 100)^p, h(s) = clamp(s, 0, 100)^(1/p), so
/// the adapter derives the gradient. 0 for a node without neighbours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerMean {
    /// The power p (> 0).
    pub p: f32,
}

impl PowerMean {
    /// Refuses p ≤ 0 or not finite.
    pub fn new(p: f64) -> Result<PowerMean, OpError> {
        if !(p.is_finite() && p > 0.0) {
            return Err(OpError::args(format!(
                "powermean_agg: p = {p}, expected a finite p > 0"
            )));
        }
        Ok(PowerMean { p: p as f32 })
    }
}

/// clamp(v, 0, 100)^e and its derivative in v (0 outside the clamp's open interval).
fn clamped_power(v: f32, e: f32) -> (f32, f32) {
    if v <= 0.0 {
        (0.0, 0.0)
    } else if v >= POWER_MEAN_MAX {
        (POWER_MEAN_MAX.powf(e), 0.0)
    } else {
        (v.powf(e), e * v.powf(e - 1.0))
    }
}

impl NeighbourReduce for PowerMean {
    fn name(&self) -> &str {
        "powermean_agg"
    }
    fn attrs(&self) -> String {
        format!("p={}", self.p)
    }
    fn neutral(&self) -> f32 {
        0.0
    }
    fn fold(&self, acc: f32, a: f32, x: f32) -> f32 {
        a.mul_add(clamped_power(x, self.p).0, acc)
    }
    fn routing(&self) -> Routing {
        Routing::Mapped
    }
    fn map(&self, x: f32) -> (f32, f32) {
        clamped_power(x, self.p)
    }
    fn finish(&self, acc: f32) -> (f32, f32) {
        clamped_power(acc, 1.0 / self.p)
    }
}
