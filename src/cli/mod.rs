//! The `saintflow` command: argument parsing (clap) and dispatch, one file per subcommand.

#[cfg(feature = "bench")]
mod bench;
mod check;
mod demo;
mod embed;
mod embedding;
mod eval;
mod explain;
mod export;
mod gen;
mod import;
mod info;
mod link;
mod ops;
mod partition;
mod plans;
#[cfg(feature = "plot")]
mod plot;
mod sample;
mod train;

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::op::Registry;
use crate::progress::Progress;

/// Train GNNs by graph sampling over memory-mapped on-disk graphs.
#[derive(Debug, Parser)]
#[command(name = "saintflow", version, about, propagate_version = true)]
struct Cli {
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a synthetic graph store.
    #[command(subcommand)]
    Gen(gen::Gen),
    /// Import a dataset into a graph store.
    #[command(subcommand)]
    Import(import::Import),
    /// Print a store's summary statistics.
    Info(info::InfoArgs),
    /// Verify a store completely (checksums, indices, ordering, symmetry, labels, roles).
    Check(check::CheckArgs),
    /// Draw subgraphs with a sampler and report sizes, timing and coverage.
    Sample(sample::SampleArgs),
    /// Lower a plan file, plan its step for expected subgraph sizes and print the planned
    /// graph with per-node costs (chain orders, Q_f, peak memory).
    Explain(explain::ExplainArgs),
    /// The quick start: generate a small planted graph and train a shipped plan on it.
    Demo(demo::DemoArgs),
    /// List the ops a plan file may call by name, with their attributes.
    Ops(ops::OpsArgs),
    /// Draw training curves (validation accuracy and loss against wall time) of training
    /// logs as SVG or PNG.
    #[cfg(feature = "plot")]
    Plot(plot::PlotArgs),
    /// Train a plan (a file, or a shipped plan's name: `gcn`) on a graph store; print the
    /// test accuracy and F1.
    Train(train::TrainArgs),
    /// List the shipped plans (built into saintflow) with their Cora figures; `plans NAME`
    /// prints one plan's file.
    Plans(plans::PlansArgs),
    /// Evaluate a checkpoint again: the validation and test figures `train` printed, and
    /// with `-o` every node's predicted class as .npy.
    Eval(eval::EvalArgs),
    /// Write the node embeddings of a trained plan (the `[output]` layer's input) as .npy.
    Embed(embed::EmbedArgs),
    /// Partition a store into k part stores (multilevel k-way + GAD augmentation by
    /// random walks from each part's boundary) for distributed training.
    Partition(partition::PartitionArgs),
    /// Score node embeddings (`.npy`): node classification at 10%..90% labelled
    /// (Micro/Macro-F1), or link prediction on held-out edges (AUC).
    EvalEmbedding(embedding::EvalEmbeddingArgs),
    /// Benchmarks: `bench scale` (step time vs |V| and vs degree under a memory cap).
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(bench::Bench),
    /// Write a checkpoint's parameters as .safetensors (names and shapes as in the plan).
    Export(export::ExportArgs),
    /// Hold out validation and test edges into a new store, with fixed evaluation
    /// negatives (link prediction).
    SplitEdges(link::SplitEdgesArgs),
    /// Score a store's link split with heuristics (CN, AA, RA) or an embedding: AUC, AP,
    /// MRR and Hits@K against its stored negatives.
    EvalLink(link::EvalLinkArgs),
}

/// The `saintflow` command with the built-in ops: [`run_with`]`(Registry::with_builtins())`.
pub fn main() -> ExitCode {
    run_with(Registry::with_builtins())
}

