//! Training curves: SVG vertices are the curves' points under one increasing affine map per
//! axis, the PNG has the curve's colour at those same pixels (and nowhere when the curve is
//! absent), `training_panels` extracts exactly the logged series, and bad input (format, log
//! records) fails with errors naming the place, leaving no file behind.

mod common;

use common::saintflow;

use std::path::{Path, PathBuf};

use saintflow::log::Record;
use saintflow::plot::{
    curve_color, image_size, plot, read_log, training_panels, Curve, Panel, PANEL_SIZE,
};
use serde_json::{json, Value};

fn panel(title: &str, curves: Vec<Curve>) -> Panel {
    Panel {
        title: title.into(),
        x_label: "wall time (s)".into(),
        y_label: "value".into(),
        curves,
    }
}

fn curve(label: &str, points: &[(f64, f64)]) -> Curve {
    Curve {
        label: label.into(),
        points: points.to_vec(),
    }
}

/// Two panels: the left with a 7-point and a 5-point curve, the right with a 9-point curve.
fn sample_panels() -> Vec<Panel> {
    let a: Vec<(f64, f64)> = [0.0, 0.5, 1.5, 2.0, 3.5, 4.0, 6.0]
        .iter()
        .map(|&t| (t, 0.3 + 0.1 * t - 0.01 * t * t))
        .collect();
    let b: Vec<(f64, f64)> = (0..5)
        .map(|i| (1.0 + i as f64, 0.2 + 0.05 * i as f64))
        .collect();
    let c: Vec<(f64, f64)> = (0..9)
        .map(|i| (10.0 * i as f64, 3.0 * (-0.3 * i as f64).exp()))
        .collect();
    vec![
        panel("accuracy", vec![curve("a", &a), curve("b", &b)]),
        panel("loss", vec![curve("c", &c)]),
    ]
}

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// The vertex lists of the SVG's polylines stroked in `color` with exactly `n` vertices.
fn polylines(svg: &str, color: (u8, u8, u8), n: usize) -> Vec<Vec<(f64, f64)>> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let want = hex(color);
    doc.descendants()
        .filter(|e| e.has_tag_name("polyline"))
        .filter(|e| {
            e.attribute("stroke")
                .is_some_and(|s| s.eq_ignore_ascii_case(&want))
        })
        .map(|e| {
            e.attribute("points")
                .expect("points")
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').expect("x,y");
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect::<Vec<(f64, f64)>>()
        })
        .filter(|v| v.len() == n)
        .collect()
}

/// Asserts that `px[i] = a·data[i] + b` on each axis (within rounding to whole pixels), with
/// a > 0 horizontally and a < 0 vertically (SVG y grows downwards), and that every vertex
/// lies inside `[x0, x1) × [0, h)`.
fn assert_affine(data: &[(f64, f64)], px: &[(f64, f64)], x0: f64, x1: f64, h: f64) {
    assert_eq!(data.len(), px.len());
    for axis in 0..2 {
        let d: Vec<f64> = data
            .iter()
            .map(|p| if axis == 0 { p.0 } else { p.1 })
            .collect();
        let p: Vec<f64> = px
            .iter()
            .map(|p| if axis == 0 { p.0 } else { p.1 })
            .collect();
        let (lo, hi) = (0..d.len()).fold((0, 0), |(lo, hi), i| {
            (
                if d[i] < d[lo] { i } else { lo },
                if d[i] > d[hi] { i } else { hi },
            )
        });
        let a = (p[hi] - p[lo]) / (d[hi] - d[lo]);
        let b = p[lo] - a * d[lo];
        if axis == 0 {
            assert!(a > 0.0, "x must grow rightwards, slope {a}");
        } else {
            assert!(a < 0.0, "y must grow upwards, slope {a}");
        }
        for i in 0..d.len() {
            let want = a * d[i] + b;
            assert!(
                (p[i] - want).abs() <= 1.01,
                "axis {axis} vertex {i}: pixel {} but the affine map gives {want}",
                p[i]
            );
        }
    }
    for &(x, y) in px {
        assert!(x >= x0 && x < x1 && y >= 0.0 && y < h, "({x},{y}) outside");
    }
}

