//! The compile step of a training run (issue 24, item 3): a plan lowered for a store
//! (`lower_env`, `lower_for`, and `lower_and_plan` for `explain`), the schedule of its
//! phases, and each phase set up to step (its sampler, the normalisation counts pre-sampled
//! for it, the graph planned for its expected subgraph size; `setup_phase`). The memory
//! check ([`memory`]) and `partition --plan` use the same functions, so they see the graph
//! the trainer runs.
//!
//! Issue 54: a layer of its own below both wings that use it, training
//! ([`crate::train`], the loop) and full-graph inference ([`crate::infer`]); it imports
//! only the engine (store, sample, ir, op, plan, planner) and the leaves.

pub mod memory;

use crate::ir::{Bindings, Graph, NodeId};
use crate::op::builtin::LossKind;
use crate::op::{Registry, StoreSource};
use crate::plan::{LowerEnv, Lowered, Plan, SampleGraph, SamplerConfig, SamplerPlan};
use crate::planner::{plan, PlanOptions, PlanReport};
use crate::sample::{LinkSampling, NormCounts, Sampler};
use crate::seed::{hash3, stream};
use crate::store::{Access, GraphStore, Labels, Role, SectionId};

/// Result with the compile step's [`CompileError`].
pub type Result<T, E = CompileError> = std::result::Result<T, E>;

/// Errors of the compile step: those of the layers it drives, and a plan that cannot run
/// on a store. Each is worded as training words it, and
/// [`TrainError`](crate::train::TrainError) takes each back as its own variant (issue 54).
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// Building a sampler or pre-sampling its normalisation counts.
    #[error(transparent)]
    Sample(#[from] crate::sample::SampleError),
    /// Typing or lowering the plan.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// Building or planning the step graph.
    #[error(transparent)]
    Ir(#[from] crate::ir::IrError),
    /// A plan that cannot run on this store, or a planned graph that lost an output.
    #[error("training: {0}")]
    Run(String),
}

/// Epochs of a plan without `[[phase]]` (what [`schedule`] gives it).
pub const DEFAULT_EPOCHS: usize = 50;

/// xxh3-64 of a plan's effective text: what a checkpoint is tied to.
pub fn plan_hash(plan: &Plan) -> u64 {
    xxhash_rust::xxh3::xxh3_64(plan.effective_text().as_bytes())
}

/// The schedule: `(phase index, sampler, epochs)` in order. Without phases, one phase of
/// the plan's sampler and [`DEFAULT_EPOCHS`]; with `epochs`, phases are taken in order
/// until that total, the last cut or extended.
pub fn schedule(plan: &Plan, epochs: Option<usize>) -> Vec<(usize, SamplerPlan, usize)> {
    let mut phases: Vec<(usize, SamplerPlan, usize)> = if plan.phases.is_empty() {
        vec![(0, plan.sampler.clone(), DEFAULT_EPOCHS)]
    } else {
        plan.phases
            .iter()
            .enumerate()
            .map(|(i, p)| (i, p.sampler.clone(), p.epochs))
            .collect()
    };
    if let Some(total) = epochs {
        let mut left = total;
        let mut out = Vec::new();
        for p in &phases {
            if left == 0 {
                break;
            }
            let e = p.2.min(left);
            out.push((p.0, p.1.clone(), e));
            left -= e;
        }
        if left > 0 {
            let last = out.last_mut().expect("at least one phase");
            last.2 += left;
        }
        phases = out;
    }
    phases
}

/// A sampler of `sp`'s kind over the graph it names ([`SamplerConfig::build`]).
pub fn build_sampler<'g>(store: &'g GraphStore, sp: &SamplerPlan) -> Result<Box<dyn Sampler + 'g>> {
    let g = match sp.graph {
        SampleGraph::Train => store.train(),
        SampleGraph::Full => store.full(),
    };
    Ok(sp.kind.build(store, g)?)
}

/// The sampler's expected node draw (before dedup) on a graph of `n` nodes.
pub(crate) fn expected_nodes(kind: &SamplerConfig, n: usize) -> usize {
    kind.expected_nodes().unwrap_or(n).clamp(1, n.max(1))
}

/// Advises what sampled training reads, when `on` (the trainer's `io_hints`): the sampled
/// graph's CSR and the features (`Random`: [`GraphStore::advise_sampling`]; `Normal` again
/// for a full-graph pass).
pub(crate) fn advise_training(on: bool, store: &GraphStore, sp: &SamplerPlan, access: Access) {
    if !on {
        return;
    }
    let train = sp.graph == SampleGraph::Train;
    match access {
        Access::Random => store.advise_sampling(train),
        _ => {
            store.advise(&GraphStore::csr_sections(train), access);
            store.advise(&[SectionId::Features], access);
        }
    }
}

