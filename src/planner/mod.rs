//! The planner: passes that rewrite a differentiated step graph before it runs — common
//! subexpressions merged, every matrix chain ordered by a sparse-aware dynamic programme
//! (reusing products the graph already has), dead nodes dropped, SpMM feature partitions
//! chosen — then a memory-aware schedule, and the report `explain` prints.
//!
//! Protocol, in prose: a [`Pass`] mutates the graph only through [`Graph`]'s methods and
//! returns what it changed as counts. [`run_passes`] runs passes in order and calls
//! [`Graph::validate`] after each one, so a pass that breaks an invariant (a wrong fact, an
//! edge that no longer mirrors an input, a cycle) is named in the error, not discovered
//! later by the interpreter. Passes see the expected symbol values ([`PlanOptions::bindings`])
//! only for cost decisions; the graph they leave stays valid for every binding.

pub mod chain;
pub mod cse;
pub mod dce;
pub mod explain;
pub mod fuse;
pub mod memory;
pub mod partition;
pub mod precision;
pub mod sparse_features;

use crate::ir::{Bindings, Graph, IrError, NodeId};
use crate::op::Cost;

pub use chain::{best_order, ChainPass, Tree};
pub use cse::Cse;
pub use dce::Dce;
pub use explain::{explain_dot, explain_text};
pub use fuse::Fuse;
pub use memory::{greedy_order, liveness, schedule, Liveness};
pub use partition::{feature_partitions, Partition};
pub use precision::PrecisionPass;
pub use saintflow_ops::gemm::Precision;
pub use sparse_features::{SparseFeatures, SPARSE_FEATURES_MAX_DENSITY};

/// What the planner is told about the steps it plans for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanOptions {
    /// Expected symbol values (the sampler's node budget, its mean entry count).
    pub bindings: Bindings,
    /// Threads of the executor (p, the least feature-partition count).
    pub threads: usize,
    /// Per-core cache bytes a feature block of SpMM should fit (S_cache).
    pub cache_bytes: usize,
    /// The arithmetic of the dense products ([`PrecisionPass`]; f32 unless the plan's
    /// `[compute] precision` says bf16).
    pub precision: Precision,
    /// The fraction of nonzero input features, measured on the store trained on: at most
    /// [`SPARSE_FEATURES_MAX_DENSITY`], the [`SparseFeatures`] pass runs the products by
    /// the features sparse. `None` (the default): the pass does nothing.
    pub feature_density: Option<f64>,
    /// A typed store's densest node-type features (issue 57's `[input]`: each type's
    /// `x[t] @ W`), measured the same way: at most [`SPARSE_FEATURES_MAX_DENSITY`], those
    /// products run sparse too. `None` (the default): they stay dense.
    pub type_feature_density: Option<f64>,
}

impl PlanOptions {
    /// Options for `bindings` on `threads` workers (the executor's count, passed down by
    /// the caller, never read back from the ambient rayon pool) with the detected L2 size.
    pub fn new(bindings: Bindings, threads: std::num::NonZeroUsize) -> PlanOptions {
        PlanOptions {
            bindings,
            threads: threads.get(),
            cache_bytes: saintflow_ops::cache::l2_bytes(),
            precision: Precision::F32,
            feature_density: None,
            type_feature_density: None,
        }
    }

    /// These options with the dense products at `precision`.
    pub fn with_precision(self, precision: Precision) -> PlanOptions {
        PlanOptions { precision, ..self }
    }

    /// These options for features of this fraction of nonzeros ([`SparseFeatures`]).
    pub fn with_feature_density(self, density: f64) -> PlanOptions {
        PlanOptions {
            feature_density: Some(density),
            ..self
        }
    }

    /// These options with a store's densities: its features' and, for a typed store, its
    /// densest node type's ([`SparseFeatures`]).
    pub fn with_store_densities(self, store: &crate::store::GraphStore) -> PlanOptions {
        let typed = store.is_typed().then(|| {
            (0..store.n_node_types())
                .filter(|&t| store.type_features(t).width > 0)
                .map(|t| store.type_feature_density(t))
                .fold(0.0, f64::max)
        });
        PlanOptions {
            feature_density: Some(store.feature_density()),
            type_feature_density: typed,
            ..self
        }
    }
}

/// A pass over the IR.
pub trait Pass {
    /// Its name in reports (`chain`, `cse`).
    fn name(&self) -> &str;
    /// Rewrites `graph`; returns what changed as `(what, count)` pairs, in a fixed order.
    fn run(&self, graph: &mut Graph, opts: &PlanOptions) -> Result<Vec<(String, usize)>, IrError>;
}

