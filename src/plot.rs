//! Training curves as SVG or PNG: [`plot`] draws [`Panel`]s of line [`Curve`]s, and
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
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::log::Record;

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

/// The bundled font (printable ASCII of DejaVu Sans; licence in `assets/fonts/`).
static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans-subset.ttf");

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

/// Writes `panels` to `path`, two to a row, as SVG or PNG by the extension (`.svg`, `.png`,
/// any case; anything else is an error before anything is written). Atomic: the image goes
/// to a temp file in the same directory, is fsynced, then renamed over `path`; on failure no
/// temp file is left and an existing `path` is untouched.
pub fn plot(path: &Path, panels: &[Panel]) -> Result<(), PlotError> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let draw_err = |what: String| PlotError::Draw {
        path: path.to_path_buf(),
        what,
    };
    if ext != "svg" && ext != "png" {
        return Err(PlotError::Format {
            path: path.to_path_buf(),
            ext,
        });
    }
    if panels.is_empty() {
        return Err(draw_err("no panels to draw".into()));
    }
    for p in panels {
        for c in &p.curves {
            if let Some(i) = c
                .points
                .iter()
                .position(|&(x, y)| !x.is_finite() || !y.is_finite())
            {
                return Err(draw_err(format!(
                    "panel {:?}: curve {:?}: point {i} is {:?}, expected finite coordinates",
                    p.title, c.label, c.points[i]
                )));
            }
        }
    }
    register_font();
    let size = image_size(panels.len());
    let bytes = if ext == "svg" {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            draw_panels(&root, panels, Strokes::Native).map_err(draw_err)?;
        }
        svg.into_bytes()
    } else {
        let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
            draw_panels(&root, panels, Strokes::Clipped).map_err(draw_err)?;
        }
        encode_png(&rgb, size).map_err(|e| draw_err(format!("cannot encode PNG: {e}")))?
    };
    write_atomic(path, &bytes)?;
    Ok(())
}

/// Registers the bundled font as plotters' "sans-serif", once per process.
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is compiled in; failing to parse it is a broken build, not bad input.
        if plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_err() {
            panic!("the bundled font assets/fonts/DejaVuSans-subset.ttf does not parse");
        }
    });
}

fn draw_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[Panel],
    strokes: Strokes,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let cols = panels.len().clamp(1, PANELS_PER_ROW);
    let rows = panels.len().div_ceil(PANELS_PER_ROW);
    let areas = root.split_evenly((rows, cols));
    for (area, panel) in areas.iter().zip(panels) {
        draw_panel(area, panel, strokes).map_err(err)?;
    }
    root.present().map_err(err)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    strokes: Strokes,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let all = || panel.curves.iter().flat_map(|c| c.points.iter().copied());
    let x_range = padded_range(all().map(|p| p.0), 0.0);
    let y_range = padded_range(all().map(|p| p.1), 0.05);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range.clone(), y_range.clone())?;
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let mut labelled = false;
    for (i, curve) in panel.curves.iter().enumerate() {
        if curve.points.is_empty() {
            continue;
        }
        let (r, g, b) = curve_color(i);
        let style = RGBColor(r, g, b).stroke_width(STROKE);
        match strokes {
            Strokes::Native => {
                chart
                    .draw_series(LineSeries::new(curve.points.iter().copied(), style))?
                    .label(curve.label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
                if let [p] = curve.points[..] {
                    // A line through one point draws nothing: mark it (one evaluation so far).
                    chart.draw_series(std::iter::once(Circle::new(p, DOT, style.filled())))?;
                }
            }
            Strokes::Clipped => {
                draw_clipped(chart.plotting_area(), &curve.points, style.color)?;
                // An empty series only to register the legend entry.
                chart
                    .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
                    .label(curve.label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            }
        }
        labelled = true;
    }
    if labelled {
        chart
            .configure_series_labels()
            .position(legend_corner(panel, &x_range, &y_range))
            .label_font(("sans-serif", 12))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .draw()?;
    }
    Ok(())
}

/// Stroke width of the curves, pixels.
const STROKE: u32 = 2;
/// Radius of the dot that marks a lone point, pixels.
const DOT: u32 = 3;

/// How curves are stroked. SVG strokes are the renderer's (a `<polyline>` per curve, joins
/// with the renderer's miter limit). plotters' bitmap backend turns a wide polyline into
/// one polygon whose inner join at a sharp reversal lies ~w/(2·tan(θ/2)) from the vertex: a
/// per-step loss with several steps to a pixel column made spikes hundreds of pixels long,
/// far outside the axes (issue 15). So the PNG strokes each segment as its own rectangle
/// with a square at each vertex (no joins to spike), clipped to the plotting area.
#[derive(Debug, Clone, Copy)]
enum Strokes {
    Native,
    Clipped,
}

/// Draws `points` as a polyline of width [`STROKE`] (a lone point as a dot of radius
/// [`DOT`]) in `color` on the chart's plotting `area`, every piece clipped to that area (in
/// pixels: the closed box plotters maps the axis ranges onto).
fn draw_clipped<DB: DrawingBackend, CT: CoordTranslate<From = (f64, f64)>>(
    area: &DrawingArea<DB, CT>,
    points: &[(f64, f64)],
    color: RGBAColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (xr, yr) = area.get_pixel_range();
    let bounds = (
        f64::from(xr.start),
        f64::from(xr.end),
        f64::from(yr.start),
        f64::from(yr.end),
    );
    let px: Vec<(f64, f64)> = points
        .iter()
        .map(|p| {
            let (x, y) = area.map_coordinate(p);
            (f64::from(x), f64::from(y))
        })
        .collect();
    // Backend coordinates, drawn on the same rectangle without its data coordinates.
    let pixels = area.strip_coord_spec();
    let origin = (xr.start, yr.start);
    let fill = |poly: Vec<(f64, f64)>| {
        let clipped = clip_polygon(poly, bounds);
        if clipped.len() < 3 {
            return Ok(());
        }
        let rel = clipped
            .iter()
            .map(|&(x, y)| (x.round() as i32 - origin.0, y.round() as i32 - origin.1))
            .collect::<Vec<_>>();
        pixels.draw(&Polygon::new(rel, color.filled()))
    };
    let hw = f64::from(STROKE) / 2.0;
    if let [(x, y)] = px[..] {
        let r = f64::from(DOT);
        let dot = (0..16)
            .map(|k| {
                let a = std::f64::consts::TAU * f64::from(k) / 16.0;
                (x + r * a.cos(), y + r * a.sin())
            })
            .collect();
        return fill(dot);
    }
    for w in px.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        let len = (x1 - x0).hypot(y1 - y0);
        if len > 0.0 {
            let (nx, ny) = (-(y1 - y0) / len * hw, (x1 - x0) / len * hw);
            fill(vec![
                (x0 + nx, y0 + ny),
                (x1 + nx, y1 + ny),
                (x1 - nx, y1 - ny),
                (x0 - nx, y0 - ny),
            ])?;
        }
    }
    // A square of the stroke's width at each vertex fills the joins (and marks a run of
    // points on one pixel).
    for &(x, y) in &px {
        fill(vec![
            (x - hw, y - hw),
            (x + hw, y - hw),
            (x + hw, y + hw),
            (x - hw, y + hw),
        ])?;
    }
    Ok(())
}