#[test]
fn svg_vertices_are_the_points_mapped_affinely_per_panel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("curves.svg");
    let panels = sample_panels();
    plot(&path, &panels).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    let (w, h) = image_size(2);
    assert_eq!((w, h), (2 * PANEL_SIZE.0, PANEL_SIZE.1));
    assert!(svg.starts_with(&format!("<svg width=\"{w}\" height=\"{h}\"")));
    let a = &panels[0].curves[0].points;
    let b = &panels[0].curves[1].points;
    let c = &panels[1].curves[0].points;
    let pa = polylines(&svg, curve_color(0), a.len());
    let pb = polylines(&svg, curve_color(1), b.len());
    let pc = polylines(&svg, curve_color(0), c.len());
    assert_eq!((pa.len(), pb.len(), pc.len()), (1, 1, 1));
    let half = f64::from(PANEL_SIZE.0);
    assert_affine(a, &pa[0], 0.0, half, f64::from(h));
    assert_affine(b, &pb[0], 0.0, half, f64::from(h));
    assert_affine(c, &pc[0], half, 2.0 * half, f64::from(h));
    // Curves of one panel share its axes: b's pixels follow a's map.
    let ax = (pa[0][6].0 - pa[0][0].0) / (a[6].0 - a[0].0);
    for (d, p) in b.iter().zip(&pb[0]) {
        assert!((pa[0][0].0 + ax * (d.0 - a[0].0) - p.0).abs() <= 1.01);
    }
    // Time is monotone, so the drawn x is too.
    assert!(pc[0].windows(2).all(|w| w[0].0 < w[1].0));
    // Titles, axis descriptions and legend labels are text elements.
    for text in ["accuracy", "loss", "wall time (s)", "value", "a", "b", "c"] {
        assert!(
            svg.contains(&format!(">\n{text}\n</text>")),
            "no <text> {text:?} in the SVG"
        );
    }
}

fn decode_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// Whether a pixel within one of (x, y) has colour `c` (anti-aliased edges aside, a
/// two-pixel line has its exact colour at its vertices).
fn has_color_near(rgb: &[u8], w: u32, (x, y): (f64, f64), c: (u8, u8, u8)) -> bool {
    let h = rgb.len() as i64 / (3 * i64::from(w));
    (-1..=1).any(|dy| {
        (-1..=1).any(|dx| {
            let (px, py) = (x as i64 + dx, y as i64 + dy);
            if px < 0 || py < 0 || px >= i64::from(w) || py >= h {
                return false;
            }
            let i = 3 * (py * i64::from(w) + px) as usize;
            (rgb[i], rgb[i + 1], rgb[i + 2]) == c
        })
    })
}

fn count_color(rgb: &[u8], c: (u8, u8, u8)) -> usize {
    rgb.chunks_exact(3)
        .filter(|p| (p[0], p[1], p[2]) == c)
        .count()
}

#[test]
fn png_decodes_with_curve_pixels_where_the_svg_puts_the_vertices() {
    let dir = tempfile::tempdir().unwrap();
    let panels = sample_panels();
    let (svg_path, png_path) = (dir.path().join("c.svg"), dir.path().join("c.PNG"));
    plot(&svg_path, &panels).unwrap();
    plot(&png_path, &panels).unwrap();
    let (w, h, rgb) = decode_png(&png_path);
    assert_eq!((w, h), image_size(2));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let a = &panels[0].curves[0].points;
    let c = &panels[1].curves[0].points;
    let pa = &polylines(&svg, curve_color(0), a.len())[0];
    let pc = &polylines(&svg, curve_color(0), c.len())[0];
    for &v in pa.iter().chain(pc) {
        assert!(
            has_color_near(&rgb, w, v, curve_color(0)),
            "no curve pixel near {v:?}"
        );
    }
    // The background is white, and most of the image is background.
    assert_eq!(&rgb[..3], &[255, 255, 255]);
    assert!(count_color(&rgb, (255, 255, 255)) > rgb.len() / 3 / 2);
    // Without the curves, their colour appears nowhere: the pixels above are the curves'.
    let mut empty = panels.clone();
    empty[0].curves.truncate(0);
    empty[1].curves.truncate(0);
    let empty_path = dir.path().join("empty.png");
    plot(&empty_path, &empty).unwrap();
    let (_, _, rgb0) = decode_png(&empty_path);
    assert_eq!(count_color(&rgb0, curve_color(0)), 0);
    assert!(count_color(&rgb, curve_color(0)) > 100);
    // Text is rendered: the empty chart still has dark (glyph or axis) pixels.
    assert!(rgb0.chunks_exact(3).any(|p| p.iter().all(|&v| v < 64)));
}

