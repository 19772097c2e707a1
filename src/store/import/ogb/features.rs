//! Node features of either layout written row by row into the features section
//! (`node-feat.csv.gz`, `data.npz`'s `node_feat`), each value a finite f32.

use std::path::Path;

use crate::store::format::{Dtype, SectionEntry, SectionId};
use crate::store::import::write_no_features;
use crate::store::writer::{SectionWriter, StoreWriter};
use crate::store::StoreError;

use super::gz::GzLines;
use super::npz::{for_each_f64, npz_member, open_npz};

/// Streams f32 rows into the features section, checking finiteness.
struct FeatureSink {
    section: SectionWriter,
    buf: Vec<f32>,
}

impl FeatureSink {
    fn new(w: &StoreWriter) -> Result<Self, StoreError> {
        Ok(FeatureSink {
            section: w.section(SectionId::Features, Dtype::F32)?,
            buf: Vec::with_capacity(1 << 16),
        })
    }

    fn push(&mut self, x: f32) -> Result<(), StoreError> {
        self.buf.push(x);
        if self.buf.len() == self.buf.capacity() {
            self.section.write_f32s(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<SectionEntry, StoreError> {
        self.section.write_f32s(&self.buf)?;
        self.section.finish()
    }
}

pub(crate) fn write_features_csv(
    w: &StoreWriter,
    path: &Path,
    n: u64,
) -> Result<(u64, SectionEntry), StoreError> {
    let mut lines = GzLines::open(path)?;
    let mut sink = FeatureSink::new(w)?;
    let mut f = None::<u64>;
    let mut rows = 0u64;
    while lines.advance()? {
        let l = lines.line();
        if rows >= n {
            return Err(lines.err(format!(
                "more feature rows than the N = {n} nodes of num-node-list"
            )));
        }
        let mut cols = 0u64;
        if !l.is_empty() {
            for s in l.split(',') {
                let t = s.trim();
                let x: f32 = t
                    .parse()
                    .map_err(|_| lines.err(format!("column {cols}: {t:?} is not a number")))?;
                if !x.is_finite() {
                    return Err(lines.err(format!("column {cols}: {t} is not finite")));
                }
                sink.push(x)?;
                cols += 1;
            }
        }
        match f {
            None => f = Some(cols),
            Some(f) if f != cols => {
                return Err(lines.err(format!(
                    "ragged row: {cols} features, expected {f} (as the first row)"
                )))
            }
            _ => {}
        }
        rows += 1;
    }
    if rows != n {
        return Err(StoreError::input(
            path,
            format!("{rows} feature rows, expected one per node, N = {n} (num-node-list)"),
        ));
    }
    Ok((f.unwrap_or(0), sink.finish()?))
}

pub(super) fn write_features_npz(
    w: &StoreWriter,
    path: &Path,
    n: u64,
) -> Result<(u64, SectionEntry), StoreError> {
    let mut npz = open_npz(path)?;
    let Some(npy) = npz_member(&mut npz, path, "node_feat")? else {
        return Ok((0, write_no_features(w)?));
    };
    let f = match npy.shape() {
        [rows, f] if *rows == n => *f,
        s => {
            return Err(StoreError::input(
                path,
                format!("member node_feat: shape expected ({n}, F), got {s:?}"),
            ))
        }
    };
    let mut sink = FeatureSink::new(w)?;
    for_each_f64(npy, path, "node_feat", |i, x| {
        // Checked as stored: a finite f64 beyond f32's range (1e300) would be inf, which
        // `check` refuses (issue 55).
        let y = x as f32;
        if !y.is_finite() {
            return Err(StoreError::input(
                path,
                format!(
                    "member node_feat: row {}, column {}: {x:?} {}, expected a finite float32",
                    i / f.max(1),
                    i % f.max(1),
                    if x.is_finite() {
                        "is beyond float32's range"
                    } else {
                        "is not finite"
                    }
                ),
            ));
        }
        sink.push(y)
    })?;
    Ok((f, sink.finish()?))
}
