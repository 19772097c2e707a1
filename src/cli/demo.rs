//! `saintflow demo`: the README's first command. Generates a small planted graph, checks
//! it, prints its info, then trains the shipped GraphSAGE plan (random-walk sampler) on it
//! and prints the test accuracy.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::error::Result;
use crate::op::Registry;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::store::gen::{generate_kronecker, KroneckerSpec, Planted};
use crate::store::{check, info, GraphStore};
use crate::train::TrainOptions;

#[derive(Debug, Args)]
pub(super) struct DemoArgs {
    /// Where to write the demo store (replaced if present).
    #[arg(long, default_value = "target/demo.sf")]
    output: PathBuf,
    /// Training epochs (0: generate and check only).
    #[arg(long, default_value_t = 10, value_parser = super::count_in(0, super::MAX_EPOCHS as u64))]
    epochs: usize,
}

pub(super) fn run(a: DemoArgs, registry: &Arc<Registry>, progress: &Progress) -> Result<()> {
    let spec = KroneckerSpec {
        scale: 14,
        degree: 16.0,
        n_features: 32,
        n_classes: 4,
        seed: 1,
        planted: Some(Planted::default()),
        ..KroneckerSpec::default()
    };
    // The demo store replaces an earlier one (the store writer refuses a directory that is
    // not a store); never a file, a link or a device, nor a path inside a store.
    crate::atomic::OutputGuard::new()
        .dir("--output", &a.output)
        .check()?;
    if let Some(parent) = a.output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| crate::StoreError::io(parent, "create directory", e))?;
    }
    let r = generate_kronecker(&spec, &a.output, true, progress)?;
    super::out(&format!(
        "generated {} (planted Kronecker, scale {}) in {:.2} s\n",
        a.output.display(),
        spec.scale,
        r.seconds
    ))?;
    let store = GraphStore::open(&a.output)?;
    check(&store)?;
    super::out("check: ok\n")?;
    super::out(&info(&store).to_text())?;
    if a.epochs == 0 {
        return Ok(());
    }
    // GraphSAGE as shipped, with a hidden width and walk count sized for a 16k-node graph.
    // The shipped plan, built in, so the demo runs from any directory.
    let shipped = crate::plan::shipped::find("graphsage").expect("plans/graphsage.toml is shipped");
    let plan = Plan::parse_with_overrides(
        shipped.text,
        &shipped.file(),
        &[
            "dims.hidden=64",
            "sampler.roots=1000",
            "phase.1.sampler.roots=2000",
        ],
    )?;
    super::out(&format!(
        "training plans/graphsage.toml (hidden 64, random walks from 1000 roots) for {} epochs\n",
        a.epochs
    ))?;
    let out = TrainOptions::new(&plan, &store)
        .registry(Arc::clone(registry))
        .progress(*progress)
        .seed(1)
        .epochs(a.epochs)
        .graph_name(a.output.display().to_string())
        .train()?;
    let test = out.test.expect("a finished run is tested");
    super::out(&format!(
        "test accuracy {:.4}  F1-micro {:.4}  F1-macro {:.4} (best validation epoch {})\n",
        test.accuracy, test.f1_micro, test.f1_macro, out.best_epoch
    ))?;
    Ok(())
}
