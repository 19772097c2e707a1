//! A plan's receptive-field radius: the number of message-passing hops between the
//! features and the logits, what `saintflow partition --plan` takes as GAD's walk length L.
//!
//! Measured on the *planned* forward graph, where every product with an adjacency is a
//! neighbour op ([`NeighbourOp`](crate::op::NeighbourOp): `spmm`, `gat`, a user's
//! aggregation) and the planner never multiplies two sparse matrices, so `A @ A @ x` is two
//! hops: a value's radius is the largest of its inputs', plus one at a neighbour op over
//! its per-node operand X (a neighbour op's sparse operand, such as attention's α, brings
//! its own radius, not one more). GCN's two layers give 2, GraphSAGE's `repeat = 2` gives 2,
//! MixHop's two layers with A² give 4, an MLP gives 0. Ops are asked, never recognised by
//! name, so user ops count as they declare themselves.

use std::collections::HashMap;

use super::Result;
use crate::ir::{Bindings, Fact, Graph, NodeId};
use crate::op::Registry;
use crate::plan::Plan;
use crate::planner::PlanOptions;
use crate::store::GraphStore;

/// The longest chain of neighbour hops from a source to `output` in `graph`.
pub fn receptive_field(graph: &Graph, output: NodeId) -> Result<usize> {
    let wanted = graph.ancestors(&[output]);
    let mut radius: HashMap<NodeId, usize> = HashMap::new();
    for id in graph.topo_order()? {
        if !wanted.contains(&id) {
            continue;
        }
        let node = graph.node(id);
        let of = |i: usize| radius.get(&node.inputs[i]).copied().unwrap_or(0);
        let facts: Vec<&Fact> = node.inputs.iter().map(|&i| graph.fact(i)).collect();
        let nb = node.op.as_neighbour().map(|o| o.neighbour(&facts));
        let r = (0..node.inputs.len())
            .map(|i| match nb {
                Some(nb) if i == nb.x => of(i) + 1,
                _ => of(i),
            })
            .max()
            .unwrap_or(0);
        radius.insert(id, r);
    }
    Ok(radius.get(&output).copied().unwrap_or(0))
}

/// `plan`'s receptive-field radius on `store` (its feature width and classes) with
/// `registry`'s ops: lowered, planned for the whole graph, measured at the logits.
pub fn plan_hops(plan: &Plan, store: &GraphStore, registry: &Registry) -> Result<usize> {
    // The radius is the graph's, whatever the planner's partitioning: planned for one
    // worker.
    let opts = PlanOptions::new(
        Bindings {
            nodes: store.n_nodes().max(1),
            entries: store.full().n_entries(),
            pairs: 0,
        },
        std::num::NonZeroUsize::MIN,
    );
    let (graph, _) =
        crate::compile::lower_and_plan(plan, &crate::compile::lower_env(store, registry), &opts)?;
    let logits = graph
        .output("logits")
        .expect("a lowered plan names its logits");
    receptive_field(&graph, logits)
}
