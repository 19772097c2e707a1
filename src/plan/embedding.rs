//! The `[embedding]` plan family (issue 16): node embedding by skip-gram with negative
//! sampling over random-walk samples, as GraphVite trains DeepWalk, LINE and node2vec.
//! A plan file with an `[embedding]` table is this family ([`is_embedding_text`], asked by
//! [`super::AnyPlan::load`]); it is typed here, with the same `FILE:LINE:COL` errors and
//! `--set` overrides as a GNN plan, and trained by [`crate::embedding`].

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use toml::de::DeTable;

use crate::suggest::did_you_mean;

use super::spanned::S;
use super::{PlanError, PlanErrorKind, Source, MAX_DIM};

/// The walk that feeds the sample pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddingModel {
    /// First-order (uniform) random walks (Perozzi et al., KDD 2014).
    DeepWalk,
    /// Edges: walks of one step (Tang et al., WWW 2015, second-order proximity).
    Line,
    /// Second-order walks biased by return parameter p and in-out parameter q (Grover &
    /// Leskovec, KDD 2016), drawn by rejection (no Σd² alias tables).
    Node2vec,
}

impl EmbeddingModel {
    /// The plan's spelling.
    pub fn name(self) -> &'static str {
        match self {
            EmbeddingModel::DeepWalk => "deepwalk",
            EmbeddingModel::Line => "line",
            EmbeddingModel::Node2vec => "node2vec",
        }
    }
}

/// How the pairs of a walk are weighted by their distance k ≤ s (the window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowWeights {
    /// Every pair within s is a sample (GraphVite's augmentation).
    Uniform,
    /// A pair k apart is kept with probability (s − k + 1)/s: word2vec's reduced window
    /// (the window drawn uniformly in 1..=s per position), which DeepWalk, node2vec, gensim
    /// and pecanpy train with.
    Linear,
}

/// A typed `[embedding]` plan. Sizes are checked here; what needs the graph (|V|·dim
/// against the disk, partitions against |V|) is checked when training starts.
#[derive(Clone, Debug)]
pub struct EmbeddingPlan {
    /// `name`, or the file's stem.
    pub name: String,
    /// `description` (may be empty).
    pub description: String,
    /// The walk.
    pub model: EmbeddingModel,
    /// Embedding width d.
    pub dim: usize,
    /// Training length in epochs of |E| positive samples each (|E| undirected edges).
    pub epochs: f64,
    /// Steps per walk (a walk visits `walk_length + 1` nodes).
    pub walk_length: usize,
    /// Augmentation distance s: pairs of walk nodes at most s steps apart are samples.
    pub window: usize,
    /// How those pairs are weighted by distance.
    pub window_weights: WindowWeights,
    /// Negative samples per positive sample.
    pub negatives: usize,
    /// Weight of each negative term in the loss.
    pub negative_weight: f32,
    /// Exponent of the degree in the noise distribution (0.75).
    pub noise_power: f64,
    /// Initial learning rate, decayed linearly to lr·1e-4 over the run.
    pub lr: f32,
    /// node2vec's return parameter p (1 otherwise).
    pub p: f64,
    /// node2vec's in-out parameter q (1 otherwise).
    pub q: f64,
    /// Walks whose samples are interleaved in the pool (the pseudo-shuffle's width).
    pub shuffle_walks: usize,
    /// Parts n of the grid's n × n split of the rows (0: chosen from the workers and the
    /// matrices' size, [`crate::embedding::grid_parts`]). Any n keeps concurrent blocks on
    /// disjoint rows: every block of a round is orthogonal to the others.
    pub grid_parts: usize,
    /// The effective plan (after overrides) as TOML.
    pub effective: String,
}

