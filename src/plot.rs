//! Training curves as SVG or PNG: [`plot`] (the `plot` feature, on by default; `draw.rs`)
//! draws [`Panel`]s of line [`Curve`]s, and
//! [`training_panels`] turns training logs (JSON lines of [`Record`]s, the schema of
//! [`crate::log`]) into the JPDC Fig. 2 panels: validation accuracy and F1-micro against
//! wall time, and training loss (each step's, and each epoch's mean) against wall time.
//! [`read_log`] reads a log file through that schema.
//!
//! # What is drawn
//!
//! A `run` record opens each run (a file may hold several runs one after another); its
//! `plan` and `seed` name the run's curves, "`plan` seed `seed`". `step` records give the
//! step loss and `epoch` records the epoch's mean loss and, when the epoch was evaluated,
//! `val.accuracy` and `val.f1_micro`, all against `time`; `test` closes a run and is not
//! drawn. A loss that is not finite (written `null`) is a diverged step: it is skipped,
//! not an error. Beyond the schema, a run must start with its `run` record and its times
//! must be ≥ 0 and not go back; a departure is an error naming the record (or, through
//! [`read_log`], the file and line).
//!
//! # Rendering
//!
//! plotters draws both formats with the same layout: SVG through its SVG backend (text as
//! `<text>` elements), PNG through its RGB bitmap backend, encoded by the `png` crate. PNG
//! curves are stroked one segment at a time and clipped to the plotting area (see
//! `Strokes`): the backend's own wide polylines spike at sharp reversals. Text
//! metrics and the PNG's glyphs come from a bundled subset of DejaVu Sans through ab_glyph, so
//! nothing outside cargo is needed (no fontconfig, no FreeType). Panels are 640×480 pixels,
//! two to a row. Files are written atomically: a temp file beside the target, fsync, rename.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::log::Record;

// The drawing (plotters, png): the `plot` feature, on by default (issue 54 item 6).
#[cfg(feature = "plot")]
mod draw;
#[cfg(feature = "plot")]
pub use draw::plot;

/// One line of a panel: `points` are (x, y) pairs drawn in order, joined by straight segments
/// (a lone point is drawn as a dot).
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The legend's text.
    pub label: String,
    /// The vertices, in drawing order; all finite.
    pub points: Vec<(f64, f64)>,
}

/// One chart: a title, axis descriptions and its curves, on axes fitted to the curves' points.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Caption above the chart.
    pub title: String,
    /// Description of the horizontal axis.
    pub x_label: String,
    /// Description of the vertical axis.
    pub y_label: String,
    /// The lines, each in its own colour, in legend order.
    pub curves: Vec<Curve>,
}

/// Errors of the plotting layer.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// An operating-system error on the output or a log file.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What we were doing ("read", "write", ...).
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The output's extension names no format we write.
    #[error("{}: unknown image format {ext:?}, expected a file name ending in .svg or .png", path.display())]
    Format {
        /// The output path.
        path: PathBuf,
        /// Its extension ("" when it has none).
        ext: String,
    },
    /// The panels cannot be drawn (no panel, a non-finite point), or the drawing failed.
    #[error("{}: {what}", path.display())]
    Draw {
        /// The output path.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// This saintflow was built without the `plot` feature: nothing is drawn.
    #[error("{}: cannot draw: this saintflow was built without the `plot` feature, expected a build with it (the default features, or `--features plot`)", path.display())]
    NotBuilt {
        /// The output path asked for.
        path: PathBuf,
    },
    /// A training log record is malformed.
    #[error("{at}: {what}")]
    Log {
        /// Where: `FILE:LINE` from [`read_log`], `RUN: record N` from [`training_panels`].
        at: String,
        /// What is wrong, naming the field.
        what: String,
    },
}

/// Width and height of one panel, pixels.
pub const PANEL_SIZE: (u32, u32) = (640, 480);
/// Panels per row of the image.
pub const PANELS_PER_ROW: usize = 2;