/// Sutherland–Hodgman: the part of the convex polygon `poly` inside the box
/// `(x_min, x_max, y_min, y_max)`, as a polygon (fewer than 3 vertices when nothing is left).
fn clip_polygon(
    mut poly: Vec<(f64, f64)>,
    (x0, x1, y0, y1): (f64, f64, f64, f64),
) -> Vec<(f64, f64)> {
    // Each edge of the box: the coordinate tested (0 = x, 1 = y), the bound, and whether
    // inside is below it.
    for (axis, bound, below) in [(0, x0, false), (0, x1, true), (1, y0, false), (1, y1, true)] {
        let coord = |p: (f64, f64)| if axis == 0 { p.0 } else { p.1 };
        let inside = |p: (f64, f64)| {
            if below {
                coord(p) <= bound
            } else {
                coord(p) >= bound
            }
        };
        let mut out = Vec::with_capacity(poly.len() + 2);
        for i in 0..poly.len() {
            let (a, b) = (poly[i], poly[(i + 1) % poly.len()]);
            if inside(a) {
                out.push(a);
            }
            if inside(a) != inside(b) {
                let t = (bound - coord(a)) / (coord(b) - coord(a));
                out.push((a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1)));
            }
        }
        poly = out;
        if poly.is_empty() {
            break;
        }
    }
    poly
}

/// `[min, max]` of `values` widened by `pad` of its span on each side; a single value or
/// none gets a unit-wide range around it (or [0, 1]).
fn padded_range(values: impl Iterator<Item = f64>, pad: f64) -> Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo > hi {
        return 0.0..1.0;
    }
    let span = hi - lo;
    if span <= f64::EPSILON * hi.abs().max(1.0) {
        return lo - 0.5..hi + 0.5;
    }
    lo - pad * span..hi + pad * span
}

/// The corner of the plot whose quarter holds the fewest points, so the legend hides the
/// least: typically the lower right for rising accuracy, the upper right for falling loss.
fn legend_corner(panel: &Panel, x: &Range<f64>, y: &Range<f64>) -> SeriesLabelPosition {
    // Order of preference on ties: upper right, lower right, upper left, lower left.
    let mut counts = [0usize; 4];
    let (xm, ym) = ((x.start + x.end) / 2.0, (y.start + y.end) / 2.0);
    for c in &panel.curves {
        for &(px, py) in &c.points {
            let idx = match (px >= xm, py >= ym) {
                (true, true) => 0,
                (true, false) => 1,
                (false, true) => 2,
                (false, false) => 3,
            };
            counts[idx] += 1;
        }
    }
    let best = (0..4).min_by_key(|&i| (counts[i], i)).unwrap_or(0);
    [
        SeriesLabelPosition::UpperRight,
        SeriesLabelPosition::LowerRight,
        SeriesLabelPosition::UpperLeft,
        SeriesLabelPosition::LowerLeft,
    ][best]
        .clone()
}

fn encode_png(rgb: &[u8], (w, h): (u32, u32)) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Balanced);
        let mut writer = enc.write_header()?;
        writer.write_image_data(rgb)?;
        writer.finish()?;
    }
    Ok(out)
}

/// Writes `bytes` to `path` atomically ([`crate::atomic`]).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    crate::atomic::write_atomic(path, bytes).map_err(|source| PlotError::Io {
        path: path.to_path_buf(),
        op: "write",
        source,
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
