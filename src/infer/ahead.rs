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
    /// The first row of the part being copied.
    at: usize,
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
            at: 0,
            next: None,
        };
        ahead.spawn()?;
        Ok(ahead)
    }

    fn rows(&self) -> usize {
        self.data.len() / self.cols.max(1)
    }

    /// Starts copying the part from row `at` (nothing past the last row).
    fn spawn(&mut self) -> Result<()> {
        let (n, p0) = (self.rows(), self.at);
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

    /// The next part, in order; the one after it starts copying.
    pub(super) fn take(&mut self) -> Result<Vec<f32>> {
        let copy = match self.next.take() {
            Some(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            None => Vec::new(),
        };
        self.at += self.part_rows;
        self.spawn()?;
        Ok(copy)
    }
}