#[test]
fn a_lone_point_is_drawn_as_a_dot() {
    let dir = tempfile::tempdir().unwrap();
    let (svg_path, png_path) = (dir.path().join("dot.svg"), dir.path().join("dot.png"));
    let panels = vec![panel(
        "one evaluation",
        vec![
            curve("line", &[(0.0, 0.0), (2.0, 1.0)]),
            curve("dot", &[(1.0, 0.25)]),
        ],
    )];
    plot(&svg_path, &panels).unwrap();
    plot(&png_path, &panels).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let line = &polylines(&svg, curve_color(0), 2)[0];
    // Where the line's map puts (1, 0.25).
    let at = (
        (line[0].0 + line[1].0) / 2.0,
        line[0].1 + 0.25 * (line[1].1 - line[0].1),
    );
    let (w, _, rgb) = decode_png(&png_path);
    assert!(has_color_near(&rgb, w, at, curve_color(1)));
}

#[test]
fn panels_are_laid_out_two_to_a_row() {
    assert_eq!(image_size(1), PANEL_SIZE);
    assert_eq!(image_size(3), (2 * PANEL_SIZE.0, 2 * PANEL_SIZE.1));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("three.png");
    let mut panels = sample_panels();
    panels.push(panels[1].clone());
    plot(&path, &panels).unwrap();
    let (w, h, _) = decode_png(&path);
    assert_eq!((w, h), image_size(3));
}

/// Issue 15: the PNG drew stroke joins of a jagged curve (per-step losses: sharp reversals a
/// pixel apart) as spikes reaching far outside the axes, and across the neighbouring panel.
/// The plotting area is read off the SVG (x unpadded: the first and last vertices are its
/// left and right edges; y padded by 5 % of the span each side), and no pixel of a curve's
/// colour may lie outside it (one pixel of slack for rounding).
#[test]
fn png_curves_stay_inside_the_plotting_area() {
    let dir = tempfile::tempdir().unwrap();
    // A jagged loss: 5000 steps, several to a pixel column, alternating high and low.
    let jagged: Vec<(f64, f64)> = (0..5000)
        .map(|i| {
            let t = i as f64 * 0.001;
            let noise =
                if i % 2 == 0 { 0.9 } else { -0.9 } * (1.0 + 0.3 * ((i * 7919) % 13) as f64 / 13.0);
            (t, 2.0 * (-t).exp() + noise)
        })
        .collect();
    let smooth: Vec<(f64, f64)> = (0..40)
        .map(|i| (i as f64 * 0.1, 1.0 - 0.02 * i as f64))
        .collect();
    let panels = vec![
        panel(
            "jagged",
            vec![curve("steps", &jagged), curve("epochs", &smooth)],
        ),
        // An empty right-hand panel: a spike crossing into it would be the only colour there.
        panel("right", vec![]),
    ];
    let (svg_path, png_path) = (dir.path().join("j.svg"), dir.path().join("j.png"));
    plot(&svg_path, &panels).unwrap();
    plot(&png_path, &panels).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let px = &polylines(&svg, curve_color(0), jagged.len())[0];
    assert_affine(
        &jagged,
        px,
        0.0,
        f64::from(PANEL_SIZE.0),
        f64::from(PANEL_SIZE.1),
    );
    // The area's pixel box from the map of the extreme points.
    let (x0, x1) = (px[0].0, px[jagged.len() - 1].0);
    let (lo, hi) = jagged
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
            (l.min(p.1), h.max(p.1))
        });
    let (ilo, ihi) = (
        (0..jagged.len()).find(|&i| jagged[i].1 == lo).unwrap(),
        (0..jagged.len()).find(|&i| jagged[i].1 == hi).unwrap(),
    );
    let per = (px[ilo].1 - px[ihi].1) / (hi - lo); // pixels per unit, downwards
    let pad = 0.05 * (hi - lo) * per;
    let (y0, y1) = (px[ihi].1 - pad, px[ilo].1 + pad);
    let (w, _, rgb) = decode_png(&png_path);
    for c in [curve_color(0), curve_color(1)] {
        let outside: Vec<(usize, usize)> = rgb
            .chunks_exact(3)
            .enumerate()
            .filter(|(_, p)| (p[0], p[1], p[2]) == c)
            .map(|(i, _)| (i % w as usize, i / w as usize))
            .filter(|&(x, y)| {
                let (x, y) = (x as f64, y as f64);
                x < x0 - 1.0 || x > x1 + 1.0 || y < y0 - 1.0 || y > y1 + 1.0
            })
            .collect();
        assert!(
            outside.is_empty(),
            "{} pixels of colour {c:?} outside the plotting area x {x0}..{x1}, y {y0:.1}..{y1:.1}, e.g. {:?}",
            outside.len(),
            &outside[..outside.len().min(5)]
        );
    }
    // And the curve is drawn: its colour reaches the area's four sides.
    let blue: Vec<(f64, f64)> = rgb
        .chunks_exact(3)
        .enumerate()
        .filter(|(_, p)| (p[0], p[1], p[2]) == curve_color(0))
        .map(|(i, _)| ((i % w as usize) as f64, (i / w as usize) as f64))
        .collect();
    assert!(blue.iter().any(|p| p.0 <= x0 + 1.0) && blue.iter().any(|p| p.0 >= x1 - 1.0));
    assert!(
        blue.iter().any(|p| p.1 <= y0 + pad + 1.0) && blue.iter().any(|p| p.1 >= y1 - pad - 1.0)
    );
}

