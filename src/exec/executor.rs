//! The work-stealing executor: runs a step's DAG as op × part tasks on a [`Pool`], with
//! readiness by atomic dependency counters, and returns what the interpreter returns.
//!
//! Protocol, in prose:
//! * The step's nodes are the ancestors of the wanted ones. Each node counts its unfinished
//!   inputs (one per input *occurrence*, so `add(x, x)` waits for x once per use); nodes at
//!   zero are submitted in topological order. The task that finishes a node decrements each
//!   consumer's counter and spawns the consumers that reach zero (on its own deque).
//! * A node's task asks its op for a [`Split`](crate::op::Split) (`Partitioned::split`, given the
//!   actual inputs and the pool's width). None: the task runs `forward`. Some: it allocates
//!   the output, cuts it into one disjoint view per part and spawns the parts in range
//!   order; the part that finishes last (an atomic count) completes the node.
//! * Completing a node: if it is a subgraph, the step's bindings are set from it (every
//!   node that depends on it runs later, through the counters); the value is checked
//!   against the node's fact, stored, and each input's remaining-use count is decremented —
//!   at zero the input's value is dropped unless it is wanted (the interpreter's freeing),
//!   its buffer going to the [`recycle`] free-list when unshared.
//! * Time: each task adds its duration to its op's stage ([`StageTimes`]); CPU time, so on
//!   p workers the sum may exceed the step's wall time.
//! * Failure: an op error, or a panic (caught per task), records the first error naming
//!   the op and its expression, and sets a flag; tasks that start afterwards return at once
//!   and no node is completed, so no new task is spawned. The step returns `Err` once the
//!   pool's scope has drained every task already spawned: never a hang, nothing borrowed
//!   from the step outlives it.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::interp::{
    check_output, op_error, step_order, StageTimes, StepInput, StepRunner, StepValues,
};
use super::pool::{current_worker, Pool, Scope};
use super::timeline::{Span, SpanKind, Timeline};
use crate::ir::{recycle, Bindings, Graph, IrError, NodeId, Params, Tensor, Value};
use crate::op::{AnySplit, Axis, Ctx, GraphSource, MatMut, OpError};

/// The work-stealing [`StepRunner`]: one [`Pool`] of worker threads, reused by every step.
#[derive(Debug)]
pub struct Executor {
    pool: Arc<Pool>,
    timeline: bool,
}

impl Executor {
    /// An executor on exactly `threads` worker threads (`machine::threads_or_cores(None)`
    /// for one per core). The threads start now and live until the executor is dropped;
    /// kernels inside its tasks see a one-thread rayon pool, so the process computes on
    /// exactly `threads` threads (plus the caller, who waits).
    pub fn new(threads: std::num::NonZeroUsize) -> Executor {
        Executor {
            pool: Arc::new(Pool::new(threads)),
            timeline: false,
        }
    }

    /// Records every step's per-worker timeline into [`StepValues::timeline`] (a span per
    /// task and part: a lock and a push each, so off by default).
    pub fn with_timeline(mut self, on: bool) -> Executor {
        self.timeline = on;
        self
    }

    /// The pool, for other work that should share the workers (the subgraph prefetcher).
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }
}

impl StepRunner for Executor {
    fn run_step(&self, i: StepInput<'_>) -> Result<StepValues, IrError> {
        run_on(
            &self.pool,
            i.graph,
            i.wanted,
            i.source,
            i.params,
            (i.step, i.seed, i.training),
            self.timeline,
        )
    }

    fn threads(&self) -> usize {
        self.pool.threads()
    }

    fn name(&self) -> &'static str {
        "executor"
    }

    fn with_prefetch(
        &self,
        source: &dyn GraphSource,
        steps: std::ops::Range<u64>,
        f: &mut dyn FnMut(&dyn GraphSource),
    ) {
        super::Prefetch::scope_until(&self.pool, source, PREFETCH_AHEAD, steps.end, |p| f(p))
    }
}

/// Subgraphs sampled ahead by [`StepRunner::with_prefetch`] (k of JPDC Algorithm 8): two
/// keep a sampler task queued behind the one running, which was enough to hide sampling
/// in `benches/step.rs` (prefetch / compute-only = 1.03×).
pub const PREFETCH_AHEAD: usize = 2;

