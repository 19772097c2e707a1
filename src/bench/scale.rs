//! The scale benchmark (`saintflow bench scale`): JPDC Fig. 5 on this machine. Generates (or reuses) Kronecker
//! stores — a |V| series (scales, degree 16) and a degree series (degrees, one scale) —
//! trains N steps of a plan on each in a child process under `memcap` (no evaluation), and
//! writes a markdown table, a JSON summary and a plot (step time vs |V|, vs degree).
//!
//! Per run: the store's pages are dropped from the page cache first (`warm` keeps them),
//! so every run starts cold and a run cannot ride on an earlier one's cache beyond its cap;
//! the median step time is over the log's `step` records after `warmup`; memory is the
//! cap's peak (memcap's cgroup: resident memory and the page cache the run brought in) and
//! the largest anonymous resident memory (`RssAnon`, summed over the child's process tree,
//! polled every 50 ms): what the run holds itself, page cache excluded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::log::Record;
use crate::plot::{Curve, Panel};
use crate::progress::Progress;
use crate::store::gen::{generate_kronecker, KroneckerSpec};
use crate::store::GraphStore;

use super::BenchError;

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// What [`run`] measures (the `bench scale` flags; defaults as the command's).
#[derive(Clone, Debug)]
pub struct ScaleSpec {
    /// The `saintflow` binary (or one with the same `train` command) each run starts.
    pub exe: PathBuf,
    /// Where the stores are (named `k{scale}.sf` at degree 16, `k{scale}d{degree}.sf`
    /// otherwise); missing ones are generated there (50 features, 2 classes, seed 1).
    pub dir: PathBuf,
    /// Scales of the |V| series.
    pub scales: Vec<u32>,
    /// Degree of the |V| series (16 in the JPDC's figure).
    pub scales_degree: u32,
    /// Degrees of the degree series.
    pub degrees: Vec<u32>,
    /// Scale of the degree series.
    pub degree_scale: u32,
    /// Training steps per run.
    pub steps: u64,
    /// Steps left out of the median at the start of each run.
    pub warmup: usize,
    /// The plan trained.
    pub plan: PathBuf,
    /// Plan overrides after the benchmark's own ([`MODEL_SET`]).
    pub set: Vec<String>,
    /// Worker threads of each run.
    pub threads: usize,
    /// The memcap script; when it is absent runs are not capped, with a warning.
    pub memcap: PathBuf,
    /// The memory cap.
    pub cap: String,
    /// Rounds: the whole list of runs is repeated this many times, round-robin (so a busy
    /// moment on a shared machine hits every point alike); a point's figure is the median
    /// of its rounds' medians. At least 1.
    pub repeat: u32,
    /// Keep the stores' pages in the page cache between runs (default: dropped first).
    pub warm: bool,
    /// Output directory: `scale.md`, `scale.json`, `scale.svg`, `scale.png` and the runs'
    /// logs (`logs/`).
    pub output: PathBuf,
}

/// What [`run`] wrote, as values.
#[derive(Clone, Debug)]
pub struct ScaleReport {
    /// The points, the |V| series first.
    pub points: Vec<Point>,
    /// The markdown table written to `scale.md`.
    pub table: String,
}

/// The benchmark's model: the 2-layer GraphSAGE, hidden 512, frontier m=1000
/// n=8000, dropout 0 (so a step's work does not depend on random masks).
pub const MODEL_SET: [&str; 6] = [
    "sampler.kind=frontier",
    "sampler.frontier=1000",
    "sampler.budget=8000",
    "dims.hidden=512",
    "layer.0.dropout=0",
    "output.dropout=0",
];

/// One point's figures: the step-time median over the rounds, the memory maxima over
/// them, everything else from the first round.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// `V` (the |V| series) or `degree`.
    pub series: &'static str,
    /// log2 N.
    pub scale: u32,
    /// Generator's target degree.
    pub degree: u32,
    /// N.
    pub nodes: u64,
    /// Directed entries of the full graph.
    pub entries: u64,
    /// Bytes of the store's sections.
    pub store_bytes: u64,
    /// Steps in the log.
    pub steps: usize,
    /// Median wall time per step after the warm-up, ms (the median over rounds).
    pub median_ms: f64,
    /// Each round's median, ms.
    pub round_ms: Vec<f64>,
    /// Median of wall time per 1000 subgraph nodes, ms.
    pub ms_per_1000_nodes: f64,
    /// Mean subgraph nodes.
    pub mean_nodes: f64,
    /// Mean subgraph entries.
    pub mean_entries: f64,
    /// Seconds from the start of training to the first step's end (setup: sampler,
    /// normalisation pre-sampling, planning).
    pub first_step_s: f64,
    /// memcap's peak, bytes (None without memcap).
    pub cap_peak: Option<u64>,
    /// Largest anonymous resident memory of the run's processes, bytes.
    pub max_anon: u64,
    /// Wall seconds of the whole child process.
    pub wall_s: f64,
}

