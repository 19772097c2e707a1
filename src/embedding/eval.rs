//! Evaluation of node embeddings, the protocol of DeepWalk and node2vec: multi-label node
//! classification by one-vs-rest L2-regularised logistic regression on a labelled fraction
//! (10 %..90 %, repeats over seeded shuffles; Micro/Macro-F1 on the rest, a multi-label
//! node predicted as its k top-scoring labels, k = its true label count), and link
//! prediction (held-out edges against as many non-edges, scored by u·v; AUC).
//!
//! The regression: per class c, minimise Σ_i log(1 + e^(−y_ic·(x_i·w_c + b_c))) +
//! ‖w_c‖²/(2C) (liblinear's objective, C = 1 by default; the bias is not penalised), all
//! classes at once by L-BFGS on their sum (the problems are independent, so the joint
//! optimum is every class's own); the products are GEMMs from `ops`.

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use saintflow_ops::gemm::{gemm_nn, gemm_tn};

use crate::metrics::{argmax, Counts, Metrics};
use crate::sample::below;
use crate::seed::{hash3, stream};
use crate::store::{Csr, Labels};

use super::{EmbedError, Result};

/// An embedding held in memory: N rows of `dim`.
pub struct Embedding {
    /// Row-major values.
    pub data: Vec<f32>,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub dim: usize,
}

impl Embedding {
    /// Reads an `[N, d]` `.npy` (f4, f8 or integers), checking it is 2-D with finite values.
    pub fn load(path: &std::path::Path) -> Result<Embedding> {
        let npy = crate::npy::Npy::open(path)?;
        let shape = npy.shape.clone();
        let [rows, dim] = shape[..] else {
            return Err(EmbedError::Invalid(format!(
                "{}: expected a 2-D array [nodes, dim], got shape {shape:?}",
                path.display()
            )));
        };
        let (rows, dim) = (rows as usize, dim as usize);
        let mut data = Vec::with_capacity(rows.saturating_mul(dim).min(1 << 30));
        let mut bad = None;
        npy.for_each_f64(path, |x| {
            if !x.is_finite() && bad.is_none() {
                bad = Some(data.len());
            }
            data.push(x as f32);
            Ok::<(), EmbedError>(())
        })?;
        if Some(data.len()) != rows.checked_mul(dim) {
            return Err(EmbedError::Invalid(format!(
                "{}: the header says {rows} × {dim} values, the file holds {}",
                path.display(),
                data.len()
            )));
        }
        if let Some(i) = bad {
            return Err(EmbedError::Invalid(format!(
                "{}: element [{}, {}] is not finite",
                path.display(),
                i / dim.max(1),
                i % dim.max(1)
            )));
        }
        Ok(Embedding { data, rows, dim })
    }

    /// Row v.
    pub fn row(&self, v: usize) -> &[f32] {
        &self.data[v * self.dim..(v + 1) * self.dim]
    }

    /// Every row scaled to unit L2 norm (zero rows stay zero).
    pub fn normalized(&self) -> Embedding {
        let mut data = self.data.clone();
        data.par_chunks_mut(self.dim.max(1)).for_each(|r| {
            let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
            if n > 0.0 {
                r.iter_mut().for_each(|x| *x /= n);
            }
        });
        Embedding {
            data,
            rows: self.rows,
            dim: self.dim,
        }
    }
}

/// What `eval-embedding` (and the Python package's `eval_embedding`) computes.
#[derive(Clone, Debug)]
pub enum Scoring {
    /// Node classification by the protocol above; rows L2-normalised first when `normalize`.
    Classify {
        /// The protocol's settings.
        opts: ClassifyOptions,
        /// Normalise each row to unit length before the regression (DeepWalk's practice).
        normalize: bool,
    },
    /// Node classification on the store's own split (fitted on its training nodes, scored
    /// on its test nodes); rows L2-normalised first when `normalize`.
    Split {
        /// The regression's settings (`ratios`, `repeats` and `seed` unused).
        opts: ClassifyOptions,
        /// Normalise each row first.
        normalize: bool,
    },
    /// Link prediction on the edges `fraction` of them held out of training (seeded).
    Link {
        /// The held-out fraction, in (0, 1), as training used it.
        fraction: f64,
        /// The seed training held them out with.
        seed: u64,
    },
}

