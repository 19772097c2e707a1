//! `saintflow embed PLAN --graph STORE --checkpoint CK -o OUT.npy`: the embedding of every
//! node (the input of the plan's `[output]` layer) by a full-graph forward pass with the
//! checkpoint's best-validation parameters, layer by layer in row blocks
//! (`infer`: values kept between layers go to mapped scratch files when they do
//! not fit `--memory`), written as an `[N, width]` f32 `.npy` through a memory map,
//! block by block, atomically.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::infer::{embed, Output};
use crate::op::Registry;
use crate::progress::Progress;
use crate::store::GraphStore;
use crate::train::checkpoint::params_for;
use crate::train::TrainError;

use super::pool;
use crate::exec::Executor;
use crate::plan::embedding::EmbeddingPlan;
use crate::plan::AnyPlan;

#[derive(Debug, Args)]
pub(super) struct EmbedArgs {
    /// The plan the checkpoint was trained with: a file, or a shipped plan's name (`gcn`).
    plan: PathBuf,
    /// The graph store.
    #[arg(long)]
    graph: PathBuf,
    /// The checkpoint (file, or the directory given to `train --checkpoint`). Not taken by
    /// an `[embedding]` plan, which `embed` trains and writes at once.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// The same `--set` overrides as the training run.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Output `.npy` file.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing regular file at the output when it is one saintflow writes
    /// there (never an input of the command, a file of the user's, a file inside a store,
    /// a link or a device: those are refused even with `--force`).
    #[arg(long)]
    force: bool,
    /// Use the last parameters instead of the best-validation ones.
    #[arg(long)]
    last: bool,
    /// Write the logits `[N, classes]` (the model's predictions before softmax or sigmoid)
    /// instead of the `[output]` layer's input.
    #[arg(long)]
    logits: bool,
    #[command(flatten)]
    pass: super::PassArgs,
    /// Worker threads, 1 to 256 (default: all cores).
    #[arg(long, value_parser = super::threads())]
    threads: Option<std::num::NonZeroUsize>,
    /// `[embedding]` plans: seed of walks, negatives and initial rows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// `[embedding]` plans: epochs instead of the plan's (each |E| positive samples).
    #[arg(long)]
    epochs: Option<f64>,
    /// `[embedding]` plans: hold this fraction of edges out of the walks, for
    /// `eval-embedding --holdout` (link prediction).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    holdout: f64,
    /// `[embedding]` plans: where the SGD runs, `cpu` or `cuda[:K]` (GPU K, fed by the
    /// CPU's samplers; needs a build with `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: crate::embedding::Device,
    #[command(flatten)]
    verify: super::check::VerifyArgs,
}

pub(super) fn run(a: EmbedArgs, registry: &Registry, progress: &Progress) -> Result<()> {
    let mut guard = crate::atomic::OutputGuard::new();
    guard.input("PLAN", &a.plan).input("--graph", &a.graph);
    if let Some(ck) = &a.checkpoint {
        guard.input(
            "--checkpoint",
            &crate::train::checkpoint::checkpoint_file(ck),
        );
    }
    guard
        .file("--output", &a.output, a.force)
        .ours("a .npy file", super::written::npy)
        .check()?;
    let plan = match super::plan_arg(&a.plan, &a.set)?.1 {
        AnyPlan::Embedding(plan) => return embedding_plan(a, plan, progress),
        AnyPlan::Gnn(plan) => plan,
    };
    let Some(checkpoint) = a.checkpoint.clone() else {
        return Err(TrainError::Run(format!(
            "{}: a GNN plan needs --checkpoint (the trained parameters to embed with)",
            a.plan.display()
        ))
        .into());
    };
    if a.device != crate::embedding::Device::Cpu {
        return Err(TrainError::Run(format!(
            "{}: --device {} applies to [embedding] plans; a GNN plan's forward pass runs on the CPU",
            a.plan.display(),
            a.device
        ))
        .into());
    }
    if a.holdout != 0.0 || a.epochs.is_some() {
        return Err(super::embedding::refuse(
            if a.holdout != 0.0 {
                "--holdout"
            } else {
                "--epochs"
            },
            &a.plan,
        ));
    }
    let store = GraphStore::open(&a.graph)?;
    a.verify.apply(&store)?;
    let params = params_for(
        &checkpoint,
        &plan,
        &a.plan.display().to_string(),
        &store,
        a.last,
    )?;
    let output_dir = || match a.output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let opts = a.pass.infer_options(output_dir, progress);
    let threads = crate::machine::threads_or_cores(a.threads);
    let out = pool(Some(threads))?.install(|| {
        // The work-stealing executor on as many workers as the pool, as training uses by
        // default.
        let runner = Executor::new(threads);
        let which = if a.logits {
            Output::Logits
        } else {
            Output::Embedding
        };
        embed(
            &store, &plan, registry, &params, &runner, opts, which, &a.output,
        )
    })?;
    if let Some(why) = &out.in_memory {
        crate::atomic::stderr_line(&format!(
            "note: the whole graph is evaluated in memory at once: {why}"
        ));
    }
    let (rows, cols) = (out.rows, out.cols);
    super::out(&format!(
        "wrote {} ({rows} nodes × {cols} {}, f32)\n",
        a.output.display(),
        if a.logits { "logits" } else { "features" }
    ))?;
    Ok(())
}

/// `embed` of an `[embedding]` plan: trains it and writes the vertex matrix to `-o`.
fn embedding_plan(a: EmbedArgs, plan: EmbeddingPlan, progress: &Progress) -> Result<()> {
    if a.checkpoint.is_some() || a.last || a.logits {
        let flag = if a.checkpoint.is_some() {
            "--checkpoint"
        } else if a.last {
            "--last"
        } else {
            "--logits"
        };
        return Err(super::embedding::refuse(flag, &a.plan));
    }
    if !(0.0..1.0).contains(&a.holdout) {
        return Err(crate::embedding::EmbedError::Invalid(format!(
            "--holdout: {} is not a fraction in [0, 1)",
            a.holdout
        ))
        .into());
    }
    // No fixed upper bound: an absurd run length is estimated after the first pool
    // (issue 28, item 4), a clear note rather than a refusal.
    if let Some(e) = a.epochs.filter(|e| !(*e > 0.0 && e.is_finite())) {
        return Err(crate::embedding::EmbedError::Invalid(format!(
            "--epochs: {e} must be a positive number"
        ))
        .into());
    }
    super::embedding::train(
        super::embedding::Run {
            plan,
            graph: a.graph,
            seed: a.seed,
            threads: a.threads,
            memory_mib: a.pass.memory,
            epochs: a.epochs,
            json: false,
            output: Some(a.output),
            scratch_dir: a.pass.scratch_dir,
            holdout: a.holdout,
            no_memory_check: a.pass.no_memory_check,
            verify: a.verify,
            device: a.device,
        },
        progress,
    )
}
