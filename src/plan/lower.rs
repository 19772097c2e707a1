//! Lowering a [`Plan`] to the IR: source nodes (one `sample`, its `features`, one
//! adjacency node per flavour used, shared by every layer, and the `targets`), one `param`
//! node per parameter copy, the layers' expressions, the loss, then autodiff. Every node is
//! labelled with its expression's text, and every error points at the expression.
//!
//! Expression → IR: a run of `@` operands is one `MatMul` chain (the planner orders it),
//! `a + b` is `Add` (b may be a `[1, k]` bias row), `a - b`, `a * b`, `c * a`, `a / c`
//! and `-a` are the registry's `sub`, `mul` and `scale` (attribute `c`), a call `f(…)` is
//! the registry's op `f` with its keyword arguments as attributes, a layer's `dropout` key
//! the registry's `dropout` (attribute `p`). A binding `z = …` names a node: later uses
//! share it, and a chain does not flow through it.
//!
//! Here the plan's sources, parameters, loss and outputs; a layer copy in lower/layer.rs,
//! expressions in lower/expression.rs, calls in lower/call.rs, what reads a typed store in
//! lower/typed.rs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use saintflow_ops::gemm::Precision;

use crate::autodiff::differentiate;
use crate::ir::{Dim, Fact, Graph, Init, IrError, NodeId, ParamDecl};
use crate::op::builtin::{
    relation_flavour, running_names, Add, AdjKind, BasisWeight, Features, LinkLoss, Loss, LossKind,
    MatMul, PairKind, Pairs, Param, RelAdjacency, RelationBlock, Sample, TargetsOp, TypeInput,
    TypeRows,
};
use crate::op::{Attr, Attrs, GraphSource, Op, Registry};
use crate::store::TypesMeta;

mod call;
mod expression;
mod layer;
mod typed;

use super::aggregations;
use super::expr::{self, BinOp, Expr, ExprKind};
use super::schema::{Decoder, Layer, LinkTask};
use super::{Plan, PlanError, PlanErrorKind, Source};

/// What lowering needs to know about the graph trained on, and the ops available.
#[derive(Clone, Copy, Debug)]
pub struct LowerEnv<'r> {
    /// Feature width F.
    pub n_features: usize,
    /// Classes C.
    pub n_classes: usize,
    /// Multi-label targets (sigmoid loss) rather than single-label (softmax).
    pub multilabel: bool,
    /// The ops plan expressions may call.
    pub registry: &'r Registry,
    /// The node types and relations of a typed store (issue 57: `A_mean[r]`,
    /// `sum_relations`, `[input]`); `None`: one type `node`, one relation `to`.
    pub types: Option<&'r TypesMeta>,
}

impl<'r> LowerEnv<'r> {
    /// The environment of a data source.
    pub fn of(source: &'r dyn GraphSource, registry: &'r Registry) -> LowerEnv<'r> {
        LowerEnv {
            n_features: source.n_features(),
            n_classes: source.n_classes(),
            multilabel: source.multilabel(),
            registry,
            types: source.types(),
        }
    }

    /// Relations: the store's, or the one of a homogeneous graph.
    pub fn n_relations(&self) -> usize {
        self.types.map_or(1, |t| t.relations.len())
    }

    /// Relation `r` as `(source type, name, destination type)`.
    pub fn relation_names(&self, r: usize) -> (&str, &str, &str) {
        use crate::store::format::{DEFAULT_NODE_TYPE, DEFAULT_RELATION};
        match self.types {
            Some(t) => {
                let rel = &t.relations[r];
                (
                    &t.node_types[rel.src as usize].name,
                    &rel.name,
                    &t.node_types[rel.dst as usize].name,
                )
            }
            None => (DEFAULT_NODE_TYPE, DEFAULT_RELATION, DEFAULT_NODE_TYPE),
        }
    }
}

/// The plan functions over relations (issue 57), lowered here, not registry ops:
/// `sum_relations(e)`, `mean_relations(e)` (e once per relation `r`) and `basis(a, V, r)`.
pub const RELATION_FNS: &[&str] = &["sum_relations", "mean_relations", "basis"];

