//! Fusion (issue 33). First, slices as views: a `gemm` or `spmm` reading a column `slice`
//! reads the block in place (`slices_as_views`). Then row-wise chains: a node whose op computes row blocks
//! ([`RowBlocks`](crate::op::RowBlocks)) and whose value only one such node reads is merged
//! into that reader, repeatedly, so a chain like the backward's
//! `l2norm_backward → dropout_backward → relu_backward` or `add_n → dropout_backward →
//! relu_backward` becomes one `fused` node ([`Fused`]) that makes one pass over the rows
//! with its intermediates in cache-sized blocks. An op takes part when it can compute its
//! rows for these operands ([`RowBlocks::fusible`](crate::op::RowBlocks::fusible)): a
//! `gemm` of op(A) not transposed and op(B) a parameter, whatever its k, op(B) packed once
//! for all the blocks where k is long ([`RowBlocks::prepare`](crate::op::RowBlocks::prepare),
//! [`PREPACK_K_MIN`](crate::op::builtin::PREPACK_K_MIN)). So the two products of a SAGE
//! layer meet in the chain that concatenates them (`gemm → gemm → concat → relu`: the
//! concatenation is assembled block by block in cache, and neither product's n × h output
//! is written), and the backward's two products ∇H·W_selfᵀ and ∇H'·W_neighᵀ meet in the
//! sum of their gradients (`gemm → gemm → add_n → dropout_backward → relu_backward`):
//! issue 33's concat elimination and add_n in place, done by keeping both operands of the
//! concat and of the sum in block buffers instead of having the products write one shared
//! n × f buffer (which needs no in-place outputs from the executor). The classifier's
//! ∇H = ∇Y·W_outᵀ (k = classes) is the first stage of the chain after it
//! (`gemm[NT] → l2norm_backward → relu_backward`). A value something else also reads (a
//! forward activation the backward keeps, a named output) is never fused away, so no work
//! is duplicated and no value a later op needs disappears. Only dense per-node values with
//! a known width are fused. The fused node computes every element as the unfused chain did:
//! the same bits (tests: every shipped plan's step, fused and not).

use std::collections::HashMap;
use std::sync::Arc;

use crate::ir::{Dim, Fact, Graph, IrError, NodeId};
use crate::op::fused::{Fused, Src, Stage};
use crate::op::Op;

use super::{Pass, PlanOptions};

/// The fusion pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fuse;

/// The width of a dense per-node fact with a known number of columns.
fn per_node_width(f: &Fact) -> Option<usize> {
    match f {
        Fact::Dense { rows, cols } if *rows == Dim::NODES => cols.as_known(),
        _ => None,
    }
}

/// Node `id` as a chain of stages over its own inputs (one stage, or a fused node's).
fn stages_of(graph: &Graph, id: NodeId) -> Option<Vec<Stage>> {
    let node = graph.node(id);
    if let Some(f) = node.op.downcast_ref::<Fused>() {
        return Some(f.stages.clone());
    }
    let blocks = node.op.as_row_blocks()?;
    let cols = per_node_width(&node.fact)?;
    let facts: Vec<Fact> = node.inputs.iter().map(|&i| graph.fact(i).clone()).collect();
    if !blocks.fusible_any(&facts.iter().collect::<Vec<_>>()) {
        return None;
    }
    let mut per_node = Vec::with_capacity(facts.len());
    for f in &facts {
        match f {
            Fact::Dense { rows, .. } => per_node.push(*rows == Dim::NODES),
            _ => return None,
        }
    }
    Some(vec![Stage {
        op: node.op.clone(),
        node: id,
        inputs: (0..node.inputs.len()).map(Src::Input).collect(),
        per_node,
        cols,
        facts,
        fact: node.fact.clone(),
    }])
}

/// Producer `v`'s stages followed by consumer `u`'s, rewired over one input list: the
/// fused node's inputs (deduplicated) and its stages.
fn merge(
    graph: &Graph,
    v: NodeId,
    vs: Vec<Stage>,
    u: NodeId,
    us: Vec<Stage>,
) -> (Vec<NodeId>, Vec<Stage>) {
    let mut inputs: Vec<NodeId> = Vec::new();
    let mut slot: HashMap<NodeId, usize> = HashMap::new();
    let mut input = |id: NodeId, inputs: &mut Vec<NodeId>| {
        *slot.entry(id).or_insert_with(|| {
            inputs.push(id);
            inputs.len() - 1
        })
    };
    let v_inputs = &graph.node(v).inputs;
    let mut stages = Vec::with_capacity(vs.len() + us.len());
    for mut s in vs {
        for src in &mut s.inputs {
            if let Src::Input(i) = *src {
                *src = Src::Input(input(v_inputs[i], &mut inputs));
            }
        }
        stages.push(s);
    }
    let v_last = stages.len() - 1;
    let u_inputs = &graph.node(u).inputs;
    for mut s in us {
        for src in &mut s.inputs {
            *src = match *src {
                Src::Input(i) if u_inputs[i] == v => Src::Stage(v_last),
                Src::Input(i) => Src::Input(input(u_inputs[i], &mut inputs)),
                Src::Stage(k) => Src::Stage(k + v_last + 1),
            };
        }
        stages.push(s);
    }
    (inputs, stages)
}

impl Pass for Fuse {
    fn name(&self) -> &str {
        "fuse"
    }