// ---------------------------------------------------------------------------------------
// Logs

fn run_record(plan: &str, seed: u64) -> Value {
    json!({"kind": "run", "plan": plan, "plan_hash": "00ff", "effective_plan": "[dims]\n",
           "graph": "g.sf", "seed": seed, "threads": 2, "runner": "interpreter"})
}

fn step_record(epoch: u64, step: u64, time: f64, loss: Value) -> Value {
    json!({"kind": "step", "epoch": epoch, "step": step, "time": time, "loss": loss,
           "nodes": 100, "entries": 400,
           "ms": {"sampling": 1.0, "aggregation": 2.0, "transformation": 3.0, "other": 0.5,
                  "optimizer": 0.5, "wall": 7.0}})
}

fn epoch_record(
    epoch: u64,
    step: u64,
    time: f64,
    train_loss: f64,
    val: Option<(f64, f64)>,
) -> Value {
    let mut r = json!({"kind": "epoch", "epoch": epoch, "step": step, "time": time,
                       "train_loss": train_loss, "best": false, "eval_ms": 4.0});
    if let Some((acc, f1)) = val {
        r["val"] = json!({"accuracy": acc, "f1_micro": f1, "f1_macro": f1 - 0.1});
    }
    r
}

/// A small log following the schema: 3 epochs of 4 steps; step 5's loss diverged (null);
/// epoch 2 not evaluated. Returns the records and the expected series
/// (accuracy, f1_micro, step loss, epoch mean), each (time, value).
#[allow(clippy::type_complexity)]
fn sample_log(plan: &str, seed: u64, t0: f64) -> (Vec<Value>, [Vec<(f64, f64)>; 4]) {
    let mut recs = vec![run_record(plan, seed)];
    let mut want: [Vec<(f64, f64)>; 4] = Default::default();
    let mut t = t0;
    let mut step = 0;
    for epoch in 1..=3u64 {
        let mut sum = 0.0;
        for _ in 0..4 {
            t += 0.25;
            let loss = 2.0 / (1.0 + step as f64) + seed as f64 * 0.01;
            if step == 5 {
                recs.push(step_record(epoch, step, t, Value::Null));
            } else {
                recs.push(step_record(epoch, step, t, json!(loss)));
                want[2].push((t, loss));
            }
            sum += loss;
            step += 1;
        }
        t += 0.1;
        let val = (epoch != 2).then_some((0.5 + 0.1 * epoch as f64, 0.45 + 0.1 * epoch as f64));
        recs.push(epoch_record(epoch, step, t, sum / 4.0, val));
        want[3].push((t, sum / 4.0));
        if let Some((a, f)) = val {
            want[0].push((t, a));
            want[1].push((t, f));
        }
    }
    recs.push(json!({"kind": "test", "epoch": 3, "time": t + 0.2,
                     "val": {"accuracy": 0.8, "f1_micro": 0.8, "f1_macro": 0.7},
                     "test": {"accuracy": 0.79, "f1_micro": 0.79, "f1_macro": 0.69}}));
    (recs, want)
}