/// The scores of [`score`].
#[derive(Clone, Debug)]
pub enum Scores {
    /// One row per labelled fraction.
    Classify(Vec<ClassifyRow>),
    /// The store's split.
    Split(SplitScore),
    /// AUC and the held-out edges it was measured on.
    Link {
        /// Area under the ROC curve.
        auc: f64,
        /// Held-out edges (and as many non-edges).
        edges: usize,
    },
}

/// Scores the embedding `emb` (named `name` in messages) against `graph`'s labels or edges,
/// after the checks every caller needs: as many rows as nodes, a non-zero width, not all
/// zeros (issue 28: an untrained embedding is a mistake upstream, not a score), fractions in
/// (0, 1) and a positive C.
pub fn score(
    emb: Embedding,
    name: &str,
    graph: &crate::store::GraphStore,
    scoring: &Scoring,
) -> Result<Scores> {
    if emb.rows != graph.n_nodes() {
        return Err(EmbedError::Invalid(format!(
            "{name}: {} rows, but {} has {} nodes",
            emb.rows,
            graph.path().display(),
            graph.n_nodes()
        )));
    }
    if emb.dim == 0 {
        return Err(EmbedError::Invalid(format!(
            "{name}: {} rows of width 0: there is nothing to score",
            emb.rows
        )));
    }
    if emb.data.iter().all(|&x| x == 0.0) {
        return Err(EmbedError::Invalid(format!(
            "{name}: every value is 0 (an untrained or unwritten embedding?): there is nothing to score"
        )));
    }
    match scoring {
        Scoring::Link { fraction, seed } => {
            if !(*fraction > 0.0 && *fraction < 1.0) {
                return Err(EmbedError::Invalid(format!(
                    "holdout: {fraction} is not a fraction in (0, 1)"
                )));
            }
            let (auc, edges) = link_auc(&emb, graph.full(), *fraction, *seed)?;
            Ok(Scores::Link { auc, edges })
        }
        Scoring::Split { opts, normalize } => {
            if !(opts.c > 0.0 && opts.c.is_finite()) {
                return Err(EmbedError::Invalid(format!(
                    "c: {} must be a positive number",
                    opts.c
                )));
            }
            let emb = if *normalize { emb.normalized() } else { emb };
            Ok(Scores::Split(classify_split(&emb, graph, opts)?))
        }
        Scoring::Classify { opts, normalize } => {
            // Issue 55: the work is ratios × repeats regressions; both are bounded here for
            // the CLI and the Python package alike.
            if opts.ratios.is_empty() || opts.ratios.len() > MAX_RATIOS {
                return Err(EmbedError::Invalid(format!(
                    "ratios: {} fractions, expected 1 ..= {MAX_RATIOS}",
                    opts.ratios.len()
                )));
            }
            if !(1..=MAX_REPEATS).contains(&opts.repeats) {
                return Err(EmbedError::Invalid(format!(
                    "repeats = {}: expected 1 ..= {MAX_REPEATS}",
                    opts.repeats
                )));
            }
            if let Some(bad) = opts.ratios.iter().find(|r| !(**r > 0.0 && **r < 1.0)) {
                return Err(EmbedError::Invalid(format!(
                    "ratios: {bad} is not a fraction in (0, 1)"
                )));
            }
            if !(opts.c > 0.0 && opts.c.is_finite()) {
                return Err(EmbedError::Invalid(format!(
                    "c: {} must be a positive number",
                    opts.c
                )));
            }
            let emb = if *normalize { emb.normalized() } else { emb };
            Ok(Scores::Classify(classify(
                &emb,
                &graph.labels(),
                graph.n_classes(),
                opts,
            )?))
        }
    }
}

