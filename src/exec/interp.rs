//! The reference interpreter: evaluates the ancestors of the wanted nodes in topological
//! order on the calling thread (kernels still use the current rayon pool), checks every
//! output against its node's fact, and frees each value after its last use, so the memory
//! held is the live set of the order.

use std::collections::{HashMap, HashSet};

use crate::ir::{Bindings, Graph, IrError, NodeId, Params, Value};
use crate::op::{Ctx, GraphSource};

/// The values of the wanted nodes after one step.
#[derive(Debug)]
pub struct StepValues {
    values: HashMap<NodeId, Value>,
    /// The step's symbol values (from its subgraph).
    pub bindings: Bindings,
}

impl StepValues {
    /// A wanted node's value.
    pub fn get(&self, id: NodeId) -> Option<&Value> {
        self.values.get(&id)
    }

    /// Takes a wanted node's value out.
    pub fn take(&mut self, id: NodeId) -> Option<Value> {
        self.values.remove(&id)
    }
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
    let needed = graph.ancestors(wanted);
    let order: Vec<NodeId> = graph
        .topo_order()?
        .into_iter()
        .filter(|v| needed.contains(v))
        .collect();
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
    };
    for &v in &order {
        let node = graph.node(v);
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
                .map_err(|source| IrError::Op {
                    op: node.op.name().to_string(),
                    label: node.label.clone(),
                    source,
                })?
        };
        if let Value::Subgraph(s) = &out {
            bindings = Bindings {
                nodes: s.n_nodes(),
                entries: s.n_entries(),
            };
        }
        if !out.matches(&node.fact, &bindings) {
            return Err(IrError::Invariant(format!(
                "%{} {} in `{}`: output does not match its fact {}",
                v.index(),
                node.op.name(),
                node.label,
                node.fact
            )));
        }
        for &i in &node.inputs {
            let u = uses.get_mut(&i).expect("counted");
            *u -= 1;
            if *u == 0 && !keep.contains(&i) {
                values.remove(&i);
            }
        }
        values.insert(v, out);
    }
    values.retain(|k, _| keep.contains(k));
    Ok(StepValues { values, bindings })
}
