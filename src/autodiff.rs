//! Reverse-mode autodiff on the IR: appends the backward DAG to the forward one by calling
//! each op's `backward` in reverse topological order, summing gradients that meet at a
//! node with one `add_n`. It runs when a plan is loaded; the planner then optimises the
//! forward and backward nodes together (chain order, CSE, liveness).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::op::builtin::{AddN, One};
use crate::op::{GradBuilder, Op};

use crate::ir::{Fact, Graph, IrError, NodeId};

/// The result of [`differentiate`]: the gradient node of each node asked for.
#[derive(Clone, Debug)]
pub struct Gradients {
    /// `(node, its gradient)` in the order asked.
    pub grads: Vec<(NodeId, NodeId)>,
}

/// Adds the nodes computing ∂loss/∂w for every `w` in `wrt` (parameters, usually).
/// Errors: a loss that is not a scalar, a `w` the loss does not depend on, an op on the
/// path without a backward (named, with its expression).
pub fn differentiate(
    graph: &mut Graph,
    loss: NodeId,
    wrt: &[NodeId],
) -> Result<Gradients, IrError> {
    if graph.fact(loss) != &Fact::Scalar {
        return Err(IrError::Autodiff(format!(
            "the loss `{}` is {}, expected a scalar",
            graph.node(loss).label,
            graph.fact(loss)
        )));
    }
    let forward = graph.topo_order()?;
    let up = graph.ancestors(&[loss]);
    for &w in wrt {
        if !up.contains(&w) {
            return Err(IrError::Autodiff(format!(
                "the loss does not depend on `{}`",
                graph.node(w).label
            )));
        }
    }
    let down = graph.descendants(wrt);
    let needs: HashSet<NodeId> = up.intersection(&down).copied().collect();

    let seed = graph.add(Arc::new(One), &[], "∂loss/∂loss")?;
    let mut pending: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    pending.insert(loss, vec![seed]);
    let mut done: HashMap<NodeId, NodeId> = HashMap::new();
    for &v in forward.iter().rev() {
        if !needs.contains(&v) {
            continue;
        }
        let Some(parts) = pending.remove(&v) else {
            continue;
        };
        let grad = if parts.len() == 1 {
            parts[0]
        } else {
            let label = format!("∇ {} (sum)", graph.node(v).label);
            graph.add(Arc::new(AddN), &parts, label)?
        };
        done.insert(v, grad);
        let node = graph.node(v).clone();
        if !node.inputs.iter().any(|i| needs.contains(i)) {
            continue;
        }
        let mut b = GradBuilder {
            graph,
            node: v,
            needs: &needs,
        };
        let grads = node
            .op
            .backward(&mut b, grad)
            .map_err(|source| IrError::Op {
                op: node.op.name().to_string(),
                label: node.label.clone(),
                source,
            })?;
        if grads.len() != node.inputs.len() {
            return Err(IrError::Invariant(format!(
                "{}: backward returned {} gradients for {} inputs",
                node.op.name(),
                grads.len(),
                node.inputs.len()
            )));
        }
        for (slot, (&input, g)) in node.inputs.iter().zip(grads).enumerate() {
            if !needs.contains(&input) {
                continue;
            }
            let Some(g) = g else {
                return Err(IrError::Invariant(format!(
                    "{} in `{}`: no gradient for argument {} although one is needed",
                    node.op.name(),
                    node.label,
                    slot + 1
                )));
            };
            let want = graph.fact(input).grad();
            if want.as_ref() != Some(graph.fact(g)) {
                return Err(IrError::Invariant(format!(
                    "{} in `{}`: gradient of argument {} is {}, expected {}",
                    node.op.name(),
                    node.label,
                    slot + 1,
                    graph.fact(g),
                    want.map_or("none".to_string(), |f| f.to_string())
                )));
            }
            pending.entry(input).or_default().push(g);
        }
    }
    let grads = wrt
        .iter()
        .map(|w| {
            done.get(w).map(|&g| (*w, g)).ok_or_else(|| {
                IrError::Invariant(format!("no gradient reached `{}`", graph.node(*w).label))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Gradients { grads })
}

/// Whether `op` is the seed gradient node autodiff adds.
pub fn is_seed(op: &dyn Op) -> bool {
    op.source_kind() == Some(crate::op::SourceKind::Seed)
}
