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
//! Multi-label also: **ROC-AUC** as OGB's evaluator scores ogbn-proteins, the mean over the
//! classes that have both a positive and a negative among the scored nodes of each class's
//! AUC of the logits (Mann–Whitney, ties ½: [`ranking::auc`]); None where no class has both
//! (OGB raises an error there). The logits rank as the sigmoids do, so the figure is that of
//! the probabilities. It needs every (node, class) score, 4 bytes each, kept by
//! [`Counts::add_scores`]; the summed vector of a job's parts ([`Counts::flat`]) carries
//! counts only, so a distributed run's metrics have no ROC-AUC.
//!
//! A leaf: counts come in as class ids and predicates, so training (against a store's
//! labels, `infer::metrics::add_node`) and embedding evaluation count alike. The ranking
//! metrics of link prediction (AUC, AP, MRR, Hits@K) are in [`ranking`].

pub mod ranking;

use serde::{Deserialize, Serialize};

/// Hits@K cut-offs a link plan's evaluation reports (and `[task] metric` may name).
pub const LINK_HITS: [usize; 6] = [1, 3, 10, 20, 50, 100];

/// Hits@K cut-offs against a pool of negative pairs (OGB's ogbl-ddi, -collab and -ppa
/// figures: 20, 50, 100).
pub const LINK_POOL_HITS: [usize; 3] = [20, 50, 100];

/// A link plan's figures on one set of the store's split (issue 52), each against the
/// split's fixed negatives: AUC, AP and pool Hits@K of the positives against the negative
/// pairs (the GAE protocol; ogbl-collab's Hits@50), MRR and Hits@K of each positive against
/// its own `negatives` tails (ogbl-citation2's). A figure the split cannot give (a given
/// split without tails or without pairs) is None, `null` in the log. Definitions: [`ranking`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkMetrics {
    /// AUC against the negative pairs.
    pub auc: Option<f64>,
    /// Average precision against the negative pairs.
    pub ap: Option<f64>,
    /// Mean reciprocal rank against each positive's tails.
    pub mrr: Option<f64>,
    /// Hits@K against each positive's tails, K in [`LINK_HITS`] order.
    #[serde(rename = "hits@1")]
    pub hits1: Option<f64>,
    /// Hits@3.
    #[serde(rename = "hits@3")]
    pub hits3: Option<f64>,
    /// Hits@10.
    #[serde(rename = "hits@10")]
    pub hits10: Option<f64>,
    /// Hits@20.
    #[serde(rename = "hits@20")]
    pub hits20: Option<f64>,
    /// Hits@50.
    #[serde(rename = "hits@50")]
    pub hits50: Option<f64>,
    /// Hits@100.
    #[serde(rename = "hits@100")]
    pub hits100: Option<f64>,
    /// Hits@20 against the pool of negative pairs.
    #[serde(rename = "pool_hits@20")]
    pub pool_hits20: Option<f64>,
    /// Hits@50 against the pool.
    #[serde(rename = "pool_hits@50")]
    pub pool_hits50: Option<f64>,
    /// Hits@100 against the pool.
    #[serde(rename = "pool_hits@100")]
    pub pool_hits100: Option<f64>,
    /// Tail negatives per positive, the K of MRR and Hits@K (stated with every figure).
    pub negatives: u32,
    /// Negative pairs (AUC, AP, pool Hits@K).
    pub negative_pairs: u64,
    /// Positives scored.
    pub positives: u64,
}

impl LinkMetrics {
    /// Hits@`k` against the tails, for `k` in [`LINK_HITS`].
    pub fn hits(&self, k: usize) -> Option<f64> {
        match k {
            1 => self.hits1,
            3 => self.hits3,
            10 => self.hits10,
            20 => self.hits20,
            50 => self.hits50,
            100 => self.hits100,
            _ => None,
        }
    }

    /// Hits@`k` against the pool, for `k` in [`LINK_POOL_HITS`].
    pub fn pool_hits(&self, k: usize) -> Option<f64> {
        match k {
            20 => self.pool_hits20,
            50 => self.pool_hits50,
            100 => self.pool_hits100,
            _ => None,
        }
    }

