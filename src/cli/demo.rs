//! `saintflow demo`: the README's first command. Generates a small planted graph, checks it
//! and prints its info.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::progress::Progress;
use crate::store::gen::{generate_kronecker, KroneckerSpec, Planted};
use crate::store::{check, info, GraphStore};

#[derive(Debug, Args)]
pub(super) struct DemoArgs {
    /// Where to write the demo store (replaced if present).
    #[arg(long, default_value = "target/demo.sf")]
    output: PathBuf,
}

pub(super) fn run(a: DemoArgs, progress: &Progress) -> Result<()> {
    let spec = KroneckerSpec {
        scale: 14,
        degree: 16.0,
        n_features: 32,
        n_classes: 4,
        seed: 1,
        planted: Some(Planted::default()),
        ..KroneckerSpec::default()
    };
    if let Some(parent) = a.output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| crate::StoreError::io(parent, "create directory", e))?;
    }
    let r = generate_kronecker(&spec, &a.output, true, progress)?;
    println!(
        "generated {} (planted Kronecker, scale {}) in {:.2} s",
        a.output.display(),
        spec.scale,
        r.seconds
    );
    let store = GraphStore::open(&a.output)?;
    check(&store)?;
    println!("check: ok");
    print!("{}", info(&store).to_text());
    Ok(())
}
