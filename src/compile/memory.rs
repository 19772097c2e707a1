//! The memory check (issue 15): what a plan's parameters and one training step need,
//! estimated before any parameter is allocated and compared with the machine's memory, so
//! that `dims.hidden = 100000000` is a clear error naming the dim instead of an allocation
//! abort.
//!
//! The estimate is parameters + optimiser state (Adam: two more copies, SGD: one) + the
//! peak live bytes of one step ([`crate::planner::memory::schedule`] over the lowered,
//! unplanned step graph, with n the sampler's expected node draw clamped to the
//! sampled graph, or the whole graph for `full`, and nnz = n × its mean degree). The
//! store's sections are memory-mapped and paged in on demand, so they are not counted:
//! a store larger than memory trains. The step's estimate counts the parameters it reads
//! once more, and the sampler's own buffers not at all; both are small beside the
//! activations of any plan that comes near the limit.
//!
//! A sampler's own draw buffer is counted apart (issue 28): the subgraph is clamped to the
//! graph, but the buffer a sampler fills before dedup is not (`roots × (depth + 1)` node
//! ids for `rw`), so `sampler.depth = 1000000000` is refused naming that key at its value
//! rather than aborting in the allocator.
//!
//! The machine's memory and the [`MemoryLimit`](crate::machine::MemoryLimit) that
//! overrides it are [`crate::machine`]'s; this module only estimates and compares.

use std::fmt::Write as _;

use crate::ir::{Bindings, ParamDecl};
use crate::machine::human;
use crate::plan::{Lowered, Optimizer, Plan, PlanError, SampleGraph, SamplerPlan};
use crate::sample::SamplerConfig;
use crate::store::GraphStore;

/// What a training needs, in bytes (u128: no product of plan sizes overflows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// The parameters.
    pub params: u128,
    /// The optimiser's state (copies of the parameters).
    pub optimizer: u128,
    /// Copies of the parameters the optimiser keeps (2 for Adam, 1 for SGD; 0 for
    /// inference).
    pub optimizer_copies: u128,
    /// The peak live bytes of one step, over the phases (0 for inference).
    pub step: u128,
    /// The bindings of the phase with that peak.
    pub step_bindings: Option<Bindings>,
    /// The largest sampler draw buffer over the phases ([`sampler_bytes`]; 0 for
    /// inference).
    pub sampler: u128,
    /// The largest count written for that sampler (where to place the error).
    pub(crate) sampler_size: Option<crate::plan::WrittenCount>,
}

impl Estimate {
    /// The total.
    pub fn total(&self) -> u128 {
        self.params + self.optimizer + self.step + self.sampler
    }
}

/// The bytes a sampler allocates in proportion to its sizes whatever the graph: its draw
/// buffer, one u32 per expected draw before dedup (`roots × (depth + 1)`, `2 × edges`,
/// `budget`; saturating). The whole-graph sampler draws nothing.
pub fn sampler_bytes(kind: &SamplerConfig) -> u128 {
    4 * kind.expected_nodes().unwrap_or(0) as u128
}

fn param_bytes(d: &ParamDecl) -> u128 {
    4 * d.rows as u128 * d.cols as u128
}

/// The expected subgraph of `sp` on `store`: n and nnz.
fn step_bindings(store: &GraphStore, sp: &SamplerPlan, lowered: &Lowered) -> Bindings {
    let g = match sp.graph {
        SampleGraph::Train => store.train(),
        SampleGraph::Full => store.full(),
    };
    let n = g.n_nodes();
    let nodes = if sp.kind.whole_graph() {
        n
    } else {
        super::expected_nodes(&sp.kind, n)
    };
    let degree = g.n_entries() as f64 / n.max(1) as f64;
    let entries = (nodes as f64 * degree).round() as usize;
    Bindings {
        nodes,
        entries,
        pairs: lowered
            .link
            .as_ref()
            .map_or(0, |l| l.sampling.expected_pairs(entries)),
    }
}

