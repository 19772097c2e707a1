//! Feature partitioning (JPDC Algorithm 7): SpMM walks the adjacency once per feature block
//! of f/Q_f columns, and a block of the dense operand (n rows × f/Q_f columns, 4 bytes
//! each, times 2 for the output block it accumulates into) should fit the per-core cache:
//! 8·n·f/Q_f ≤ S_cache, i.e. Q_f ≥ ⌈8·n·f / S_cache⌉; and at least p blocks, so every thread
//! has one. Q_f = max(p, ⌈8·n·f / S_cache⌉), capped at f (a block has at least one column).
//! The count is decided for the expected bindings and written on the node and its note;
//! the ops that take one say so through [`FeaturePartitioned`](crate::op::FeaturePartitioned) (`spmm`).

use crate::ir::{Graph, IrError};

use super::{Pass, PlanOptions};

/// Q_f for an SpMM of `n` rows and `f` feature columns: max(p, ⌈8·n·f / S_cache⌉), at most
/// f, at least 1.
pub fn feature_partitions(n: usize, f: usize, threads: usize, cache_bytes: usize) -> usize {
    let by_cache = (8 * n * f).div_ceil(cache_bytes.max(1));
    threads.max(by_cache).min(f).max(1)
}

/// The feature-partitioning pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Partition;

impl Pass for Partition {
    fn name(&self) -> &str {
        "partition"
    }

    fn run(&self, graph: &mut Graph, opts: &PlanOptions) -> Result<Vec<(String, usize)>, IrError> {
        let b = &opts.bindings;
        let mut annotated = 0;
        let mut max_q = 0;
        for id in graph.ids() {
            let Some((rows, cols)) = graph.fact(id).matrix() else {
                continue;
            };
            let (n, f) = (rows.resolve(b), cols.resolve(b));
            let q = feature_partitions(n, f, opts.threads, opts.cache_bytes);
            let Some(op) = graph
                .node(id)
                .op
                .as_feature_partitioned()
                .map(|p| p.with_partitions(q))
            else {
                continue;
            };
            graph.replace_op(id, op)?;
            let note = &mut graph.node_mut(id).note;
            let by_cache = (8 * n * f).div_ceil(opts.cache_bytes.max(1));
            let mut add = format!(
                "Q_f = max(p={}, ⌈8·{n}·{f}/{}⌉={by_cache})",
                opts.threads, opts.cache_bytes
            );
            if q < opts.threads.max(by_cache) {
                add.push_str(&format!(" capped at f = {q}"));
            } else {
                add.push_str(&format!(" = {q}"));
            }
            if note.is_empty() {
                *note = add;
            } else {
                note.push_str("; ");
                note.push_str(&add);
            }
            annotated += 1;
            max_q = max_q.max(q);
        }
        Ok(vec![
            ("annotated".into(), annotated),
            ("max Q_f".into(), max_q),
        ])
    }
}
