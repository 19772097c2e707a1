//! Normalisation layers over nodes and over features (issue 58 item 1): `batchnorm`,
//! `layernorm`, `pairnorm` and `graphnorm`, one op type ([`NodeNorm`]) with one gradient op
//! ([`NodeNormGrad`]) and the batch statistics a training step hands to the running
//! statistics ([`BatchNormStats`]).
//!
//! For x of n rows (the step's nodes) and f columns, with σ = √(v + ε):
//!
//! | plan name | statistics | y |
//! |---|---|---|
//! | `batchnorm(x[, γ, β])` | training: per column, μ = Σ pᵢ xᵢ, v = Σ pᵢ (xᵢ − μ)², p the step's node weights normalised to sum 1 (below); evaluation: the running mean and variance, or (`running=false`) the evaluated rows' own, uniform | γ ⊙ (x − μ)/σ + β |
//! | `layernorm(x[, γ, β])` | per row, over its f features (uniform) | γ ⊙ (x − μ)/σ + β |
//! | `pairnorm(x, mode="PN")` | c = x − μ (μ the column means over the nodes) | PN: s·c / √(ε + mean_i ‖cᵢ‖²); PN-SI: s·cᵢ / √(ε + ‖cᵢ‖²); PN-SCS: s·xᵢ / √(ε + ‖xᵢ‖²) − μ |
//! | `graphnorm(x, α, γ, β)` | per column, μ the mean over the nodes, v = mean_i (xᵢ − α ⊙ μ)² | γ ⊙ (x − α ⊙ μ)/σ + β |
//!
//! The statistics are accumulated in f64 in row order (the same bits for any thread count).
//!
//! **BatchNorm under GraphSAINT sampling.** A sampled subgraph's nodes are not uniform
//! draws: frontier and random-walk samplers draw well-connected nodes more often, node v
//! in proportion to C_v, its count in the pre-sampled subgraphs (JPDC §3.2). The running
//! statistics, used at evaluation over every node of the full graph, must estimate the
//! graph's per-feature mean and variance, not the sampler's: so with `weighted=true` (the
//! default) the step's statistics weigh node v by 1/C_v (the sampler's node normalisation,
//! the same C_v as the loss weights 1/λ_v, but over every node of the subgraph, labelled
//! or not — BatchNorm normalises every node's activation), self-normalised: p_v =
//! (1/C_v) / Σ_u (1/C_u), the ratio (Hájek) estimator of the graph's mean, which stays
//! a convex combination (a mean within the values' range, a variance ≥ 0) where the plain
//! Horvitz–Thompson sum would not. Without counts (the `full` sampler, whose every step is
//! the graph) every p_v is 1/n: PyTorch's BatchNorm exactly. `weighted=false` gives the
//! plain per-subgraph statistics (PyG's `BatchNorm` on GraphSAINT batches). The running
//! variance is the weighted variance times n_eff/(n_eff − 1), n_eff = (Σw)²/Σw² (Kish's
//! effective sample size; n/(n − 1), PyTorch's Bessel factor, when the weights are equal).
//! The gradient differentiates through the weighted statistics with the weights fixed.
//!
//! Backward formulas (g = ∇y, ĝ = g ⊙ γ, x̂ = (x − μ)/σ) sit above `grads`, in `grad.rs`
//! with the gradient op.
//!
//! Blocked (out-of-core) evaluation: `layernorm` is row-wise (row-local, partitioned,
//! fusible); `batchnorm` in evaluation reads its running statistics, so it is row-local
//! too; `pairnorm` and `graphnorm` reduce over every node: they fold one-pass statistics
//! (column sums, Σ‖xᵢ‖² or Σ xᵢ²) in row order through [`NodeStats`], which blocked
//! inference folds over their kept input block by block before computing their rows (see
//! `infer::levels`), the same sums as the in-memory forward's.
//!
//! How a plan's call becomes the op ([`PlanCall`]): `batchnorm` and `layernorm` take x, or
//! x, γ, β; a `batchnorm` keeps running state, so lowering names it, appends the subgraph
//! and adds its [`BatchNormStats`] node.

use std::sync::Arc;

