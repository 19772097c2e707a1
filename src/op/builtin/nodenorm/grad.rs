//! The gradient op of the normalisations ([`NodeNormGrad`]) and the formulas of every
//! gradient of a norm ([`grads`]), one function per family (BatchNorm and GraphNorm,
//! LayerNorm, PairNorm), recomputing the statistics from x in training mode.

use crate::ir::{Bindings, Dim, Fact, Kind, Tensor, Value};
use crate::op::util::{dense, elementwise_cost};
use crate::op::{Arity, Cost, Ctx, Op, OpError};

use super::{
    affine_rows, column_stats, node_weights, param_row, row_stats, NodeNorm, NormKind, PairMode,
};

/// Which input a [`NodeNormGrad`] gives the gradient of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrt {
    /// x.
    X,
    /// GraphNorm's α.
    Alpha,
    /// γ.
    Gamma,
    /// β.
    Beta,
}

/// The gradient of one input of a [`NodeNorm`] from its inputs and ∇y (the last input),
/// in training mode (the statistics recomputed from x: nothing saved but x).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeNormGrad {
    /// The forward op.
    pub norm: NodeNorm,
    /// Which gradient.
    pub wrt: Wrt,
}

/// Every gradient of a norm (∂x, ∂α, ∂γ, ∂β; the parameter ones `[1, f]`), with
/// g = ∇y, ĝ = γ ⊙ g, x̂ the normalised x, σ = √(v + ε), p the node weights (1/n each
/// unless BatchNorm's are given), sums over the rows i per column:
///
/// * BatchNorm: ∂xᵢ = (ĝᵢ − pᵢ (Σ ĝ + x̂ᵢ Σ ĝ ⊙ x̂)) / σ (μ = Σ pᵢ xᵢ and v = Σ pᵢ (xᵢ − μ)²:
///   ∂v/∂xᵢ = 2pᵢ(xᵢ − μ), the Σ pₖ(xₖ − μ) term being 0);
/// * LayerNorm: the same along each row with p = 1/f;
/// * GraphNorm: ∂cᵢ = (ĝᵢ − x̂ᵢ mean(ĝ ⊙ x̂)) / σ for c = x − α ⊙ μ, then
///   ∂xᵢ = ∂cᵢ − α mean(∂c), ∂α = −μ ⊙ Σ ∂c;
/// * PairNorm PN: ∂c = (s/D) g − s (Σ g ⊙ c) c / (n D³), D = √(ε + mean ‖cᵢ‖²); PN-SI:
///   ∂cᵢ = (s/Dᵢ)(gᵢ − cᵢ ⟨gᵢ, cᵢ⟩ / Dᵢ²); both then ∂x = ∂c − mean(∂c) (the centring is a
///   symmetric projection); PN-SCS: ∂xᵢ = (s/Dᵢ)(gᵢ − xᵢ⟨gᵢ, xᵢ⟩/Dᵢ²) − mean(g);
/// * ∂γ = Σ g ⊙ x̂, ∂β = Σ g.
// Index loops read as the formulas above (i a row, j a column).
#[allow(clippy::needless_range_loop)]
pub fn grads(
    norm: &NodeNorm,
    inputs: &[&Value],
    dy: &Tensor,
    ctx: &Ctx<'_>,
) -> Result<[Tensor; 4], OpError> {
    let op = norm.plan_name();
    let x = dense(inputs, 0, op)?;
    let (n, f) = (x.rows, x.cols);
    let (gamma, _) = affine_rows(norm, inputs, f)?;
    let mut dx = vec![0.0f64; n * f];
    let mut dgamma = vec![0.0f64; f];
    let mut dbeta = vec![0.0f64; f];
    let mut dalpha = vec![0.0f64; f];
    let gv = |i: usize, j: usize| f64::from(dy.data[i * f + j]);
    for i in 0..n {
        for j in 0..f {
            dbeta[j] += gv(i, j);
        }
    }
    match &norm.kind {
        NormKind::Batch { .. } | NormKind::Graph if f > 0 => {
            let mut acc = Acc {
                dx: &mut dx,
                dgamma: &mut dgamma,
                dalpha: &mut dalpha,
            };
            batch_graph_grads(norm, inputs, x, dy, &gamma, ctx, &mut acc)?
        }
        NormKind::Layer if f > 0 => layer_grads(norm, x, dy, &gamma, &mut dx, &mut dgamma),
        NormKind::Pair { mode, scale } if f > 0 && n > 0 => {
            pair_grads(norm.eps, *mode, *scale, x, dy, &dbeta, &mut dx)
        }
        _ => {}
    }
    let t = |rows: usize, v: Vec<f64>| {
        Tensor::from_vec(rows, f, v.into_iter().map(|x| x as f32).collect()).expect("shape")
    };
    Ok([t(n, dx), t(1, dalpha), t(1, dgamma), t(1, dbeta)])
}

