//! `saintflow info`.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::store::{info, GraphStore};

#[derive(Debug, Args)]
pub(super) struct InfoArgs {
    /// Store directory.
    store: PathBuf,
    /// Print the stable JSON (schema saintflow.info/1, see docs/FORMAT.md).
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: InfoArgs) -> Result<()> {
    let store = GraphStore::open(&a.store)?;
    let i = info(&store);
    if a.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&i).expect("info serialises")
        ))?;
    } else {
        super::out(&i.to_text())?;
    }
    Ok(())
}
