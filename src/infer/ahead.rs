//! Parts of an X read in place, read ahead (issue 56): [`Ahead`] copies each part of a
//! kept value's or the features' map into a buffer of its own, on a thread of its own,
//! while the last part folds.
//!
//! Folded straight from the map, a part's page faults — which read the disk — stalled the
//! folding threads (a streamed pass at Kronecker scale 25 under `memcap 2G` kept 1.2 of 2
//! cores busy), and its gathers walked 4 KiB pages, a TLB miss an entry over a 120 MB part.
//! The copy takes the faults on its own thread, the kernel asked to read the part as the
//! copy starts, and the fold gathers from the copy's huge pages
//! ([`recycle::copied`](crate::ir::recycle)).

use std::thread::{Scope, ScopedJoinHandle};

use super::kept::Kept;
use super::{InferError, Result};
use crate::ir::recycle;
use crate::store::GraphStore;

/// Where an X read in place lives: a kept value's file, or the store's features.
#[derive(Clone, Copy)]
pub(super) enum Source<'a> {
    Kept(&'a Kept),
    Features(&'a GraphStore),
}

/// The parts of `data` (N rows of `cols`), in order, each copied while the last folds.
pub(super) struct Ahead<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    source: Source<'env>,
    data: &'env [f32],
    cols: usize,
    part_rows: usize,
    next: Option<ScopedJoinHandle<'scope, Vec<f32>>>,
}

impl<'scope, 'env> Ahead<'scope, 'env> {
    /// The first part's copy started.
    pub(super) fn start(
        scope: &'scope Scope<'scope, 'env>,
        source: Source<'env>,
        (data, cols): (&'env [f32], usize),
        part_rows: usize,
    ) -> Result<Ahead<'scope, 'env>> {
        let mut ahead = Ahead {
            scope,
            source,
            data,
            cols,
            part_rows,
            next: None,
        };
        ahead.spawn(0)?;
        Ok(ahead)
    }

    fn rows(&self) -> usize {
        self.data.len() / self.cols.max(1)
    }

    /// Starts copying the part from row p0 (nothing past the last row).
    fn spawn(&mut self, p0: usize) -> Result<()> {
        let n = self.rows();
        if p0 >= n {
            return Ok(());
        }
        let (p1, cols) = ((p0 + self.part_rows).min(n), self.cols);
        match self.source {
            Source::Kept(k) => k.will_need(p0 * cols, (p1 - p0) * cols),
            Source::Features(store) => {
                store.will_need_feature_rows(p0..p1);
            }
        }
        let rows = &self.data[p0 * cols..p1 * cols];
        let h = std::thread::Builder::new()
            .name("part-read".into())
            .spawn_scoped(self.scope, move || recycle::copied(rows))
            .map_err(|e| InferError::Infer(format!("starting a part reader: {e}")))?;
        self.next = Some(h);
        Ok(())
    }

    /// The part from row p0 (the one after the last taken), the next one's copy started.
    pub(super) fn take(&mut self, p0: usize) -> Result<Vec<f32>> {
        let copy = match self.next.take() {
            Some(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            None => Vec::new(),
        };
        self.spawn(p0 + self.part_rows)?;
        Ok(copy)
    }
}