/// Line colours, in curve order (cycled): ten well-separated hues.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// The colour of curve `i` of a panel, as written in SVG (`#rrggbb`) and PNG (RGB).
pub fn curve_color(i: usize) -> (u8, u8, u8) {
    PALETTE[i % PALETTE.len()]
}

/// The image size for `n_panels` panels, pixels: [`PANELS_PER_ROW`] to a row.
pub fn image_size(n_panels: usize) -> (u32, u32) {
    let cols = n_panels.clamp(1, PANELS_PER_ROW);
    let rows = n_panels.div_ceil(PANELS_PER_ROW).max(1);
    (PANEL_SIZE.0 * cols as u32, PANEL_SIZE.1 * rows as u32)
}

/// Issue 28: whether `plot(path, …)` could write: a known extension, and a temporary
/// beside `path` created (and removed) the way the atomic write will make it; for a run
/// to check its `--plot` before training rather than fail after it.
pub fn check_output(path: &Path) -> Result<(), PlotError> {
    if cfg!(not(feature = "plot")) {
        return Err(PlotError::NotBuilt {
            path: path.to_path_buf(),
        });
    }
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if ext != "svg" && ext != "png" {
        return Err(PlotError::Format {
            path: path.to_path_buf(),
            ext,
        });
    }
    crate::atomic::AtomicFile::create(path)
        .map(drop)
        .map_err(|source| PlotError::Io {
            path: path.to_path_buf(),
            op: "write",
            source,
        })
}

/// A build without the `plot` feature draws nothing: every call is
/// [`PlotError::NotBuilt`] (`--plot` is refused by [`check_output`] before a run).
#[cfg(not(feature = "plot"))]
pub fn plot(path: &Path, _panels: &[Panel]) -> Result<(), PlotError> {
    Err(PlotError::NotBuilt {
        path: path.to_path_buf(),
    })
}

/// Reads a training log (JSON lines): every non-blank line must be a [`Record`]
/// ([`Record::from_line`]), the first a `run` record, times in order (see the module
/// docs). Errors name `FILE:LINE` and the field.
pub fn read_log(path: &Path) -> Result<Vec<Record>, PlotError> {
    let text = std::fs::read_to_string(path).map_err(|e| PlotError::Io {
        path: path.to_path_buf(),
        op: "read",
        source: e,
    })?;
    let mut records = Vec::new();
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r = Record::from_line(line).map_err(|what| PlotError::Log {
            at: format!("{}:{}", path.display(), i + 1),
            what,
        })?;
        records.push(r);
        lines.push(i + 1);
    }
    if records.is_empty() {
        return Err(PlotError::Log {
            at: path.display().to_string(),
            what: "no records, expected a training log (JSON lines, a \"run\" record first)".into(),
        });
    }
    parse_runs(&records).map_err(|(i, what)| PlotError::Log {
        at: format!("{}:{}", path.display(), lines[i]),
        what,
    })?;
    Ok(records)
}

/// The JPDC Fig. 2 panels of training logs: (1) validation accuracy and F1-micro against
/// wall time, (2) training loss per step and its per-epoch mean against wall time. Each
/// entry of `runs` is (a name for errors and disambiguation, e.g. the log's path; its
/// records in order); each `run` record in them starts a run, whose curves are labelled
/// "`plan` seed `seed`" (plus the name, or a number, where two runs would share a label).
pub fn training_panels(runs: &[(String, Vec<Record>)]) -> Result<Vec<Panel>, PlotError> {
    let mut all = Vec::new();
    for (name, records) in runs {
        if records.is_empty() {
            return Err(PlotError::Log {
                at: name.clone(),
                what: "no records, expected a training log (a \"run\" record first)".into(),
            });
        }
        let parsed = parse_runs(records).map_err(|(i, what)| PlotError::Log {
            at: format!("{name}: record {}", i + 1),
            what,
        })?;
        all.extend(parsed.into_iter().map(|r| (name.as_str(), r)));
    }
    let labels = unique_labels(&all);
    let mut val = Vec::new();
    let mut loss = Vec::new();
    for ((_, run), label) in all.into_iter().zip(labels) {
        val.push(Curve {
            label: format!("{label} accuracy"),
            points: run.accuracy,
        });
        val.push(Curve {
            label: format!("{label} F1-micro"),
            points: run.f1_micro,
        });
        loss.push(Curve {
            label: format!("{label} step loss"),
            points: run.step_loss,
        });
        loss.push(Curve {
            label: format!("{label} epoch mean"),
            points: run.epoch_loss,
        });
    }
    Ok(vec![
        Panel {
            title: "Validation accuracy vs time".into(),
            x_label: "wall time (s)".into(),
            y_label: "validation accuracy / F1-micro".into(),
            curves: val,
        },
        Panel {
            title: "Training loss vs time".into(),
            x_label: "wall time (s)".into(),
            y_label: "training loss".into(),
            curves: loss,
        },
    ])
}