/// The whole `saintflow` command line with `registry`'s ops: what a user crate's `main`
/// calls to get `train`, `embed`, `explain` and `demo` with its own ops added
/// (`examples/custom_op/src/main.rs`). Parses the arguments, runs the command, prints any
/// error, and returns the exit code (0 success, 1 error; clap exits with 2 on a usage
/// error).
pub fn run_with(registry: Registry) -> ExitCode {
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    // The kernels ignore a `SAINTFLOW_ISA` or `SAINTFLOW_AMX` they do not know; the
    // command says so at once.
    let env = saintflow_ops::isa::Isa::from_env()
        .map(|_| ())
        .and_then(|()| saintflow_ops::gemm::amx::from_env().map(|_| ()));
    if let Err(e) = env {
        crate::atomic::stderr_line(&format!("error: {e}"));
        return ExitCode::from(2);
    }
    let progress = Progress::new(cli.quiet);
    let registry = Arc::new(registry);
    let result = match cli.command {
        Command::Gen(g) => gen::run(g, &progress),
        Command::Import(i) => import::run(i, &progress),
        Command::Info(a) => info::run(a),
        Command::Check(a) => check::run(a, &progress),
        Command::Demo(a) => demo::run(a, &registry, &progress),
        Command::Sample(a) => sample::run(a, &progress),
        Command::Explain(a) => explain::run(a, &registry),
        Command::Ops(a) => ops::run(a, &registry),
        #[cfg(feature = "plot")]
        Command::Plot(a) => plot::run(a),
        Command::Train(a) => train::dispatch(a, &registry, &progress),
        Command::Plans(a) => plans::run(a),
        Command::Eval(a) => eval::run(a, &registry, &progress),
        Command::EvalEmbedding(a) => embedding::eval(a),
        Command::Embed(a) => embed::run(a, &registry, &progress),
        Command::Export(a) => export::run(a),
        Command::Partition(a) => partition::run(a, &registry, &progress),
        #[cfg(feature = "bench")]
        Command::Bench(b) => bench::run(b, &progress),
        Command::SplitEdges(a) => link::split(a),
        Command::EvalLink(a) => link::eval(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::atomic::stderr_line(&format!("error: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// What clap's `Error::exit` does, with the write checked (issue 55, item 4): `--help` and
/// `--version` go to stdout (exit 0, or 1 when stdout cannot be written), a usage error to
/// stderr (exit 2 whether or not stderr can be written).
fn clap_exit(e: clap::Error) -> ExitCode {
    let code = u8::try_from(e.exit_code()).unwrap_or(2);
    let text = e.render().to_string();
    if e.use_stderr() {
        crate::atomic::stderr_line(text.trim_end_matches('\n'));
        ExitCode::from(code)
    } else {
        match crate::atomic::stdout_write(&text) {
            Ok(()) => ExitCode::from(code),
            Err(err) => {
                crate::atomic::stderr_line(&format!("error: {err}"));
                ExitCode::FAILURE
            }
        }
    }
}

/// Issue 28: a closed stdout (`saintflow train … --json | head -1`) ends the command the
/// way it ends `cat`: killed quietly by SIGPIPE (status 141 in a shell), never a panic.
/// Rust's runtime ignores SIGPIPE, so every `print!` (the CLI's and the training log's
/// `--json` sink alike) would get EPIPE and panic; the default action covers them all in
/// one place. Outputs are written atomically, so a kill mid-write leaves no partial file.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: `signal` with `SIG_DFL` installs no handler and touches no Rust state; the
    // disposition is process-wide, which is what a command line wants.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A count that must be at least 1 (`--threads`, `--epochs`, …): 0 would mean nothing, so
/// it is a usage error (exit 2) rather than silently read as a default.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1, got 0".into()),
        Ok(k) => Ok(k),
        Err(_) => Err(format!("{s:?} is not a whole number")),
    }
}

/// The most worker threads a command starts (`--threads`); the Python package takes the
/// same bound. 0 is a usage error as well, never "all cores" (that is the default when
/// `--threads` is absent), in every command.
pub use crate::machine::MAX_THREADS;

/// The most epochs a run takes (`--epochs`).
pub const MAX_EPOCHS: usize = 1_000_000;

/// The most steps a run takes (`--steps`, `bench scale --steps`).
pub const MAX_STEPS: u64 = 1_000_000_000_000;

/// The most MiB `--memory` and `--buffer` take: 16 TiB, beyond any machine's memory (a
/// larger number would overflow the byte count it is turned into).
pub const MAX_MIB: usize = 1 << 24;

/// A whole number in `lo..=hi`: clap's error names the range (usage error, exit 2).
fn count_in(lo: u64, hi: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(lo..=hi)
}

/// `--threads`: 1 ..= [`MAX_THREADS`], the crate's one thread type (leave the flag out for
/// one worker per core: `machine::threads_or_cores`).
fn threads() -> impl clap::builder::TypedValueParser<Value = std::num::NonZeroUsize> {
    use clap::builder::TypedValueParser;
    count_in(1, MAX_THREADS as u64)
        .map(|t| std::num::NonZeroUsize::new(t).expect("the range starts at 1"))
}

/// A rayon pool of `threads` (None: one per core). The flags' parsers keep an explicit
/// count in 1 ..= [`MAX_THREADS`] (issue 55, item 5).
fn pool(threads: Option<std::num::NonZeroUsize>) -> crate::error::Result<rayon::ThreadPool> {
    crate::exec::rayon_pool(crate::machine::threads_or_cores(threads)).map_err(|e| {
        crate::error::Error::Train(crate::train::TrainError::Run(format!("thread pool: {e}")))
    })
}

/// `--epochs`: 1 ..= [`MAX_EPOCHS`].
fn epochs() -> clap::builder::RangedU64ValueParser<usize> {
    count_in(1, MAX_EPOCHS as u64)
}

/// `--memory`: 0 ..= [`MAX_MIB`] (0: every value kept between layers goes to scratch
/// files).
fn memory_mib() -> clap::builder::RangedU64ValueParser<usize> {
    count_in(0, MAX_MIB as u64)
}

/// `--buffer`: 1 ..= [`MAX_MIB`].
fn buffer_mib() -> clap::builder::RangedU64ValueParser<usize> {
    count_in(1, MAX_MIB as u64)
}

/// The flags of a full-graph pass (`eval`, `embed`): memory for kept values, the stream
/// buffer, the scratch directory, the memory check.
#[derive(Debug, clap::Args)]
struct PassArgs {
    /// Memory for values kept between layers, in MiB, before they go to scratch files (0 to
    /// 16777216, 16 TiB); for `embed` of an `[embedding]` plan, the two sample pools
    /// together (each at least one 65,536-sample episode, whatever the figure).
    #[arg(long, value_name = "MIB", default_value_t = 512, value_parser = memory_mib())]
    memory: usize,
    /// Memory in MiB that the pass streams a large layer input through, in parts of rows
    /// (default: half of what the memory limit leaves beside the process).
    #[arg(long, value_name = "MIB", value_parser = buffer_mib())]
    buffer: Option<usize>,
    /// Directory for the scratch files of values kept between layers (they are unlinked at
    /// once, so nothing is left behind) [default: `embed`'s output directory, `eval`'s
    /// the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    scratch_dir: Option<std::path::PathBuf>,
    /// Skip the check that the parameters fit the machine's memory.
    #[arg(long)]
    no_memory_check: bool,
}

impl PassArgs {
    /// The pass's options, scratch files in `--scratch-dir` or else `scratch`.
    fn infer_options(
        &self,
        scratch: impl FnOnce() -> std::path::PathBuf,
        progress: &crate::progress::Progress,
    ) -> crate::infer::InferOptions {
        crate::infer::InferOptions {
            memory_bytes: self.memory << 20,
            buffer_bytes: self.buffer.map(|b| b.saturating_mul(1 << 20)),
            scratch_dir: self.scratch_dir.clone().unwrap_or_else(scratch),
            memory_limit: if self.no_memory_check {
                crate::train::MemoryLimit::Off
            } else {
                crate::train::MemoryLimit::Detect
            },
            // The pass's rows by layer (a bar, or a line every 10 s when piped).
            progress: *progress,
            ..crate::infer::InferOptions::default()
        }
    }
}

/// A plan argument (issue 54, item 8): the file when it exists, else a shipped plan by its
/// name ([`PlanSource::resolve`](crate::plan::PlanSource::resolve)), loaded with `set`;
/// which one was taken is said on stderr when the argument does not make it plain.
fn plan_arg(
    path: &std::path::Path,
    set: &[String],
) -> Result<(crate::plan::PlanSource, crate::plan::AnyPlan), crate::error::Error> {
    let source = crate::plan::PlanSource::resolve(path)?;
    if let Some(note) = source.note() {
        crate::atomic::stderr_line(&format!("note: {note}"));
    }
    let plan = crate::plan::AnyPlan::load_from(&source, set)?;
    Ok((source, plan))
}

/// The recognisers of the files saintflow writes ([`crate::atomic::written`]).
pub use crate::atomic::written;

/// Writes `text` to stdout: a write that fails (a full disk behind `> FILE`, `/dev/full`)
/// ends the command with exit 1 and a message, never a panic (issue 55, item 4).
fn out(text: &str) -> Result<(), crate::error::Error> {
    Ok(crate::atomic::stdout_write(text)?)
}

/// Parses "a,b,c" into three fractions.
fn parse_split(s: &str) -> Result<[f64; 3], String> {
    let parts: Vec<&str> = s.split(',').collect();
    let [a, b, c] = parts.as_slice() else {
        return Err(format!(
            "expected three comma-separated fractions (train,val,test), got {s:?}"
        ));
    };
    let f = |x: &str| {
        x.trim()
            .parse::<f64>()
            .map_err(|_| format!("{x:?} is not a number"))
    };
    Ok([f(a)?, f(b)?, f(c)?])
}