/// Most labelled fractions one classification score takes (`ratios`).
pub const MAX_RATIOS: usize = 100;

/// Most shuffles per fraction (`repeats`).
pub const MAX_REPEATS: usize = 1000;

/// Settings of the classification protocol.
#[derive(Clone, Debug)]
pub struct ClassifyOptions {
    /// Labelled fractions (each in (0, 1)).
    pub ratios: Vec<f64>,
    /// Shuffles per fraction.
    pub repeats: usize,
    /// Seed of the shuffles.
    pub seed: u64,
    /// Inverse regularisation strength C.
    pub c: f64,
    /// L-BFGS iterations at most.
    pub max_iter: usize,
}

impl Default for ClassifyOptions {
    fn default() -> Self {
        ClassifyOptions {
            ratios: (1..=9).map(|k| k as f64 / 10.0).collect(),
            repeats: 5,
            seed: 0,
            c: 1.0,
            max_iter: 200,
        }
    }
}

/// One-vs-rest regression fitted on `train`, scored on `test` (every node of both labelled).
fn fit_and_score(
    emb: &Embedding,
    labels: &Labels<'_>,
    classes: usize,
    train: &[u32],
    test: &[u32],
    opts: &ClassifyOptions,
) -> Result<Metrics> {
    let multi = matches!(labels, Labels::Multi { .. });
    let x = design(emb, train);
    let y: Vec<f32> = train
        .iter()
        .flat_map(|&v| {
            (0..classes).map(move |k| f32::from(u8::from(labels.has_class(v, k as u32))))
        })
        .collect();
    let w = fit(
        &x,
        &y,
        train.len(),
        emb.dim + 1,
        classes,
        opts.c,
        opts.max_iter,
    );
    let xt = design(emb, test);
    let mut z = vec![0f32; test.len() * classes];
    gemm_nn(test.len(), emb.dim + 1, classes, &xt, &w, &mut z, false)
        .map_err(|e| EmbedError::Invalid(e.to_string()))?;
    let mut counts = Counts::new(classes);
    for (t, &v) in test.iter().enumerate() {
        let row = &z[t * classes..(t + 1) * classes];
        if multi {
            let k = (0..classes)
                .filter(|&c| labels.has_class(v, c as u32))
                .count();
            let top = top_k(row, k);
            counts.add_multi(|c| top.contains(&c), |c| labels.has_class(v, c as u32));
        } else {
            let pred = argmax(row);
            let truth = (0..classes)
                .find(|&c| labels.has_class(v, c as u32))
                .unwrap_or(0);
            counts.add_single(pred, truth);
        }
    }
    Ok(counts.metrics())
}

/// The store's own split (`eval-embedding --split store`, the Planetoid protocol): the
/// regression fitted on the labelled training nodes, scored on the labelled test nodes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SplitScore {
    /// Training nodes fitted on.
    pub train_nodes: usize,
    /// Test nodes scored.
    pub test_nodes: usize,
    /// Nodes of those two splits left out for having no label.
    pub unlabelled: usize,
    /// Accuracy, F1-micro and F1-macro on the test nodes.
    pub accuracy: f64,
    /// F1-micro.
    pub micro_f1: f64,
    /// F1-macro.
    pub macro_f1: f64,
}

