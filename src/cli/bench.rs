//! `saintflow bench scale`: the arguments of [`crate::bench::scale`] and the call; the
//! benchmark itself is a library module.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::bench::scale::{self, ScaleSpec};
use crate::bench::BenchError;
use crate::error::Result;
use crate::progress::Progress;

#[derive(Debug, Subcommand)]
pub(super) enum Bench {
    /// Step time against |V| and against degree under a memory cap (JPDC Fig. 5).
    Scale(ScaleArgs),
}

#[derive(Debug, Args)]
pub(super) struct ScaleArgs {
    /// Where the stores are (named `k{scale}.sf` at degree 16, `k{scale}d{degree}.sf`
    /// otherwise); missing ones are generated there (50 features, 2 classes, seed 1).
    #[arg(long)]
    dir: PathBuf,
    /// Scales of the |V| series, degree `--scales-degree` (`--scales` alone: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "20,21,22,23,24,25")]
    scales: Vec<u32>,
    /// Degree of the |V| series (its stores are `k{scale}.sf` at 16, else
    /// `k{scale}d{degree}.sf`).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    scales_degree: u32,
    /// Degrees of the degree series (`--degrees` alone: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "8,16,32,64,128,256")]
    degrees: Vec<u32>,
    /// Scale of the degree series.
    #[arg(long, default_value_t = 20)]
    degree_scale: u32,
    /// Training steps per run, ≥ 1.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=super::MAX_STEPS))]
    steps: u64,
    /// Steps left out of the median at the start of each run.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// The plan trained.
    #[arg(long, default_value = "plans/graphsage.toml")]
    plan: PathBuf,
    /// Plan overrides after the benchmark's own (frontier m=1000 n=8000, hidden 512,
    /// dropout 0).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Worker threads of each run, 1 to 256.
    #[arg(long, default_value = "2", value_parser = super::threads())]
    threads: std::num::NonZeroUsize,
    /// The memcap script (relative paths from the current directory); when it is absent
    /// runs are not capped, with a warning.
    #[arg(long, default_value = "../shared/tools/memcap")]
    memcap: PathBuf,
    /// The memory cap.
    #[arg(long, default_value = "4G")]
    cap: String,
    /// Rounds: the whole list of runs is repeated this many times, round-robin (so a busy
    /// moment on a shared machine hits every point alike); a point's figure is the median
    /// of its rounds' medians.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Keep the stores' pages in the page cache between runs (default: dropped first).
    #[arg(long)]
    warm: bool,
    /// Output directory: `scale.md`, `scale.json`, `scale.svg`, `scale.png` and the runs'
    /// logs (`logs/`).
    #[arg(long, short)]
    output: PathBuf,
}

pub(super) fn run(b: Bench, progress: &Progress) -> Result<()> {
    let Bench::Scale(a) = b;
    let exe = std::env::current_exe().map_err(|source| BenchError::Io {
        path: PathBuf::from("/proc/self/exe"),
        op: "find the saintflow binary at",
        source,
    })?;
    crate::atomic::OutputGuard::new()
        .input("--plan", &a.plan)
        .input("--memcap", &a.memcap)
        .dir("--output", &a.output)
        .check()?;
    let spec = ScaleSpec {
        exe,
        dir: a.dir,
        scales: a.scales,
        scales_degree: a.scales_degree,
        degrees: a.degrees,
        degree_scale: a.degree_scale,
        steps: a.steps,
        warmup: a.warmup,
        plan: a.plan,
        set: a.set,
        threads: a.threads.get(),
        memcap: a.memcap,
        cap: a.cap,
        repeat: a.repeat,
        warm: a.warm,
        output: a.output,
    };
    let report = scale::run(&spec, progress)?;
    super::out(&report.table.to_string())?;
    Ok(())
}