use crate::ir::{Bindings, Dim, Fact, Kind, NodeId, Params, Tensor, Value};
use crate::op::util::{dense, elementwise_cost, row_split};
use crate::op::{
    Arity, Cost, Ctx, GradBuilder, MatMut, MatRef, NodeStats, Op, OpError, Partitioned,
    PartitionedDyn, PlanCall, RowBlocks, RowBlocksDyn, RowLocal, Split,
};

mod grad;

pub use grad::{NodeNormGrad, Wrt};

/// PyTorch's BatchNorm/LayerNorm ε, PyG's PairNorm and GraphNorm ε.
pub const NORM_EPS: f64 = 1e-5;
/// PyTorch's BatchNorm momentum: running ← (1 − m)·running + m·batch.
pub const BN_MOMENTUM: f64 = 0.1;

/// PairNorm's variants (Zhao & Akoglu 2020, §3.2 and their code's `PN-SI`, `PN-SCS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairMode {
    /// `PN`: centre over the nodes, then one scale for all rows (the mean squared row norm).
    Pn,
    /// `PN-SI`: centre, then each row to norm s (scale individually).
    Si,
    /// `PN-SCS`: each row to norm s, then the column means of x subtracted (scale and centre
    /// simultaneously).
    Scs,
}

impl PairMode {
    /// The plan's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            PairMode::Pn => "PN",
            PairMode::Si => "PN-SI",
            PairMode::Scs => "PN-SCS",
        }
    }

    /// A mode from its plan name.
    pub fn parse(s: &str) -> Result<PairMode, OpError> {
        [PairMode::Pn, PairMode::Si, PairMode::Scs]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| OpError::Attr {
                name: "mode".into(),
                what: format!("expected \"PN\", \"PN-SI\" or \"PN-SCS\", got {s:?}"),
            })
    }
}

/// Which normalisation.
#[derive(Clone, Debug, PartialEq)]
pub enum NormKind {
    /// BatchNorm: column statistics over the step's nodes (weighted), running ones in
    /// evaluation.
    Batch {
        /// Running-statistics momentum, in (0, 1].
        momentum: f64,
        /// Weigh the step's nodes by the sampler's 1/C_v (see the module header).
        weighted: bool,
        /// The running statistics' name: parameters `NAME.running_mean`,
        /// `NAME.running_var` (set by lowering; empty until then).
        state: String,
        /// Whether it keeps running statistics for evaluation (`running=false`: PyTorch's
        /// `track_running_stats=False`, TensorFlow's batch_norm left in training mode —
        /// evaluation normalises by the statistics of the nodes evaluated, uniformly
        /// weighted, and the op has no state).
        running: bool,
    },
    /// LayerNorm: row statistics over the features.
    Layer,
    /// PairNorm with scale s.
    Pair {
        /// The variant.
        mode: PairMode,
        /// The scale s.
        scale: f64,
    },
    /// GraphNorm: column statistics over the nodes with a learnable mean shift α.
    Graph,
}

/// A normalisation op (see the module header). Inputs: `batchnorm` x, [γ, β], the
/// subgraph (lowering appends it); `layernorm` x, [γ, β]; `pairnorm` x; `graphnorm` x, α,
/// γ, β — γ, β, α each `[1, f]`.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeNorm {
    /// Which.
    pub kind: NormKind,
    /// ε added to the variance.
    pub eps: f64,
    /// Whether γ and β are inputs (`batchnorm`, `layernorm`; always for `graphnorm`).
    pub affine: bool,
}

impl NodeNorm {
    /// `batchnorm` with its attributes, affine, its state not named yet.
    pub fn batch(
        momentum: f64,
        eps: f64,
        weighted: bool,
        running: bool,
    ) -> Result<NodeNorm, OpError> {
        if !(momentum > 0.0 && momentum <= 1.0) {
            return Err(OpError::Attr {
                name: "momentum".into(),
                what: format!("expected a number in (0, 1], got {momentum}"),
            });
        }
        NodeNorm::new(
            NormKind::Batch {
                momentum,
                weighted,
                state: String::new(),
                running,
            },
            eps,
            true,
        )
    }