impl Op for NodeNormGrad {
    fn name(&self) -> &str {
        match self.norm.kind {
            NormKind::Batch { .. } => "batchnorm_backward",
            NormKind::Layer => "layernorm_backward",
            NormKind::Pair { .. } => "pairnorm_backward",
            NormKind::Graph => "graphnorm_backward",
        }
    }
    fn attrs(&self) -> String {
        format!("wrt={:?}, {}", self.wrt, self.norm.attrs())
    }
    fn args(&self) -> Arity {
        let mut k = self.norm.arity();
        k.push(Kind::Dense);
        Arity::Exact(k)
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let x = self.norm.check(self.name(), inputs)?;
        let dy = inputs[inputs.len() - 1];
        if *dy != x {
            return Err(OpError::args(format!(
                "{}: ∇y, expected {x} like x, got {dy}",
                self.name()
            )));
        }
        let (_, f) = x.matrix().expect("checked");
        Ok(match self.wrt {
            Wrt::X => x,
            _ => Fact::dense(Dim::known(1), f),
        })
    }
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        elementwise_cost(inputs, &inputs[0].clone(), b, 16.0).plus(Cost::streaming(&[], output, b))
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let (fwd, dy) = inputs.split_at(inputs.len() - 1);
        let dy = dense(dy, 0, self.name())?;
        let [dx, da, dg, db] = grads(&self.norm, fwd, dy, ctx)?;
        Ok(Value::dense(match self.wrt {
            Wrt::X => dx,
            Wrt::Alpha => da,
            Wrt::Gamma => dg,
            Wrt::Beta => db,
        }))
    }
}

/// The gradients' accumulators a BatchNorm or GraphNorm fills (∂x, ∂γ, ∂α).
struct Acc<'a> {
    dx: &'a mut [f64],
    dgamma: &'a mut [f64],
    dalpha: &'a mut [f64],
}

/// [`grads`] of a BatchNorm or GraphNorm (f > 0): ∂x, ∂γ and GraphNorm's ∂α into `acc`.
#[allow(clippy::needless_range_loop)]
fn batch_graph_grads(
    norm: &NodeNorm,
    inputs: &[&Value],
    x: &Tensor,
    dy: &Tensor,
    gamma: &[f64],
    ctx: &Ctx<'_>,
    acc: &mut Acc<'_>,
) -> Result<(), OpError> {
    let op = norm.plan_name();
    let (n, f) = (x.rows, x.cols);
    let xv = |i: usize, j: usize| f64::from(x.data[i * f + j]);
    let gv = |i: usize, j: usize| f64::from(dy.data[i * f + j]);
    let graph = matches!(norm.kind, NormKind::Graph);
    let (p, alpha) = match &norm.kind {
        NormKind::Batch { weighted, .. } => (
            node_weights(*weighted, inputs[inputs.len() - 1], n, ctx)?,
            vec![1.0; f],
        ),
        _ => (None, param_row(inputs, 0, f, 1.0, op)?),
    };
    let uniform = 1.0 / n.max(1) as f64;
    let pw = |i: usize| p.as_ref().map_or(uniform, |p| p[i]);
    let (mean, _) = column_stats(&x.data, n, f, p.as_deref());
    let shift: Vec<f64> = mean.iter().zip(&alpha).map(|(m, a)| m * a).collect();
    let mut var = vec![0.0f64; f];
    for i in 0..n {
        for j in 0..f {
            var[j] += pw(i) * (xv(i, j) - shift[j]).powi(2);
        }
    }
    let sigma: Vec<f64> = var.iter().map(|v| (v + norm.eps).sqrt()).collect();
    let xhat = |i: usize, j: usize| (xv(i, j) - shift[j]) / sigma[j];
    let (mut s1, mut s2) = (vec![0.0f64; f], vec![0.0f64; f]);
    for i in 0..n {
        for j in 0..f {
            let gh = gv(i, j) * gamma[j];
            s1[j] += gh;
            s2[j] += gh * xhat(i, j);
            acc.dgamma[j] += gv(i, j) * xhat(i, j);
        }
    }
    // BatchNorm: ∂x at once (μ inside x̂); GraphNorm: ∂c (c's own mean is not
    // subtracted: no Σ ĝ term), then the shift α ⊙ μ's share.
    let s1_share = if graph { 0.0 } else { 1.0 };
    for i in 0..n {
        for j in 0..f {
            let gh = gv(i, j) * gamma[j];
            acc.dx[i * f + j] = (gh - pw(i) * (s1_share * s1[j] + xhat(i, j) * s2[j])) / sigma[j];
        }
    }
    if graph {
        let mut sum_dc = vec![0.0f64; f];
        for i in 0..n {
            for j in 0..f {
                sum_dc[j] += acc.dx[i * f + j];
            }
        }
        for i in 0..n {
            for j in 0..f {
                acc.dx[i * f + j] -= alpha[j] * sum_dc[j] * uniform;
            }
        }
        for j in 0..f {
            acc.dalpha[j] = -mean[j] * sum_dc[j];
        }
    }
    Ok(())
}