/// The records as the schema's type (what the trainer hands the plotter).
fn typed(recs: &[Value]) -> Vec<Record> {
    recs.iter()
        .map(|r| serde_json::from_value(r.clone()).unwrap())
        .collect()
}

fn write_log(dir: &Path, name: &str, recs: &[Value]) -> PathBuf {
    let path = dir.join(name);
    let text: String = recs.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn training_panels_hold_exactly_the_logged_series() {
    let (r1, w1) = sample_log("gcn", 1, 0.0);
    let (r2, w2) = sample_log("graphsage", 7, 0.5);
    let panels = training_panels(&[
        ("one.jsonl".into(), typed(&r1)),
        ("two.jsonl".into(), typed(&r2)),
    ])
    .unwrap();
    assert_eq!(panels.len(), 2);
    let labels: Vec<&str> = panels[0].curves.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "gcn seed 1 accuracy",
            "gcn seed 1 F1-micro",
            "graphsage seed 7 accuracy",
            "graphsage seed 7 F1-micro"
        ]
    );
    let labels: Vec<&str> = panels[1].curves.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "gcn seed 1 step loss",
            "gcn seed 1 epoch mean",
            "graphsage seed 7 step loss",
            "graphsage seed 7 epoch mean"
        ]
    );
    for (run, want) in [w1, w2].iter().enumerate() {
        assert_eq!(panels[0].curves[2 * run].points, want[0]);
        assert_eq!(panels[0].curves[2 * run + 1].points, want[1]);
        assert_eq!(panels[1].curves[2 * run].points, want[2]);
        assert_eq!(panels[1].curves[2 * run + 1].points, want[3]);
        assert_eq!(want[0].len(), 2, "epoch 2 was not evaluated");
        assert_eq!(want[2].len(), 11, "the null loss is skipped");
    }
}

#[test]
fn repeated_runs_get_distinct_labels() {
    let a = typed(&sample_log("gcn", 1, 0.0).0);
    let b = typed(&sample_log("gcn", 1, 0.0).0);
    // Two logs with the same plan and seed: told apart by the log's name.
    let panels =
        training_panels(&[("x.jsonl".into(), a.clone()), ("y.jsonl".into(), b.clone())]).unwrap();
    assert_eq!(panels[0].curves[0].label, "gcn seed 1 (x.jsonl) accuracy");
    assert_eq!(panels[0].curves[2].label, "gcn seed 1 (y.jsonl) accuracy");
    // Two runs in one log: a run record starts a new run, numbered within the log.
    let both: Vec<Record> = a.into_iter().chain(b).collect();
    let panels = training_panels(&[("x.jsonl".into(), both)]).unwrap();
    assert_eq!(panels[1].curves.len(), 4);
    assert_eq!(
        panels[1].curves[0].label,
        "gcn seed 1 (x.jsonl) #1 step loss"
    );
    assert_eq!(
        panels[1].curves[2].label,
        "gcn seed 1 (x.jsonl) #2 step loss"
    );
}