    /// A normalisation of `kind` with ε `eps` (> 0).
    pub fn new(kind: NormKind, eps: f64, affine: bool) -> Result<NodeNorm, OpError> {
        if !(eps > 0.0 && eps.is_finite()) {
            return Err(OpError::Attr {
                name: "eps".into(),
                what: format!("expected a number > 0, got {eps}"),
            });
        }
        if let NormKind::Pair { scale, .. } = kind {
            if !(scale > 0.0 && scale.is_finite()) {
                return Err(OpError::Attr {
                    name: "scale".into(),
                    what: format!("expected a number > 0, got {scale}"),
                });
            }
        }
        Ok(NodeNorm { kind, eps, affine })
    }

    /// The same op with γ and β as inputs or not, and (BatchNorm) its state named `state`.
    pub fn with(&self, affine: bool, state: Option<&str>) -> NodeNorm {
        let mut n = self.clone();
        n.affine = affine || matches!(n.kind, NormKind::Graph);
        if let (NormKind::Batch { state: s, .. }, Some(name)) = (&mut n.kind, state) {
            *s = name.to_string();
        }
        n
    }

    /// The [`BatchNormStats`] of this op (a BatchNorm), reading x and the subgraph.
    pub fn stats(&self) -> Option<BatchNormStats> {
        match &self.kind {
            NormKind::Batch { weighted, .. } => Some(BatchNormStats {
                weighted: *weighted,
            }),
            _ => None,
        }
    }

    /// Number of dense parameter inputs after x: γ, β (and α first for GraphNorm).
    fn n_params(&self) -> usize {
        match self.kind {
            NormKind::Graph => 3,
            NormKind::Pair { .. } => 0,
            _ if self.affine => 2,
            _ => 0,
        }
    }

    fn reads_subgraph(&self) -> bool {
        matches!(self.kind, NormKind::Batch { .. })
    }

    /// The inputs: x, the parameters, the subgraph (BatchNorm).
    fn arity(&self) -> Vec<Kind> {
        let mut k = vec![Kind::Dense; 1 + self.n_params()];
        if self.reads_subgraph() {
            k.push(Kind::Subgraph);
        }
        k
    }

    fn plan_name(&self) -> &'static str {
        match self.kind {
            NormKind::Batch { .. } => "batchnorm",
            NormKind::Layer => "layernorm",
            NormKind::Pair { .. } => "pairnorm",
            NormKind::Graph => "graphnorm",
        }
    }

    /// Checks x `[n, f]` and every parameter `[1, f]`; returns x's fact.
    fn check(&self, op: &str, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (_, f) = inputs[0]
            .matrix()
            .ok_or_else(|| OpError::args(format!("{op}: x is not a matrix")))?;
        let names: &[&str] = match self.kind {
            NormKind::Graph => &["alpha", "gamma", "beta"],
            _ => &["gamma", "beta"],
        };
        for i in 0..self.n_params() {
            let want = Fact::dense(Dim::known(1), f);
            if *inputs[1 + i] != want {
                return Err(OpError::args(format!(
                    "{op}: {}, expected {want} (one value per column of x {}), got {}",
                    names[i],
                    inputs[0],
                    inputs[1 + i]
                )));
            }
        }
        Ok(inputs[0].clone())
    }

    /// Whether this op is row-local in evaluation (LayerNorm, BatchNorm's running
    /// statistics).
    fn row_local_eval(&self) -> bool {
        matches!(
            self.kind,
            NormKind::Batch { running: true, .. } | NormKind::Layer
        )
    }
}

/// The running statistics' parameter names of BatchNorm state `name`.
pub fn running_names(name: &str) -> [String; 2] {
    [
        format!("{name}.running_mean"),
        format!("{name}.running_var"),
    ]
}

/// BatchNorm `name`'s running mean and variance in `params` (f columns), or their initial
/// values (0 and 1, PyTorch's) when `params` has none: a network fresh from
/// [`Params::init`] normalises as a fresh PyTorch BatchNorm does in evaluation.
pub fn running_stats(
    params: &Params,
    name: &str,
    f: usize,
) -> Result<(Vec<f64>, Vec<f64>), OpError> {
    let [m, v] = running_names(name);
    let get = |key: &str, init: f64| -> Result<Vec<f64>, OpError> {
        match params.get(key) {
            None => Ok(vec![init; f]),
            Some(t) if t.rows == 1 && t.cols == f => {
                Ok(t.data.iter().map(|&x| f64::from(x)).collect())
            }
            Some(t) => Err(OpError::Missing(format!(
                "batchnorm: `{key}` is {}×{}, expected 1×{f}",
                t.rows, t.cols
            ))),
        }
    };
    Ok((get(&m, 0.0)?, get(&v, 1.0)?))
}

