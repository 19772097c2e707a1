//! The sparse-features pass: where the step's feature rows are read only by products —
//! X·W of a first layer and, after differentiation, its ∇W = Xᵀ·∇Y — and the store's
//! features are mostly zeros ([`PlanOptions::feature_density`] at most
//! [`SPARSE_FEATURES_MAX_DENSITY`]), those products become
//! [`FeatureProduct`]s, which skip the zeros, and the
//! dense `features` gather goes. Cora's bag of words is 1.3 % nonzero: its two 2708 × 1433
//! × 32 products (≈ 250 MFLOP each) and the 15.5 MB gather were three quarters of a GAE
//! step; sparse they are ≈ 3 MFLOP each.
//!
//! Features read through one inverted dropout (GCN's input dropout) are handled too: the
//! products apply the dropout node's mask to the nonzeros (`DropoutMask`: the same
//! elements kept, scaled by the same f32), and the dropout goes with the gather. Left
//! alone: features read by anything else as well (a concatenation, an `A·X` the chain pass
//! ordered first), and every graph
//! planned without a density (`explain` without a store, tests'), so the pass changes
//! nothing it was not asked to. Full-graph evaluation is planned with the store's density
//! (issue 53 item 7), and blocked inference runs X·W on a block's nodes (it is row-local).

use std::sync::Arc;

use crate::ir::op::ChainRole;
use crate::ir::{Fact, Graph, IrError};
use crate::op::builtin::{FeatureProduct, TypeRange};
use crate::op::SourceKind;

use super::{Pass, PlanOptions};

/// The largest fraction of nonzero features at which the products by the features run
/// sparse. Per nonzero the sparse kernel does one multiply-add per output column, as the
/// dense GEMM does per element, but gathered: on Zen 4/5 the SpMM kernel runs at about a
/// quarter of the GEMM's rate per multiply-add (BENCHMARKS.md), and the dense path also
/// gathers the whole n × F block, which the sparse one never reads; a tenth leaves a
/// margin for CPUs whose GEMM is relatively faster.
pub const SPARSE_FEATURES_MAX_DENSITY: f64 = 0.1;

/// The sparse-features pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct SparseFeatures;

impl Pass for SparseFeatures {
    fn name(&self) -> &str {
        "sparse features"
    }

    fn run(&self, graph: &mut Graph, opts: &PlanOptions) -> Result<Vec<(String, usize)>, IrError> {
        let sparse = |d: Option<f64>| d.filter(|&d| d <= SPARSE_FEATURES_MAX_DENSITY);
        let (plain, typed) = (
            sparse(opts.feature_density),
            sparse(opts.type_feature_density),
        );
        if plain.is_none() && typed.is_none() {
            return Ok(vec![("products".into(), 0)]);
        }
        let mut changed = 0;
        for id in graph.ids() {
            // The gemms a rewrite removed.
            if !graph.contains(id) {
                continue;
            }
            // Asked of the ops, not by downcast: the features source (the store's, or a
            // node type's under a typed plan's `[input]`), and consumers that are binary
            // products op(X)·Y with X as their first operand (a dense one, so a gemm: an
            // spmm's first is sparse) and Y not transposed.
            let node = graph.node(id);
            let (density, ty) = match node.op.source_kind() {
                Some(SourceKind::Features) => (plain, None),
                Some(SourceKind::TypeFeatures { ty, start, end }) => {
                    (typed, Some(TypeRange { ty, start, end }))
                }
                _ => continue,
            };
            let Some(density) = density else {
                continue;
            };
            let Fact::Dense { cols, .. } = node.fact else {
                continue;
            };
            let Some(width) = cols.as_known() else {
                continue;
            };
            let is_output = |g: &Graph, v| g.outputs().values().any(|&o| o == v);
            if is_output(graph, id) {
                continue;
            }
            let sub = node.inputs[0];
            // X is read by the products themselves, or through one dropout whose mask the
            // products then apply (GCN's input dropout).
            let mut x = id;
            let mut dropout = None;
            if let [d] = graph.consumers(id)[..] {
                if let Some(p) = graph.node(d).op.dropout() {
                    if is_output(graph, d) {
                        continue;
                    }
                    x = d;
                    dropout = Some((p, d.index() as u32));
                }
            }
            // (consumer, Xᵀ·Y rather than X·Y, the other operand)
            let products: Option<Vec<_>> = graph
                .consumers(x)
                .iter()
                .map(|&c| {
                    let n = graph.node(c);
                    let Some(ChainRole::Product(ta, false)) = n.op.chain() else {
                        return None;
                    };
                    // (The pass runs before fusion, where products gain column views.)
                    (n.inputs[0] == x && n.inputs[1] != x).then_some((c, ta, n.inputs[1]))
                })
                .collect();
            let Some(products) = products.filter(|p| !p.is_empty()) else {
                continue;
            };
            for (c, transpose, y) in products {
                let op = FeatureProduct {
                    width,
                    transpose,
                    density,
                    dropout,
                    ty,
                };
                let label = graph.node(c).label.clone();
                let note = graph.node(c).note.clone();
                let new = graph.add(Arc::new(op), &[sub, y], label)?;
                graph.node_mut(new).note = if note.is_empty() {
                    format!("features read sparse, {:.2} % nonzero", 100.0 * density)
                } else {
                    format!(
                        "{note}; features read sparse, {:.2} % nonzero",
                        100.0 * density
                    )
                };
                graph.replace_uses(c, new)?;
                graph.remove(c)?;
                changed += 1;
            }
            if x != id {
                graph.remove(x)?;
            }
            graph.remove(id)?;
        }
        Ok(vec![("products".into(), changed)])
    }
}
