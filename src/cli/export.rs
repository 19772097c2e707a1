//! `saintflow export CHECKPOINT -o model.safetensors`.

use std::path::PathBuf;

use clap::Args;

use crate::atomic::OutputGuard;
use crate::error::Result;
use crate::train::checkpoint::checkpoint_file;
use crate::train::export::{export_safetensors, Which};

#[derive(Debug, Args)]
pub(super) struct ExportArgs {
    /// The checkpoint (a file, or a run directory holding checkpoint.bin).
    checkpoint: PathBuf,
    /// Output .safetensors file.
    #[arg(short, long)]
    output: PathBuf,
    /// Export the last epoch's parameters instead of the best-validation ones (the
    /// default, as `embed` and the run's test use; the last when the run never evaluated).
    #[arg(long)]
    last: bool,
    /// The best-validation parameters: the default, accepted for older scripts.
    #[arg(long, hide = true, conflicts_with = "last")]
    best: bool,
    /// The plan trained (a file, or a shipped plan's name), whose text goes into the header's __metadata__ as "plan"
    /// (the checkpoint records only the plan's hash).
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Replace an existing regular file at the output when it is one saintflow writes
    /// there (never an input of the command, a file of the user's, a file inside a store,
    /// a link or a device: those are refused even with `--force`).
    #[arg(long)]
    force: bool,
}

pub(super) fn run(a: ExportArgs) -> Result<()> {
    let plan = match &a.plan {
        // A file, or a shipped plan by name, as every plan argument.
        Some(p) => Some(crate::plan::PlanSource::resolve(p)?.text()?),
        None => None,
    };
    let _ = a.best; // the default
    let which = if a.last { Which::Last } else { Which::Best };
    let cp = checkpoint_file(&a.checkpoint);
    let mut guard = OutputGuard::new();
    guard.input("CHECKPOINT", &cp);
    if let Some(p) = &a.plan {
        guard.input("--plan", p);
    }
    guard
        .file("--output", &a.output, a.force)
        .ours("a .safetensors file", super::written::safetensors)
        .check()?;
    let n = export_safetensors(&cp, &a.output, which, plan.as_deref())?;
    super::out(&format!("wrote {}: {n} tensors\n", a.output.display()))?;
    Ok(())
}
