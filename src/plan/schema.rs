//! The typed plan: what [`Plan::parse`](super::Plan::parse) checks a plan file into
//! (dims, layers with their parameters and `out` programs, sampler, loss, optimizer, phases,
//! eval). Reading it is `spanned.rs`'s job, checking it `typing/`'s and `sampler.rs`'s.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use saintflow_ops::gemm::Precision;
use saintflow_ops::optim::{Adam, Sgd};

use crate::ir::Init;
use crate::op::builtin::{LinkLossKind, LossKind};
use crate::sample::LinkSampling;
pub use crate::sample::SamplerConfig;

use super::expr::Statement;
use super::outpos::OutMap;
use super::Source;

/// A dimension in a parameter shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimRef {
    /// `"in"`: the width of the layer's input `x` in this repetition.
    In,
    /// `"features"`: the graph's feature width F.
    Features,
    /// `"classes"`: the graph's class count C.
    Classes,
    /// `"relations"`: the store's relation count R (1 for a homogeneous graph; issue 57:
    /// R-GCN's basis coefficients `[relations, B]`).
    Relations,
    /// A number (written, or a `[dims]` name resolved when the plan is parsed).
    Known(usize),
    /// Arithmetic over the above (`"3 * hidden"`, `"in + classes"`): `+`, `-`, `*`, `/`
    /// (exact) and parentheses, evaluated when the layer copy is lowered (`in` is known
    /// then).
    Formula(Box<DimFormula>),
}

/// `[input]` (issue 57, plans/README.md "Typed graphs"): h0, the first layer's `x`, made
/// over the rows of every node type: a type with features F_t > 0 contributes
/// `x_t @ input.W.<type>` (`[F_t, dim]`, Glorot), a type without a learned table
/// `input.E.<type>` (`[count(t), dim]`, Glorot, updated sparsely: only rows with a
/// gradient).
#[derive(Clone, Debug, PartialEq)]
pub struct InputSpec {
    /// The width of h0.
    pub dim: usize,
    /// L2 weight decay of the projections and tables (else the optimizer's).
    pub weight_decay: Option<f32>,
    /// Where `[input]` is.
    pub at: usize,
}

/// A shape formula's tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimFormula {
    /// A leaf: `in`, `features`, `classes` or a number.
    Leaf(DimRef),
    /// `a op b`, op one of `+ - * /`.
    Op(char, Box<DimFormula>, Box<DimFormula>),
}

impl DimFormula {
    /// The value with `in`, `features` and `classes` as `leaf` gives them; None when a
    /// step is not a whole number ≥ 1 (a difference below 1, an inexact quotient).
    pub fn eval(&self, leaf: &dyn Fn(&DimRef) -> usize) -> Option<usize> {
        match self {
            DimFormula::Leaf(d) => Some(leaf(d)),
            DimFormula::Op(op, a, b) => {
                let (a, b) = (a.eval(leaf)?, b.eval(leaf)?);
                let v = match op {
                    '+' => a.checked_add(b)?,
                    '-' => a.checked_sub(b)?,
                    '*' => a.checked_mul(b)?,
                    _ => (b != 0 && a % b == 0).then(|| a / b)?,
                };
                (v >= 1).then_some(v)
            }
        }
    }
}

/// A parameter's initialiser as written: fixed, or Glorot over fans that may name dims
/// (`glorot(in, hidden / heads)`), resolved with the shape when the layer copy is lowered.
#[derive(Clone, Debug, PartialEq)]
pub enum InitSpec {
    /// Known when the plan is parsed.
    Fixed(Init),
    /// `glorot(FAN_IN, FAN_OUT)` with each fan a whole number, a dim or arithmetic over them.
    GlorotFans(DimRef, DimRef),
}