/// One node of the step, by dense index.
struct NodeState {
    id: NodeId,
    /// Inputs by dense index, one per occurrence.
    inputs: Vec<usize>,
    /// Consumers by dense index, one per input occurrence.
    consumers: Vec<usize>,
    /// Unfinished input occurrences.
    deps: AtomicUsize,
    /// Reads of the value still to come (one per consumer occurrence).
    uses: AtomicUsize,
    keep: bool,
    value: Mutex<Option<Arc<Value>>>,
}

struct Step<'a> {
    graph: &'a Graph,
    nodes: Vec<NodeState>,
    source: Option<&'a dyn GraphSource>,
    params: &'a Params,
    step: u64,
    seed: u64,
    training: bool,
    threads: usize,
    bindings: Mutex<Bindings>,
    times: Mutex<StageTimes>,
    failed: AtomicBool,
    error: Mutex<Option<IrError>>,
    /// With a timeline: the step's start and the spans so far.
    timeline: Option<(Instant, Mutex<Vec<Span>>)>,
}

/// The output of a split node while its parts run.
struct Parts {
    /// The inputs; each part reads a clone, the last part empties it (so the inputs'
    /// buffers can be recycled when the node completes).
    inputs: Mutex<Vec<Arc<Value>>>,
    split: Box<dyn AnySplit>,
    /// Views of the output, one per part, taken by the part that runs.
    views: Mutex<Vec<Option<MatMut<'static>>>>,
    /// The output buffer; the views point into it. Taken when the last part ends.
    out: Mutex<Option<Box<Tensor>>>,
    remaining: AtomicUsize,
}

fn run_on(
    pool: &Pool,
    graph: &Graph,
    wanted: &[NodeId],
    source: Option<&dyn GraphSource>,
    params: &Params,
    (step, seed, training): (u64, u64, bool),
    timeline: bool,
) -> Result<StepValues, IrError> {
    let order = step_order(graph, wanted)?;
    let index: std::collections::HashMap<NodeId, usize> =
        order.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let keep: HashSet<NodeId> = wanted.iter().copied().collect();
    let mut nodes: Vec<NodeState> = order
        .iter()
        .map(|&v| {
            let inputs: Vec<usize> = graph.node(v).inputs.iter().map(|i| index[i]).collect();
            NodeState {
                id: v,
                deps: AtomicUsize::new(inputs.len()),
                inputs,
                consumers: Vec::new(),
                uses: AtomicUsize::new(0),
                keep: keep.contains(&v),
                value: Mutex::new(None),
            }
        })
        .collect();
    for i in 0..nodes.len() {
        for k in 0..nodes[i].inputs.len() {
            let j = nodes[i].inputs[k];
            nodes[j].consumers.push(i);
            *nodes[j].uses.get_mut() += 1;
        }
    }
    let st = Step {
        graph,
        nodes,
        source,
        params,
        step,
        seed,
        training,
        threads: pool.threads(),
        bindings: Mutex::new(Bindings {
            nodes: 0,
            entries: 0,
            pairs: 0,
        }),
        times: Mutex::new(StageTimes::default()),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        timeline: timeline.then(|| (Instant::now(), Mutex::new(Vec::new()))),
    };
    let st = &st;
    pool.scope(|s| {
        for (i, n) in st.nodes.iter().enumerate() {
            if n.inputs.is_empty() {
                s.spawn(move |s| run_node(st, i, s));
            }
        }
    });
    if let Some(e) = st.error.lock().expect("step").take() {
        return Err(e);
    }
    let mut values = std::collections::HashMap::new();
    for &w in wanted {
        if values.contains_key(&w) {
            continue;
        }
        let i = *index
            .get(&w)
            .ok_or_else(|| IrError::Invariant(format!("wanted node %{} not run", w.index())))?;
        let v = st.nodes[i]
            .value
            .lock()
            .expect("value")
            .take()
            .ok_or_else(|| {
                IrError::Invariant(format!("%{}: no value after the step", w.index()))
            })?;
        values.insert(w, Arc::try_unwrap(v).unwrap_or_else(|a| (*a).clone()));
    }
    let bindings = *st.bindings.lock().expect("bindings");
    let times = *st.times.lock().expect("times");
    let mut out = StepValues::new(values, bindings, times);
    if let Some((_, spans)) = &st.timeline {
        out.timeline = Some(Timeline {
            spans: std::mem::take(&mut *spans.lock().expect("timeline")),
            workers: pool.threads(),
        });
    }
    Ok(out)
}