/// Median of the steps' wall times after `warmup`, and of wall per 1000 nodes, with the
/// mean nodes and entries, from a training log's records.
pub fn step_stats(records: &[Record], warmup: usize) -> Option<(usize, f64, f64, f64, f64, f64)> {
    // (time, wall ms, nodes, entries) of each step.
    let steps: Vec<(f64, f64, f64, f64)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Step {
                time,
                ms,
                nodes,
                entries,
                ..
            } => Some((*time, ms.wall, *nodes as f64, *entries as f64)),
            _ => None,
        })
        .collect();
    let first = steps.first()?.0;
    let kept = &steps[warmup.min(steps.len().saturating_sub(1))..];
    let mut wall = Vec::new();
    let mut per = Vec::new();
    let (mut nodes, mut entries) = (0.0, 0.0);
    for &(_, w, n, e) in kept {
        wall.push(w);
        per.push(w * 1000.0 / n.max(1.0));
        nodes += n;
        entries += e;
    }
    let k = kept.len() as f64;
    Some((
        steps.len(),
        median(&mut wall),
        median(&mut per),
        nodes / k,
        entries / k,
        first,
    ))
}

/// The median (mean of the middle two for an even count).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn store_name(scale: u32, degree: u32) -> String {
    if degree == 16 {
        format!("k{scale}.sf")
    } else {
        format!("k{scale}d{degree}.sf")
    }
}