/// [`SplitScore`] of `emb` on `graph`'s roles and labels.
pub fn classify_split(
    emb: &Embedding,
    graph: &crate::store::GraphStore,
    opts: &ClassifyOptions,
) -> Result<SplitScore> {
    let labels = graph.labels();
    let classes = graph.n_classes();
    let (mut unlabelled, mut nodes) = (0, [Vec::new(), Vec::new()]);
    for (k, role) in [crate::store::Role::Train, crate::store::Role::Test]
        .into_iter()
        .enumerate()
    {
        for v in graph.nodes_with_role(role) {
            if labels.is_labelled(v) {
                nodes[k].push(v);
            } else {
                unlabelled += 1;
            }
        }
    }
    let [train, test] = nodes;
    if train.is_empty() || test.is_empty() || classes == 0 {
        return Err(EmbedError::Invalid(format!(
            "{}: {} labelled training and {} labelled test nodes, {classes} classes: the store's split gives nothing to classify",
            graph.path().display(),
            train.len(),
            test.len()
        )));
    }
    let m = fit_and_score(emb, &labels, classes, &train, &test, opts)?;
    Ok(SplitScore {
        train_nodes: train.len(),
        test_nodes: test.len(),
        unlabelled,
        accuracy: m.accuracy,
        micro_f1: m.f1_micro,
        macro_f1: m.f1_macro,
    })
}

/// One labelled fraction's scores: mean and standard deviation over the repeats.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ClassifyRow {
    /// Labelled fraction.
    pub ratio: f64,
    /// Mean Micro-F1.
    pub micro_f1: f64,
    /// Standard deviation of Micro-F1.
    pub micro_f1_std: f64,
    /// Mean Macro-F1.
    pub macro_f1: f64,
    /// Standard deviation of Macro-F1.
    pub macro_f1_std: f64,
    /// Training nodes.
    pub train_nodes: usize,
}

/// Node classification of `emb` against `labels` (C classes) by the protocol above.
pub fn classify(
    emb: &Embedding,
    labels: &Labels<'_>,
    classes: usize,
    opts: &ClassifyOptions,
) -> Result<Vec<ClassifyRow>> {
    let nodes: Vec<u32> = (0..emb.rows as u32)
        .filter(|&v| labels.is_labelled(v))
        .collect();
    if nodes.len() < 2 || classes == 0 {
        return Err(EmbedError::Invalid(format!(
            "{} labelled nodes and {classes} classes: nothing to classify",
            nodes.len()
        )));
    }
    let mut rows = Vec::new();
    for &ratio in &opts.ratios {
        let mut scores: Vec<Metrics> = Vec::new();
        let n_train = ((ratio * nodes.len() as f64).round() as usize).clamp(1, nodes.len() - 1);
        for rep in 0..opts.repeats {
            let mut order = nodes.clone();
            let mut rng =
                Xoshiro256PlusPlus::seed_from_u64(hash3(opts.seed, stream::EMB_EVAL, rep as u64));
            for i in (1..order.len()).rev() {
                order.swap(i, below(&mut rng, i as u64 + 1) as usize);
            }
            let (train, test) = order.split_at(n_train);
            let metrics = fit_and_score(emb, labels, classes, train, test, opts)?;
            scores.push(metrics);
        }
        let (mi, mi_s) = mean_std(scores.iter().map(|m| m.f1_micro));
        let (ma, ma_s) = mean_std(scores.iter().map(|m| m.f1_macro));
        rows.push(ClassifyRow {
            ratio,
            micro_f1: mi,
            micro_f1_std: mi_s,
            macro_f1: ma,
            macro_f1_std: ma_s,
            train_nodes: n_train,
        });
    }
    Ok(rows)
}

fn mean_std(x: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = x.clone().count().max(1) as f64;
    let m = x.clone().sum::<f64>() / n;
    let v = x.map(|a| (a - m) * (a - m)).sum::<f64>() / n;
    (m, v.sqrt())
}

/// The k largest entries' indices (ties to the lower index).
fn top_k(row: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    idx.truncate(k);
    idx
}

/// Rows of `nodes` with a trailing 1 (the bias's column).
fn design(emb: &Embedding, nodes: &[u32]) -> Vec<f32> {
    let d = emb.dim + 1;
    let mut x = vec![1f32; nodes.len() * d];
    for (r, &v) in nodes.iter().enumerate() {
        x[r * d..r * d + emb.dim].copy_from_slice(emb.row(v as usize));
    }
    x
}

