//! The reference interpreter: evaluates the ancestors of the wanted nodes in topological
//! order on the calling thread (kernels still use the current rayon pool), checks every
//! output against its node's fact, and frees each value after its last use, so the memory
//! held is the live set of the order.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::ir::{Bindings, Graph, IrError, Node, NodeId, Params, Value};
use crate::op::{Ctx, GraphSource, OpError, Stage};

/// Time spent per [`Stage`] in one step: the sum of the durations of the op tasks of that
/// stage (on several threads this is CPU time, and may exceed the step's wall time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Source ops: sample, features, targets, adjacency.
    pub sampling: Duration,
    /// SpMM, SDDMM, attention.
    pub aggregation: Duration,
    /// GEMM.
    pub transformation: Duration,
    /// Everything else.
    pub other: Duration,
}

impl StageTimes {
    /// Adds `d` to `stage`'s time.
    pub fn add(&mut self, stage: Stage, d: Duration) {
        match stage {
            Stage::Sampling => self.sampling += d,
            Stage::Aggregation => self.aggregation += d,
            Stage::Transformation => self.transformation += d,
            Stage::Other => self.other += d,
        }
    }

    /// The sum over stages.
    pub fn total(&self) -> Duration {
        self.sampling + self.aggregation + self.transformation + self.other
    }
}

/// The values of the wanted nodes after one step.
#[derive(Debug)]
pub struct StepValues {
    values: HashMap<NodeId, Value>,
    /// The step's symbol values (from its subgraph).
    pub bindings: Bindings,
    /// Where the step's time went.
    pub times: StageTimes,
    /// The per-worker timeline, when the runner records one
    /// ([`Executor::with_timeline`](super::Executor::with_timeline)).
    pub timeline: Option<super::timeline::Timeline>,
}

/// What one step of a DAG runs on ([`StepRunner::run_step`]).
#[derive(Clone, Copy)]
pub struct StepInput<'a> {
    /// The lowered DAG.
    pub graph: &'a Graph,
    /// The nodes whose values the step returns.
    pub wanted: &'a [NodeId],
    /// The step's subgraph and its inputs (None for a DAG without graph inputs).
    pub source: Option<&'a dyn GraphSource>,
    /// The parameters' values.
    pub params: &'a Params,
    /// The step's global index (asks `source` for its subgraph).
    pub step: u64,
    /// The run's seed: with `step`, keys the step's randomness (dropout masks).
    pub seed: u64,
    /// Training (dropout on) or evaluation.
    pub training: bool,
}

impl<'a> StepInput<'a> {
    /// An evaluation step 0 of `graph` (seed 0, no source) returning `wanted`; the
    /// methods below set the rest.
    pub fn new(graph: &'a Graph, wanted: &'a [NodeId], params: &'a Params) -> Self {
        StepInput {
            graph,
            wanted,
            source: None,
            params,
            step: 0,
            seed: 0,
            training: false,
        }
    }

    /// With the subgraphs and inputs of `source`.
    pub fn source(self, source: &'a dyn GraphSource) -> Self {
        StepInput {
            source: Some(source),
            ..self
        }
    }

    /// As step `step` of a run seeded `seed`.
    pub fn step(self, step: u64, seed: u64) -> Self {
        StepInput { step, seed, ..self }
    }

    /// Training (dropout on) when `training`, else evaluation.
    pub fn training(self, training: bool) -> Self {
        StepInput { training, ..self }
    }
}

/// Something that runs a step's DAG: the reference [`Interpreter`] or the work-stealing
/// executor. The training loop, evaluation and `embed` are written against this, so a
/// runner can be swapped (and tested against the interpreter) without touching them.
pub trait StepRunner: Sync {
    /// Runs step `input.step` of `input.graph` and returns the values of `input.wanted`
    /// ([`StepInput`] says what each field does).
    fn run_step(&self, input: StepInput<'_>) -> Result<StepValues, IrError>;

    /// Worker threads it computes on.
    fn threads(&self) -> usize;

    /// Its name in the training log's `run` record.
    fn name(&self) -> &'static str {
        "custom"
    }

    /// Runs `f` with a source serving `source`'s subgraphs for `steps`, asked for in order.
    /// A runner with a pool samples the next subgraphs there while the current step
    /// computes (the executor's [`Prefetch`](super::Prefetch)); the default hands `source`
    /// through unchanged. `f` keeps its own result (its error type is the caller's).
    fn with_prefetch(
        &self,
        source: &dyn GraphSource,
        steps: std::ops::Range<u64>,
        f: &mut dyn FnMut(&dyn GraphSource),
    ) {
        let _ = steps;
        f(source)
    }
}

