//! The `[embedding]` plan family on the command line (issue 16): `train` and `embed` of an
//! embedding plan (dispatched here from `train.rs` and `embed.rs` when the plan file has an
//! `[embedding]` table), and `eval-embedding`, which scores a `.npy` of node embeddings.

use std::path::PathBuf;

use clap::Args;

use crate::embedding::eval::{score, ClassifyOptions, Embedding, Scores, Scoring};
use crate::embedding::{EmbedError, EmbedOptions};
use crate::error::Result;
use crate::plan::embedding::EmbeddingPlan;
use crate::plot::{Curve, Panel};
use crate::progress::Progress;
use crate::store::GraphStore;

/// A run of an embedding plan: what `train` and `embed` pass on.
#[derive(Debug)]
pub(super) struct Run {
    /// The plan, loaded with the run's `--set` overrides.
    pub plan: EmbeddingPlan,
    pub graph: PathBuf,
    pub seed: u64,
    pub threads: Option<std::num::NonZeroUsize>,
    pub memory_mib: usize,
    pub epochs: Option<f64>,
    pub json: bool,
    pub output: Option<PathBuf>,
    pub scratch_dir: Option<PathBuf>,
    pub holdout: f64,
    pub no_memory_check: bool,
    pub verify: super::check::VerifyArgs,
    pub device: crate::embedding::Device,
}

/// Refuses a flag that an embedding plan does not take, naming it.
pub(super) fn refuse(flag: &str, plan: &std::path::Path) -> crate::error::Error {
    EmbedError::Invalid(format!(
        "{}: `{flag}` applies to GNN plans; an [embedding] plan takes --set, --seed, --threads, --epochs, --memory, --scratch-dir, --holdout, --no-memory-check, --verify, --no-verify and --json (`saintflow embed PLAN --graph G -o emb.npy` writes the embedding)",
        plan.display()
    ))
    .into()
}

/// Trains the plan; writes the embedding when `run.output` is given. Prints a summary
/// (JSON on stdout with `--json`).
pub(super) fn train(run: Run, progress: &Progress) -> Result<()> {
    let plan = &run.plan;
    let store = GraphStore::open(&run.graph)?;
    run.verify.apply(&store)?;
    if let Some(out) = &run.output {
        crate::atomic::create_parent_dirs(out).map_err(|source| EmbedError::Io {
            path: out.clone(),
            op: "create the directory of",
            source,
        })?;
    }
    let scratch = run.scratch_dir.clone().unwrap_or_else(|| {
        match run.output.as_ref().and_then(|o| o.parent()) {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::env::temp_dir(),
        }
    });
    let opts = EmbedOptions {
        seed: run.seed,
        threads: run.threads,
        memory_bytes: run.memory_mib << 20,
        output: run.output.clone(),
        scratch_dir: scratch,
        epochs: run.epochs,
        progress: *progress,
        holdout: run.holdout,
        memory_limit: if run.no_memory_check {
            crate::machine::MemoryLimit::Off
        } else {
            crate::machine::MemoryLimit::Detect
        },
        device: run.device,
    };
    let out = crate::embedding::train(plan, &store, &opts)?;
    let line = format!(
        "{} ({}) on {}: {} positive samples in {:.2} s ({:.2} M/s on {} workers{}, {n}×{n} grid, {} episodes of ≤ {} samples), last loss {:.4}{}",
        plan.name,
        plan.model.name(),
        run.graph.display(),
        out.samples,
        out.seconds,
        out.samples_per_s / 1e6,
        out.workers,
        out.gpu_wait_seconds.map_or(String::new(), |w| format!(
            " feeding {}, which waited {w:.2} s ({:.0} %) for their pools",
            out.device,
            100.0 * w / out.seconds.max(1e-9)
        )),
        out.episodes,
        out.pool_samples,
        out.last_loss,
        run.output.as_ref().map_or(String::new(), |o| format!("; wrote {} ({} × {} f32)", o.display(), out.nodes, out.dim)),
        n = out.parts,
    );
    if run.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string(&out).map_err(|e| EmbedError::Invalid(e.to_string()))?
        ))?;
        crate::atomic::stderr_line(&line.to_string());
    } else {
        super::out(&format!("{line}\n"))?;
    }
    Ok(())
}

