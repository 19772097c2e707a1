//! Dead-node elimination: a node from which no named output is reachable is removed
//! (consumers before producers, so every removal is of an unused node).

use crate::ir::{Graph, IrError};

use super::{Pass, PlanOptions};

/// The dead-node elimination pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &str {
        "dce"
    }

    fn run(&self, graph: &mut Graph, _: &PlanOptions) -> Result<Vec<(String, usize)>, IrError> {
        let outputs: Vec<_> = graph.outputs().values().copied().collect();
        let live = graph.ancestors(&outputs);
        let mut removed = 0;
        for id in graph.topo_order()?.into_iter().rev() {
            if !live.contains(&id) {
                graph.remove(id)?;
                removed += 1;
            }
        }
        Ok(vec![("removed".into(), removed)])
    }
}