#[test]
fn a_log_file_round_trips_through_read_log_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, want) = sample_log("gcn", 3, 0.0);
    let path = write_log(dir.path(), "train.jsonl", &recs);
    // Blank lines are allowed.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\n\n");
    std::fs::write(&path, text).unwrap();
    let read = read_log(&path).unwrap();
    assert_eq!(read.len(), recs.len());
    let panels = training_panels(&[("train.jsonl".into(), read)]).unwrap();
    // serde_json's default float parsing may be off by an ulp from what was written.
    let got = [
        &panels[0].curves[0].points,
        &panels[0].curves[1].points,
        &panels[1].curves[0].points,
        &panels[1].curves[1].points,
    ];
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.len(), w.len());
        for (a, b) in g.iter().zip(w) {
            assert!(
                (a.0 - b.0).abs() < 1e-12 && (a.1 - b.1).abs() < 1e-12,
                "{a:?} vs {b:?}"
            );
        }
    }
    let out = dir.path().join("fig2.svg");
    plot(&out, &panels).unwrap();
    let svg = std::fs::read_to_string(&out).unwrap();
    let steps = &polylines(&svg, curve_color(0), want[2].len());
    assert_eq!(
        steps.len(),
        1,
        "the step-loss curve with one vertex per finite loss"
    );
    assert_affine(
        &want[2],
        &steps[0],
        f64::from(PANEL_SIZE.0),
        2.0 * f64::from(PANEL_SIZE.0),
        480.0,
    );
}

// ---------------------------------------------------------------------------------------
// Errors

fn err_text<T: std::fmt::Debug, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// Writes `recs` as a log with line `line` (1-based) replaced by `bad`, and returns
/// read_log's error.
fn log_error(line: usize, bad: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (recs, _) = sample_log("gcn", 1, 0.0);
    let mut lines: Vec<String> = recs.iter().map(|r| r.to_string()).collect();
    lines[line - 1] = bad.to_string();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    err_text(read_log(&path))
}