/// The objective (above) and its gradient at W ([d, C], the last row the biases).
#[allow(clippy::too_many_arguments)] // the problem's shapes, spelt out as the GEMMs take them
fn objective(
    x: &[f32],
    y: &[f32],
    n: usize,
    d: usize,
    c: usize,
    lam: f64,
    w: &[f32],
    grad: &mut [f32],
) -> f64 {
    let mut z = vec![0f32; n * c];
    gemm_nn(n, d, c, x, w, &mut z, false).expect("shapes agree");
    let mut loss = 0f64;
    for (zi, &yi) in z.iter_mut().zip(y) {
        let s = f64::from(*zi);
        // y ∈ {0,1}: log(1 + e^s) − y·s, stably; its derivative σ(s) − y.
        loss += s.max(0.0) + (-s.abs()).exp().ln_1p() - f64::from(yi) * s;
        *zi = (1.0 / (1.0 + (-s).exp()) - f64::from(yi)) as f32;
    }
    gemm_tn(d, n, c, x, &z, grad, false).expect("shapes agree");
    // Penalty on the weights, not on the biases (row d − 1).
    for (k, (g, &wk)) in grad.iter_mut().zip(w).enumerate() {
        if k / c < d - 1 {
            *g += (lam * f64::from(wk)) as f32;
            loss += 0.5 * lam * f64::from(wk) * f64::from(wk);
        }
    }
    loss
}

/// Σ a_i·b_i in f64, in order (f32 or f64 operands).
fn dot<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    a.iter().zip(b).map(|(&p, &q)| p.into() * q.into()).sum()
}

/// L-BFGS (memory 10, backtracking Armijo) from W = 0; returns W [d, C].
fn fit(x: &[f32], y: &[f32], n: usize, d: usize, c: usize, cost: f64, max_iter: usize) -> Vec<f32> {
    let m = d * c;
    let lam = 1.0 / cost;
    let mut w = vec![0f32; m];
    let mut g = vec![0f32; m];
    let mut f = objective(x, y, n, d, c, lam, &w, &mut g);
    let g0 = dot(&g, &g).sqrt();
    let mut hist: Vec<(Vec<f32>, Vec<f32>, f64)> = Vec::new();
    let mut g_new = vec![0f32; m];
    for _ in 0..max_iter {
        // Two-loop recursion: dir = −H·g.
        let mut q: Vec<f64> = g.iter().map(|&v| f64::from(v)).collect();
        let mut alphas = Vec::with_capacity(hist.len());
        for (s, yv, rho) in hist.iter().rev() {
            let a = rho * dot(s, &q);
            q.iter_mut()
                .zip(yv)
                .for_each(|(r, &yy)| *r -= a * f64::from(yy));
            alphas.push(a);
        }
        let gamma = hist.last().map_or(1.0 / g0.max(1e-12), |(s, yv, _)| {
            dot(s, yv) / dot(yv, yv).max(1e-300)
        });
        q.iter_mut().for_each(|r| *r *= gamma);
        for ((s, yv, rho), a) in hist.iter().zip(alphas.iter().rev()) {
            let b = rho * dot(yv, &q);
            q.iter_mut()
                .zip(s)
                .for_each(|(r, &ss)| *r += (a - b) * f64::from(ss));
        }
        let dir: Vec<f32> = q.iter().map(|&r| -r as f32).collect();
        let mut slope = dot(&g, &dir);
        let dir = if slope >= 0.0 {
            // Not a descent direction (curvature lost to rounding): steepest descent.
            hist.clear();
            slope = -dot(&g, &g);
            g.iter().map(|&v| -v / g0.max(1e-12) as f32).collect()
        } else {
            dir
        };
        let mut t = 1.0f64;
        let mut w_new = vec![0f32; m];
        let mut f_new;
        loop {
            w_new
                .iter_mut()
                .zip(&w)
                .zip(&dir)
                .for_each(|((o, &a), &p)| *o = a + (t * f64::from(p)) as f32);
            f_new = objective(x, y, n, d, c, lam, &w_new, &mut g_new);
            if f_new <= f + 1e-4 * t * slope || t < 1e-10 {
                break;
            }
            t *= 0.5;
        }
        let s: Vec<f32> = w_new.iter().zip(&w).map(|(&a, &b)| a - b).collect();
        let yv: Vec<f32> = g_new.iter().zip(&g).map(|(&a, &b)| a - b).collect();
        let sy = dot(&s, &yv);
        if sy > 1e-12 {
            if hist.len() == 10 {
                hist.remove(0);
            }
            hist.push((s, yv, 1.0 / sy));
        }
        let done = (f - f_new).abs() <= 1e-7 * f.abs().max(1.0);
        w = w_new;
        std::mem::swap(&mut g, &mut g_new);
        f = f_new;
        if done || dot(&g, &g).sqrt() <= 1e-5 * g0.max(1e-12) {
            break;
        }
    }
    w
}

