//! Metrics against a store's labels (issue 54: out of `train/metrics.rs`, with the
//! full-graph pass that counts them): the counting itself is [`crate::metrics`]; this adds
//! what needs the store's [`Labels`]: a node's logits scored by argmax (single-label) or by
//! sign (multi-label).

use crate::metrics::{argmax, Counts, Metrics};

use crate::store::Labels;

/// Node `v` with logits `row` counted against its labels (unlabelled nodes are skipped):
/// single-label by argmax, multi-label by sign; with its loss, the training loss's kind
/// ([`Metrics::loss`](crate::metrics::Metrics::loss)).
pub fn add_node(counts: &mut Counts, labels: &Labels<'_>, v: u32, row: &[f32]) {
    if !labels.is_labelled(v) {
        return;
    }
    match labels {
        Labels::Single(l) => {
            let truth = l[v as usize] as usize;
            counts.add_single(argmax(row), truth);
            counts.add_loss(softmax_ce(row, truth));
        }
        Labels::Multi { .. } => {
            let truth = |k: usize| labels.has_class(v, k as u32);
            counts.add_multi(|k| row[k] > 0.0, truth);
            counts.add_scores(row, truth);
            counts.add_loss(sigmoid_ce(row, truth));
        }
    }
}

/// −log softmax(row)[truth], in f64: log Σ e^(z − max) + max − z_truth.
fn softmax_ce(row: &[f32], truth: usize) -> f64 {
    let max = row
        .iter()
        .fold(f64::NEG_INFINITY, |m, &z| m.max(f64::from(z)));
    let sum: f64 = row.iter().map(|&z| (f64::from(z) - max).exp()).sum();
    sum.ln() + max - f64::from(row[truth])
}

/// Σ_k of the sigmoid cross entropy of logit z_k against target t_k ∈ {0, 1}, in f64:
/// max(z, 0) − z·t + ln(1 + e^−|z|).
fn sigmoid_ce(row: &[f32], truth: impl Fn(usize) -> bool) -> f64 {
    row.iter()
        .enumerate()
        .map(|(k, &z)| {
            let (z, t) = (f64::from(z), f64::from(u8::from(truth(k))));
            z.max(0.0) - z * t + (-z.abs()).exp().ln_1p()
        })
        .sum()
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
