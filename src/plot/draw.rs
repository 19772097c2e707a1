//! The drawing of [`super::plot`]: panels through plotters' SVG and bitmap backends, PNG
//! through the `png` crate, the bundled font registered once. Built with the `plot`
//! feature only (issue 54 item 6); the panels, the logs' reading and the checks of an
//! output are the parent's, in every build.

use std::ops::Range;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{curve_color, image_size, Panel, PlotError, PANELS_PER_ROW};

/// The bundled font (printable ASCII of DejaVu Sans; licence in `assets/fonts/`).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-subset.ttf");

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