/// Drops the pages of every file of `dir` from the page cache (clean pages only; a hint).
fn evict(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if let Ok(f) = std::fs::File::open(e.path()) {
            use std::os::fd::AsRawFd;
            // SAFETY: a plain syscall on a file descriptor we own; it only drops cached
            // clean pages.
            unsafe {
                libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
    }
}

/// Anonymous resident bytes of `pid` and its descendants (0 once gone).
fn tree_anon(pid: u32) -> u64 {
    let own = crate::machine::anon_resident(pid);
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    own + children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .map(tree_anon)
        .sum::<u64>()
}

/// Runs the benchmark `a` describes: generates missing stores, runs every point
/// `a.repeat` times, writes `scale.md`, `scale.json`, `scale.svg` and `scale.png` under
/// `a.output`, and returns the points and the table.
pub fn run(a: &ScaleSpec, progress: &Progress) -> Result<ScaleReport> {
    let logs = a.output.join("logs");
    std::fs::create_dir_all(&logs).map_err(|source| BenchError::Io {
        path: logs.clone(),
        op: "create directory",
        source,
    })?;
    let memcap = if a.memcap.is_file() {
        Some(a.memcap.clone())
    } else {
        crate::atomic::stderr_line(&format!(
            "warning: {} not found: runs are NOT memory-capped (pass --memcap PATH)\n",
            a.memcap.display()
        ));
        None
    };
    let exe = &a.exe;
    let mut runs: Vec<(&'static str, u32, u32)> = a
        .scales
        .iter()
        .map(|&s| ("V", s, a.scales_degree))
        .collect();
    runs.extend(a.degrees.iter().map(|&d| ("degree", a.degree_scale, d)));
    for &(_, scale, degree) in &runs {
        let store = a.dir.join(store_name(scale, degree));
        if !store.exists() {
            crate::atomic::stderr_line(&format!("generating {}", store.display()));
            let spec = KroneckerSpec {
                scale,
                degree: f64::from(degree),
                n_features: 50,
                n_classes: 2,
                seed: 1,
                ..KroneckerSpec::default()
            };
            generate_kronecker(&spec, &store, false, progress)?;
        }
    }
    let mut points: Vec<Point> = Vec::new();
    for round in 0..a.repeat {
        for (k, &(series, scale, degree)) in runs.iter().enumerate() {
            let store = a.dir.join(store_name(scale, degree));
            let p = run_one(
                a,
                exe,
                memcap.as_deref(),
                (series, scale, degree),
                &store,
                round,
            )?;
            report(&store, &p);
            if round == 0 {
                points.push(p);
            } else {
                let q = &mut points[k];
                q.round_ms.push(p.median_ms);
                q.median_ms = median(&mut q.round_ms.clone());
                q.cap_peak = q.cap_peak.max(p.cap_peak);
                q.max_anon = q.max_anon.max(p.max_anon);
            }
        }
    }
    let table = markdown(a, memcap.is_some(), &points);
    write_atomic(&a.output.join("scale.md"), table.as_bytes())?;
    let json = serde_json::to_vec_pretty(&points).expect("points serialise");
    write_atomic(&a.output.join("scale.json"), &json)?;
    let panels = panels(&points);
    if !panels.is_empty() {
        crate::plot::plot(&a.output.join("scale.svg"), &panels)?;
        crate::plot::plot(&a.output.join("scale.png"), &panels)?;
    }
    Ok(ScaleReport { points, table })
}

fn report(store: &Path, point: &Point) {
    crate::atomic::stderr_line(&format!(
        "{}: {} steps, median {:.1} ms ({:.2} ms / 1000 nodes), cap peak {}, max anon {:.0} MiB\n",
        store.display(),
        point.steps,
        point.median_ms,
        point.ms_per_1000_nodes,
        point
            .cap_peak
            .map_or("-".into(), |p| format!("{:.0} MiB", p as f64 / 1048576.0)),
        point.max_anon as f64 / 1048576.0
    ));
}

fn run_one(
    a: &ScaleSpec,
    exe: &Path,
    memcap: Option<&Path>,
    (series, scale, degree): (&'static str, u32, u32),
    store: &Path,
    round: u32,
) -> Result<Point> {
    let opened = GraphStore::open(store)?;
    let header = opened.header();
    let (nodes, entries) = (header.n_nodes, opened.full().n_entries() as u64);
    let store_bytes: u64 = header.sections.iter().map(|s| s.bytes).sum();
    drop(opened);
    if !a.warm {
        evict(store);
    }
    let log = a.output.join("logs").join(if round == 0 {
        format!("{series}-s{scale}-d{degree}.log")
    } else {
        format!("{series}-s{scale}-d{degree}-r{round}.log")
    });
    let mut cmd = match memcap {
        Some(m) => {
            let mut c = Command::new(m);
            c.arg(&a.cap).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.arg("train")
        .arg(&a.plan)
        .arg("--graph")
        .arg(store)
        .args(["-q", "--no-eval", "--threads"])
        .arg(a.threads.to_string())
        .arg("--steps")
        .arg(a.steps.to_string())
        .arg("--log")
        .arg(&log)
        // The log is this benchmark's own, under its output directory: a later `bench
        // scale` into the same directory (reusing its stores) writes it again.
        .arg("--force");
    for s in MODEL_SET.iter().map(|s| s.to_string()).chain(a.set.clone()) {
        cmd.arg("--set").arg(s);
    }
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BenchError::Spawn {
            program: PathBuf::from(cmd.get_program()),
            source,
        })?;
    let pid = child.id();
    let stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(std::result::Result::ok)
            .collect::<Vec<_>>()
    });
    let mut max_anon = 0;
    let status = loop {
        max_anon = max_anon.max(tree_anon(pid));
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(source) => {
                return Err(BenchError::Io {
                    path: store.to_path_buf(),
                    op: "wait for the run on",
                    source,
                })
            }
        }
    };
    let wall_s = start.elapsed().as_secs_f64();
    let lines = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(BenchError::RunFailed {
            store: store.to_path_buf(),
            status: status.to_string(),
            stderr: lines.join("\n"),
        });
    }
    let cap_peak = lines
        .iter()
        .filter_map(|l| l.strip_prefix("memcap: "))
        .flat_map(|l| l.split_whitespace())
        .find_map(|kv| kv.strip_prefix("peak="))
        .and_then(|p| p.parse().ok());
    let records = crate::plot::read_log(&log)?;
    let (steps, median_ms, ms_per_1000_nodes, mean_nodes, mean_entries, first_step_s) =
        step_stats(&records, a.warmup).ok_or_else(|| BenchError::NoSteps { log: log.clone() })?;
    Ok(Point {
        series,
        scale,
        degree,
        nodes,
        entries,
        store_bytes,
        steps,
        median_ms,
        round_ms: vec![median_ms],
        ms_per_1000_nodes,
        mean_nodes,
        mean_entries,
        first_step_s,
        cap_peak,
        max_anon,
        wall_s,
    })
}