/// One training step's update of BatchNorm `name`'s running statistics in `params` from
/// its [`BatchNormStats`] value `stats` (`[2, f]`: the step's mean, its unbiased variance):
/// running ← (1 − m)·running + m·batch, in f64 then rounded (PyTorch's rule).
pub fn update_running(
    params: &mut Params,
    name: &str,
    momentum: f64,
    stats: &Tensor,
) -> Result<(), OpError> {
    let f = stats.cols;
    if stats.rows != 2 {
        return Err(OpError::args(format!(
            "batchnorm statistics of `{name}`: expected 2 rows, got {}",
            stats.rows
        )));
    }
    let (mean, var) = running_stats(params, name, f)?;
    let [mk, vk] = running_names(name);
    let blend = |run: &[f64], batch: &[f32]| -> Vec<f32> {
        run.iter()
            .zip(batch)
            .map(|(&r, &b)| ((1.0 - momentum) * r + momentum * f64::from(b)) as f32)
            .collect()
    };
    let m = blend(&mean, &stats.data[..f]);
    let v = blend(&var, &stats.data[f..]);
    params.insert(mk, Tensor::from_vec(1, f, m).expect("1 × f"));
    params.insert(vk, Tensor::from_vec(1, f, v).expect("1 × f"));
    Ok(())
}

/// The step's node weights p (summing to 1) of a BatchNorm, from the subgraph input: the
/// source's 1/C_v when `weighted` and it has counts, else uniform. `None`: uniform.
fn node_weights(
    weighted: bool,
    sub: &Value,
    n: usize,
    ctx: &Ctx<'_>,
) -> Result<Option<Vec<f64>>, OpError> {
    if !weighted {
        return Ok(None);
    }
    let Some(src) = ctx.source else {
        return Ok(None);
    };
    let sub = sub
        .as_subgraph()
        .ok_or_else(|| OpError::args("batchnorm: the last argument is not the subgraph"))?;
    let Some(w) = src.node_weights(sub) else {
        return Ok(None);
    };
    if w.len() != n {
        return Err(OpError::Source(format!(
            "batchnorm: {} node weights for {n} rows",
            w.len()
        )));
    }
    let total: f64 = w.iter().map(|&x| f64::from(x)).sum();
    if !(total > 0.0 && total.is_finite()) {
        return Ok(None);
    }
    Ok(Some(w.iter().map(|&x| f64::from(x) / total).collect()))
}

/// Column mean and (biased) variance of x (n × f) under weights p (uniform when None).
fn column_stats(x: &[f32], n: usize, f: usize, p: Option<&[f64]>) -> (Vec<f64>, Vec<f64>) {
    let mut mean = vec![0.0f64; f];
    let mut var = vec![0.0f64; f];
    if n == 0 {
        return (mean, var);
    }
    let uniform = 1.0 / n as f64;
    let w = |i: usize| p.map_or(uniform, |p| p[i]);
    for (i, row) in x.chunks_exact(f).enumerate() {
        let wi = w(i);
        for (m, &v) in mean.iter_mut().zip(row) {
            *m += wi * f64::from(v);
        }
    }
    for (i, row) in x.chunks_exact(f).enumerate() {
        let wi = w(i);
        for ((s, &m), &v) in var.iter_mut().zip(&mean).zip(row) {
            let d = f64::from(v) - m;
            *s += wi * d * d;
        }
    }
    (mean, var)
}

/// Row i's mean and biased variance over its f values.
fn row_stats(row: &[f32]) -> (f64, f64) {
    let f = row.len().max(1) as f64;
    let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / f;
    let var = row
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / f;
    (mean, var)
}

