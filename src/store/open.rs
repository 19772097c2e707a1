//! `GraphStore::open`: the mapped store (mmap.rs) and then the cheap checks of its link
//! split (link/) and of its typed sections (typed.rs). Here, above the three, because the
//! link and typed modules read through `GraphStore`: the store does not name them.

use std::path::Path;

use super::mmap::GraphStore;
use super::StoreError;

impl GraphStore {
    /// Opens the store directory `dir`: header, lengths, offsets and roles are checked
    /// (mmap.rs's header lists what), then the link split's and the typed sections' O(N)
    /// checks.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        let store = GraphStore::open_mapped(dir.as_ref())?;
        super::link::check_cheap(&store)?;
        super::typed::check_cheap(&store)?;
        Ok(store)
    }
}
