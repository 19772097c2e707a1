//! Common-subexpression elimination: nodes with equal op name, attributes, inputs and fact
//! whose op is [`pure`](crate::op::Op::pure) compute the same value, so all uses of the
//! later ones are pointed at the first (in topological order, ties by index) and the later
//! ones removed. One topological sweep merges whole equal sub-DAGs (inputs are merged
//! before their consumers are keyed); the sweep repeats until nothing merges.

use std::collections::HashMap;

use crate::ir::{Fact, Graph, IrError, NodeId};

use super::{Pass, PlanOptions};

/// The CSE pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cse;

type CseKey = (String, String, Vec<NodeId>, Fact);

impl Pass for Cse {
    fn name(&self) -> &str {
        "cse"
    }

    fn run(&self, graph: &mut Graph, _: &PlanOptions) -> Result<Vec<(String, usize)>, IrError> {
        let mut merged = 0;
        let mut sweeps = 0;
        loop {
            sweeps += 1;
            let mut seen: HashMap<CseKey, NodeId> = HashMap::new();
            let mut changed = 0;
            for id in graph.topo_order()? {
                let n = graph.node(id);
                if !n.op.pure() {
                    continue;
                }
                let key = (
                    n.op.name().to_string(),
                    n.op.identity(),
                    n.inputs.clone(),
                    n.fact.clone(),
                );
                match seen.get(&key) {
                    Some(&first) => {
                        graph.replace_uses(id, first)?;
                        graph.remove(id)?;
                        changed += 1;
                    }
                    None => {
                        seen.insert(key, id);
                    }
                }
            }
            merged += changed;
            if changed == 0 {
                break;
            }
        }
        Ok(vec![("merged".into(), merged), ("sweeps".into(), sweeps)])
    }
}
