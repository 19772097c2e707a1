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
}

pub(super) fn run(a: PlotArgs) -> Result<()> {
    let mut runs = Vec::with_capacity(a.logs.len());
    for log in &a.logs {
        runs.push((log.display().to_string(), read_log(log)?));
    }
    let panels = training_panels(&runs)?;
    plot(&a.output, &panels)?;
    let n_curves: usize = panels.iter().map(|p| p.curves.len()).sum();
    println!(
        "wrote {} ({} panels, {n_curves} curves)",
        a.output.display(),
        panels.len()
    );
    Ok(())
}
