//! Feature partitioning (JPDC Algorithm 7): SpMM walks the adjacency once per feature block
//! of f/Q_f columns, and a block of the dense operand should fit the per-core cache, with
//! at least p blocks so every thread has one. JPDC's Q_f = max(p, ⌈8·n·f / S_cache⌉) counts
//! the output block too (4 + 4 bytes an element); our kernel sums an output row's block in
//! registers and writes it once, so only X's block must fit, in whole 16-float units (a
//! packed panel pads to them): [`saintflow_ops::spmm::feature_partitions`], which the
//! kernel's own default uses too. The count is decided for the expected bindings and
//! written on the node and its note; the ops that take one say so through
//! [`FeaturePartitioned`](crate::op::FeaturePartitioned) (`spmm`).

use crate::ir::{Graph, IrError};

use super::{Pass, PlanOptions};

/// Q_f for an SpMM of `n` rows and `f` feature columns on `threads` threads with
/// `cache_bytes` per core: [`saintflow_ops::spmm::feature_partitions`].
pub fn feature_partitions(n: usize, f: usize, threads: usize, cache_bytes: usize) -> usize {
    saintflow_ops::spmm::feature_partitions(n, f, threads, cache_bytes)
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
            let w = saintflow_ops::spmm::cache_width(n, opts.cache_bytes);
            let by_cache = f.div_ceil(w);
            let mut add = format!("Q_f = max(p={}, ⌈{f}/{w}⌉={by_cache})", opts.threads);
            if q < opts.threads.max(by_cache) {
                add.push_str(&format!(" capped at f = {q}"));
            } else {
                add.push_str(&format!(" = {q}"));
            }
            add.push_str(&format!(
                " ({w} columns: X's {n} rows in {} B)",
                opts.cache_bytes
            ));
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