/// The reference interpreter as a [`StepRunner`]: [`run`] on the calling thread (kernels
/// use the current rayon pool).
#[derive(Clone, Copy, Debug, Default)]
pub struct Interpreter;

impl StepRunner for Interpreter {
    fn run_step(&self, i: StepInput<'_>) -> Result<StepValues, IrError> {
        run(
            i.graph, i.wanted, i.source, i.params, i.step, i.seed, i.training,
        )
    }

    fn threads(&self) -> usize {
        rayon::current_num_threads()
    }

    fn name(&self) -> &'static str {
        "interpreter"
    }
}

impl StepValues {
    pub(crate) fn new(
        values: HashMap<NodeId, Value>,
        bindings: Bindings,
        times: StageTimes,
    ) -> StepValues {
        StepValues {
            values,
            bindings,
            times,
            timeline: None,
        }
    }

    /// A wanted node's value.
    pub fn get(&self, id: NodeId) -> Option<&Value> {
        self.values.get(&id)
    }

    /// Takes a wanted node's value out.
    pub fn take(&mut self, id: NodeId) -> Option<Value> {
        self.values.remove(&id)
    }
}

/// What a step runs: the ancestors of `wanted`, in the graph's topological order.
pub(crate) fn step_order(graph: &Graph, wanted: &[NodeId]) -> Result<Vec<NodeId>, IrError> {
    let needed = graph.ancestors(wanted);
    Ok(graph
        .topo_order()?
        .into_iter()
        .filter(|v| needed.contains(v))
        .collect())
}

/// An op's failure, named by the op and its expression.
pub(crate) fn op_error(node: &Node, source: OpError) -> IrError {
    IrError::Op {
        op: node.op.name().to_string(),
        label: node.label.clone(),
        source,
    }
}

/// Checks node `id`'s output against its fact; a subgraph output first sets the step's
/// symbols in `bindings` (n and nnz). Returns the symbols the check used.
pub(crate) fn check_output(
    id: NodeId,
    node: &Node,
    out: &Value,
    bindings: &mut Bindings,
) -> Result<Bindings, IrError> {
    if let Value::Subgraph(s) = out {
        *bindings = Bindings {
            nodes: s.n_nodes(),
            entries: s.n_entries(),
            pairs: s.link.as_ref().map_or(0, |l| l.len()),
        };
    }
    if !out.matches(&node.fact, bindings) {
        return Err(IrError::Invariant(format!(
            "%{} {} in `{}`: output does not match its fact {}",
            id.index(),
            node.op.name(),
            node.label,
            node.fact
        )));
    }
    Ok(*bindings)
}

/// Runs step `step` of `graph` and returns the values of `wanted`.
pub fn run(
    graph: &Graph,
    wanted: &[NodeId],
    source: Option<&dyn GraphSource>,
    params: &Params,
    step: u64,
    seed: u64,
    training: bool,
) -> Result<StepValues, IrError> {
    let order = step_order(graph, wanted)?;
    let keep: HashSet<NodeId> = wanted.iter().copied().collect();
    let mut uses: HashMap<NodeId, usize> = HashMap::new();
    for &v in &order {
        for &i in &graph.node(v).inputs {
            *uses.entry(i).or_default() += 1;
        }
    }
    let mut values: HashMap<NodeId, Value> = HashMap::new();
    let mut bindings = Bindings {
        nodes: 0,
        entries: 0,
        pairs: 0,
    };
    let mut times = StageTimes::default();
    for &v in &order {
        let node = graph.node(v);
        let started = Instant::now();
        let out = {
            let inputs: Vec<&Value> = node
                .inputs
                .iter()
                .map(|i| values.get(i).expect("inputs run first"))
                .collect();
            let ctx = Ctx {
                source,
                params,
                step,
                seed,
                training,
                node: v,
                bindings,
            };
            node.op
                .forward(&inputs, &ctx)
                .map_err(|source| op_error(node, source))?
        };
        times.add(node.op.stage(), started.elapsed());
        check_output(v, node, &out, &mut bindings)?;
        for &i in &node.inputs {
            let u = uses.get_mut(&i).expect("counted");
            *u -= 1;
            if *u == 0 && !keep.contains(&i) {
                if let Some(dead) = values.remove(&i) {
                    crate::ir::recycle::recycle_value(dead);
                }
            }
        }
        values.insert(v, out);
    }
    values.retain(|k, _| keep.contains(k));
    Ok(StepValues {
        values,
        bindings,
        times,
        timeline: None,
    })
}
