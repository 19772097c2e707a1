//! Classification metrics: accuracy, F1-micro and F1-macro, from per-class counts.
//!
//! Single-label: the prediction is the argmax of a node's logits (the first maximum on
//! ties); accuracy is the fraction of nodes predicted right, and F1-micro equals it (every
//! node has exactly one true and one predicted class). Multi-label: class k is predicted
//! iff its logit is > 0 (sigmoid > ½); accuracy is the exact-match (subset) accuracy, as
//! scikit-learn's `accuracy_score` defines it. In both, with per-class true positives,
//! false positives and false negatives,
//!
//! * F1-micro = 2·ΣTP / (2·ΣTP + ΣFP + ΣFN);
//! * F1-macro = the mean over classes of 2·TP_k / (2·TP_k + FP_k + FN_k), over the classes
//!   that occur in the truth or the predictions (a class absent from both has no F1; this
//!   is scikit-learn's set of labels for single-label data).
//!
//! Every metric of an empty node set is 0.
//!
//! A leaf: counts come in as class ids and predicates, so training (against a store's
//! labels, `infer::metrics::add_node`) and embedding evaluation count alike. The ranking
//! metrics of link prediction (AUC, AP, MRR, Hits@K) are in [`ranking`].

pub mod ranking;

use serde::{Deserialize, Serialize};

/// Accuracy, F1-micro and F1-macro of a node set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Fraction of nodes predicted right (multi-label: every class right).
    pub accuracy: f64,
    /// F1 of the pooled (node, class) decisions.
    pub f1_micro: f64,
    /// Mean per-class F1.
    pub f1_macro: f64,
}

/// Per-class confusion counts, accumulated node by node.
#[derive(Clone, Debug)]
pub struct Counts {
    tp: Vec<u64>,
    fp: Vec<u64>,
    fn_: Vec<u64>,
    exact: u64,
    nodes: u64,
}

impl Counts {
    /// Zero counts over `classes` classes.
    pub fn new(classes: usize) -> Counts {
        Counts {
            tp: vec![0; classes],
            fp: vec![0; classes],
            fn_: vec![0; classes],
            exact: 0,
            nodes: 0,
        }
    }

    /// One single-label node: predicted class `pred`, true class `truth` (both < C).
    pub fn add_single(&mut self, pred: usize, truth: usize) {
        self.nodes += 1;
        if pred == truth {
            self.tp[pred] += 1;
            self.exact += 1;
        } else {
            self.fp[pred] += 1;
            self.fn_[truth] += 1;
        }
    }

    /// One multi-label node: `pred(k)` and `truth(k)` for every class k.
    pub fn add_multi(&mut self, pred: impl Fn(usize) -> bool, truth: impl Fn(usize) -> bool) {
        self.nodes += 1;
        let mut all = true;
        for k in 0..self.tp.len() {
            match (pred(k), truth(k)) {
                (true, true) => self.tp[k] += 1,
                (true, false) => {
                    self.fp[k] += 1;
                    all = false;
                }
                (false, true) => {
                    self.fn_[k] += 1;
                    all = false;
                }
                (false, false) => {}
            }
        }
        self.exact += u64::from(all);
    }

    /// The nodes counted (labelled nodes of the set): metrics over none are no
    /// measurement, and callers say so rather than print 0 (issue 55 item 1).
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// The counts as one vector (TP, FP, FN per class, exact matches, nodes): what the
    /// parts of a job sum to get the metrics of all their nodes.
    pub fn flat(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(3 * self.tp.len() + 2);
        v.extend(&self.tp);
        v.extend(&self.fp);
        v.extend(&self.fn_);
        v.extend([self.exact, self.nodes]);
        v
    }

    /// Counts back from [`flat`](Self::flat) (a sum of such vectors included).
    pub fn from_flat(flat: &[u64]) -> Counts {
        let c = (flat.len().saturating_sub(2)) / 3;
        Counts {
            tp: flat[..c].to_vec(),
            fp: flat[c..2 * c].to_vec(),
            fn_: flat[2 * c..3 * c].to_vec(),
            exact: flat[3 * c],
            nodes: flat[3 * c + 1],
        }
    }

    /// The metrics of the counts.
    pub fn metrics(&self) -> Metrics {
        if self.nodes == 0 {
            return Metrics::default();
        }
        let f1 = |tp: u64, fp: u64, fn_: u64| {
            let d = 2 * tp + fp + fn_;
            if d == 0 {
                None
            } else {
                Some(2.0 * tp as f64 / d as f64)
            }
        };
        let sum = |v: &[u64]| v.iter().sum::<u64>();
        let micro = f1(sum(&self.tp), sum(&self.fp), sum(&self.fn_)).unwrap_or(0.0);
        let per_class: Vec<f64> = (0..self.tp.len())
            .filter_map(|k| f1(self.tp[k], self.fp[k], self.fn_[k]))
            .collect();
        let macro_ = if per_class.is_empty() {
            0.0
        } else {
            per_class.iter().sum::<f64>() / per_class.len() as f64
        };
        Metrics {
            accuracy: self.exact as f64 / self.nodes as f64,
            f1_micro: micro,
            f1_macro: macro_,
        }
    }
}

/// The argmax of a row (the first maximum; NaN never wins).
pub fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (k, &x) in row.iter().enumerate() {
        if x > row[best] || row[best].is_nan() {
            best = k;
        }
    }
    best
}