    /// The figures with `(K, Hits@K)` against the tails and against the pool.
    pub fn with_hits(mut self, tails: &[(usize, f64)], pool: &[(usize, f64)]) -> LinkMetrics {
        for &(k, h) in tails {
            match k {
                1 => self.hits1 = Some(h),
                3 => self.hits3 = Some(h),
                10 => self.hits10 = Some(h),
                20 => self.hits20 = Some(h),
                50 => self.hits50 = Some(h),
                100 => self.hits100 = Some(h),
                _ => {}
            }
        }
        for &(k, h) in pool {
            match k {
                20 => self.pool_hits20 = Some(h),
                50 => self.pool_hits50 = Some(h),
                100 => self.pool_hits100 = Some(h),
                _ => {}
            }
        }
        self
    }

    /// Every figure, named as the log names it.
    pub fn figures(&self) -> [(&'static str, Option<f64>); 12] {
        [
            ("auc", self.auc),
            ("ap", self.ap),
            ("mrr", self.mrr),
            ("hits@1", self.hits1),
            ("hits@3", self.hits3),
            ("hits@10", self.hits10),
            ("hits@20", self.hits20),
            ("hits@50", self.hits50),
            ("hits@100", self.hits100),
            ("pool_hits@20", self.pool_hits20),
            ("pool_hits@50", self.pool_hits50),
            ("pool_hits@100", self.pool_hits100),
        ]
    }
}

/// Accuracy, F1-micro and F1-macro of a node set; a link plan's also its ranking figures
/// (`link`), its accuracy and F1 then those of the pairs classified at σ(score) > ½
/// (positives against the negative pairs; F1-micro the edge class's F1, F1-macro the mean
/// of the edge and non-edge classes').
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Fraction of nodes predicted right (multi-label: every class right).
    pub accuracy: f64,
    /// F1 of the pooled (node, class) decisions.
    pub f1_micro: f64,
    /// Mean per-class F1.
    pub f1_macro: f64,
    /// A link plan's ranking figures (written flat beside the others in the log).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkMetrics>,
    /// The mean loss of the nodes, the training loss's kind unweighted (softmax cross
    /// entropy of a single-label store, the sum of the classes' sigmoid cross entropies of
    /// a multi-label one), with the parameters evaluated as at inference (no dropout): what
    /// early stopping watches as `loss`. None where nothing was scored by a loss (a link
    /// plan's pairs, an embedding's classifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// A multi-label store's ROC-AUC, the mean over classes (module comment); None for a
    /// single-label store, where no class has both kinds of node, and in a distributed run
    /// (its parts sum counts, not scores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roc_auc: Option<f64>,
}

impl Metrics {
    /// One line of text: `accuracy 0.8130  F1-micro 0.8130  F1-macro 0.8021`, or a link
    /// plan's `AUC 0.9120  AP 0.9231  MRR 0.3121  Hits@10 0.6000  Hits@50 0.8000 (against
    /// 1000 negatives per positive)`.
    pub fn text(&self) -> String {
        match &self.link {
            Some(l) => {
                let f = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.4}"));
                let mut t = String::new();
                if l.negative_pairs > 0 {
                    t += &format!(
                        "AUC {}  AP {}  pool Hits@50 {} (against {} negative pairs)",
                        f(l.auc),
                        f(l.ap),
                        f(l.pool_hits50),
                        l.negative_pairs
                    );
                }
                if l.negatives > 0 {
                    if !t.is_empty() {
                        t += "; ";
                    }
                    t += &format!(
                        "MRR {}  Hits@10 {}  Hits@50 {} (against {} negatives per positive)",
                        f(l.mrr),
                        f(l.hits10),
                        f(l.hits50),
                        l.negatives
                    );
                }
                t
            }
            None => format!(
                "accuracy {:.4}  F1-micro {:.4}  F1-macro {:.4}{}",
                self.accuracy,
                self.f1_micro,
                self.f1_macro,
                self.roc_auc
                    .map_or(String::new(), |a| format!("  ROC-AUC {a:.4}"))
            ),
        }
    }

    /// The epoch line's shorter form: accuracy, F1-micro and the loss, or AUC, AP and MRR.
    pub fn brief(&self) -> String {
        match &self.link {
            Some(l) => {
                let f = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.4}"));
                format!("AUC {} AP {} MRR {}", f(l.auc), f(l.ap), f(l.mrr))
            }
            None => format!(
                "accuracy {:.4} F1-micro {:.4}{}{}",
                self.accuracy,
                self.f1_micro,
                self.roc_auc
                    .map_or(String::new(), |a| format!(" ROC-AUC {a:.4}")),
                self.loss.map_or(String::new(), |l| format!(" loss {l:.4}"))
            ),
        }
    }
}

