//! `saintflow check`.

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::progress::Progress;
use crate::store::{check, check_with_progress, GraphStore};
use crate::train::Verify;

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Store directory.
    store: PathBuf,
}

pub(super) fn run(a: CheckArgs, progress: &Progress) -> Result<()> {
    let store = GraphStore::open(&a.store)?;
    check_with_progress(&store, progress)?;
    super::out(&format!("ok: {} passed every check\n", a.store.display()))?;
    Ok(())
}

/// `--verify` / `--no-verify`, the same policy as `train`'s ([`Verify`]), for every other
/// command that reads a store's large sections (`sample`, `partition`, `embed`, an
/// `[embedding]` plan's `train`): issue 28, so a damaged store is refused there too.
#[derive(Debug, Args, Clone, Copy)]
pub(super) struct VerifyArgs {
    /// Run the store's full check (`saintflow check`) first and refuse a store that fails
    /// it. Without a flag it runs for stores up to 1 GiB; beyond that, opening verifies the
    /// O(N) sections and the large ones are only bounds-checked as they are read.
    #[arg(long, conflicts_with = "no_verify")]
    pub verify: bool,
    /// Skip the full check even for a small store (see `--verify`).
    #[arg(long)]
    pub no_verify: bool,
}

impl VerifyArgs {
    /// The policy these flags choose.
    pub fn policy(self) -> Verify {
        if self.verify {
            Verify::Full
        } else if self.no_verify {
            Verify::Off
        } else {
            Verify::Auto
        }
    }

    /// Runs the full check of `store` when the policy says so.
    pub fn apply(self, store: &GraphStore) -> Result<()> {
        if self.policy().runs_check(store) {
            check(store)?;
        }
        Ok(())
    }
}