/// A lowered plan: the validated forward + backward graph of one step, with its outputs
/// named `loss`, `logits` and `grad/<param>`.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The graph.
    pub graph: Graph,
    /// The loss node (a scalar).
    pub loss: NodeId,
    /// The logits node, `[n, classes]`.
    pub logits: NodeId,
    /// The input of the `[output]` layer (the last hidden layer's output, before the
    /// output's dropout; the features when the plan has no layer): the nodes' embedding.
    /// Not a named output (that would keep it live through the step's schedule): name it
    /// before planning a graph that must keep it.
    pub embedding: NodeId,
    /// The loss chosen (`auto` resolved).
    pub loss_kind: LossKind,
    /// Every parameter, in the order the plan declares them (layer by layer, repetition by
    /// repetition, names sorted within a layer).
    pub params: Vec<ParamDecl>,
    /// `(parameter name, gradient node)`, in the order of `params`.
    pub grads: Vec<(String, NodeId)>,
    /// L2 weight decay per parameter: its own `weight_decay`, else its layer's, else the
    /// optimizer's.
    pub weight_decay: BTreeMap<String, f32>,
    /// Column group lasso λ per weight matrix whose layer sets `lasso` (absent: none).
    pub lasso: BTreeMap<String, f32>,
    /// The arithmetic of its dense products (`[compute] precision`), which the planner's
    /// precision pass applies (`PlanOptions::precision`).
    pub precision: Precision,
    /// A link plan's task (decoder, loss, targets and negatives; `logits` are then the
    /// node representations `[n, d]`); None for node classification.
    pub link: Option<LinkTask>,
    /// The `batchnorm`s' running statistics, in plan order: state, not parameters (no
    /// gradient, no optimiser), updated after every training step from the step's
    /// statistics (the graph's output `state/NAME`).
    pub running: Vec<RunningStats>,
    /// Parameters updated sparsely (issue 57: `[input]`'s tables of featureless types):
    /// the optimiser updates only the rows whose gradient is not all zero, so a row no
    /// step touched keeps its value and its Adam moments (PyTorch's `SparseAdam`; see
    /// plans/README.md "Typed graphs").
    pub sparse_rows: BTreeSet<String>,
}

/// One `batchnorm`'s running statistics: parameters `NAME.running_mean` and
/// `NAME.running_var` (`[1, cols]`, starting at 0 and 1) in the run's [`Params`](crate::ir::Params), read by
/// the op in evaluation, and the node computing a training step's statistics
/// ([`BatchNormStats`](crate::op::builtin::BatchNormStats), the output `state/NAME`).
#[derive(Clone, Debug, PartialEq)]
pub struct RunningStats {
    /// The state's name (`name=` of the call, else `batchnorm.K`, K counting the plan's
    /// `batchnorm` calls from 0 in lowering order).
    pub name: String,
    /// Columns (the normalised value's width).
    pub cols: usize,
    /// The update's momentum.
    pub momentum: f64,
    /// The statistics node.
    pub stats: NodeId,
}

impl RunningStats {
    /// The graph output of its step statistics.
    pub fn output(&self) -> String {
        format!("state/{}", self.name)
    }
}

impl Lowered {
    /// The running statistics as declarations (`NAME.running_mean` zeros, `NAME.running_var`
    /// ones, `[1, cols]`): [`Params::init`](crate::ir::Params::init) of them is the
    /// initial state.
    pub fn state_decls(&self) -> Vec<ParamDecl> {
        self.running
            .iter()
            .flat_map(|r| {
                let [m, v] = running_names(&r.name);
                [(m, Init::Zeros), (v, Init::Const(1.0))].map(|(name, init)| ParamDecl {
                    name,
                    rows: 1,
                    cols: r.cols,
                    init,
                })
            })
            .collect()
    }
}