impl Step<'_> {
    fn fail(&self, i: usize, source: OpError) {
        self.fail_with(op_error(self.graph.node(self.nodes[i].id), source));
    }

    fn fail_with(&self, e: IrError) {
        let mut slot = self.error.lock().expect("step");
        if slot.is_none() {
            *slot = Some(e);
        }
        self.failed.store(true, Ordering::SeqCst);
    }

    fn ctx(&self, i: usize) -> Ctx<'_> {
        Ctx {
            source: self.source,
            params: self.params,
            step: self.step,
            seed: self.seed,
            training: self.training,
            node: self.nodes[i].id,
            bindings: *self.bindings.lock().expect("bindings"),
        }
    }

    fn inputs(&self, i: usize) -> Option<Vec<Arc<Value>>> {
        self.nodes[i]
            .inputs
            .iter()
            .map(|&j| self.nodes[j].value.lock().expect("value").clone())
            .collect()
    }

    fn add_time(&self, i: usize, started: Instant, kind: SpanKind) {
        let node = self.graph.node(self.nodes[i].id);
        let ended = Instant::now();
        self.times
            .lock()
            .expect("times")
            .add(node.op.stage(), ended - started);
        if let Some((t0, spans)) = &self.timeline {
            spans.lock().expect("timeline").push(Span {
                worker: current_worker().unwrap_or(usize::MAX),
                node: self.nodes[i].id,
                op: node.op.name().to_string(),
                kind,
                start: started.saturating_duration_since(*t0),
                end: ended.saturating_duration_since(*t0),
            });
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Runs `f` catching a panic as an op error.
fn guarded<T>(f: impl FnOnce() -> Result<T, OpError>) -> Result<T, OpError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(OpError::Panicked(panic_message(p.as_ref()))),
    }
}

fn run_node<'s>(st: &'s Step<'s>, i: usize, s: &Scope<'s>) {
    if st.failed.load(Ordering::SeqCst) {
        return;
    }
    let started = Instant::now();
    let Some(inputs) = st.inputs(i) else {
        st.fail_with(IrError::Invariant(format!(
            "%{}: an input's value is missing",
            st.nodes[i].id.index()
        )));
        return;
    };
    let node = st.graph.node(st.nodes[i].id);
    let ctx = st.ctx(i);
    let refs: Vec<&Value> = inputs.iter().map(|v| &**v).collect();
    let split = match node.op.as_partitioned().map_or(Ok(None), |p| {
        guarded(|| p.split_any(&refs, &node.fact, &ctx, st.threads))
    }) {
        Ok(s) => s,
        Err(e) => return st.fail(i, e),
    };
    let Some(split) = split else {
        let out = guarded(|| node.op.forward(&refs, &ctx));
        drop(refs);
        drop(inputs);
        st.add_time(i, started, SpanKind::Task);
        match out {
            Ok(v) => complete(st, i, v, s),
            Err(e) => st.fail(i, e),
        }
        return;
    };
    drop(refs);
    let parts = match prepare_parts(st, i, inputs, split, &ctx) {
        Ok(p) => Arc::new(p),
        Err(e) => return st.fail(i, e),
    };
    st.add_time(i, started, SpanKind::Prepare);
    for k in 0..parts.split.ranges().len() {
        let parts = parts.clone();
        s.spawn(move |s| run_part(st, i, &parts, k, s));
    }
}

