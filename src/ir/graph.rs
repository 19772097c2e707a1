//! The DAG of one training step, on petgraph. A node is one op application; its ordered
//! inputs are other nodes (mirrored as petgraph edges whose weight is the argument slot, so
//! graph algorithms — topological order, reachability, Graphviz — come from petgraph).
//!
//! Invariants, checked by [`Graph::validate`] after every pass: the graph is acyclic, every
//! node's fact is what its op infers from its inputs' facts, and edges mirror input lists.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{Dfs, EdgeRef, Reversed};
use petgraph::Direction;

use super::op::Op;

use super::fact::Fact;
use super::IrError;

/// A node's id: stable across node removals.
pub type NodeId = NodeIndex<u32>;

/// One op application.
#[derive(Clone, Debug)]
pub struct Node {
    /// The op.
    pub op: Arc<dyn Op>,
    /// Its arguments, in order.
    pub inputs: Vec<NodeId>,
    /// What its output is.
    pub fact: Fact,
    /// Where it comes from: the plan expression, or `∇…` for gradient nodes.
    pub label: String,
    /// What the planner decided about it (chain order, partitions), for `explain`.
    pub note: String,
}

/// The DAG of a step: nodes, and the named outputs (`loss`, `logits`, `grad/<param>`).
#[derive(Clone, Debug, Default)]
pub struct Graph {
    dag: StableDiGraph<Node, u32>,
    outputs: BTreeMap<String, NodeId>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Adds `op` applied to `inputs`: checks arity and argument kinds, infers the fact.
    pub fn add(
        &mut self,
        op: Arc<dyn Op>,
        inputs: &[NodeId],
        label: impl Into<String>,
    ) -> Result<NodeId, IrError> {
        let label = label.into();
        let fact = self.infer(op.as_ref(), inputs, &label)?;
        let id = self.dag.add_node(Node {
            op,
            inputs: inputs.to_vec(),
            fact,
            label,
            note: String::new(),
        });
        for (slot, &i) in inputs.iter().enumerate() {
            self.dag.add_edge(i, id, slot as u32);
        }
        Ok(id)
    }

    /// The fact `op` gives on `inputs`, with arity and kinds checked.
    pub fn infer(&self, op: &dyn Op, inputs: &[NodeId], label: &str) -> Result<Fact, IrError> {
        let facts = inputs
            .iter()
            .map(|&i| self.try_node(i).map(|n| &n.fact))
            .collect::<Result<Vec<_>, _>>()?;
        super::op::check_args(op, &facts)
            .and_then(|()| op.infer(&facts))
            .map_err(|source| IrError::Op {
                op: op.name().to_string(),
                label: label.to_string(),
                source,
            })
    }

    fn try_node(&self, id: NodeId) -> Result<&Node, IrError> {
        self.dag
            .node_weight(id)
            .ok_or(IrError::MissingNode(id.index()))
    }