/// Parameter row k of the inputs (after x) as f64, or `fill` when absent.
fn param_row(
    inputs: &[&Value],
    k: usize,
    f: usize,
    fill: f64,
    op: &str,
) -> Result<Vec<f64>, OpError> {
    match inputs.get(1 + k) {
        Some(v) if v.as_dense().is_some() => Ok(dense(inputs, 1 + k, op)?
            .data
            .iter()
            .map(|&x| f64::from(x))
            .collect()),
        _ => Ok(vec![fill; f]),
    }
}

/// The per-column affine parameters (γ, β) of a norm, ones and zeros when not affine.
fn affine_rows(
    norm: &NodeNorm,
    inputs: &[&Value],
    f: usize,
) -> Result<(Vec<f64>, Vec<f64>), OpError> {
    let op = norm.plan_name();
    let off = usize::from(matches!(norm.kind, NormKind::Graph));
    if norm.n_params() == 0 {
        return Ok((vec![1.0; f], vec![0.0; f]));
    }
    Ok((
        param_row(inputs, off, f, 1.0, op)?,
        param_row(inputs, off + 1, f, 0.0, op)?,
    ))
}

/// Rows of a LayerNorm (γ, β per column) into `y` (both row-major, f columns).
fn layer_rows(x: &[f32], f: usize, eps: f64, gamma: &[f64], beta: &[f64], y: &mut [f32]) {
    if f == 0 {
        return;
    }
    for (row, out) in x.chunks_exact(f).zip(y.chunks_exact_mut(f)) {
        let (mean, var) = row_stats(row);
        let inv = 1.0 / (var + eps).sqrt();
        for (j, (o, &v)) in out.iter_mut().zip(row).enumerate() {
            *o = (gamma[j] * (f64::from(v) - mean) * inv + beta[j]) as f32;
        }
    }
}

