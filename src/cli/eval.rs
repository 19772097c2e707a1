//! `saintflow eval PLAN --graph STORE --checkpoint CK [-o predictions.npy]`: the
//! checkpoint's validation and test figures again, as `train` printed them (the same
//! parameters through the same full-graph pass and counting: `train::eval_checkpoint`),
//! and optionally every node's predicted class as `.npy`.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::error::Result;
use crate::exec::Executor;
use crate::op::Registry;
use crate::progress::Progress;
use crate::store::GraphStore;
use crate::train::checkpoint::checkpoint_file;
use crate::train::{evaluate_checkpoint, EvalCheckpoint};

use super::pool;

#[derive(Debug, Args)]
pub(super) struct EvalArgs {
    /// The plan the checkpoint was trained with: a file, or a shipped plan's name (`gcn`).
    plan: PathBuf,
    /// The graph store (the run's, or one with the same header).
    #[arg(long)]
    graph: PathBuf,
    /// The checkpoint (file, or the directory given to `train --checkpoint`).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The same `--set` overrides as the training run.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Evaluate the last epoch's parameters instead of the best-validation ones (those the
    /// run's test measured).
    #[arg(long)]
    last: bool,
    /// Write every node's prediction here as `.npy`: `[N]` int64 class ids (single-label),
    /// `[N, C]` uint8 0/1 (multi-label).
    #[arg(short, long, value_name = "FILE.npy")]
    output: Option<PathBuf>,
    /// Replace an existing `.npy` at `--output` (only a file saintflow writes there).
    #[arg(long)]
    force: bool,
    /// Print the figures as one JSON object (`{"checkpoint", "epoch", "which", "val",
    /// "test"}`, the metrics as the log's `test` record has them).
    #[arg(long)]
    json: bool,
    /// Worker threads, 1 to 256 (default: all cores).
    #[arg(long, value_parser = super::threads())]
    threads: Option<std::num::NonZeroUsize>,
    #[command(flatten)]
    pass: super::PassArgs,
    #[command(flatten)]
    verify: super::check::VerifyArgs,
}

pub(super) fn run(a: EvalArgs, registry: &Arc<Registry>, progress: &Progress) -> Result<()> {
    let mut guard = crate::atomic::OutputGuard::new();
    guard
        .input("PLAN", &a.plan)
        .input("--graph", &a.graph)
        .input("--checkpoint", &checkpoint_file(&a.checkpoint));
    if let Some(out) = &a.output {
        guard
            .file("--output", out, a.force)
            .ours("a .npy file", super::written::npy);
    }
    guard.check()?;
    let (source, plan) = super::plan_arg(&a.plan, &a.set)?;
    let plan = plan.into_gnn(&a.plan)?;
    let store = GraphStore::open(&a.graph)?;
    a.verify.apply(&store)?;
    // Its directory is made, once the inputs are good, as train makes its log's (`-o out/pred.npy`).
    if let Some(out) = &a.output {
        crate::atomic::create_parent_dirs(out)
            .map_err(|e| crate::train::TrainError::io(out, "create the directory of", e))?;
    }
    let e = EvalCheckpoint {
        plan: &plan,
        plan_label: source.label(),
        store: &store,
        checkpoint: a.checkpoint.clone(),
        last: a.last,
        infer: a.pass.infer_options(std::env::temp_dir, progress),
        predictions: a.output.clone(),
    };
    let threads = crate::machine::threads_or_cores(a.threads);
    let r = pool(Some(threads))?.install(|| {
        let runner = Executor::new(threads);
        evaluate_checkpoint(&e, registry, &runner)
    })?;
    if a.json {
        let v = serde_json::json!({
            "checkpoint": r.checkpoint.display().to_string(),
            "epoch": r.epoch,
            "which": r.which,
            "val": r.val,
            "test": r.test,
        });
        super::out(&format!("{v}\n"))?;
    } else {
        let none = |what: &str| format!("not measured: no labelled {what} nodes");
        let which = match r.which {
            "best" => "best validation epoch",
            _ => "last epoch",
        };
        super::out(&format!(
            "{} on {}: {} ({which} {}): val {}; test {}\n",
            plan.name,
            a.graph.display(),
            r.checkpoint.display(),
            r.epoch,
            r.val
                .as_ref()
                .map_or_else(|| none("validation"), |m| m.text()),
            r.test.as_ref().map_or_else(|| none("test"), |m| m.text()),
        ))?;
    }
    if let (Some(out), Some(shape)) = (&a.output, &r.predictions) {
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        let line = format!(
            "wrote {} ([{}] {})",
            out.display(),
            dims.join(", "),
            if shape.len() == 1 {
                "int64 class ids"
            } else {
                "uint8 0/1 per class"
            }
        );
        // stdout stays one JSON object with --json.
        if a.json {
            crate::atomic::stderr_line(&line);
        } else {
            super::out(&format!("{line}\n"))?;
        }
    }
    Ok(())
}