/// Whether `text` is an `[embedding]` plan (a top-level `embedding` table). A file that is
/// not TOML is not: the GNN plan parser reports its syntax error.
pub fn is_embedding_text(text: &str) -> bool {
    DeTable::parse(text)
        .map(|t| t.get_ref().contains_key("embedding"))
        .unwrap_or(false)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Option<String>,
    description: Option<String>,
    embedding: RawEmbedding,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmbedding {
    model: S<String>,
    dim: S<i64>,
    epochs: S<f64>,
    walk_length: Option<S<i64>>,
    window: Option<S<i64>>,
    window_weights: Option<S<String>>,
    negatives: Option<S<i64>>,
    negative_weight: Option<S<f64>>,
    noise_power: Option<S<f64>>,
    lr: Option<S<f64>>,
    p: Option<S<f64>>,
    q: Option<S<f64>>,
    shuffle_walks: Option<S<i64>>,
    grid_parts: Option<S<i64>>,
}

impl EmbeddingPlan {
    /// Reads and types the plan at `path` with `--set`-style `overrides`
    /// (`embedding.dim=64`).
    pub fn load_with_overrides(
        path: &Path,
        overrides: &[&str],
    ) -> Result<EmbeddingPlan, PlanError> {
        let file = path.display().to_string();
        let text = super::read_plan_file(path)?;
        let stem = path.file_stem().map_or_else(
            || "embedding".to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        EmbeddingPlan::parse_with_overrides(&text, &file, &stem, overrides)
    }

    /// Types `text` (named `file` in errors; `stem` is the default name) after applying
    /// `overrides`.
    pub fn parse_with_overrides(
        text: &str,
        file: &str,
        stem: &str,
        overrides: &[&str],
    ) -> Result<EmbeddingPlan, PlanError> {
        let src = Arc::new(Source::new(text, file, overrides));
        let (raw, effective) = super::typing::deserialize_with_overrides::<RawFile>(&src)?;
        typed(&src, raw, stem, effective)
    }
}

fn typed(
    src: &Source,
    raw: RawFile,
    stem: &str,
    effective: String,
) -> Result<EmbeddingPlan, PlanError> {
    let e = raw.embedding;
    let err = |at: usize, what: String| src.error(at, PlanErrorKind::Schema, what);
    const MODELS: [&str; 3] = ["deepwalk", "line", "node2vec"];
    let model = match e.model.get_ref().as_str() {
        "deepwalk" => EmbeddingModel::DeepWalk,
        "line" => EmbeddingModel::Line,
        "node2vec" => EmbeddingModel::Node2vec,
        other => {
            return Err(src.error(
                e.model.span().start,
                PlanErrorKind::Name,
                format!(
                    "unknown embedding model `{other}`{}",
                    did_you_mean(other, MODELS.into_iter())
                        .if_empty("; expected deepwalk, line or node2vec")
                ),
            ))
        }
    };
    let whole = |v: &S<i64>, key: &str, lo: i64, hi: i64| -> Result<usize, PlanError> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            return Err(err(
                v.span().start,
                format!("embedding.{key} = {x}: expected a whole number in {lo}..={hi}"),
            ));
        }
        Ok(x as usize)
    };
    let positive = |v: &S<f64>, key: &str, hi: f64| -> Result<f64, PlanError> {
        let x = *v.get_ref();
        if !(x > 0.0 && x <= hi) {
            return Err(err(
                v.span().start,
                format!("embedding.{key} = {x}: expected a number > 0 and ≤ {hi}"),
            ));
        }
        Ok(x)
    };
    let or =
        |v: &Option<S<i64>>, key: &str, lo: i64, hi: i64, d: usize| -> Result<usize, PlanError> {
            v.as_ref().map_or(Ok(d), |v| whole(v, key, lo, hi))
        };
    let dim = whole(&e.dim, "dim", 1, (MAX_DIM as i64).min(1 << 16))?;
    let epochs = positive(&e.epochs, "epochs", 1e9)?;
    let (walk_default, window_default) = match model {
        EmbeddingModel::Line => (1, 1),
        _ => (40, 5),
    };
    let walk_length = or(&e.walk_length, "walk_length", 1, 1 << 16, walk_default)?;
    let window = or(&e.window, "window", 1, 1 << 16, window_default)?;
    if window > walk_length {
        let at = e
            .window
            .as_ref()
            .map_or(e.model.span().start, |w| w.span().start);
        return Err(err(at, format!("embedding.window = {window} is longer than embedding.walk_length = {walk_length}: no pair is that far apart")));
    }
    let window_weights = match &e.window_weights {
        None => WindowWeights::Linear,
        Some(v) => match v.get_ref().as_str() {
            "linear" => WindowWeights::Linear,
            "uniform" => WindowWeights::Uniform,
            other => {
                return Err(src.error(
                    v.span().start,
                    PlanErrorKind::Name,
                    format!(
                        "unknown embedding.window_weights `{other}`{}",
                        did_you_mean(other, ["linear", "uniform"].into_iter())
                            .if_empty("; expected linear or uniform")
                    ),
                ))
            }
        },
    };
    let negatives = or(&e.negatives, "negatives", 1, 1000, 1)?;
    let negative_weight = e
        .negative_weight
        .as_ref()
        .map_or(Ok(5.0), |v| positive(v, "negative_weight", 1e6))? as f32;
    let noise_power = match &e.noise_power {
        None => 0.75,
        Some(v) => {
            let x = *v.get_ref();
            if !(0.0..=4.0).contains(&x) {
                return Err(err(
                    v.span().start,
                    format!("embedding.noise_power = {x}: expected a number in 0..=4"),
                ));
            }
            x
        }
    };
    let lr =
        e.lr.as_ref()
            .map_or(Ok(0.025), |v| positive(v, "lr", 100.0))? as f32;
    let mut pq = [1.0f64; 2];
    for (k, (key, v)) in [("p", &e.p), ("q", &e.q)].into_iter().enumerate() {
        if let Some(v) = v {
            if model != EmbeddingModel::Node2vec {
                return Err(err(
                    v.span().start,
                    format!(
                        "embedding.{key} is node2vec's; model `{}` walks uniformly",
                        model.name()
                    ),
                ));
            }
            pq[k] = positive(v, key, 1e6)?;
        }
    }
    let shuffle_walks = or(&e.shuffle_walks, "shuffle_walks", 1, 1 << 20, 64)?;
    let grid_parts = or(&e.grid_parts, "grid_parts", 0, 1 << 10, 0)?;
    Ok(EmbeddingPlan {
        name: raw.name.unwrap_or_else(|| stem.to_string()),
        description: raw.description.unwrap_or_default(),
        model,
        dim,
        epochs,
        walk_length,
        window,
        window_weights,
        negatives,
        negative_weight,
        noise_power,
        lr,
        p: pq[0],
        q: pq[1],
        shuffle_walks,
        grid_parts,
        effective,
    })
}

trait IfEmpty {
    fn if_empty(self, alt: &str) -> String;
}

impl IfEmpty for String {
    fn if_empty(self, alt: &str) -> String {
        if self.is_empty() {
            alt.to_string()
        } else {
            self
        }
    }
}