/// One parameter of a layer.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    /// Its name in the layer (`W_self`; a repeated layer's copies become `W_self.0`, …).
    pub name: String,
    /// `[rows, cols]`.
    pub shape: [DimRef; 2],
    /// Its initialiser; `None`: glorot, or zeros for a `[1, k]` row (a bias).
    pub init: Option<InitSpec>,
    /// Its own L2 weight decay (`weight_decay` in its table), else its layer's.
    pub weight_decay: Option<f32>,
    pub(crate) span: Range<usize>,
    /// The `[dims]` names its rows and columns were written with, if any (what the memory
    /// check names).
    pub(crate) dim_names: [Option<String>; 2],
}

/// A `[[layer]]`, or the `[output]` (whose `repeat` is 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// `name`: later layers and the `[output]` read this layer's output (its last copy's)
    /// by it.
    pub name: Option<String>,
    /// Copies of the layer, in sequence.
    pub repeat: usize,
    /// `share = true`: every copy uses the same parameters (declared once, no `.k` suffix).
    pub share: bool,
    /// Dropout rate applied to the layer's input first.
    pub dropout: Option<f32>,
    /// L2 weight decay of its parameters (else the optimizer's).
    pub weight_decay: Option<f32>,
    /// Group lasso on the columns of its weight matrices (`lasso = λ`: λ · Σ_c ‖W[:, c]‖
    /// added to the loss of every parameter with more than one row; MixHop's regulariser).
    pub lasso: Option<f32>,
    /// Its parameters, by name.
    pub params: Vec<ParamSpec>,
    /// The expression program.
    pub out: String,
    pub(crate) out_map: OutMap,
    /// `out`, parsed (never empty; the last statement is an expression).
    pub(crate) program: Vec<Statement>,
    pub(crate) dropout_span: usize,
}

/// Which graph a sampler draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleGraph {
    /// The training graph (inductive; GraphSAINT's default).
    Train,
    /// The full graph (transductive, e.g. Planetoid splits).
    Full,
}

/// The `[sampler]` table, typed.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerPlan {
    /// Which sampler, with its parameters.
    pub kind: SamplerConfig,
    /// The graph sampled from.
    pub graph: SampleGraph,
    /// Subgraph node counts clipped down to a multiple of this (1: off).
    pub clip: usize,
    /// The counts written in the plan (or by `--set`): key, value and where the value is,
    /// so the memory check can place an absurd sampler size (issue 28).
    pub(crate) written: Vec<WrittenCount>,
    /// Where each field written in the plan (or by `--set`) has its value, so that a name
    /// the store lacks (a typed sampler's `budgets`) is placed at it when the plan is
    /// lowered against a store.
    pub(crate) spans: Vec<(&'static str, usize)>,
}

/// A sampler count as written: its key, its value, and where (in the virtual source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WrittenCount {
    /// The field's name (`depth`).
    pub key: &'static str,
    /// The value.
    pub value: u64,
    /// Byte offset of the value in the plan's virtual source.
    pub at: usize,
}

/// The optimiser and its hyper-parameters (`weight_decay` is the default of every
/// parameter; see [`Lowered::weight_decay`](super::Lowered) for the per-parameter values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
    /// Adam.
    Adam(Adam),
    /// SGD with optional momentum.
    Sgd(Sgd),
}

impl Optimizer {
    /// The learning rate.
    pub fn lr(&self) -> f64 {
        match self {
            Optimizer::Adam(a) => a.lr,
            Optimizer::Sgd(s) => s.lr,
        }
    }

    /// The same optimiser with learning rate `lr`.
    pub fn with_lr(self, lr: f64) -> Optimizer {
        match self {
            Optimizer::Adam(a) => Optimizer::Adam(Adam { lr, ..a }),
            Optimizer::Sgd(s) => Optimizer::Sgd(Sgd { lr, ..s }),
        }
    }

    /// The default weight decay.
    pub fn weight_decay(&self) -> f64 {
        match self {
            Optimizer::Adam(a) => a.weight_decay,
            Optimizer::Sgd(s) => s.weight_decay,
        }
    }
}