/// Link prediction: the held-out edges (as [`held_out`] chose them) against as many
/// uniformly drawn non-edges, each scored u·v; the AUC (ties count half).
pub fn link_auc(emb: &Embedding, graph: Csr<'_>, fraction: f64, seed: u64) -> Result<(f64, usize)> {
    let pos: Vec<(u32, u32)> = (0..graph.n_nodes() as u32)
        .flat_map(|u| {
            graph
                .neighbors(u)
                .iter()
                .filter(move |&&v| u < v)
                .map(move |&v| (u, v))
        })
        .filter(|&(u, v)| held_out(u, v, fraction, seed))
        .collect();
    if pos.is_empty() {
        return Err(EmbedError::Invalid(format!(
            "no edge is held out at fraction {fraction}"
        )));
    }
    let n = graph.n_nodes() as u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(hash3(seed, stream::EMB_EVAL, u64::MAX));
    let mut neg = Vec::with_capacity(pos.len());
    let mut tries = 0u64;
    while neg.len() < pos.len() && tries < 100 * pos.len() as u64 + 1000 {
        tries += 1;
        let (u, v) = (below(&mut rng, n) as u32, below(&mut rng, n) as u32);
        if u != v && graph.neighbors(u).binary_search(&v).is_err() {
            neg.push((u, v));
        }
    }
    let score = |&(u, v): &(u32, u32)| {
        emb.row(u as usize)
            .iter()
            .zip(emb.row(v as usize))
            .map(|(a, b)| a * b)
            .sum::<f32>()
    };
    // The Mann–Whitney AUC (ties count half) of `crate::metrics::ranking`, which
    // `eval-link` reports too.
    let pos_scores: Vec<f64> = pos.iter().map(|e| f64::from(score(e))).collect();
    let neg_scores: Vec<f64> = neg.iter().map(|e| f64::from(score(e))).collect();
    let auc = crate::metrics::ranking::auc(&pos_scores, &neg_scores).ok_or_else(|| {
        EmbedError::Invalid("no non-edge drawn: the graph is complete".to_string())
    })?;
    Ok((auc, pos.len()))
}

/// Whether undirected edge {u, v} is held out from training at `fraction` under `seed`
/// (a hash of the pair: the same set in training and in evaluation, nothing stored).
#[inline]
pub fn held_out(u: u32, v: u32, fraction: f64, seed: u64) -> bool {
    if fraction <= 0.0 {
        return false;
    }
    let (a, b) = if u < v { (u, v) } else { (v, u) };
    let h = hash3(seed, stream::EMB_EVAL, (u64::from(a) << 32) | u64::from(b));
    crate::seed::unit_f64(h) < fraction
}