/// What one pass changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassReport {
    /// The pass.
    pub pass: String,
    /// `(what, count)`, in the pass's order.
    pub changes: Vec<(String, usize)>,
}

impl PassReport {
    /// A count by name (0 when the pass did not report it).
    pub fn count(&self, what: &str) -> usize {
        self.changes
            .iter()
            .find(|(w, _)| w == what)
            .map_or(0, |c| c.1)
    }
}

/// What planning did and what the planned step costs.
#[derive(Clone, Debug)]
pub struct PlanReport {
    /// The options planned for.
    pub options: PlanOptions,
    /// Per pass, in the order run.
    pub passes: Vec<PassReport>,
    /// Total cost of the graph as given (chains evaluated right to left).
    pub before: Cost,
    /// Per node of the planned graph, in schedule order.
    pub costs: Vec<(NodeId, Cost)>,
    /// Total cost of the planned graph.
    pub total: Cost,
    /// The schedule chosen and its live bytes.
    pub memory: Liveness,
    /// Peak live bytes of plain index (topological) order, for comparison.
    pub index_order_peak: usize,
}

/// The passes [`plan`] runs, in order: CSE (so equal operands have one id), chain ordering
/// (CSE-aware), CSE again (transposes and products emitted twice), dead-node elimination,
/// the products by sparse features, the products' precision, fusion of row-wise chains,
/// feature partitioning.
pub fn default_passes() -> Vec<Box<dyn Pass>> {
    vec![
        Box::new(Cse),
        Box::new(ChainPass { reuse: true }),
        Box::new(Cse),
        Box::new(Dce),
        Box::new(SparseFeatures),
        Box::new(PrecisionPass),
        Box::new(Fuse),
        Box::new(Partition),
    ]
}

/// Runs `passes` in order, validating the graph after each one.
pub fn run_passes(
    graph: &mut Graph,
    passes: &[Box<dyn Pass>],
    opts: &PlanOptions,
) -> Result<Vec<PassReport>, IrError> {
    let mut reports = Vec::with_capacity(passes.len());
    for p in passes {
        let changes = p.run(graph, opts)?;
        graph
            .validate()
            .map_err(|e| IrError::Invariant(format!("after pass `{}`: {e}", p.name())))?;
        reports.push(PassReport {
            pass: p.name().to_string(),
            changes,
        });
    }
    Ok(reports)
}

/// Total cost of every node of `graph` under `b`.
pub fn total_cost(graph: &Graph, b: &Bindings) -> Cost {
    graph
        .ids()
        .into_iter()
        .map(|id| node_cost(graph, id, b))
        .fold(Cost::default(), Cost::plus)
}

/// One node's cost under `b` ([`crate::op::Op::cost`] on its facts).
pub fn node_cost(graph: &Graph, id: NodeId, b: &Bindings) -> Cost {
    let n = graph.node(id);
    let inputs: Vec<_> = n.inputs.iter().map(|&i| graph.fact(i)).collect();
    n.op.cost(&inputs, &n.fact, b)
}

/// Plans `graph` in place with [`default_passes`], then schedules it for low peak memory.
/// Errors: a graph with no named outputs (dead-node elimination would remove everything),
/// a pass failure, a pass leaving the graph invalid.
pub fn plan(graph: &mut Graph, opts: &PlanOptions) -> Result<PlanReport, IrError> {
    plan_with(graph, &default_passes(), opts)
}

/// [`plan`] with a given pass list.
pub fn plan_with(
    graph: &mut Graph,
    passes: &[Box<dyn Pass>],
    opts: &PlanOptions,
) -> Result<PlanReport, IrError> {
    if graph.outputs().is_empty() {
        return Err(IrError::Invariant(
            "planning a graph with no named outputs: name the loss, logits and gradients \
             (Graph::set_output), else every node is dead"
                .into(),
        ));
    }
    graph.validate()?;
    let b = opts.bindings;
    let before = total_cost(graph, &b);
    let passes = run_passes(graph, passes, opts)?;
    let memory = schedule(graph, &b)?;
    let index_order_peak = liveness(graph, &graph.topo_order()?, &b)?.peak;
    let costs: Vec<(NodeId, Cost)> = memory
        .order
        .iter()
        .map(|&id| (id, node_cost(graph, id, &b)))
        .collect();
    let total = costs.iter().map(|c| c.1).fold(Cost::default(), Cost::plus);
    Ok(PlanReport {
        options: *opts,
        passes,
        before,
        costs,
        total,
        memory,
        index_order_peak,
    })
}