/// Allocates a split node's output and cuts it into one view per part.
fn prepare_parts(
    st: &Step<'_>,
    i: usize,
    inputs: Vec<Arc<Value>>,
    split: Box<dyn AnySplit>,
    ctx: &Ctx<'_>,
) -> Result<Parts, OpError> {
    let fact = &st.graph.node(st.nodes[i].id).fact;
    let (r, c) = fact
        .matrix()
        .ok_or_else(|| OpError::args(format!("split of a non-matrix output {fact}")))?;
    let (rows, cols) = (r.resolve(&ctx.bindings), c.resolve(&ctx.bindings));
    let extent = match split.axis() {
        Axis::Rows => rows,
        Axis::Cols => cols,
    };
    let mut at = 0;
    for r in split.ranges() {
        if r.start < at || r.end < r.start || r.end > extent {
            return Err(OpError::args(format!(
                "split ranges {:?}: expected ascending disjoint ranges within 0..{extent}",
                split.ranges()
            )));
        }
        at = r.end;
    }
    // Zeros only where a part may leave an element unwritten (issue 33: this fill was a
    // serial pass over the whole output before any part could start).
    let mut out = Box::new(if split.writes_all() && split.covers(extent) {
        Tensor::scratch(rows, cols)
    } else {
        Tensor::zeros(rows, cols)
    });
    // SAFETY: the buffer is boxed, so it does not move when `out` is moved into `Parts`;
    // it is taken out (and the views dropped first) only after every part has finished.
    // The views cover disjoint ranges (checked above), so no element has two writers.
    let data: &'static mut [f32] =
        unsafe { std::slice::from_raw_parts_mut(out.data.as_mut_ptr(), out.data.len()) };
    let mut rest = MatMut::row_major(data, rows, cols)?;
    let mut offset = 0;
    let mut views = Vec::with_capacity(split.ranges().len());
    for r in split.ranges() {
        let (view, tail) = match split.axis() {
            Axis::Rows => {
                let (_, v) = rest.split_rows_mut(r.start - offset)?;
                v.split_rows_mut(r.end - r.start)?
            }
            Axis::Cols => {
                let (_, v) = rest.split_cols_mut(r.start - offset)?;
                v.split_cols_mut(r.end - r.start)?
            }
        };
        views.push(Some(view));
        rest = tail;
        offset = r.end;
    }
    Ok(Parts {
        inputs: Mutex::new(inputs),
        remaining: AtomicUsize::new(split.ranges().len()),
        split,
        views: Mutex::new(views),
        out: Mutex::new(Some(out)),
    })
}

fn run_part<'s>(st: &'s Step<'s>, i: usize, parts: &Parts, k: usize, s: &Scope<'s>) {
    if !st.failed.load(Ordering::SeqCst) {
        let started = Instant::now();
        let view = parts.views.lock().expect("views")[k].take();
        if let Some(view) = view {
            let node = st.graph.node(st.nodes[i].id);
            let ctx = st.ctx(i);
            let inputs = parts.inputs.lock().expect("inputs").clone();
            let refs: Vec<&Value> = inputs.iter().map(|v| &**v).collect();
            let r = guarded(|| match node.op.as_partitioned() {
                Some(p) => p.forward_part_any(&refs, &ctx, &*parts.split, k, view),
                None => Err(OpError::Missing(format!(
                    "{}: parts without a split",
                    node.op.name()
                ))),
            });
            drop(refs);
            drop(inputs);
            st.add_time(i, started, SpanKind::Part(k));
            if let Err(e) = r {
                st.fail(i, e);
            }
        }
    }
    if parts.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
        // Every part is done: no view is in use any more.
        parts.views.lock().expect("views").clear();
        parts.inputs.lock().expect("inputs").clear();
        let out = parts.out.lock().expect("out").take();
        if let (Some(mut out), false) = (out, st.failed.load(Ordering::SeqCst)) {
            let started = Instant::now();
            let node = st.graph.node(st.nodes[i].id);
            let finished = guarded(|| {
                let (rows, cols) = (out.rows, out.cols);
                let view = MatMut::row_major(&mut out.data, rows, cols)?;
                match node.op.as_partitioned() {
                    Some(p) => p.finish_any(&*parts.split, view),
                    None => Ok(()),
                }
            });
            st.add_time(i, started, SpanKind::Finish);
            match finished {
                Ok(()) => complete(st, i, Value::dense(*out), s),
                Err(e) => st.fail(i, e),
            }
        }
    }
}

/// Checks, stores and publishes a node's value; frees inputs after their last use; spawns
/// the consumers that became ready.
fn complete<'s>(st: &'s Step<'s>, i: usize, out: Value, s: &Scope<'s>) {
    let n = &st.nodes[i];
    let node = st.graph.node(n.id);
    let checked = check_output(n.id, node, &out, &mut st.bindings.lock().expect("bindings"));
    if let Err(e) = checked {
        st.fail_with(e);
        return;
    }
    *n.value.lock().expect("value") = Some(Arc::new(out));
    for &j in &n.inputs {
        let input = &st.nodes[j];
        if input.uses.fetch_sub(1, Ordering::AcqRel) == 1 && !input.keep {
            let dead = input.value.lock().expect("value").take();
            if let Some(Ok(v)) = dead.map(Arc::try_unwrap) {
                recycle::recycle_value(v);
            }
        }
    }
    if st.failed.load(Ordering::SeqCst) {
        return;
    }
    for &c in &n.consumers {
        if st.nodes[c].deps.fetch_sub(1, Ordering::AcqRel) == 1 {
            s.spawn(move |s| run_node(st, c, s));
        }
    }
}