impl Plan {
    /// Lowers the plan for a graph with `env`'s sizes: builds the forward graph, checks
    /// every shape, differentiates the loss with respect to every parameter and validates
    /// the result.
    ///
    /// A `[compute] precision` this CPU cannot run (bf16 without AVX512_BF16) is an error
    /// at its value, before anything is built.
    pub fn lower(&self, env: &LowerEnv<'_>) -> Result<Lowered, PlanError> {
        if let Err(why) = self.compute.precision.check() {
            return Err(self.limit_error_at(
                self.compute.at,
                format!(
                    "[compute] precision = \"{}\": {why}",
                    self.compute.precision.name()
                ),
            ));
        }
        self.check_sampler_names(env)?;
        let mut lowered = Lowerer::new(self, env)?.run()?;
        lowered.precision = self.compute.precision;
        lowered.link = self.task.link().cloned();
        Ok(lowered)
    }

    /// The names the samplers give (a typed sampler's node types and relations) against
    /// the graph's, each error at the field's value.
    fn check_sampler_names(&self, env: &LowerEnv<'_>) -> Result<(), PlanError> {
        let phases = self.phases.iter().map(|p| &p.sampler);
        for sp in std::iter::once(&self.sampler).chain(phases) {
            if let Err(e) = sp.kind.check_graph_fields(env.types) {
                let at = sp.spans.iter().find(|(k, _)| *k == e.field).map(|s| s.1);
                let what = format!("sampler `{}`: {}", e.field, e.what);
                return Err(match at {
                    Some(at) => self.src.error(at, PlanErrorKind::Name, what),
                    // Only a written value can name something.
                    None => PlanError {
                        kind: PlanErrorKind::Name,
                        ..self.limit_error_at(None, what)
                    },
                });
            }
        }
        Ok(())
    }

    /// Every registry op the plan calls (by name, or through `-`, `*`, `/` and `dropout`):
    /// what a caller checks against its registry before lowering.
    pub fn ops_used(&self) -> BTreeSet<String> {
        let mut ops = BTreeSet::new();
        for l in self.layers.iter().chain(std::iter::once(&self.output)) {
            if l.dropout.is_some_and(|p| p > 0.0) {
                ops.insert("dropout".to_string());
            }
            for s in &l.program {
                collect_ops(&s.expr, &mut ops);
            }
        }
        ops
    }
}

fn collect_ops(e: &Expr, ops: &mut BTreeSet<String>) {
    match &e.kind {
        ExprKind::Name(_) | ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Index { .. } => {}
        ExprKind::Neg(a) | ExprKind::Paren(a) => {
            if matches!(e.kind, ExprKind::Neg(_)) && !matches!(a.kind, ExprKind::Number(_)) {
                ops.insert("scale".into());
            }
            collect_ops(a, ops);
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let num = |x: &Expr| matches!(x.kind, ExprKind::Number(_));
            match op {
                BinOp::Add => {}
                BinOp::Sub => {
                    ops.insert("sub".into());
                }
                BinOp::Mul if num(lhs) || num(rhs) => {
                    ops.insert("scale".into());
                }
                BinOp::Mul => {
                    ops.insert("mul".into());
                }
                BinOp::Div => {
                    ops.insert("scale".into());
                }
            }
            collect_ops(lhs, ops);
            collect_ops(rhs, ops);
        }
        ExprKind::Chain(v) => v.iter().for_each(|x| collect_ops(x, ops)),
        ExprKind::Call {
            name, args, kwargs, ..
        } => {
            if let Some(Ok(written)) = aggregations::rewrite(name, args, kwargs, e) {
                return collect_ops(&written, ops);
            }
            if name == "mean_relations" {
                ops.insert("scale".into());
            }
            if !NUMBER_FNS.contains(&name.as_str()) && !RELATION_FNS.contains(&name.as_str()) {
                ops.insert(name.clone());
            }
            args.iter().for_each(|x| collect_ops(x, ops));
        }
    }
}

/// A lowered expression: a node, or a number (a factor of `*`, an attribute).
#[derive(Clone, Copy, Debug)]
enum Val {
    Node(NodeId),
    Num(f64),
}

