//! Metrics against a store's labels (issue 54: out of `train/metrics.rs`, with the
//! full-graph pass that counts them): the counting itself is [`crate::metrics`]; this adds
//! what needs the store's [`Labels`]: a node's logits scored by argmax (single-label) or by
//! sign (multi-label).

use crate::metrics::{argmax, Counts, Metrics};

use crate::store::Labels;

/// Node `v` with logits `row` counted against its labels (unlabelled nodes are skipped):
/// single-label by argmax, multi-label by sign.
pub fn add_node(counts: &mut Counts, labels: &Labels<'_>, v: u32, row: &[f32]) {
    if !labels.is_labelled(v) {
        return;
    }
    match labels {
        Labels::Single(l) => counts.add_single(argmax(row), l[v as usize] as usize),
        Labels::Multi { .. } => {
            counts.add_multi(|k| row[k] > 0.0, |k| labels.has_class(v, k as u32))
        }
    }
}

/// Metrics of `nodes` whose logits are rows `rows[i]` of `logits` (`classes` columns),
/// against the store's labels; unlabelled nodes are skipped.
pub fn evaluate(
    logits: &[f32],
    classes: usize,
    labels: &Labels<'_>,
    nodes: &[u32],
    rows: impl Fn(u32) -> usize,
) -> Metrics {
    let mut c = Counts::new(classes);
    for &v in nodes {
        let r = rows(v);
        add_node(&mut c, labels, v, &logits[r * classes..(r + 1) * classes]);
    }
    c.metrics()
}