    fn run(&self, graph: &mut Graph, _: &PlanOptions) -> Result<Vec<(String, usize)>, IrError> {
        let (views, slices) = slices_as_views(graph)?;
        let mut fused = 0;
        loop {
            let outputs: Vec<NodeId> = graph.outputs().values().copied().collect();
            let mut merged = false;
            for u in graph.topo_order()? {
                let Some(us) = stages_of(graph, u) else {
                    continue;
                };
                let node = graph.node(u);
                let candidate = node.inputs.iter().copied().find(|&v| {
                    !outputs.contains(&v)
                        && graph.consumers(v) == [u]
                        && stages_of(graph, v).is_some()
                        && !keeps_wider_input(graph, v, u)
                });
                let Some(v) = candidate else {
                    continue;
                };
                let vs = stages_of(graph, v).expect("checked");
                let fact = node.fact.clone();
                let (inputs, stages) = merge(graph, v, vs, u, us);
                replace_node(graph, u, Arc::new(Fused { stages, fact }), &inputs)?;
                graph.remove(v)?;
                fused += 1;
                merged = true;
                break;
            }
            if !merged {
                break;
            }
        }
        Ok(vec![
            ("slice read in place".into(), views),
            ("slice removed".into(), slices),
            ("fused".into(), fused),
        ])
    }
}

/// Whether merging producer `v` into its reader `u` would keep one of `v`'s per-node inputs
/// x, wider than `v`'s output, alive across other work: fused, `v` reads x when `u` runs,
/// and `u` also waits on another computation from x. SAGE's h·W_self (n × h, from h of
/// n × 2h) fused into the concat's chain, which also waits on the neighbour op over
/// h·W_neigh, would keep h instead of h·W_self across that neighbour op (and blocked
/// inference holds exactly the values that cross one). Not when something that need not
/// run before `u` reads x too (the training step's ∇W = hᵀ·∇Y): x may live that long
/// anyway.
fn keeps_wider_input(graph: &Graph, v: NodeId, u: NodeId) -> bool {
    let Some(out) = per_node_width(graph.fact(v)) else {
        return false;
    };
    let outputs: Vec<NodeId> = graph.outputs().values().copied().collect();
    let mut before_u = None;
    graph.node(v).inputs.iter().any(|&x| {
        if per_node_width(graph.fact(x)).is_none_or(|w| w <= out) || outputs.contains(&x) {
            return false;
        }
        let from_x = graph.descendants(&[x]);
        let u_waits_on_x = graph
            .node(u)
            .inputs
            .iter()
            .any(|&w| w != v && from_x.contains(&w));
        // A reader of x that need not run before `u` (a descendant of `u`, or one beside
        // it) may keep x alive past `u` anyway.
        let before_u = before_u.get_or_insert_with(|| graph.ancestors(&[u]));
        let read_later = graph
            .consumers(x)
            .into_iter()
            .any(|c| c != v && !before_u.contains(&c));
        u_waits_on_x && !read_later
    })
}

/// Replaces node `u` by `op` on `inputs` (a new node with `u`'s label and note, which
/// every reader of `u` reads instead); `u` is removed.
fn replace_node(
    graph: &mut Graph,
    u: NodeId,
    op: Arc<dyn Op>,
    inputs: &[NodeId],
) -> Result<NodeId, IrError> {
    let (label, note) = (graph.node(u).label.clone(), graph.node(u).note.clone());
    let w = graph.add(op, inputs, label)?;
    graph.node_mut(w).note = note;
    graph.replace_uses(u, w)?;
    graph.remove(u)?;
    Ok(w)
}

/// Slices as views (issue 33): an op that can read a column view
/// ([`Op::as_column_views`]: `gemm`, and `spmm` for its X) and reads a column slice
/// ([`Op::as_column_slice`]) of a value — the backward of `concat` slices its gradient for
/// each branch's ∇W = Xᵀ·∇Y and ∇X = ∇Y·Wᵀ, and for a neighbour branch's Sᵀ·∇Y — reads that
/// block of the value in place instead (both kernels take strided operands), and a slice
/// left with no reader is removed: its n × len copy is neither written nor read back. The
/// product computes the same bits (neither kernel's arithmetic depends on its operands'
/// strides). Returns (operands rewired,
/// slices removed).
fn slices_as_views(graph: &mut Graph) -> Result<(usize, usize), IrError> {
    let (mut views, mut removed) = (0, 0);
    let outputs: Vec<NodeId> = graph.outputs().values().copied().collect();
    let slices: Vec<(NodeId, std::ops::Range<usize>)> = graph
        .ids()
        .into_iter()
        .filter_map(|s| Some((s, graph.node(s).op.column_slice()?)))
        .collect();
    for (s, cols) in slices {
        let source = graph.node(s).inputs[0];
        for u in graph.consumers(s) {
            let node = graph.node(u);
            let mut op = node.op.clone();
            let mut inputs = node.inputs.clone();
            let mut rewired = false;
            for (slot, input) in inputs.iter_mut().enumerate() {
                if *input != s {
                    continue;
                }
                if let Some(viewing) = op.with_column_view(slot, cols.clone()) {
                    op = viewing;
                    *input = source;
                    views += 1;
                    rewired = true;
                }
            }
            if rewired {
                replace_node(graph, u, op, &inputs)?;
            }
        }
        if graph.consumers(s).is_empty() && !outputs.contains(&s) {
            graph.remove(s)?;
            removed += 1;
        }
    }
    Ok((views, removed))
}
