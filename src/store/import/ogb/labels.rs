//! Node labels of either layout (`node-label.csv.gz`, `node-label.npz`): one column single-task
//! multiclass, several multi-task binary stored multi-label, NaN tasks noted (`OgbLabels`).

use std::path::Path;

use crate::store::format::{LabelKind, MAX_CLASSES, NO_LABEL};
use crate::store::import::{limits, LabelTable};
use crate::store::StoreError;

use super::gz::GzLines;
use super::npz::{for_each_f64, npz_member, open_npz, required};

/// Labels as read, before the split is known.
pub(super) struct OgbLabels {
    pub(super) table: LabelTable,
    /// Per node: the label is NaN (single-task) or every task is NaN (multi-task).
    pub(super) missing: Vec<bool>,
    /// Multi-task rows with some (not all) tasks NaN.
    pub(super) partial_nan_rows: u64,
}

/// Builds [`OgbLabels`] row by row; the task count T is fixed by the first non-empty row.
struct LabelRows {
    n: usize,
    tasks: Option<usize>,
    single: Vec<u32>,
    multi: Vec<u8>,
    missing: Vec<bool>,
    max_class: Option<u64>,
    partial_nan_rows: u64,
}

/// One label field: Some(value) or None for NaN / empty.
fn label_field(s: &str) -> Result<Option<f64>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("nan") {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(x) if x.is_nan() => Ok(None),
        Ok(x) => Ok(Some(x)),
        Err(_) => Err(format!("label {t:?} is not a number")),
    }
}

impl LabelRows {
    fn new(path: &Path, n: usize) -> Result<Self, StoreError> {
        Ok(LabelRows {
            n,
            tasks: None,
            single: Vec::new(),
            multi: Vec::new(),
            missing: limits::filled(path, "label flags", n as u64, true)?,
            max_class: None,
            partial_nan_rows: 0,
        })
    }

    /// Row `v` from its fields (None: an empty row, no label); the error is a bare message.
    fn row(&mut self, v: usize, fields: Option<&[Option<f64>]>) -> Result<(), String> {
        let Some(fields) = fields else {
            return Ok(());
        };
        let t = *self.tasks.get_or_insert(fields.len());
        if self.single.is_empty() && self.multi.is_empty() {
            // Fallible, and the multi-label table checked against memory first: T comes
            // from the input.
            let bytes = self.n as u128 * t.div_ceil(8) as u128;
            if let Some((limit, source)) = crate::machine::allocatable() {
                if t > 1 && bytes > u128::from(limit) {
                    return Err(format!(
                        "{t} label columns: a table of {} for N = {} nodes, expected at most {} ({source})",
                        crate::machine::human(bytes),
                        self.n,
                        crate::machine::human(u128::from(limit))
                    ));
                }
            }
            let no_room = |e: StoreError| match e {
                StoreError::Input { what, .. } => what,
                e => e.to_string(),
            };
            let here = Path::new("labels");
            if t == 1 {
                self.single =
                    limits::filled(here, "table", self.n as u64, NO_LABEL).map_err(no_room)?;
            } else {
                let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
                self.multi = limits::filled(here, "table", bytes, 0u8).map_err(no_room)?;
            }
        }
        if fields.len() != t {
            return Err(format!(
                "{} label columns, expected {t} (as the first labelled row)",
                fields.len()
            ));
        }
        if t == 1 {
            if let Some(c) = fields[0] {
                if c < 0.0 || c.fract() != 0.0 {
                    return Err(format!("class {c}, expected a non-negative integer or nan"));
                }
                // The store's bound, which `check` enforces (issue 55: never write what
                // `check` refuses).
                if c >= MAX_CLASSES as f64 {
                    return Err(format!("class {c} too large, expected < {MAX_CLASSES}"));
                }
                self.single[v] = c as u32;
                self.missing[v] = false;
                self.max_class = Some(self.max_class.map_or(c as u64, |m| m.max(c as u64)));
            }
        } else {
            let r = t.div_ceil(8);
            let mut nan = 0;
            for (j, x) in fields.iter().enumerate() {
                match x {
                    None => nan += 1,
                    Some(x) if *x == 1.0 => self.multi[v * r + j / 8] |= 1 << (j % 8),
                    Some(x) if *x == 0.0 => {}
                    Some(x) => {
                        return Err(format!("task {j}: {x}, expected 0, 1 or nan"));
                    }
                }
            }
            self.missing[v] = nan == t;
            if nan > 0 && nan < t {
                self.partial_nan_rows += 1;
            }
        }
        Ok(())
    }

    fn finish(self) -> OgbLabels {
        let table = match self.tasks {
            None => LabelTable::none(self.n),
            Some(1) => LabelTable {
                kind: LabelKind::Single,
                n_classes: self.max_class.map_or(0, |m| m + 1),
                data: bytemuck::cast_slice(&self.single).to_vec(),
            },
            Some(t) => LabelTable {
                kind: LabelKind::Multi,
                n_classes: t as u64,
                data: self.multi,
            },
        };
        OgbLabels {
            table,
            missing: self.missing,
            partial_nan_rows: self.partial_nan_rows,
        }
    }
}

pub(super) fn read_labels_csv(path: &Path, n: usize) -> Result<OgbLabels, StoreError> {
    let mut lines = GzLines::open(path)?;
    let mut rows = LabelRows::new(path, n)?;
    let mut fields = Vec::new();
    let mut v = 0usize;
    while lines.advance()? {
        let l = lines.line();
        if v >= n {
            return Err(lines.err(format!(
                "more label rows than the N = {n} nodes of num-node-list"
            )));
        }
        let row = if l.trim().is_empty() {
            None
        } else {
            fields.clear();
            for f in l.split(',') {
                fields.push(label_field(f).map_err(|e| lines.err(e))?);
            }
            Some(fields.as_slice())
        };
        rows.row(v, row).map_err(|e| lines.err(e))?;
        v += 1;
    }
    if v != n {
        return Err(StoreError::input(
            path,
            format!("{v} label rows, expected one per node, N = {n} (num-node-list)"),
        ));
    }
    Ok(rows.finish())
}

pub(super) fn read_labels_npz(path: &Path, n: usize) -> Result<OgbLabels, StoreError> {
    let mut npz = open_npz(path)?;
    let npy = required(
        npz_member(&mut npz, path, "node_label")?,
        path,
        "node_label",
    )?;
    let t = match npy.shape() {
        [rows] if *rows == n as u64 => 1,
        [rows, t] if *rows == n as u64 && *t > 0 => *t as usize,
        s => {
            return Err(StoreError::input(
                path,
                format!("member node_label: shape expected ({n}, T), got {s:?}"),
            ))
        }
    };
    let mut rows = LabelRows::new(path, n)?;
    let mut fields = Vec::with_capacity(t);
    for_each_f64(npy, path, "node_label", |i, x| {
        fields.push((!x.is_nan()).then_some(x));
        if fields.len() == t {
            let v = (i / t as u64) as usize;
            rows.row(v, Some(&fields)).map_err(|e| {
                StoreError::input(path, format!("member node_label, node {v}: {e}"))
            })?;
            fields.clear();
        }
        Ok(())
    })?;
    Ok(rows.finish())
}