/// One run's series, (time, value) in log order.
struct RunSeries {
    label: String,
    accuracy: Vec<(f64, f64)>,
    f1_micro: Vec<(f64, f64)>,
    step_loss: Vec<(f64, f64)>,
    epoch_loss: Vec<(f64, f64)>,
}

/// Labels of the runs, made unique: a repeated "plan seed S" gets " (name)", and one still
/// repeated (two runs of one log) also " #k" with k counting from 1 within its log.
fn unique_labels(runs: &[(&str, RunSeries)]) -> Vec<String> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (_, r) in runs {
        *count.entry(r.label.as_str()).or_default() += 1;
    }
    let mut with_name: Vec<String> = runs
        .iter()
        .map(|(name, r)| {
            if count[r.label.as_str()] > 1 {
                format!("{} ({name})", r.label)
            } else {
                r.label.clone()
            }
        })
        .collect();
    let mut count2: HashMap<String, usize> = HashMap::new();
    for l in &with_name {
        *count2.entry(l.clone()).or_default() += 1;
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for l in &mut with_name {
        if count2[l.as_str()] > 1 {
            let k = seen.entry(l.clone()).or_default();
            *k += 1;
            *l = format!("{l} #{k}");
        }
    }
    with_name
}

/// Splits records into runs and checks their order; an error is (record index, what).
fn parse_runs(records: &[Record]) -> Result<Vec<RunSeries>, (usize, String)> {
    let mut runs: Vec<RunSeries> = Vec::new();
    let mut last_time = f64::NEG_INFINITY;
    for (i, rec) in records.iter().enumerate() {
        let fail = |what: String| (i, what);
        let kind = rec.kind();
        if let Record::Run { plan, seed, .. } = rec {
            runs.push(RunSeries {
                label: format!("{plan} seed {seed}"),
                accuracy: Vec::new(),
                f1_micro: Vec::new(),
                step_loss: Vec::new(),
                epoch_loss: Vec::new(),
            });
            last_time = f64::NEG_INFINITY;
            continue;
        }
        let Some(run) = runs.last_mut() else {
            return Err(fail(format!(
                "a \"{kind}\" record before any \"run\" record, expected the log to start with a \"run\" record"
            )));
        };
        let time = rec.time().unwrap_or(f64::NAN);
        let at = format!("{kind} record");
        if time.is_nan() || time < 0.0 {
            return Err(fail(format!(
                "{at}: field \"time\" is {time}, expected seconds ≥ 0"
            )));
        }
        if time < last_time {
            return Err(fail(format!(
                "{at}: field \"time\" is {time}, before the previous record's {last_time} (times must not go back within a run)"
            )));
        }
        last_time = time;
        match rec {
            Record::Step { loss, .. } if loss.is_finite() => run.step_loss.push((time, *loss)),
            Record::Epoch {
                train_loss, val, ..
            } => {
                if train_loss.is_finite() {
                    run.epoch_loss.push((time, *train_loss));
                }
                if let Some(val) = val {
                    run.accuracy.push((time, val.accuracy));
                    run.f1_micro.push((time, val.f1_micro));
                }
            }
            _ => {} // "test", and a diverged step: checked for the time only; not drawn.
        }
    }
    Ok(runs)
}
