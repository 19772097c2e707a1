//! `saintflow plot`: training curves of existing logs (the JPDC Fig. 2 panels) as SVG or PNG.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::plot::{plot, read_log, training_panels};

#[derive(Debug, Args)]
pub(super) struct PlotArgs {
    /// Training logs (JSON lines); each run in them is drawn as its own curves.
    #[arg(required = true)]
    logs: Vec<PathBuf>,
    /// Output image: the format from the extension, .svg or .png.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing regular file at the output when it is one saintflow writes
    /// there (never an input of the command, a file of the user's, a file inside a store,
    /// a link or a device: those are refused even with `--force`).
    #[arg(long)]
    force: bool,
}

pub(super) fn run(a: PlotArgs) -> Result<()> {
    let mut guard = crate::atomic::OutputGuard::new();
    for log in &a.logs {
        guard.input("LOGS", log);
    }
    guard
        .file("--output", &a.output, a.force)
        .ours("a PNG or SVG image", super::written::image)
        .check()?;
    let mut runs = Vec::with_capacity(a.logs.len());
    for log in &a.logs {
        runs.push((log.display().to_string(), read_log(log)?));
    }
    let panels = training_panels(&runs)?;
    plot(&a.output, &panels)?;
    let n_curves: usize = panels.iter().map(|p| p.curves.len()).sum();
    super::out(&format!(
        "wrote {} ({} panels, {n_curves} curves)\n",
        a.output.display(),
        panels.len()
    ))?;
    Ok(())
}