fn mib(b: u64) -> String {
    format!("{:.0}", b as f64 / 1048576.0)
}

/// The table: one row per run, the |V| series first, with each row's step time relative
/// to its series' first row.
fn markdown(a: &ScaleSpec, capped: bool, points: &[Point]) -> String {
    let mut t = format!(
        "Plan `{}` with {}{}; {} steps per run, median after {} warm-up steps, median of {} round(s); {} threads; {}; stores {}.\n\n",
        a.plan.display(),
        MODEL_SET.join(", "),
        a.set.iter().map(|s| format!(", {s}")).collect::<String>(),
        a.steps,
        a.warmup,
        a.repeat,
        a.threads,
        if capped {
            format!("memcap {}", a.cap)
        } else {
            "NOT memory-capped".into()
        },
        if a.warm { "warm" } else { "evicted from the page cache before each run" },
    );
    t.push_str("| series | scale | degree | \\|V\\| | entries | store MiB | steps | median step ms | rounds ms | ×first | ms / 1000 nodes | mean nodes | mean entries | first step s | cap peak MiB | max anon MiB |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for series in ["V", "degree"] {
        let rows: Vec<&Point> = points.iter().filter(|p| p.series == series).collect();
        let Some(base) = rows.first().map(|p| p.median_ms) else {
            continue;
        };
        for p in rows {
            t.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {:.2} | {:.2} | {:.0} | {:.0} | {:.1} | {} | {} |\n",
                if series == "V" { "\\|V\\|" } else { "degree" },
                p.scale,
                p.degree,
                p.nodes,
                p.entries,
                mib(p.store_bytes),
                p.steps,
                p.median_ms,
                p.round_ms
                    .iter()
                    .map(|m| format!("{m:.0}"))
                    .collect::<Vec<_>>()
                    .join(" / "),
                p.median_ms / base,
                p.ms_per_1000_nodes,
                p.mean_nodes,
                p.mean_entries,
                p.first_step_s,
                p.cap_peak.map_or("-".into(), mib),
                mib(p.max_anon),
            ));
        }
    }
    t
}

/// JPDC Fig. 5: median step time against log2 |V| and against degree.
pub fn panels(points: &[Point]) -> Vec<Panel> {
    let curve = |series: &str, x: fn(&Point) -> f64| Curve {
        label: "median step".into(),
        points: points
            .iter()
            .filter(|p| p.series == series)
            .map(|p| (x(p), p.median_ms))
            .collect(),
    };
    let mut out = Vec::new();
    let v = curve("V", |p| f64::from(p.scale));
    if let (Some(&(x0, y0)), Some(&(x1, _))) = (v.points.first(), v.points.last()) {
        // The acceptance band: flat within ±25 % of the smallest graph's step.
        let band = |label: &str, f: f64| Curve {
            label: label.into(),
            points: vec![(x0, y0 * f), (x1, y0 * f)],
        };
        out.push(Panel {
            title: "Step time vs |V| (degree 16)".into(),
            x_label: "log2 |V|".into(),
            y_label: "median step time (ms)".into(),
            curves: vec![v.clone(), band("+25 %", 1.25), band("-25 %", 0.75)],
        });
    }
    let d = curve("degree", |p| f64::from(p.degree));
    if !d.points.is_empty() {
        out.push(Panel {
            title: format!(
                "Step time vs degree (scale {})",
                points
                    .iter()
                    .find(|p| p.series == "degree")
                    .map_or(0, |p| p.scale)
            ),
            x_label: "degree".into(),
            y_label: "median step time (ms)".into(),
            curves: vec![d],
        });
    }
    out
}

/// Writes `bytes` to `path` atomically ([`crate::atomic`]).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::atomic::write_atomic(path, bytes).map_err(|source| BenchError::Io {
        path: path.to_path_buf(),
        op: "write",
        source,
    })
}