/// Functions of numbers an expression may call (folded while lowering): `log`, `exp`,
/// `sqrt`, for per-copy constants such as GCNII's β_l = log(λ / l + 1).
const NUMBER_FNS: &[&str] = &["log", "exp", "sqrt"];

/// The names of one layer copy while its `out` is lowered.
struct Scope {
    /// x, the parameters, and the bindings of matrices made so far.
    names: HashMap<String, NodeId>,
    /// The bindings of numbers made so far (`beta = log(lambda / l + 1)`).
    nums: HashMap<String, f64>,
    /// `l`: which copy of the layer this is, from 1.
    copy: usize,
    /// Every binding of the program: name → (statement index, offset of the name).
    bound: HashMap<String, (usize, usize)>,
    /// The statement being lowered.
    current: usize,
    /// Uses of each binding.
    uses: HashMap<String, usize>,
    /// Inside `sum_relations(…)`: the relation `r` stands for.
    relation: Option<usize>,
}

struct Lowerer<'a> {
    plan: &'a Plan,
    env: &'a LowerEnv<'a>,
    src: &'a Source,
    g: Graph,
    sample: NodeId,
    adj: BTreeMap<&'static str, NodeId>,
    /// Relation adjacencies made so far, by (flavour, relation).
    rel_adj: BTreeMap<(&'static str, usize), NodeId>,
    /// Parameters updated sparsely (`Lowered::sparse_rows`).
    sparse_rows: BTreeSet<String>,
    params: Vec<ParamDecl>,
    param_nodes: Vec<NodeId>,
    param_at: Vec<usize>,
    declared: HashMap<String, usize>,
    /// Parameter nodes by name (what a `share = true` layer's later copies reuse).
    param_of: HashMap<String, NodeId>,
    /// The layer copies' outputs a later layer may read: `h0` (the features), `h1`, `h2`,
    /// … in sequence, and each named layer's (its last copy's).
    outputs: HashMap<String, NodeId>,
    weight_decay: BTreeMap<String, f32>,
    lasso: BTreeMap<String, f32>,
    /// Node label → where its expression is (for errors raised by autodiff).
    origins: HashMap<String, usize>,
    /// The `batchnorm`s' running statistics so far.
    running: Vec<RunningStats>,
}