/// `saintflow eval-embedding EMB.npy --graph G.sf`.
#[derive(Debug, Args)]
pub(super) struct EvalEmbeddingArgs {
    /// The embedding, an `[N, d]` `.npy` (row v = node v of the store).
    embedding: PathBuf,
    /// The store whose labels (classification) and edges (link prediction) are used.
    #[arg(long)]
    graph: PathBuf,
    /// Labelled fractions, comma-separated (at most 100).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9"
    )]
    ratios: Vec<f64>,
    /// Shuffles per fraction.
    #[arg(long, default_value_t = 5, value_parser = super::count_in(1, crate::embedding::eval::MAX_REPEATS as u64))]
    repeats: usize,
    /// Seed of the shuffles; with `--holdout`, the training run's seed (it picks the
    /// held-out edges) and of the non-edges.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Inverse L2 regularisation C of the logistic regression.
    #[arg(long, default_value_t = 1.0)]
    c: f64,
    /// Classify the rows as they are instead of scaled to unit length.
    #[arg(long)]
    no_normalize: bool,
    /// Link prediction instead of classification: the edges held out at this fraction by
    /// `train/embed --holdout` (with the same `--seed` as that run), against as many
    /// non-edges, scored u·v; AUC.
    #[arg(long, value_name = "FRACTION")]
    holdout: Option<f64>,
    /// `store`: fit on the store's labelled training nodes, score on its labelled test
    /// nodes (the Planetoid protocol) instead of the labelled fractions.
    #[arg(long, value_parser = ["store"], conflicts_with_all = ["holdout", "ratios"])]
    split: Option<String>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Draw Micro- and Macro-F1 against the labelled fraction to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Replace an existing regular file at `--plot` when it is one saintflow writes
    /// there (never an input of the command, a file of the user's, a file inside a store,
    /// a link or a device: those are refused even with `--force`).
    #[arg(long)]
    force: bool,
    /// Worker threads, 1 to 256 (default: all cores).
    #[arg(long, value_parser = super::threads())]
    threads: Option<std::num::NonZeroUsize>,
    #[command(flatten)]
    verify: super::check::VerifyArgs,
}

pub(super) fn eval(a: EvalEmbeddingArgs) -> Result<()> {
    if let Some(plot) = &a.plot {
        crate::atomic::OutputGuard::new()
            .input("EMBEDDING", &a.embedding)
            .input("--graph", &a.graph)
            .file("--plot", plot, a.force)
            .ours("a PNG or SVG image", super::written::image)
            .check()?;
        // A build without the `plot` feature refuses `--plot` before the work.
        #[cfg(not(feature = "plot"))]
        crate::plot::check_output(plot)?;
    }
    let store = GraphStore::open(&a.graph)?;
    a.verify.apply(&store)?;
    let emb = Embedding::load(&a.embedding)?;
    let scoring = match (a.holdout, &a.split) {
        (Some(fraction), _) => Scoring::Link {
            fraction,
            seed: a.seed,
        },
        (None, Some(_)) => Scoring::Split {
            opts: ClassifyOptions {
                c: a.c,
                ..ClassifyOptions::default()
            },
            normalize: !a.no_normalize,
        },
        (None, None) => Scoring::Classify {
            opts: ClassifyOptions {
                ratios: a.ratios.clone(),
                repeats: a.repeats,
                seed: a.seed,
                c: a.c,
                ..ClassifyOptions::default()
            },
            normalize: !a.no_normalize,
        },
    };
    let name = a.embedding.display().to_string();
    let pool = super::pool(a.threads)?;
    let rows = match pool.install(|| score(emb, &name, &store, &scoring))? {
        Scores::Link { auc, edges } => {
            if a.json {
                super::out(&format!(
                    "{}\n",
                    serde_json::json!({"link_prediction": {"auc": auc, "held_out_edges": edges, "fraction": a.holdout}})
                ))?;
            } else {
                super::out(&format!(
                    "link prediction: AUC {auc:.4} on {edges} held-out edges and as many non-edges\n"
                ))?;
            }
            return Ok(());
        }
        Scores::Split(sc) => {
            if a.json {
                super::out(&format!("{}\n", serde_json::json!({ "split": sc })))?;
            } else {
                super::out(&format!(
                    "store split: fitted on {} training nodes, scored on {} test nodes ({} nodes of those splits without a label left out): accuracy {:.4}  Micro-F1 {:.4}  Macro-F1 {:.4}\n",
                    sc.train_nodes, sc.test_nodes, sc.unlabelled, sc.accuracy, sc.micro_f1, sc.macro_f1
                ))?;
            }
            return Ok(());
        }
        Scores::Classify(rows) => rows,
    };
    if a.json {
        super::out(&format!(
            "{}\n",
            serde_json::json!({"classification": rows, "repeats": a.repeats, "c": a.c, "normalized": !a.no_normalize})
        ))?;
    } else {
        super::out(&format!(
            "labelled  Micro-F1          Macro-F1          (mean ± sd over {} repeats)\n",
            a.repeats
        ))?;
        for r in &rows {
            super::out(&format!(
                "{:>7.0}%  {:.4} ± {:.4}   {:.4} ± {:.4}\n",
                r.ratio * 100.0,
                r.micro_f1,
                r.micro_f1_std,
                r.macro_f1,
                r.macro_f1_std
            ))?;
        }
    }
    if let Some(path) = &a.plot {
        let curve = |label: &str, f: fn(&crate::embedding::eval::ClassifyRow) -> f64| Curve {
            label: label.to_string(),
            points: rows.iter().map(|r| (r.ratio * 100.0, f(r))).collect(),
        };
        let panel = Panel {
            title: format!("node classification: {}", a.embedding.display()),
            x_label: "labelled nodes (%)".into(),
            y_label: "F1".into(),
            curves: vec![
                curve("Micro-F1", |r| r.micro_f1),
                curve("Macro-F1", |r| r.macro_f1),
            ],
        };
        crate::plot::plot(path, &[panel])?;
    }
    Ok(())
}