#[test]
fn malformed_logs_name_file_line_and_field() {
    let e = log_error(3, "{\"kind\": \"step\", \"epoch\": 1,");
    assert!(e.contains("bad.jsonl:3: not a JSON object"), "{e}");
    let e = log_error(2, r#"{"kind":"step","epoch":1,"step":0,"time":0.25}"#);
    assert!(
        e.contains("bad.jsonl:2: step record: missing field \"loss\""),
        "{e}"
    );
    let e = log_error(
        2,
        r#"{"kind":"step","epoch":1,"step":0,"time":"soon","loss":1}"#,
    );
    assert!(
        e.contains(
            "bad.jsonl:2: step record: field \"time\" is a string (\"soon\"), expected a number"
        ),
        "{e}"
    );
    let e = log_error(
        6,
        r#"{"kind":"epoch","epoch":1,"step":4,"time":1.1,"train_loss":1,"val":{"accuracy":0.5}}"#,
    );
    assert!(
        e.contains("bad.jsonl:6: epoch record: field \"val\": missing field \"f1_micro\""),
        "{e}"
    );
    let e = log_error(
        1,
        r#"{"kind":"run","plan":"gcn","plan_hash":"00ff","effective_plan":"","graph":"g.sf","threads":2,"runner":"executor"}"#,
    );
    assert!(
        e.contains("bad.jsonl:1: run record: missing field \"seed\""),
        "{e}"
    );
    let e = log_error(1, &step_record(1, 0, 0.0, json!(1)).to_string());
    assert!(
        e.contains("bad.jsonl:1: a \"step\" record before any \"run\" record"),
        "{e}"
    );
    let e = log_error(4, r#"{"kind":"stpe","time":1}"#);
    assert!(
        e.contains("bad.jsonl:4: unknown record kind \"stpe\""),
        "{e}"
    );
    let e = log_error(4, r#"[1, 2]"#);
    assert!(
        e.contains("bad.jsonl:4: expected a JSON object, got an array"),
        "{e}"
    );
    let e = log_error(4, &step_record(1, 2, 0.1, json!(1)).to_string());
    assert!(
        e.contains(
            "bad.jsonl:4: step record: field \"time\" is 0.1, before the previous record's 0.5"
        ),
        "{e}"
    );
    let e = log_error(
        3,
        r#"{"kind":"step","epoch":1.5,"step":1,"time":0.5,"loss":1}"#,
    );
    assert!(
        e.contains(
            "bad.jsonl:3: step record: field \"epoch\" is a number (1.5), expected an integer"
        ),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    let e = err_text(read_log(&empty));
    assert!(e.contains("empty.jsonl: no records"), "{e}");
    let e = err_text(read_log(&dir.path().join("missing.jsonl")));
    assert!(e.contains("missing.jsonl: cannot read"), "{e}");
}

#[test]
fn training_panels_errors_name_the_run_and_record() {
    let (mut recs, _) = sample_log("gcn", 1, 0.0);
    recs[5]["time"] = json!(0.1);
    let e = err_text(training_panels(&[("live".into(), typed(&recs))]));
    assert!(
        e.contains(
            "live: record 6: epoch record: field \"time\" is 0.1, before the previous record's"
        ),
        "{e}"
    );
    let e = err_text(training_panels(&[("headless".into(), typed(&recs[1..]))]));
    assert!(
        e.contains("headless: record 1: a \"step\" record before any \"run\" record"),
        "{e}"
    );
    let e = err_text(training_panels(&[("none".into(), vec![])]));
    assert!(e.contains("none: no records"), "{e}");
}

#[test]
fn bad_outputs_fail_cleanly_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let panels = sample_panels();
    for name in ["fig.pdf", "fig", "fig.svg.bak"] {
        let path = dir.path().join(name);
        let e = err_text(plot(&path, &panels));
        assert!(
            e.contains(name) && e.contains("expected a file name ending in .svg or .png"),
            "{e}"
        );
        assert!(!path.exists());
    }
    let path = dir.path().join("nan.svg");
    let mut bad = panels.clone();
    bad[1].curves[0].points[3].1 = f64::NAN;
    let e = err_text(plot(&path, &bad));
    assert!(
        e.contains("nan.svg: panel \"loss\": curve \"c\": point 3"),
        "{e}"
    );
    assert!(!path.exists());
    let e = err_text(plot(&dir.path().join("none.png"), &[]));
    assert!(e.contains("no panels"), "{e}");
    let e = err_text(plot(&dir.path().join("no/such/dir/fig.svg"), &panels));
    assert!(e.contains("fig.svg: cannot write"), "{e}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left behind"
    );
}

#[test]
fn writes_are_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let panels = sample_panels();
    // Replacing an existing file.
    let path = dir.path().join("fig.svg");
    std::fs::write(&path, "old").unwrap();
    plot(&path, &panels).unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
    // A failure after the image is written (the rename onto a non-empty directory fails):
    // the error names the target, the directory is intact and no temp file is left.
    let target = dir.path().join("taken.png");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), "x").unwrap();
    let e = err_text(plot(&target, &panels));
    assert!(e.contains("taken.png: cannot write"), "{e}");
    assert!(target.join("keep").exists());
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fig.svg", "taken.png"]);
}

// ---------------------------------------------------------------------------------------
// The command

#[test]
fn plot_command_draws_logs_and_names_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (r1, _) = sample_log("gcn", 1, 0.0);
    let (r2, _) = sample_log("gcn", 2, 0.0);
    write_log(dir.path(), "a.jsonl", &r1);
    write_log(dir.path(), "b.jsonl", &r2);
    let out = saintflow(&["plot", "a.jsonl", "b.jsonl", "-o", "fig.png"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("wrote fig.png (2 panels, 8 curves)"));
    let (w, h, _) = decode_png(&dir.path().join("fig.png"));
    assert_eq!((w, h), image_size(2));

    let mut bad = r1.clone();
    bad[2] = json!({"kind": "step", "epoch": 1, "step": 1, "time": 0.5});
    write_log(dir.path(), "bad.jsonl", &bad);
    let out = saintflow(
        &["plot", "a.jsonl", "bad.jsonl", "-o", "fig2.svg"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: bad.jsonl:3: step record: missing field \"loss\""),
        "{err}"
    );
    assert!(!dir.path().join("fig2.svg").exists());

    let out = saintflow(&["plot", "a.jsonl", "-o", "fig.jpg"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fig.jpg: unknown image format \"jpg\""));
}
