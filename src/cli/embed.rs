//! `saintflow embed PLAN --graph STORE --checkpoint CK -o OUT.npy`: the embedding of every
//! node (the input of the plan's `[output]` layer) by a full-graph forward pass with the
//! checkpoint's best-validation parameters, written as an `[N, width]` f32 `.npy` through
//! a memory map, atomically.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::op::Registry;
use crate::progress::Progress;
use crate::store::GraphStore;
use crate::train::checkpoint::{checkpoint_file, load_params};
use crate::train::trainer::lower_for;
use crate::train::{plan_hash, write_npy_atomic, Checkpoint, FullGraph, TrainError};

use super::train::{load_plan, pool, runner};

#[derive(Debug, Args)]
pub(super) struct EmbedArgs {
    /// The plan file the checkpoint was trained with.
    plan: PathBuf,
    /// The graph store.
    #[arg(long)]
    graph: PathBuf,
    /// The checkpoint (file, or the directory given to `train --checkpoint`).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The same `--set` overrides as the training run.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Output `.npy` file.
    #[arg(short, long)]
    output: PathBuf,
    /// Use the last parameters instead of the best-validation ones.
    #[arg(long)]
    last: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

pub(super) fn run(a: EmbedArgs, progress: &Progress) -> Result<()> {
    let plan = load_plan(&a.plan, &a.set)?;
    let store = GraphStore::open(&a.graph)?;
    let ck_path = checkpoint_file(&a.checkpoint);
    let ck = Checkpoint::load(&ck_path)?;
    if ck.plan_hash != plan_hash(&plan) {
        return Err(TrainError::Checkpoint {
            path: ck_path,
            what: format!(
                "written for another plan (plan hash {:016x}, {} with these overrides hashes to {:016x})",
                ck.plan_hash,
                a.plan.display(),
                plan_hash(&plan)
            ),
        }
        .into());
    }
    let params = match (&ck.best_params, a.last) {
        (Some(b), false) => load_params(b),
        _ => load_params(&ck.params),
    };
    let registry = Registry::with_builtins();
    let lowered = lower_for(&plan, &store, &registry)?;
    let spinner = progress.spinner("embedding");
    let emb = pool(a.threads)?.install(|| -> Result<_> {
        let (runner, _) = runner(rayon::current_num_threads());
        FullGraph::new(&store, &lowered)?.embedding(runner.as_ref(), &params)
    })?;
    spinner.finish_and_clear();
    write_npy_atomic(&a.output, emb.rows, emb.cols, |i, out| {
        out.copy_from_slice(emb.row(i))
    })?;
    println!(
        "wrote {} ({} nodes × {} features, f32)",
        a.output.display(),
        emb.rows,
        emb.cols
    );
    Ok(())
}