/// The estimate for training `lowered` with `optimizer` over the phases' samplers
/// (`phases` empty: inference, parameters only).
pub fn estimate(
    lowered: &Lowered,
    optimizer: Option<&Optimizer>,
    store: &GraphStore,
    phases: &[SamplerPlan],
) -> Result<Estimate, crate::ir::IrError> {
    let params: u128 = lowered.params.iter().map(param_bytes).sum();
    let copies = match optimizer {
        Some(Optimizer::Adam(_)) => 2,
        Some(Optimizer::Sgd(_)) => 1,
        None => 0,
    };
    let (mut step, mut step_bindings_) = (0u128, None);
    let (mut sampler, mut sampler_size) = (0u128, None);
    for sp in phases {
        let draws = sampler_bytes(&sp.kind);
        if draws > sampler {
            sampler = draws;
            sampler_size = sp.written.iter().max_by_key(|w| w.value).cloned();
        }
        let b = step_bindings(store, sp, lowered);
        let peak = crate::planner::schedule(&lowered.graph, &b)?.peak as u128;
        if peak > step || step_bindings_.is_none() {
            (step, step_bindings_) = (peak, Some(b));
        }
    }
    Ok(Estimate {
        params,
        optimizer: params * copies,
        optimizer_copies: copies,
        step,
        step_bindings: step_bindings_,
        sampler,
        sampler_size,
    })
}

/// The `[dims]` names a parameter's shape was written with (`W1.0` is `W1` of a repeated
/// layer).
fn dim_names<'p>(plan: &'p Plan, param: &str) -> Vec<&'p str> {
    let base = param.split('.').next().unwrap_or(param);
    plan.layers
        .iter()
        .chain(std::iter::once(&plan.output))
        .flat_map(|l| &l.params)
        .filter(|p| p.name == base)
        .flat_map(|p| p.dim_names.iter().flatten().map(String::as_str))
        .collect()
}

/// Compares `est` with `limit` bytes (`source` says where that number comes from); the
/// error names the plan's dim behind the largest parameter, at its value, and the largest
/// parameters with their shapes.
pub fn check(
    plan: &Plan,
    lowered: &Lowered,
    est: &Estimate,
    limit: u64,
    source: &str,
) -> Result<(), PlanError> {
    if est.total() <= u128::from(limit) {
        return Ok(());
    }
    let mut big: Vec<&ParamDecl> = lowered.params.iter().collect();
    big.sort_by_key(|d| std::cmp::Reverse(param_bytes(d)));
    let mut list = String::new();
    for (i, d) in big.iter().take(3).enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(list, "{sep}{}: {} × {} f32", d.name, d.rows, d.cols);
    }
    if big.len() > 3 {
        let _ = write!(list, ", … {} more", big.len() - 3);
    }
    // The dim behind the largest parameter, if it was written with one, when the
    // parameters are what does not fit (alone, or as the larger part with their state).
    let params_part = est.params * (1 + est.optimizer_copies);
    let dim = big
        .first()
        .and_then(|d| {
            let names = dim_names(plan, &d.name);
            // The larger side when both are dims.
            names
                .into_iter()
                .max_by_key(|n| plan.dims.get(*n).copied().unwrap_or(0))
        })
        .filter(|_| est.params > u128::from(limit) || params_part > est.step);
    let lead = match dim {
        Some(d) => format!("dims.{d} = {}: ", plan.dims[d]),
        None => String::new(),
    };
    let machine = format!(
        "this machine has {} ({source}); pass --no-memory-check (MemoryLimit::Off) to try anyway",
        human(u128::from(limit))
    );
    // A sampler size that outweighs the rest: placed at the count written largest.
    if est.sampler >= params_part.max(est.step) {
        let (at, lead) = match &est.sampler_size {
            Some(w) => (Some(w.at), format!("sampler {} = {}: ", w.key, w.value)),
            None => (None, String::new()),
        };
        return Err(plan.limit_error_at(
            at,
            format!(
                "{lead}each subgraph draws {} nodes before dedup, {} for the sampler's draw buffer alone (training needs {} in all); {machine}",
                est.sampler / 4,
                human(est.sampler),
                human(est.total())
            ),
        ));
    }
    let what = if est.params > u128::from(limit) {
        format!(
            "{lead}the parameters alone need {} ({list}), {machine}",
            human(est.params)
        )
    } else {
        let opt = match est.optimizer_copies {
            0 => String::new(),
            2 => format!(" + Adam's state {}", human(est.optimizer)),
            _ => format!(" + the optimiser's state {}", human(est.optimizer)),
        };
        let step = match est.step_bindings {
            Some(b) => format!(
                " + one step's values {} (n = {} sampled nodes, nnz = {})",
                human(est.step),
                b.nodes,
                b.entries
            ),
            None => String::new(),
        };
        format!(
            "{lead}training needs {}: parameters {} ({list}){opt}{step}; {machine}",
            human(est.total()),
            human(est.params),
        )
    };
    Err(plan.limit_error(dim, what))
}