/// Per-class confusion counts, accumulated node by node.
#[derive(Clone, Debug)]
pub struct Counts {
    tp: Vec<u64>,
    fp: Vec<u64>,
    fn_: Vec<u64>,
    exact: u64,
    nodes: u64,
    /// The nodes' summed loss and how many nodes it sums ([`Counts::add_loss`]).
    loss: f64,
    loss_nodes: u64,
    /// Multi-label, per class: the logits of the nodes that have it and of those that do
    /// not (ROC-AUC); empty until [`Counts::add_scores`].
    pos: Vec<Vec<f32>>,
    neg: Vec<Vec<f32>>,
}

/// Units of loss per nat in [`Counts::flat`]: the parts of a job sum their losses as
/// integers with the counts, to 2⁻²⁴ nats a part.
const LOSS_UNITS: f64 = (1u64 << 24) as f64;

impl Counts {
    /// Zero counts over `classes` classes.
    pub fn new(classes: usize) -> Counts {
        Counts {
            tp: vec![0; classes],
            fp: vec![0; classes],
            fn_: vec![0; classes],
            exact: 0,
            nodes: 0,
            loss: 0.0,
            loss_nodes: 0,
            pos: Vec::new(),
            neg: Vec::new(),
        }
    }

    /// One multi-label node's logits `row` (one per class) against `truth(k)`, kept for
    /// the ROC-AUC ([`Metrics::roc_auc`]): 4 bytes per (node, class).
    pub fn add_scores(&mut self, row: &[f32], truth: impl Fn(usize) -> bool) {
        let classes = self.tp.len();
        if self.pos.is_empty() {
            self.pos = vec![Vec::new(); classes];
            self.neg = vec![Vec::new(); classes];
        }
        for (k, &z) in row.iter().enumerate().take(classes) {
            if truth(k) {
                self.pos[k].push(z);
            } else {
                self.neg[k].push(z);
            }
        }
    }

    /// The mean over classes with both a positive and a negative of their AUC; None when
    /// no class has both (or no scores were kept).
    fn roc_auc(&self) -> Option<f64> {
        let wide = |v: &[f32]| v.iter().map(|&z| f64::from(z)).collect::<Vec<f64>>();
        let per_class: Vec<f64> = self
            .pos
            .iter()
            .zip(&self.neg)
            .filter_map(|(p, n)| ranking::auc(&wide(p), &wide(n)))
            .collect();
        (!per_class.is_empty()).then(|| per_class.iter().sum::<f64>() / per_class.len() as f64)
    }

    /// One node's loss (a counted node's: [`Counts::add_single`] or
    /// [`Counts::add_multi`] counts it).
    pub fn add_loss(&mut self, loss: f64) {
        self.loss += loss;
        self.loss_nodes += 1;
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

    /// The counts as one vector (TP, FP, FN per class, exact matches, nodes, the loss in
    /// units of 2⁻²⁴ nats rounded, its nodes): what the parts of a job sum to get the
    /// metrics of all their nodes. The scores behind ROC-AUC are not in it: a sum of
    /// flat vectors has no ROC-AUC (a distributed run's metrics leave it out).
    pub fn flat(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(3 * self.tp.len() + 4);
        v.extend(&self.tp);
        v.extend(&self.fp);
        v.extend(&self.fn_);
        // A loss is ≥ 0; `as` saturates a huge one at u64::MAX.
        let loss = (self.loss * LOSS_UNITS).round() as u64;
        v.extend([self.exact, self.nodes, loss, self.loss_nodes]);
        v
    }

    /// Counts back from [`flat`](Self::flat) (a sum of such vectors included).
    pub fn from_flat(flat: &[u64]) -> Counts {
        let c = (flat.len().saturating_sub(4)) / 3;
        Counts {
            tp: flat[..c].to_vec(),
            fp: flat[c..2 * c].to_vec(),
            fn_: flat[2 * c..3 * c].to_vec(),
            exact: flat[3 * c],
            nodes: flat[3 * c + 1],
            loss: flat[3 * c + 2] as f64 / LOSS_UNITS,
            loss_nodes: flat[3 * c + 3],
            pos: Vec::new(),
            neg: Vec::new(),
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
            link: None,
            // Only when every counted node was scored by the loss.
            loss: (self.loss_nodes == self.nodes).then(|| self.loss / self.nodes as f64),
            roc_auc: self.roc_auc(),
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