/// One phase, ready to step.
pub(crate) struct PhaseRun<'g> {
    pub(crate) source: StoreSource<'g>,
    pub(crate) graph: Graph,
    pub(crate) loss: NodeId,
    /// The logits and targets a built-in loss reads (for the plain mean loss beside the
    /// normalised one).
    pub(crate) loss_inputs: Option<(NodeId, NodeId)>,
    pub(crate) grads: Vec<(String, NodeId)>,
    pub(crate) wanted: Vec<NodeId>,
    /// Each `batchnorm`'s state name, momentum and step-statistics node (in `wanted`).
    pub(crate) running: Vec<(String, f64, NodeId)>,
    pub(crate) steps_per_epoch: u64,
}

/// What every phase of a run is set up with.
#[derive(Clone, Copy)]
pub(super) struct PhaseEnv {
    /// The run's seed (the normalisation's pre-sampling draws from it).
    pub(super) seed: u64,
    /// Training nodes: the steps of an epoch cover them.
    pub(super) n_train: usize,
    /// Access-pattern hints to the kernel for the store's sections.
    pub(super) io_hints: bool,
    /// The runner's workers, which the planner partitions for.
    pub(super) threads: std::num::NonZeroUsize,
    /// A link plan's targets and negatives per step (None: node classification).
    pub(super) link: Option<LinkSampling>,
}

/// Phase `phase` of a run set up on `store`: its sampler, the normalisation counts
/// pre-sampled for it, the lowered graph planned for its expected subgraph size, and the
/// steps of one epoch.
pub(crate) fn setup_phase<'g>(
    store: &'g GraphStore,
    lowered: &Lowered,
    sp: &SamplerPlan,
    phase: usize,
    env: &PhaseEnv,
) -> Result<PhaseRun<'g>> {
    let PhaseEnv {
        seed,
        n_train,
        io_hints,
        threads,
        link,
    } = *env;
    let sampler = build_sampler(store, sp)?;
    let g = sampler.graph();
    let full = sp.kind.whole_graph();
    let clip = if full { 1 } else { sp.clip.max(1) };
    let (norm, mean_nodes) = if full {
        (None, g.n_nodes() as f64)
    } else {
        let expect = expected_nodes(&sp.kind, g.n_nodes());
        let n_pre = (10 * g.n_nodes()).div_ceil(expect).clamp(8, 200) as u64;
        let counts = NormCounts::estimate(
            sampler.as_ref(),
            n_pre,
            hash3(seed, stream::NORM, phase as u64),
            clip,
        )?;
        let drawn = counts.nodes_drawn();
        let mean = drawn as f64 / n_pre as f64;
        (Some(counts), mean.max(1.0))
    };
    let nodes = mean_nodes.round() as usize;
    let degree = g.n_entries() as f64 / g.n_nodes().max(1) as f64;
    let entries = (nodes as f64 * degree).round() as usize;
    let steps_per_epoch = match (full, &link, &norm) {
        (true, _, _) => 1,
        // A link epoch scores every edge of the sampled graph once in expectation: the
        // graph's entries over the targets' share of a subgraph's (pre-sampled) entries.
        (false, Some(cfg), Some(counts)) => {
            let per_step = counts.edge.total() as f64 / counts.meta.subgraphs.max(1) as f64;
            ((g.n_entries() as f64 / (cfg.fraction * per_step).max(1.0)).ceil() as u64).max(1)
        }
        _ => ((n_train as f64 / mean_nodes).ceil() as u64).max(1),
    };
    let mut graph = lowered.graph.clone();
    plan(
        &mut graph,
        &PlanOptions::new(
            Bindings {
                nodes,
                entries,
                pairs: link.map_or(0, |l| l.expected_pairs(entries)),
            },
            threads,
        )
        .with_precision(lowered.precision)
        .with_store_densities(store),
    )?;
    let missing =
        |name: &str| CompileError::Run(format!("the planned graph lost its `{name}` output"));
    let loss = graph.output("loss").ok_or_else(|| missing("loss"))?;
    let mut grads = Vec::with_capacity(lowered.grads.len());
    for (name, _) in &lowered.grads {
        let out = format!("grad/{name}");
        grads.push((
            name.clone(),
            graph.output(&out).ok_or_else(|| missing(&out))?,
        ));
    }
    let mut wanted = vec![loss];
    wanted.extend(grads.iter().map(|g| g.1));
    let mut running = Vec::with_capacity(lowered.running.len());
    for r in &lowered.running {
        let out = r.output();
        let id = graph.output(&out).ok_or_else(|| missing(&out))?;
        wanted.push(id);
        running.push((r.name.clone(), r.momentum, id));
    }
    let node = graph.node(loss);
    let builtin = [LossKind::SoftmaxCe, LossKind::SigmoidBce].map(LossKind::plan_name);
    let loss_inputs = (builtin.contains(&node.op.name()) && node.inputs.len() == 2)
        .then(|| (node.inputs[0], node.inputs[1]));
    for &id in loss_inputs.iter().flat_map(|(z, t)| [z, t]) {
        if !wanted.contains(&id) {
            wanted.push(id);
        }
    }
    let source = StoreSource::new(store, sampler, seed, clip, norm, Role::Train)
        .will_need_features(io_hints)
        .link(link);
    Ok(PhaseRun {
        source,
        graph,
        loss,
        loss_inputs,
        grads,
        wanted,
        running,
        steps_per_epoch,
    })
}