/// The forward of a norm on the whole of x (what `forward` computes).
fn forward_whole(norm: &NodeNorm, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Tensor, OpError> {
    let op = norm.plan_name();
    let x = dense(inputs, 0, op)?;
    let (n, f) = (x.rows, x.cols);
    let mut y = Tensor::zeros(n, f);
    if f == 0 {
        return Ok(y);
    }
    let (gamma, beta) = affine_rows(norm, inputs, f)?;
    match &norm.kind {
        NormKind::Layer => layer_rows(&x.data, f, norm.eps, &gamma, &beta, &mut y.data),
        NormKind::Batch {
            weighted,
            state,
            running,
            ..
        } => {
            let (mean, var) = if ctx.training {
                let p = node_weights(*weighted, inputs[inputs.len() - 1], n, ctx)?;
                column_stats(&x.data, n, f, p.as_deref())
            } else if *running {
                running_stats(ctx.params, state, f)?
            } else {
                let mut acc = norm.start(f);
                norm.fold(&mut acc, &x.data, f);
                return stats_rows(norm, &acc, n, inputs);
            };
            batch_rows(
                &x.data,
                f,
                norm.eps,
                (&mean, &var),
                (&gamma, &beta),
                &mut y.data,
            );
        }
        NormKind::Graph | NormKind::Pair { .. } => {
            let mut acc = norm.start(f);
            norm.fold(&mut acc, &x.data, f);
            return stats_rows(norm, &acc, n, inputs);
        }
    }
    Ok(y)
}

/// The rows of a PairNorm or GraphNorm from its statistics over all `n` rows of x (see
/// [`NodeStats`]): `inputs` are x's rows and the parameters.
fn stats_rows(
    norm: &NodeNorm,
    acc: &[f64],
    n: usize,
    inputs: &[&Value],
) -> Result<Tensor, OpError> {
    let op = norm.plan_name();
    let x = dense(inputs, 0, op)?;
    let (rows, f) = (x.rows, x.cols);
    let mut y = Tensor::zeros(rows, f);
    if f == 0 {
        return Ok(y);
    }
    let inv_n = 1.0 / n.max(1) as f64;
    let mean: Vec<f64> = acc[..f].iter().map(|s| s * inv_n).collect();
    match norm.kind {
        // BatchNorm in evaluation without running statistics is GraphNorm with α = 1: the
        // evaluated nodes' mean and biased variance E[x²] − μ².
        NormKind::Graph | NormKind::Batch { .. } => {
            let (gamma, beta) = affine_rows(norm, inputs, f)?;
            let alpha = match norm.kind {
                NormKind::Graph => param_row(inputs, 0, f, 1.0, op)?,
                _ => vec![1.0; f],
            };
            // mean_i (x_i − αμ)² = E[x²] − (2α − α²) μ².
            let shift: Vec<f64> = mean.iter().zip(&alpha).map(|(m, a)| m * a).collect();
            let var: Vec<f64> = (0..f)
                .map(|j| {
                    (acc[f + j] * inv_n
                        - (2.0 * alpha[j] - alpha[j] * alpha[j]) * mean[j] * mean[j])
                        .max(0.0)
                })
                .collect();
            batch_rows(
                &x.data,
                f,
                norm.eps,
                (&shift, &var),
                (&gamma, &beta),
                &mut y.data,
            );
        }
        NormKind::Pair { mode, scale } => match mode {
            PairMode::Pn => {
                // mean_i ‖x_i − μ‖² = mean_i ‖x_i‖² − ‖μ‖².
                let sq_mean: f64 = mean.iter().map(|m| m * m).sum();
                let d = (norm.eps + (acc[f] * inv_n - sq_mean).max(0.0)).sqrt();
                for (row, out) in x.data.chunks_exact(f).zip(y.data.chunks_exact_mut(f)) {
                    for ((o, &v), m) in out.iter_mut().zip(row).zip(&mean) {
                        *o = (scale * (f64::from(v) - m) / d) as f32;
                    }
                }
            }
            PairMode::Si | PairMode::Scs => {
                let centre_first = mode == PairMode::Si;
                for (row, out) in x.data.chunks_exact(f).zip(y.data.chunks_exact_mut(f)) {
                    let c = |j: usize| f64::from(row[j]) - if centre_first { mean[j] } else { 0.0 };
                    let sq: f64 = (0..f).map(|j| c(j).powi(2)).sum();
                    let d = (norm.eps + sq).sqrt();
                    for (j, o) in out.iter_mut().enumerate() {
                        let after = if centre_first { 0.0 } else { mean[j] };
                        *o = (scale * c(j) / d - after) as f32;
                    }
                }
            }
        },
        _ => return Err(OpError::args(format!("{op}: no node statistics"))),
    }
    Ok(y)
}

impl NodeStats for NodeNorm {
    /// Σ_i x_i per column; PN also Σ_i ‖x_i‖²; GraphNorm also Σ_i x_i² per column.
    fn start(&self, cols: usize) -> Vec<f64> {
        match self.kind {
            NormKind::Pair {
                mode: PairMode::Pn, ..
            } => vec![0.0; cols + 1],
            NormKind::Graph | NormKind::Batch { .. } => vec![0.0; 2 * cols],
            _ => vec![0.0; cols],
        }
    }
    fn fold(&self, acc: &mut [f64], x: &[f32], cols: usize) {
        if cols == 0 {
            return;
        }
        for row in x.chunks_exact(cols) {
            for (s, &v) in acc[..cols].iter_mut().zip(row) {
                *s += f64::from(v);
            }
            match self.kind {
                NormKind::Pair {
                    mode: PairMode::Pn, ..
                } => acc[cols] += row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>(),
                NormKind::Graph | NormKind::Batch { .. } => {
                    for (s, &v) in acc[cols..].iter_mut().zip(row) {
                        *s += f64::from(v).powi(2);
                    }
                }
                _ => {}
            }
        }
    }
    fn rows(
        &self,
        acc: &[f64],
        n: usize,
        inputs: &[&Value],
        _: &Ctx<'_>,
    ) -> Result<Value, OpError> {
        Ok(Value::dense(stats_rows(self, acc, n, inputs)?))
    }
}

/// y = γ (x − μ)/√(v + ε) + β per column.
#[allow(clippy::needless_range_loop)]
fn batch_rows(
    x: &[f32],
    f: usize,
    eps: f64,
    (mean, var): (&[f64], &[f64]),
    (gamma, beta): (&[f64], &[f64]),
    y: &mut [f32],
) {
    let inv: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
    for (row, out) in x.chunks_exact(f).zip(y.chunks_exact_mut(f)) {
        for j in 0..f {
            out[j] = (gamma[j] * (f64::from(row[j]) - mean[j]) * inv[j] + beta[j]) as f32;
        }
    }
}

impl Op for NodeNorm {
    fn name(&self) -> &str {
        self.plan_name()
    }
    fn attrs(&self) -> String {
        match &self.kind {
            NormKind::Batch {
                momentum,
                weighted,
                state,
                running: true,
            } => format!(
                "momentum={momentum}, eps={}, weighted={weighted}, state={state:?}",
                self.eps
            ),
            NormKind::Batch {
                weighted,
                running: false,
                ..
            } => format!("eps={}, weighted={weighted}, running=false", self.eps),
            NormKind::Layer | NormKind::Graph => format!("eps={}", self.eps),
            NormKind::Pair { mode, scale } => {
                format!("mode={:?}, scale={scale}, eps={}", mode.name(), self.eps)
            }
        }
    }
    fn args(&self) -> Arity {
        Arity::Exact(self.arity())
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        self.check(self.plan_name(), inputs)
    }
    /// Two passes for the statistics, one to normalise, a few operations per element.
    fn cost(&self, inputs: &[&Fact], output: &Fact, b: &Bindings) -> Cost {
        elementwise_cost(inputs, output, b, 8.0)
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        Ok(Value::dense(forward_whole(self, inputs, ctx)?))
    }
    /// One [`NodeNormGrad`] per input asked for (the subgraph has none).
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let mut ins: Vec<NodeId> = (0..g.arity()).map(|i| g.input(i)).collect();
        ins.push(grad);
        let mut out = Vec::with_capacity(g.arity());
        for i in 0..g.arity() {
            let wrt = match (i, &self.kind) {
                (0, _) => Some(Wrt::X),
                (_, NormKind::Batch { .. }) if i == g.arity() - 1 => None,
                (1, NormKind::Graph) => Some(Wrt::Alpha),
                (k, NormKind::Graph) => Some(if k == 2 { Wrt::Gamma } else { Wrt::Beta }),
                (1, _) => Some(Wrt::Gamma),
                _ => Some(Wrt::Beta),
            };
            out.push(match wrt {
                Some(wrt) if g.needs_grad(i) => Some(g.add(
                    NodeNormGrad {
                        norm: self.clone(),
                        wrt,
                    },
                    &ins,
                )?),
                _ => None,
            });
        }
        Ok(out)
    }
    fn as_partitioned(&self) -> Option<&dyn PartitionedDyn> {
        matches!(self.kind, NormKind::Layer).then_some(self as &dyn PartitionedDyn)
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        self.row_local_eval().then_some(self as &dyn RowLocal)
    }
    fn as_row_blocks(&self) -> Option<&dyn RowBlocksDyn> {
        matches!(self.kind, NormKind::Layer).then_some(self as &dyn RowBlocksDyn)
    }
    fn as_node_stats(&self) -> Option<&dyn NodeStats> {
        matches!(
            self.kind,
            NormKind::Pair { .. } | NormKind::Graph | NormKind::Batch { running: false, .. }
        )
        .then_some(self as &dyn NodeStats)
    }
    fn as_plan_call(&self) -> Option<&dyn PlanCall> {
        matches!(self.kind, NormKind::Batch { .. } | NormKind::Layer)
            .then_some(self as &dyn PlanCall)
    }
}

