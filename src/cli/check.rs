//! `saintflow check`.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::store::{check, GraphStore};

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Store directory.
    store: PathBuf,
}

pub(super) fn run(a: CheckArgs) -> Result<()> {
    let store = GraphStore::open(&a.store)?;
    check(&store)?;
    println!("ok: {} passed every check", a.store.display());
    Ok(())
}
