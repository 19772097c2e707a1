//! Whole-graph gradient check: autodiff's gradients against central finite differences of
//! the loss, for every parameter. What every op's and every shipped plan's backward is
//! tested with, and a tool for authors of custom ops.
//!
//! The graph runs in f32, so the check uses directional derivatives: for a unit direction
//! d in one parameter's space, the numeric slope (L(θ+εd) − L(θ−εd)) / 2ε against ⟨∇L, d⟩.
//! Error budget: truncation ≈ ε²·|L'''|/6, rounding ≈ u·|L|·√(ops)/ε with u = 6·10⁻⁸; with
//! ε = 10⁻² and |L| ≈ 1 both stay near 10⁻⁴, far below the 5 % relative tolerance, while a
//! wrong backward (a missing term, a wrong scale, a transposed operand) is off by far more.
//! Directions: the gradient itself (where ⟨∇L, d⟩ = ‖∇L‖ is largest, and a gradient g'
//! passes only if ‖g'‖ = ⟨g, g'⟩/‖g'‖) and random unit vectors (which catch gradients that
//! are right in aggregate but wrong per entry), the latter compared against ‖∇L‖.

use rand::{Rng, SeedableRng};

use crate::ir::{Graph, IrError, NodeId, Params, Tensor};
use crate::op::GraphSource;
use crate::sample::SampleRng;

use super::run;

/// Settings of a check.
#[derive(Clone, Copy, Debug)]
pub struct GradCheck {
    /// Step ε along a unit direction.
    pub eps: f64,
    /// Random directions per parameter (besides the gradient's own).
    pub random_directions: usize,
    /// Relative tolerance.
    pub tolerance: f64,
    /// Seed of the random directions.
    pub seed: u64,
}

impl Default for GradCheck {
    fn default() -> GradCheck {
        GradCheck {
            eps: 1e-2,
            random_directions: 2,
            tolerance: 5e-2,
            seed: 7,
        }
    }
}

/// One comparison.
#[derive(Clone, Debug)]
pub struct Discrepancy {
    /// The parameter.
    pub param: String,
    /// `gradient` or `random k`.
    pub direction: String,
    /// ⟨∇L, d⟩ from autodiff.
    pub analytic: f64,
    /// The finite-difference slope.
    pub numeric: f64,
    /// |analytic − numeric| / scale.
    pub relative: f64,
}

/// Checks `grads` (`(parameter name, gradient node)`) of `loss`; returns every comparison
/// that fails the tolerance (empty: all pass), or an error if the graph fails to run.
pub fn check_gradients(
    graph: &Graph,
    loss: NodeId,
    grads: &[(String, NodeId)],
    source: &dyn GraphSource,
    params: &Params,
    settings: GradCheck,
) -> Result<Vec<Discrepancy>, IrError> {
    let wanted: Vec<NodeId> = std::iter::once(loss)
        .chain(grads.iter().map(|g| g.1))
        .collect();
    let mut base = run(graph, &wanted, Some(source), params, 0, 0, true)?;
    let mut failures = Vec::new();
    let mut rng = SampleRng::seed_from_u64(settings.seed);
    for (name, g) in grads {
        let grad = base
            .take(*g)
            .and_then(|v| v.as_dense().cloned())
            .ok_or_else(|| {
                IrError::Invariant(format!("gradient of {name} is not a dense value"))
            })?;
        let theta = params
            .get(name)
            .ok_or_else(|| IrError::Invariant(format!("no parameter {name}")))?
            .clone();
        let norm = grad
            .data
            .iter()
            .map(|&x| f64::from(x).powi(2))
            .sum::<f64>()
            .sqrt();
        let mut directions = Vec::new();
        if norm > 0.0 {
            directions.push((
                "gradient".to_string(),
                grad.data
                    .iter()
                    .map(|&x| f64::from(x) / norm)
                    .collect::<Vec<_>>(),
            ));
        }
        for k in 0..settings.random_directions {
            let mut d: Vec<f64> = (0..theta.data.len())
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let dn = d.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-300);
            d.iter_mut().for_each(|x| *x /= dn);
            directions.push((format!("random {k}"), d));
        }
        for (label, d) in directions {
            let analytic: f64 = grad
                .data
                .iter()
                .zip(&d)
                .map(|(&g, &x)| f64::from(g) * x)
                .sum();
            let at = |sign: f64| -> Result<f64, IrError> {
                let mut p = params.clone();
                let data = theta
                    .data
                    .iter()
                    .zip(&d)
                    .map(|(&t, &x)| (f64::from(t) + sign * settings.eps * x) as f32)
                    .collect();
                p.insert(
                    name.clone(),
                    Tensor::from_vec(theta.rows, theta.cols, data).expect("same shape"),
                );
                let mut v = run(graph, &[loss], Some(source), &p, 0, 0, true)?;
                v.take(loss)
                    .and_then(|v| v.as_scalar())
                    .ok_or_else(|| IrError::Invariant("the loss is not a scalar".into()))
            };
            let numeric = (at(1.0)? - at(-1.0)?) / (2.0 * settings.eps);
            // Random directions see a slope of order ‖∇L‖/√size: judge them against ‖∇L‖.
            let scale = if label == "gradient" {
                analytic.abs().max(numeric.abs())
            } else {
                norm
            }
            .max(1e-6);
            let relative = (analytic - numeric).abs() / scale;
            if relative > settings.tolerance {
                failures.push(Discrepancy {
                    param: name.clone(),
                    direction: label,
                    analytic,
                    numeric,
                    relative,
                });
            }
        }
    }
    Ok(failures)
}