impl PlanCall for NodeNorm {
    /// `batchnorm` and `layernorm` take x, or x, γ, β.
    fn for_call(&self, written: usize, state: &str) -> Result<Arc<dyn Op>, String> {
        if written != 1 && written != 3 {
            return Err(format!(
                "`{}` takes x, or x, gamma, beta (two [1, f] parameters, gamma with `init = \"ones\"`), got {written} argument{}",
                self.plan_name(),
                if written == 1 { "" } else { "s" }
            ));
        }
        Ok(Arc::new(self.with(written == 3, Some(state))))
    }
    fn running(&self) -> Option<crate::op::Running> {
        match self.kind {
            NormKind::Batch {
                momentum,
                running: true,
                ..
            } => Some(crate::op::Running {
                momentum,
                stats: Arc::new(self.stats().expect("a batchnorm")),
            }),
            _ => None,
        }
    }
}

impl RowLocal for NodeNorm {}

impl Partitioned for NodeNorm {
    type Prepared = ();
    /// LayerNorm only: row blocks, each row computed alone.
    fn split(
        &self,
        inputs: &[&Value],
        _: &Fact,
        _: &Ctx<'_>,
        threads: usize,
    ) -> Result<Option<Split>, OpError> {
        let x = dense(inputs, 0, self.plan_name())?;
        Ok(row_split(x.rows, x.cols, threads))
    }
    fn forward_part(
        &self,
        inputs: &[&Value],
        ctx: &Ctx<'_>,
        split: &Split,
        part: usize,
        out: MatMut<'_>,
    ) -> Result<(), OpError> {
        let x = dense(inputs, 0, self.plan_name())?;
        let r = split.ranges[part].clone();
        let f = x.cols;
        let xs = MatRef::row_major(&x.data[r.start * f..r.end * f], r.len(), f)?;
        let mut views = vec![xs];
        for k in 1..inputs.len() {
            let t = dense(inputs, k, self.plan_name())?;
            views.push(MatRef::row_major(&t.data, t.rows, t.cols)?);
        }
        self.rows_at(r.start, &views, out, ctx)
    }
}

