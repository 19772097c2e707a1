//! `saintflow check`.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::progress::Progress;
use crate::store::{check, GraphStore};

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Store directory.
    store: PathBuf,
}

pub(super) fn run(a: CheckArgs, progress: &Progress) -> Result<()> {
    let store = GraphStore::open(&a.store)?;
    let spinner = progress.spinner("checking every section");
    let result = check(&store);
    spinner.finish_and_clear();
    result?;
    println!("ok: {} passed every check", a.store.display());
    Ok(())
}