/// One `[[phase]]` of the schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Epochs in it.
    pub epochs: usize,
    /// The sampler during it (the `[sampler]` with the phase's keys over it).
    pub sampler: SamplerPlan,
    /// The optimizer's learning rate times this during it (`lr_factor = …`, PyTorch's
    /// `LambdaLR` as phases); None: the optimizer's.
    pub lr_factor: Option<f64>,
}

/// `[eval]`: how often the run validates, which epoch's parameters it keeps, and when it
/// stops early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eval {
    /// Validation every this many epochs.
    pub every: usize,
    /// Stop after this many evaluations in a row without progress (None: never early).
    pub patience: Option<usize>,
    /// The figures that count as progress. Empty (the default): the selection figure
    /// (F1-micro, a link plan's `[task] metric`), progress when strictly better than its
    /// best so far. Otherwise GAT's rule (Veličković et al. 2018): an evaluation is
    /// progress when any watched figure is at least as good as its best so far, and its
    /// parameters become the best when every one is.
    pub watch: Vec<Watch>,
    /// Which parameters the run ends with: the best validation's, or the last epoch's.
    pub keep: Keep,
}

impl Default for Eval {
    fn default() -> Eval {
        Eval {
            every: 1,
            patience: None,
            watch: Vec::new(),
            keep: Keep::Best,
        }
    }
}

/// A validation figure `[eval] watch` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// The mean loss of the validation nodes (lower is better; [`crate::metrics::Metrics::loss`]).
    Loss,
    /// Accuracy.
    Accuracy,
    /// F1-micro.
    F1Micro,
    /// F1-macro.
    F1Macro,
    /// A link plan's ranking figure.
    Link(LinkMetric),
}

impl Watch {
    /// The plan (and log) name.
    pub fn name(self) -> String {
        match self {
            Watch::Loss => "loss".into(),
            Watch::Accuracy => "accuracy".into(),
            Watch::F1Micro => "f1_micro".into(),
            Watch::F1Macro => "f1_macro".into(),
            Watch::Link(l) => l.name(),
        }
    }

    /// The figure in `m`, oriented so that more is better (the loss negated); None when
    /// the evaluation could not give it.
    pub fn value(self, m: &crate::metrics::Metrics) -> Option<f64> {
        match self {
            Watch::Loss => m.loss.map(|l| -l),
            Watch::Accuracy => Some(m.accuracy),
            Watch::F1Micro => Some(m.f1_micro),
            Watch::F1Macro => Some(m.f1_macro),
            Watch::Link(l) => m.link.as_ref().and_then(|x| l.value(x)),
        }
    }
}

/// `[eval] keep`: the parameters a run ends with (tested, exported, returned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// The best validation's (the default).
    Best,
    /// The last epoch's (the GCN paper's code tests the weights it stopped with).
    Last,
}

/// What a plan learns (`[task]`): node classification (the default) or link prediction.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Task {
    /// Classes of nodes: the `[output]` gives logits `[n, classes]`.
    #[default]
    Node,
    /// Edges: the `[output]` gives node representations `[n, d]` that a decoder scores
    /// pairs from.
    Link(LinkTask),
}

impl Task {
    /// The link task, when the plan is one.
    pub fn link(&self) -> Option<&LinkTask> {
        match self {
            Task::Link(l) => Some(l),
            Task::Node => None,
        }
    }
}

/// A pair decoder over node representations z (`[task] decoder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoder {
    /// s(u, v) = z_u · z_v (GAE, Kipf & Welling 2016).
    Dot,
    /// s(u, v) = Σ_k z_uk r_k z_vk, r learned (`decoder.r`, `[d, 1]`; DistMult, Yang et al.
    /// 2015, with one relation).
    DistMult,
    /// s(u, v) = relu((z_u ⊙ z_v)·W1 + b1)·W2 + b2 (`decoder.W1` `[d, hidden]`, `decoder.b1`,
    /// `decoder.W2` `[hidden, 1]`, `decoder.b2`): PyG's and OGB's link MLP on the Hadamard
    /// product.
    Mlp {
        /// The hidden width (`decoder_hidden`).
        hidden: usize,
    },
}