    /// A node (panics on a removed id: an internal invariant).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.dag[id]
    }

    /// A node, mutably (for notes; use [`Graph::replace_op`] to change an op).
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.dag[id]
    }

    /// A node's fact.
    pub fn fact(&self, id: NodeId) -> &Fact {
        &self.dag[id].fact
    }

    /// Whether `id` names a live node.
    pub fn contains(&self, id: NodeId) -> bool {
        self.dag.contains_node(id)
    }

    /// Live nodes.
    pub fn len(&self) -> usize {
        self.dag.node_count()
    }

    /// No nodes.
    pub fn is_empty(&self) -> bool {
        self.dag.node_count() == 0
    }

    /// All live node ids, in index order.
    pub fn ids(&self) -> Vec<NodeId> {
        self.dag.node_indices().collect()
    }

    /// The petgraph DAG (read-only), for algorithms and Graphviz.
    pub fn dag(&self) -> &StableDiGraph<Node, u32> {
        &self.dag
    }

    /// Names an output (kept alive by dead-node elimination).
    pub fn set_output(&mut self, name: impl Into<String>, id: NodeId) {
        self.outputs.insert(name.into(), id);
    }

    /// Keeps the named outputs `keep` says yes to; the others' nodes are dead unless a kept
    /// output needs them (what a forward-only evaluation plans: not the gradients).
    pub fn retain_outputs(&mut self, keep: impl Fn(&str) -> bool) {
        self.outputs.retain(|name, _| keep(name));
    }

    /// The named outputs.
    pub fn outputs(&self) -> &BTreeMap<String, NodeId> {
        &self.outputs
    }

    /// An output by name.
    pub fn output(&self, name: &str) -> Option<NodeId> {
        self.outputs.get(name).copied()
    }

    /// Nodes consuming `id`'s output, each once, in index order.
    pub fn consumers(&self, id: NodeId) -> Vec<NodeId> {
        let mut c: Vec<NodeId> = self
            .dag
            .edges_directed(id, Direction::Outgoing)
            .map(|e| e.target())
            .collect();
        c.sort();
        c.dedup();
        c
    }

    /// Nodes in a topological order (inputs before consumers); ties broken by node index,
    /// so the order is deterministic.
    pub fn topo_order(&self) -> Result<Vec<NodeId>, IrError> {
        let mut indegree: BTreeMap<NodeId, usize> = self
            .dag
            .node_indices()
            .map(|i| (i, self.dag[i].inputs.len()))
            .collect();
        let mut ready: std::collections::BTreeSet<NodeId> = indegree
            .iter()
            .filter(|(_, &d)| d == 0)
            .map(|(&i, _)| i)
            .collect();
        let mut order = Vec::with_capacity(indegree.len());
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for e in self.dag.edges_directed(i, Direction::Outgoing) {
                let d = indegree.get_mut(&e.target()).expect("edge to a live node");
                *d -= 1;
                if *d == 0 {
                    ready.insert(e.target());
                }
            }
        }
        if order.len() != self.dag.node_count() {
            let stuck = indegree
                .iter()
                .find(|(_, &d)| d > 0)
                .map(|(&i, _)| self.dag[i].label.clone())
                .unwrap_or_default();
            return Err(IrError::Cycle { at: stuck });
        }
        Ok(order)
    }

    /// Nodes from which `targets` are reachable (the targets included).
    pub fn ancestors(&self, targets: &[NodeId]) -> HashSet<NodeId> {
        let rev = Reversed(&self.dag);
        let mut seen = HashSet::new();
        for &t in targets {
            let mut dfs = Dfs::new(rev, t);
            while let Some(v) = dfs.next(rev) {
                seen.insert(v);
            }
        }
        seen
    }

    /// Nodes reachable from `sources` (the sources included).
    pub fn descendants(&self, sources: &[NodeId]) -> HashSet<NodeId> {
        let mut seen = HashSet::new();
        for &s in sources {
            let mut dfs = Dfs::new(&self.dag, s);
            while let Some(v) = dfs.next(&self.dag) {
                seen.insert(v);
            }
        }
        seen
    }

    /// Points every use of `old` (inputs and outputs) at `new`. Facts must agree.
    pub fn replace_uses(&mut self, old: NodeId, new: NodeId) -> Result<(), IrError> {
        if old == new {
            return Ok(());
        }
        if self.fact(old) != self.fact(new) {
            return Err(IrError::Invariant(format!(
                "replacing %{} ({}) by %{} ({}): facts differ",
                old.index(),
                self.fact(old),
                new.index(),
                self.fact(new)
            )));
        }
        for c in self.consumers(old) {
            let edges: Vec<_> = self
                .dag
                .edges_connecting(old, c)
                .map(|e| (e.id(), *e.weight()))
                .collect();
            for (e, slot) in edges {
                self.dag.remove_edge(e);
                self.dag.add_edge(new, c, slot);
                self.dag[c].inputs[slot as usize] = new;
            }
        }
        for v in self.outputs.values_mut() {
            if *v == old {
                *v = new;
            }
        }
        Ok(())
    }

    /// Replaces a node's op by one that infers the same fact on the same inputs.
    pub fn replace_op(&mut self, id: NodeId, op: Arc<dyn Op>) -> Result<(), IrError> {
        let node = self.node(id);
        let fact = self.infer(op.as_ref(), &node.inputs, &node.label)?;
        if fact != node.fact {
            return Err(IrError::Invariant(format!(
                "replacing the op of %{} by {}: fact {} differs from {}",
                id.index(),
                op.name(),
                fact,
                node.fact
            )));
        }
        self.dag[id].op = op;
        Ok(())
    }

    /// Removes a node that nothing consumes.
    pub fn remove(&mut self, id: NodeId) -> Result<(), IrError> {
        if !self.consumers(id).is_empty() || self.outputs.values().any(|&v| v == id) {
            return Err(IrError::Invariant(format!(
                "removing %{} ({}) which is still used",
                id.index(),
                self.node(id).label
            )));
        }
        self.dag.remove_node(id);
        Ok(())
    }

    /// Checks the invariants: acyclic, edges mirror inputs, every fact re-infers.
    pub fn validate(&self) -> Result<(), IrError> {
        self.topo_order()?;
        for id in self.dag.node_indices() {
            let node = &self.dag[id];
            let mut from_edges: Vec<(u32, NodeId)> = self
                .dag
                .edges_directed(id, Direction::Incoming)
                .map(|e| (*e.weight(), e.source()))
                .collect();
            from_edges.sort();
            let listed: Vec<(u32, NodeId)> = node
                .inputs
                .iter()
                .enumerate()
                .map(|(s, &i)| (s as u32, i))
                .collect();
            if from_edges != listed {
                return Err(IrError::Invariant(format!(
                    "%{}: edges do not mirror its inputs",
                    id.index()
                )));
            }
            let fact = self.infer(node.op.as_ref(), &node.inputs, &node.label)?;
            if fact != node.fact {
                return Err(IrError::Invariant(format!(
                    "%{} ({}): fact {} but its op infers {}",
                    id.index(),
                    node.label,
                    node.fact,
                    fact
                )));
            }
        }
        for (name, &id) in &self.outputs {
            if !self.contains(id) {
                return Err(IrError::Invariant(format!(
                    "output {name} names a removed node"
                )));
            }
        }
        Ok(())
    }
}
