//! Liveness and a memory-aware schedule. A value is live from the step its producer runs to
//! the step its last consumer runs (both included: a kernel holds its inputs and its output
//! at once); a named output lives to the end; a value nobody consumes lives for its own
//! step. Live bytes are [`Fact::bytes`](crate::ir::Fact::bytes) under the bindings. The sum
//! over all values is what running without any buffer reuse would hold.
//!
//! The schedule is greedy: among the ready nodes, run the one that frees the most bytes net
//! of what it allocates (inputs it is the last consumer of, minus its output), ties to the
//! lowest index. It is a heuristic (the optimum is NP-hard), so [`schedule`] keeps plain
//! index order when that peaks lower.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::ir::{Bindings, Graph, IrError, NodeId};

/// A schedule and its live bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Liveness {
    /// The nodes in the order they run.
    pub order: Vec<NodeId>,
    /// Bytes live while `order[k]` runs.
    pub live_bytes: Vec<usize>,
    /// The largest of `live_bytes`.
    pub peak: usize,
    /// The bytes of all values (no reuse at all).
    pub total: usize,
    /// Whether the greedy order was kept (else index order peaked lower or equal).
    pub greedy: bool,
}

/// Live bytes of `order`, which must be a topological order of all of `graph`'s nodes.
pub fn liveness(graph: &Graph, order: &[NodeId], b: &Bindings) -> Result<Liveness, IrError> {
    let pos: HashMap<NodeId, usize> = order.iter().enumerate().map(|(k, &v)| (v, k)).collect();
    if pos.len() != graph.len() || order.len() != graph.len() {
        return Err(IrError::Invariant(format!(
            "schedule has {} nodes ({} distinct), the graph {}",
            order.len(),
            pos.len(),
            graph.len()
        )));
    }
    let outputs: HashSet<NodeId> = graph.outputs().values().copied().collect();
    let last = order.len().saturating_sub(1);
    // Difference array: +bytes at the producer's step, −bytes after the last use (i128:
    // byte counts saturate at usize::MAX, sums of them must not wrap).
    let mut delta = vec![0i128; order.len() + 1];
    let mut total = 0usize;
    for (k, &v) in order.iter().enumerate() {
        for i in &graph.node(v).inputs {
            if pos[i] >= k {
                return Err(IrError::Invariant(format!(
                    "schedule runs %{} before its input %{}",
                    v.index(),
                    i.index()
                )));
            }
        }
        let end = if outputs.contains(&v) {
            last
        } else {
            graph.consumers(v).iter().map(|c| pos[c]).max().unwrap_or(k)
        };
        let bytes = graph.fact(v).bytes(b);
        total = total.saturating_add(bytes);
        delta[k] += bytes as i128;
        delta[end + 1] -= bytes as i128;
    }
    let mut live = 0i128;
    let live_bytes: Vec<usize> = delta[..order.len()]
        .iter()
        .map(|d| {
            live += d;
            live.clamp(0, usize::MAX as i128) as usize
        })
        .collect();
    Ok(Liveness {
        order: order.to_vec(),
        peak: live_bytes.iter().copied().max().unwrap_or(0),
        live_bytes,
        total,
        greedy: false,
    })
}

/// The greedy memory-aware topological order (see the module comment).
pub fn greedy_order(graph: &Graph, b: &Bindings) -> Result<Vec<NodeId>, IrError> {
    let outputs: HashSet<NodeId> = graph.outputs().values().copied().collect();
    let mut missing: HashMap<NodeId, usize> = HashMap::new();
    let mut uses: HashMap<NodeId, usize> = HashMap::new();
    let mut ready = BTreeSet::new();
    for id in graph.ids() {
        let mut ins = graph.node(id).inputs.clone();
        ins.sort();
        ins.dedup();
        missing.insert(id, ins.len());
        if ins.is_empty() {
            ready.insert(id);
        }
        uses.insert(id, graph.consumers(id).len());
    }
    let mut order = Vec::with_capacity(graph.len());
    while !ready.is_empty() {
        let score = |c: NodeId| -> i64 {
            let mut ins = graph.node(c).inputs.clone();
            ins.sort();
            ins.dedup();
            let freed: usize = ins
                .iter()
                .filter(|i| uses[i] == 1 && !outputs.contains(i))
                .map(|&i| graph.fact(i).bytes(b))
                .fold(0usize, usize::saturating_add);
            (freed as i128 - graph.fact(c).bytes(b) as i128)
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64
        };
        // Highest score, then lowest index (BTreeSet iterates by index).
        let mut best: Option<(i64, NodeId)> = None;
        for &c in &ready {
            let s = score(c);
            if best.is_none_or(|(bs, _)| s > bs) {
                best = Some((s, c));
            }
        }
        let (_, v) = best.expect("ready is not empty");
        ready.remove(&v);
        order.push(v);
        let mut ins = graph.node(v).inputs.clone();
        ins.sort();
        ins.dedup();
        for i in ins {
            *uses.get_mut(&i).expect("counted") -= 1;
        }
        for c in graph.consumers(v) {
            let m = missing.get_mut(&c).expect("counted");
            *m -= 1;
            if *m == 0 {
                ready.insert(c);
            }
        }
    }
    if order.len() != graph.len() {
        return Err(IrError::Cycle {
            at: "the memory schedule".into(),
        });
    }
    Ok(order)
}

/// The schedule with the lower peak of the greedy order and index order (greedy on ties).
pub fn schedule(graph: &Graph, b: &Bindings) -> Result<Liveness, IrError> {
    let mut greedy = liveness(graph, &greedy_order(graph, b)?, b)?;
    let index = liveness(graph, &graph.topo_order()?, b)?;
    if greedy.peak <= index.peak {
        greedy.greedy = true;
        Ok(greedy)
    } else {
        Ok(index)
    }
}