impl<'a> Lowerer<'a> {
    fn new(plan: &'a Plan, env: &'a LowerEnv<'a>) -> Result<Lowerer<'a>, PlanError> {
        let mut g = Graph::new();
        let sample = g
            .add(Arc::new(Sample), &[], "sample")
            .map_err(|e| plan.src.error(0, PlanErrorKind::Op, e.to_string()))?;
        Ok(Lowerer {
            plan,
            env,
            src: &plan.src,
            g,
            sample,
            adj: BTreeMap::new(),
            rel_adj: BTreeMap::new(),
            sparse_rows: BTreeSet::new(),
            params: Vec::new(),
            param_nodes: Vec::new(),
            param_at: Vec::new(),
            declared: HashMap::new(),
            param_of: HashMap::new(),
            outputs: HashMap::new(),
            weight_decay: BTreeMap::new(),
            lasso: BTreeMap::new(),
            origins: HashMap::new(),
            running: Vec::new(),
        })
    }

    fn internal(&self, e: IrError) -> PlanError {
        self.src.error(0, PlanErrorKind::Op, e.to_string())
    }

    fn run(mut self) -> Result<Lowered, PlanError> {
        let env = self.env;
        let plan = self.plan;
        let mut x = self
            .g
            .add(
                Arc::new(Features {
                    width: env.n_features,
                }),
                &[self.sample],
                "features",
            )
            .map_err(|e| self.internal(e))?;
        if let Some(spec) = &plan.input {
            x = self.input(spec, x)?;
        }
        self.outputs.insert("h0".into(), x);
        let mut copies = 0usize;
        for layer in &plan.layers {
            for k in 0..layer.repeat {
                let suffix = if layer.repeat > 1 && !layer.share {
                    format!(".{k}")
                } else {
                    String::new()
                };
                let (y, at) = self.layer(layer, x, &suffix, k + 1, layer.share && k > 0)?;
                match *self.g.fact(y) {
                    Fact::Dense { rows, cols }
                        if rows == Dim::NODES && cols.as_known().is_some() => {}
                    ref f => {
                        return Err(self.src.error(
                            at,
                            PlanErrorKind::Op,
                            format!("a layer's result must be a dense [n, k] matrix, got {f}"),
                        ))
                    }
                }
                copies += 1;
                self.outputs.insert(format!("h{copies}"), y);
                x = y;
            }
            if let Some(n) = &layer.name {
                self.outputs.insert(n.clone(), x);
            }
        }
        let embedding = x;
        let (logits, at) = self.layer(&plan.output, x, "", 1, false)?;
        if let Some(task) = plan.task.link() {
            let loss = self.link_head(task, logits, at)?;
            return self.finish(loss, logits, embedding, LossKind::SigmoidBce);
        }
        let c = env.n_classes;
        if *self.g.fact(logits) != Fact::dense(Dim::NODES, Dim::known(c)) {
            return Err(self.src.error(
                at,
                PlanErrorKind::Graph,
                format!(
                    "the [output] gives {}, expected the logits [n, {c}] (classes = {c})",
                    self.g.fact(logits)
                ),
            ));
        }
        let loss_kind = match (plan.loss, env.multilabel) {
            (None, false) => LossKind::SoftmaxCe,
            (None, true) => LossKind::SigmoidBce,
            (Some(k), multi) => {
                let want = if multi {
                    LossKind::SigmoidBce
                } else {
                    LossKind::SoftmaxCe
                };
                if k != want {
                    return Err(self.src.error(
                        plan.loss_span,
                        PlanErrorKind::Graph,
                        format!(
                            "loss kind `{}` needs {} targets, but the graph is {}: use `{}` or `auto`",
                            k.plan_name(),
                            if multi { "single-label" } else { "multi-label" },
                            if multi { "multi-label" } else { "single-label" },
                            want.plan_name()
                        ),
                    ));
                }
                k
            }
        };
        let targets = self
            .g
            .add(
                Arc::new(TargetsOp { classes: c }),
                &[self.sample],
                "targets",
            )
            .map_err(|e| self.internal(e))?;
        let loss = self
            .g
            .add(
                Arc::new(Loss { kind: loss_kind }),
                &[logits, targets],
                "loss",
            )
            .map_err(|e| self.src.error(at, PlanErrorKind::Op, e.to_string()))?;
        self.finish(loss, logits, embedding, loss_kind)
    }

    /// A link plan's head on the node representations `z` (the `[output]`'s `[n, d]`):
    /// the decoder's scores of the step's pairs and the loss over them.
    fn link_head(&mut self, task: &LinkTask, z: NodeId, at: usize) -> Result<NodeId, PlanError> {
        let plan = self.plan;
        if plan.loss.is_some() || plan.loss_span != 0 {
            return Err(self.src.error(
                plan.loss_span,
                PlanErrorKind::Graph,
                "a link plan's loss is [task] loss (bce or softmax), not [loss]: remove [loss]",
            ));
        }
        let d = match *self.g.fact(z) {
            Fact::Dense { rows, cols } if rows == Dim::NODES => cols.as_known(),
            _ => None,
        };
        let Some(d) = d else {
            return Err(self.src.error(
                at,
                PlanErrorKind::Graph,
                format!(
                    "a link plan's [output] gives the node representations [n, d] its decoder scores pairs from, got {}",
                    self.g.fact(z)
                ),
            ));
        };
        let (sample, at) = (self.sample, task.at);
        let product = |k| Arc::new(MatMul::plain(k)) as Arc<dyn Op>;
        let scores = match task.decoder {
            Decoder::Dot => {
                let op = Arc::new(Pairs {
                    kind: PairKind::Dot,
                });
                self.head_node(op, &[z, sample], "pair_dot(z)", at)?
            }
            Decoder::DistMult | Decoder::Mlp { .. } => {
                let op = Arc::new(Pairs {
                    kind: PairKind::Mul,
                });
                let m = self.head_node(op, &[z, sample], "pair_mul(z)", at)?;
                if let Decoder::Mlp { hidden } = task.decoder {
                    let w1 = self.decoder_param("decoder.W1", d, hidden, Init::Glorot, at)?;
                    let b1 = self.decoder_param("decoder.b1", 1, hidden, Init::Zeros, at)?;
                    let w2 = self.decoder_param("decoder.W2", hidden, 1, Init::Glorot, at)?;
                    let b2 = self.decoder_param("decoder.b2", 1, 1, Init::Zeros, at)?;
                    let h = self.head_node(product(2), &[m, w1], "pair_mul(z) @ decoder.W1", at)?;
                    let h = self.head_node(Arc::new(Add), &[h, b1], "… + decoder.b1", at)?;
                    let relu = self
                        .env
                        .registry
                        .make("relu", &Attrs::new())
                        .map_err(|e| self.src.error(at, PlanErrorKind::Op, e.to_string()))?;
                    let h = self.head_node(
                        relu,
                        &[h],
                        "relu(pair_mul(z) @ decoder.W1 + decoder.b1)",
                        at,
                    )?;
                    let s = self.head_node(product(2), &[h, w2], "… @ decoder.W2", at)?;
                    self.head_node(Arc::new(Add), &[s, b2], "… @ decoder.W2 + decoder.b2", at)?
                } else {
                    let r = self.decoder_param("decoder.r", d, 1, Init::Const(1.0), at)?;
                    self.head_node(product(2), &[m, r], "pair_mul(z) @ decoder.r", at)?
                }
            }
        };
        let loss = Arc::new(LinkLoss { kind: task.loss });
        self.head_node(loss, &[scores, sample], "loss", at)
    }

    /// A node of a link plan's head, an error placed at `[task]`'s `kind`.
    fn head_node(
        &mut self,
        op: Arc<dyn Op>,
        inputs: &[NodeId],
        label: &str,
        at: usize,
    ) -> Result<NodeId, PlanError> {
        self.g
            .add(op, inputs, label)
            .map_err(|e| self.src.error(at, PlanErrorKind::Op, e.to_string()))
    }

    /// A decoder parameter (its weight decay the optimizer's).
    fn decoder_param(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        init: Init,
        at: usize,
    ) -> Result<NodeId, PlanError> {
        let wd = self.plan.optimizer.weight_decay() as f32;
        self.declare_param(name, rows, cols, init, at, wd)
    }

    /// Declares parameter `name` (its text at `at`, its weight decay `wd`): its `param`
    /// node, declaration and bookkeeping.
    fn declare_param(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        init: Init,
        at: usize,
        wd: f32,
    ) -> Result<NodeId, PlanError> {
        let node = self
            .g
            .add(
                Arc::new(Param {
                    name: name.into(),
                    rows,
                    cols,
                }),
                &[],
                name,
            )
            .map_err(|e| self.internal(e))?;
        self.params.push(ParamDecl {
            name: name.into(),
            rows,
            cols,
            init,
        });
        self.param_nodes.push(node);
        self.param_of.insert(name.into(), node);
        self.param_at.push(at);
        self.weight_decay.insert(name.into(), wd);
        Ok(node)
    }

    /// Checks every parameter reaches the loss, differentiates, names the outputs.
    fn finish(
        mut self,
        loss: NodeId,
        logits: NodeId,
        embedding: NodeId,
        loss_kind: LossKind,
    ) -> Result<Lowered, PlanError> {
        let used = self.g.ancestors(&[loss]);
        for (i, p) in self.param_nodes.iter().enumerate() {
            if !used.contains(p) {
                return Err(self.src.error(
                    self.param_at[i],
                    PlanErrorKind::Name,
                    format!(
                        "parameter `{}` is declared but the loss does not depend on it",
                        self.params[i].name
                    ),
                ));
            }
        }
        let d = differentiate(&mut self.g, loss, &self.param_nodes).map_err(|e| match e {
            IrError::Op { op, label, source } => self.src.error(
                self.origins.get(&label).copied().unwrap_or(0),
                PlanErrorKind::Op,
                format!("cannot differentiate `{label}`: {op}: {source}"),
            ),
            other => self.internal(other),
        })?;
        self.g.set_output("loss", loss);
        self.g.set_output("logits", logits);
        let mut grads = Vec::with_capacity(self.params.len());
        for (decl, (_, gnode)) in self.params.iter().zip(&d.grads) {
            self.g.set_output(format!("grad/{}", decl.name), *gnode);
            grads.push((decl.name.clone(), *gnode));
        }
        self.g.validate().map_err(|e| self.internal(e))?;
        Ok(Lowered {
            graph: self.g,
            loss,
            logits,
            embedding,
            loss_kind,
            params: self.params,
            grads,
            weight_decay: self.weight_decay,
            lasso: self.lasso,
            precision: Precision::F32,
            link: None,
            running: self.running,
            sparse_rows: self.sparse_rows,
        })
    }

    /// Source offset of byte `i` of `layer`'s `out`.
    fn at(layer: &Layer, i: usize) -> usize {
        layer.out_map.at(i)
    }

    fn err(
        &self,
        layer: &Layer,
        i: usize,
        kind: PlanErrorKind,
        what: impl Into<String>,
    ) -> PlanError {
        self.src.error(Self::at(layer, i), kind, what)
    }

    /// A value that must be a node (`what` says where it is used).
    fn node(&self, layer: &Layer, v: Val, e: &Expr, what: &str) -> Result<NodeId, PlanError> {
        match v {
            Val::Node(n) => Ok(n),
            Val::Num(x) => Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Op,
                format!("{what} must be a matrix, got the number {x} (numbers scale matrices: `{x} * …`)"),
            )),
        }
    }

    fn label(layer: &Layer, e: &Expr) -> String {
        expr::one_line(&layer.out[e.span.clone()])
    }

    /// Adds a node for expression `e`; op errors (arity, kinds, shapes) point at `e`.
    fn add(
        &mut self,
        layer: &Layer,
        e: &Expr,
        op: Arc<dyn Op>,
        inputs: &[NodeId],
    ) -> Result<NodeId, PlanError> {
        let label = Self::label(layer, e);
        let at = Self::at(layer, e.span.start);
        let id = self
            .g
            .add(op, inputs, label.clone())
            .map_err(|err| match err {
                IrError::Op { source, .. } => {
                    self.src
                        .error(at, PlanErrorKind::Op, format!("in `{label}`: {source}"))
                }
                other => self.internal(other),
            })?;
        self.origins.entry(label).or_insert(at);
        Ok(id)
    }

    /// A registry op behind an operator (`-` → `sub`, `*` → `mul`/`scale`).
    fn operator_op(
        &self,
        layer: &Layer,
        e: &Expr,
        name: &str,
        attrs: Attrs,
    ) -> Result<Arc<dyn Op>, PlanError> {
        if !self.env.registry.contains(name) {
            return Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Name,
                format!(
                    "`{}` needs the op `{name}`, which is not registered",
                    Self::label(layer, e)
                ),
            ));
        }
        self.env
            .registry
            .make(name, &attrs)
            .map_err(|err| self.err(layer, e.span.start, PlanErrorKind::Op, err.to_string()))
    }

    /// Whether `a` is a `[1, c]` row and `b` is not: a bias written on the left of `b`.
    fn row_of(&self, a: NodeId, b: NodeId) -> bool {
        let row = |n: NodeId| {
            self.g
                .fact(n)
                .matrix()
                .is_some_and(|(r, _)| r == Dim::known(1))
        };
        row(a) && !row(b)
    }

    fn scale(&mut self, layer: &Layer, e: &Expr, c: f64, a: NodeId) -> Result<Val, PlanError> {
        let op = self.operator_op(layer, e, "scale", Attrs::new().with("c", Attr::Num(c)))?;
        Ok(Val::Node(self.add(layer, e, op, &[a])?))
    }
}