/// What `explain` shows, as values: `plan` lowered with `env` (its registry makes the
/// plan's op names, so a user's ops explain like built-in ones) and planned for `opts`.
/// Print with [`explain_text`](crate::planner::explain_text) or
/// [`explain_dot`](crate::planner::explain_dot).
pub fn lower_and_plan(
    plan: &Plan,
    env: &LowerEnv<'_>,
    opts: &PlanOptions,
) -> Result<(Graph, PlanReport)> {
    let lowered = plan.lower(env)?;
    let mut graph = lowered.graph;
    let opts = opts.with_precision(lowered.precision);
    let report = crate::planner::plan(&mut graph, &opts)?;
    Ok((graph, report))
}

/// What lowering needs to know of `store` (feature width, classes, label layout), with
/// `registry`'s ops.
pub fn lower_env<'r>(store: &'r GraphStore, registry: &'r Registry) -> LowerEnv<'r> {
    LowerEnv {
        n_features: store.n_features(),
        n_classes: store.n_classes(),
        multilabel: matches!(store.labels(), Labels::Multi { .. }),
        registry,
        types: store.types(),
    }
}

/// Lowers `plan` for `store` with `registry`'s ops. A store without node features is
/// refused here, before anything runs (issue 55 item 6; it failed inside a kernel with
/// `spmm_accumulate: indices[0] = 21 out of range, expected < 0`): every GNN plan starts
/// from the features (`h0`), and saintflow has no learned or one-hot input for featureless
/// graphs yet; the message names the ways that do work.
pub fn lower_for(plan: &Plan, store: &GraphStore, registry: &Registry) -> Result<Lowered> {
    if store.is_typed() && plan.input.is_none() {
        // A typed store's global features section is empty by design (issue 57): its
        // features are per node type, which only a plan with an [input] table reads.
        let widths: Vec<String> = (0..store.n_node_types())
            .map(|t| {
                format!(
                    "{} {}",
                    store.node_type_name(t),
                    store.type_features(t).width
                )
            })
            .collect();
        return Err(CompileError::Run(format!(
            "{}: a typed store (node types and relations, issue 57), whose features are per node type ({}); plan `{}` reads one feature matrix over all nodes: give it an [input] table (h0 per node type: each type's features through its own projection, a learned table for a type without; plans/README.md \"Typed graphs\", plans/rgcn.toml)",
            store.path().display(),
            widths.join(", "),
            plan.name
        )));
    }
    if store.n_features() == 0 && store.n_nodes() > 0 && !store.is_typed() {
        return Err(CompileError::Run(format!(
            "{}: no node features, expected at least 1 feature column for plan `{}` (a GNN plan starts from the features, h0), got 0; saintflow does not learn input embeddings for featureless graphs: give the store features when importing it (`saintflow import edgelist EDGES -o STORE --features X.npy`, an (N, F) float array; e.g. one-hot degree or identity columns, as PyG's OneHotDegree; `gen kronecker --features 16`), or learn node vectors from the graph alone with an [embedding] plan (plans/deepwalk.toml, plans/node2vec.toml, plans/line.toml)",
            store.path().display(),
            plan.name
        )));
    }
    Ok(plan.lower(&lower_env(store, registry))?)
}