/// [`grads`] of a LayerNorm (f > 0): ∂x and ∂γ, row by row.
#[allow(clippy::needless_range_loop)]
fn layer_grads(
    norm: &NodeNorm,
    x: &Tensor,
    dy: &Tensor,
    gamma: &[f64],
    dx: &mut [f64],
    dgamma: &mut [f64],
) {
    let (n, f) = (x.rows, x.cols);
    let gv = |i: usize, j: usize| f64::from(dy.data[i * f + j]);
    for i in 0..n {
        let row = &x.data[i * f..(i + 1) * f];
        let (mean, var) = row_stats(row);
        let sigma = (var + norm.eps).sqrt();
        let xhat = |j: usize| (f64::from(row[j]) - mean) / sigma;
        let (mut s1, mut s2) = (0.0f64, 0.0f64);
        for j in 0..f {
            let gh = gv(i, j) * gamma[j];
            s1 += gh;
            s2 += gh * xhat(j);
            dgamma[j] += gv(i, j) * xhat(j);
        }
        let p = 1.0 / f as f64;
        for j in 0..f {
            let gh = gv(i, j) * gamma[j];
            dx[i * f + j] = (gh - p * (s1 + xhat(j) * s2)) / sigma;
        }
    }
}

/// [`grads`] of a PairNorm (f, n > 0): ∂x, from `dbeta` (Σ g per column) for PN-SCS.
#[allow(clippy::needless_range_loop)]
fn pair_grads(
    eps: f64,
    mode: PairMode,
    s: f64,
    x: &Tensor,
    dy: &Tensor,
    dbeta: &[f64],
    dx: &mut [f64],
) {
    let (n, f) = (x.rows, x.cols);
    let xv = |i: usize, j: usize| f64::from(x.data[i * f + j]);
    let gv = |i: usize, j: usize| f64::from(dy.data[i * f + j]);
    let (mean, _) = column_stats(&x.data, n, f, None);
    let centred = mode != PairMode::Scs;
    let c = |i: usize, j: usize| xv(i, j) - if centred { mean[j] } else { 0.0 };
    match mode {
        PairMode::Pn => {
            let mut total = 0.0f64;
            let mut gc = 0.0f64;
            for i in 0..n {
                for j in 0..f {
                    total += c(i, j).powi(2);
                    gc += gv(i, j) * c(i, j);
                }
            }
            let d = (eps + total / n as f64).sqrt();
            for i in 0..n {
                for j in 0..f {
                    dx[i * f + j] = s / d * gv(i, j) - s * gc * c(i, j) / (n as f64 * d * d * d);
                }
            }
        }
        PairMode::Si | PairMode::Scs => {
            for i in 0..n {
                let sq: f64 = (0..f).map(|j| c(i, j).powi(2)).sum();
                let gc: f64 = (0..f).map(|j| gv(i, j) * c(i, j)).sum();
                let d2 = eps + sq;
                let d = d2.sqrt();
                for j in 0..f {
                    dx[i * f + j] = s / d * (gv(i, j) - c(i, j) * gc / d2);
                }
            }
        }
    }
    // PN, PN-SI: through the centring (subtract ∂c's column means); PN-SCS: the
    // subtracted mean of x passes −mean(g) to every row.
    let sub: Vec<f64> = if centred {
        let mut m = vec![0.0f64; f];
        for i in 0..n {
            for j in 0..f {
                m[j] += dx[i * f + j];
            }
        }
        m.iter().map(|v| v / n as f64).collect()
    } else {
        dbeta.iter().map(|v| v / n as f64).collect()
    };
    for i in 0..n {
        for j in 0..f {
            dx[i * f + j] -= sub[j];
        }
    }
}