impl Decoder {
    /// The plan name.
    pub fn name(self) -> &'static str {
        match self {
            Decoder::Dot => "dot",
            Decoder::DistMult => "distmult",
            Decoder::Mlp { .. } => "mlp",
        }
    }
}

/// Which validation figure picks the best epoch of a link plan (`[task] metric`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkMetric {
    /// MRR against the stored per-positive negatives (OGB's ogbl-citation2 figure).
    Mrr,
    /// AUC against the stored negative pairs (the GAE protocol).
    Auc,
    /// Average precision against the stored negative pairs.
    Ap,
    /// Hits@K against the stored per-positive negatives.
    Hits(usize),
    /// Hits@K against the pool of stored negative pairs (ogbl-collab's Hits@50).
    PoolHits(usize),
}

impl LinkMetric {
    /// The plan (and log) name: `mrr`, `auc`, `ap`, `hits@K`.
    pub fn name(self) -> String {
        match self {
            LinkMetric::Mrr => "mrr".into(),
            LinkMetric::Auc => "auc".into(),
            LinkMetric::Ap => "ap".into(),
            LinkMetric::Hits(k) => format!("hits@{k}"),
            LinkMetric::PoolHits(k) => format!("pool_hits@{k}"),
        }
    }

    /// The figure in `m` (None when the set could not give it).
    pub fn value(self, m: &crate::metrics::LinkMetrics) -> Option<f64> {
        match self {
            LinkMetric::Mrr => m.mrr,
            LinkMetric::Auc => m.auc,
            LinkMetric::Ap => m.ap,
            LinkMetric::Hits(k) => m.hits(k),
            LinkMetric::PoolHits(k) => m.pool_hits(k),
        }
    }

    /// Whether the figure needs per-positive tails (else the negative pairs).
    pub fn needs_tails(self) -> bool {
        matches!(self, LinkMetric::Mrr | LinkMetric::Hits(_))
    }
}

/// A link-prediction plan's `[task]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkTask {
    /// The decoder.
    pub decoder: Decoder,
    /// The loss over scored pairs.
    pub loss: LinkLossKind,
    /// Targets and negatives per step.
    pub sampling: LinkSampling,
    /// The figure that picks the best epoch.
    pub metric: LinkMetric,
    /// Where `kind = "link"` is in the plan's text (errors about the store's split).
    pub(crate) at: usize,
}

/// How the parts of a distributed job combine their gradients (`[distributed] consensus`):
/// ∇Ŵ = Σ ζ_i·∇W_i / Σ ζ_j (GAD's Eq. 15) with ζ_i as below (see `dist::consensus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Consensus {
    /// GAD's own (§3.4): ζ_i the variance-based importance of part i's augmented subgraph
    /// (Eq. 14, `dist::zeta`), computed once when its store is loaded.
    #[default]
    Gad,
    /// saintflow's earlier weighting: ζ_i = n_i · exp(−β · σ²_i / σ̄²) from a moving
    /// variance of each part's step losses (not GAD's).
    LossVariance,
    /// The plain mean of the parts' gradients (ζ_i = 1, GAD's Eq. 11).
    Mean,
}

impl Consensus {
    /// The plan's spelling: `gad`, `loss_variance`, `mean`.
    pub fn name(self) -> &'static str {
        match self {
            Consensus::Gad => "gad",
            Consensus::LossVariance => "loss_variance",
            Consensus::Mean => "mean",
        }
    }
}

/// `[distributed]`: what data-parallel training on several parts of the graph does with the
/// plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Distributed {
    /// `consensus = "gad" | "loss_variance" | "mean"` (default gad).
    pub consensus: Consensus,
    /// `beta` (default 0.1): `gad`, the constant of Eq. 14 (> 0); `loss_variance`, how
    /// strongly a part's loss variance lowers its weight (≥ 0).
    pub beta: f64,
}