impl RowBlocks for NodeNorm {
    type Prepared = ();
    /// LayerNorm's rows: x's block, γ and β whole.
    fn rows_at(
        &self,
        _: usize,
        x: &[MatRef<'_>],
        mut y: MatMut<'_>,
        _: &Ctx<'_>,
    ) -> Result<(), OpError> {
        let f = x[0].n_cols();
        let row = |m: &MatRef<'_>| -> Result<Vec<f64>, OpError> {
            Ok(crate::op::util::block(m, "layernorm")?
                .iter()
                .map(|&v| f64::from(v))
                .collect())
        };
        let (gamma, beta) = if x.len() == 3 {
            (row(&x[1])?, row(&x[2])?)
        } else {
            (vec![1.0; f], vec![0.0; f])
        };
        let xs = crate::op::util::block(&x[0], "layernorm")?;
        let ys = crate::op::util::block_mut(&mut y, "layernorm")?;
        layer_rows(xs, f, self.eps, &gamma, &beta, ys);
        Ok(())
    }
}

/// A BatchNorm's statistics of one training step, `[2, f]`: its (weighted) mean and its
/// unbiased variance (the weighted variance × n_eff / (n_eff − 1), see the module
/// header), which the trainer folds into the running statistics after the step
/// ([`update_running`]). Inputs: x and the subgraph.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNormStats {
    /// Weigh the nodes by the sampler's 1/C_v.
    pub weighted: bool,
}

impl Op for BatchNormStats {
    fn name(&self) -> &str {
        "batchnorm_stats"
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Subgraph])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (_, f) = inputs[0]
            .matrix()
            .ok_or_else(|| OpError::args("batchnorm_stats: x is not a matrix"))?;
        Ok(Fact::dense(Dim::known(2), f))
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, self.name())?;
        let (n, f) = (x.rows, x.cols);
        let p = node_weights(self.weighted, inputs[1], n, ctx)?;
        let (mean, var) = column_stats(&x.data, n, f, p.as_deref());
        let sq: f64 = match &p {
            Some(p) => p.iter().map(|w| w * w).sum(),
            None => 1.0 / n.max(1) as f64,
        };
        let n_eff = 1.0 / sq;
        let bessel = if n_eff > 1.0 {
            n_eff / (n_eff - 1.0)
        } else {
            1.0
        };
        let data = mean
            .iter()
            .map(|&m| m as f32)
            .chain(var.iter().map(|&v| (v * bessel) as f32))
            .collect();
        Ok(Value::dense(Tensor::from_vec(2, f, data).expect("2 × f")))
    }
    fn pure(&self) -> bool {
        true
    }
}

/// A boxed op (for the registry).
pub(super) fn boxed(n: NodeNorm) -> Arc<dyn Op> {
    Arc::new(n)
}