impl Default for Distributed {
    fn default() -> Self {
        Distributed {
            consensus: Consensus::Gad,
            beta: 0.1,
        }
    }
}

/// `[compute]`: how the step's arithmetic is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compute {
    /// `precision = "f32" | "bf16"` (default f32). bf16: every dense product (X·W and
    /// its two gradients) rounds its operands to bfloat16 and accumulates in f32, on CPUs
    /// with AVX512_BF16; parameters, Adam's moments, activations and sparse products stay
    /// f32 (mixed precision as PyTorch's autocast does it).
    pub precision: Precision,
    /// Where the `precision` value is in the plan's text (for the error on a CPU without
    /// bf16).
    pub(crate) at: Option<usize>,
}

/// A parsed, typed plan. Build one with [`Plan::parse`], [`Plan::load`] or
/// [`Plan::parse_with_overrides`]; lower it with [`Plan::lower`].
#[derive(Clone, Debug)]
pub struct Plan {
    /// `name` (the file's stem when absent).
    pub name: String,
    /// `description`.
    pub description: String,
    /// `[dims]`: named sizes.
    pub dims: BTreeMap<String, usize>,
    /// `[constants]`: named numbers the layers' expressions read (`alpha`, `lambda`).
    pub constants: BTreeMap<String, f64>,
    /// Where each dim's value is (in the virtual text: the file or an override).
    pub(crate) dim_spans: BTreeMap<String, usize>,
    /// `[sampler]` (`full` on the training graph when absent).
    pub sampler: SamplerPlan,
    /// `[input]`: the layer-0 input made per node type (issue 57); `None`: the store's
    /// features as they are.
    pub input: Option<InputSpec>,
    /// The `[[layer]]`s, in order (each possibly repeated).
    pub layers: Vec<Layer>,
    /// `[output]`: the classifier producing the logits.
    pub output: Layer,
    /// `[loss] kind`; `None` for `auto` (from the graph's labels).
    pub loss: Option<LossKind>,
    /// `[optimizer]` (Adam, lr 0.01, when absent).
    pub optimizer: Optimizer,
    /// `[[phase]]`s, in order (none: the trainer's defaults).
    pub phases: Vec<Phase>,
    /// `[eval]`.
    pub eval: Eval,
    /// `[distributed]` (read only when training a distributed job).
    pub distributed: Distributed,
    /// `[compute]`.
    pub compute: Compute,
    /// `[task]`: node classification unless `kind = "link"`.
    pub task: Task,
    pub(crate) src: Arc<Source>,
    pub(crate) loss_span: usize,
    /// The TOML after overrides, re-serialised (see [`Plan::effective_text`]).
    pub(crate) effective: String,
}

impl Plan {
    /// The effective plan: the file's TOML tree with every override applied, serialised
    /// again (comments and layout are not kept). Training logs it and hashes it: two runs
    /// with the same effective text train the same model.
    pub fn effective_text(&self) -> &str {
        &self.effective
    }

    /// A [`PlanErrorKind::Limit`](super::PlanErrorKind) error at the value of dim `dim`
    /// (`FILE:LINE:COL`, or the override that set it), or without a position when the plan
    /// has no such dim.
    pub fn limit_error(&self, dim: Option<&str>, what: impl Into<String>) -> super::PlanError {
        self.limit_error_at(dim.and_then(|d| self.dim_spans.get(d)).copied(), what)
    }

    /// A [`PlanErrorKind::Limit`](super::PlanErrorKind) error at byte `at` of the plan's
    /// virtual source (a sampler count's value), or without a position.
    pub(crate) fn limit_error_at(
        &self,
        at: Option<usize>,
        what: impl Into<String>,
    ) -> super::PlanError {
        match at {
            Some(at) => self.src.error(at, super::PlanErrorKind::Limit, what),
            None => super::PlanError {
                file: self.src.file.clone(),
                line: 0,
                col: 0,
                kind: super::PlanErrorKind::Limit,
                what: what.into(),
                source_line: String::new(),
            },
        }
    }
}
