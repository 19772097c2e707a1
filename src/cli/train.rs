//! `saintflow train PLAN --graph STORE`: trains a plan file on a store (see
//! [`crate::train`]), with `--set` overrides, checkpoints, `--resume`, a progress bar and a
//! JSON-lines log; the last line printed is the test accuracy and F1.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use crate::error::{Error, Result};
use crate::infer::InferOptions;
use crate::op::Registry;
use crate::plan::embedding::EmbeddingPlan;
use crate::plan::{AnyPlan, Plan};
use crate::progress::Progress;
use crate::store::GraphStore;
use crate::train::checkpoint::checkpoint_file;
use crate::train::{store_bytes, MemoryLimit, Metrics, TrainOptions, TrainOutcome, Verify};

#[derive(Debug, Args)]
pub(super) struct TrainArgs {
    /// The plan: a file, or the name of a shipped plan (`gcn`; `saintflow plans` lists
    /// them). A file that exists wins over a shipped plan of the same name.
    plan: PathBuf,
    /// The graph store to train on (with `--partitions`: the full graph, which rank 0
    /// evaluates on; default: the store `partition.json` names as its source).
    #[arg(long, required_unless_present = "partitions")]
    graph: Option<PathBuf>,
    /// Distributed training on MPI (`mpirun -np P saintflow train PLAN --partitions DIR`,
    /// a build with the `mpi` feature): rank i trains on its store in the directory
    /// `saintflow partition` wrote (`-k P`, or `-k K --ranks P`); gradients are combined after every step by the
    /// plan's `[distributed]` consensus; rank 0 evaluates, logs and checkpoints.
    #[arg(long, value_name = "DIR")]
    partitions: Option<PathBuf>,
    /// With `--partitions`: every rank evaluates its own part's validation and test nodes on
    /// its part store (its part and replicas only, as GAD does; no full graph needed) and
    /// the counts are summed over ranks, instead of rank 0 evaluating the full graph.
    #[arg(long, requires = "partitions", conflicts_with = "graph")]
    eval_parts: bool,
    /// Override a plan key: `--set dims.hidden=256 --set sampler.kind=rw` (repeatable;
    /// `model.X` is an alias of `dims.X`).
    #[arg(long = "set", value_name = "KEY=VALUE", long_help = super::sample::set_help())]
    set: Vec<String>,
    /// Seed of parameters, subgraphs and dropout.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads, 1 to 256 (default: all cores).
    #[arg(long, value_parser = super::threads())]
    threads: Option<std::num::NonZeroUsize>,
    /// `[embedding]` plans: where the SGD runs, `cpu` or `cuda[:K]` (GPU K, fed by the
    /// CPU's samplers; needs a build with `--features cuda`). GNN plans train on the CPU.
    #[arg(long, default_value = "cpu")]
    device: crate::embedding::Device,
    /// Total epochs instead of the plan's phases' sum, 1 to 1000000.
    #[arg(long, value_parser = super::epochs())]
    epochs: Option<usize>,
    /// Stop after N steps in total (the epoch in progress is cut short; it is evaluated
    /// and tested as the last one, but not checkpointed).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=super::MAX_STEPS))]
    steps: Option<u64>,
    /// No full-graph pass: no validation and no final test (the log ends with the last
    /// `epoch` record). For timing runs.
    #[arg(long)]
    no_eval: bool,
    /// Give the kernel no access hints (madvise: random access to the CSR and features
    /// while training, read-ahead of each drawn subgraph's feature rows): to measure them.
    #[arg(long)]
    no_io_hints: bool,
    /// Directory for the scratch files of evaluation's full-graph passes (values kept
    /// between layers beyond `--memory`; unlinked at once) [default: the system's
    /// temporary directory].
    #[arg(long, value_name = "DIR")]
    scratch_dir: Option<PathBuf>,
    /// Memory for values kept between layers in evaluation, in MiB, before scratch files
    /// (0 to 16777216, 16 TiB); for an `[embedding]` plan, the two sample pools together
    /// (each at least one 65,536-sample episode, whatever the figure).
    #[arg(long, value_name = "MIB", default_value_t = 512, value_parser = super::memory_mib())]
    memory: usize,
    /// Memory in MiB that evaluation streams a large layer input through, in parts of rows
    /// (default: half of what the memory limit leaves beside the process).
    #[arg(long, value_name = "MIB", value_parser = super::buffer_mib())]
    buffer: Option<usize>,
    /// Skip the check that the parameters, the optimiser's state and one step fit the
    /// machine's memory (MemTotal, or the cgroup's memory limit): for a machine with swap.
    #[arg(long)]
    no_memory_check: bool,
    /// Run the store's full check (`saintflow check`: every checksum, CSR index, symmetry,
    /// finite features) before training and refuse a store that fails it. Without a flag it
    /// runs for stores up to 1 GiB; beyond that, opening verifies the O(N) sections (header,
    /// offsets, labels, roles, with their checksums) and the large ones are only
    /// bounds-checked as they are read.
    #[arg(long, conflicts_with = "no_verify")]
    verify: bool,
    /// Skip the full check even for a small store (see `--verify`).
    #[arg(long)]
    no_verify: bool,
    /// Checkpoint file (or directory, existing or written `DIR/`: `DIR/checkpoint.bin`),
    /// written after every epoch. Missing directories above it are created, as for `--log`
    /// and `--plot`.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Continue from `--checkpoint` if it exists (same plan, overrides and seed).
    #[arg(long, requires = "checkpoint")]
    resume: bool,
    /// Start from these weights instead of the seeded initialisation: a `.safetensors` file
    /// with the plan's parameter names and shapes (`saintflow export`'s). Not with
    /// `--resume`, which continues from the checkpoint's.
    #[arg(long, value_name = "FILE.safetensors", conflicts_with = "resume")]
    init_from: Option<PathBuf>,
    /// Start afresh and replace what `--checkpoint`, `--log` and `--plot` already hold
    /// (without it, an existing checkpoint or log is refused unless `--resume` continues
    /// it, and an existing plot is refused). Never an input of the run, a file inside a
    /// store, a file saintflow does not write there (the user's), a link or a device: those
    /// are refused even with `--force`.
    #[arg(long, conflicts_with = "resume")]
    force: bool,
    /// Write the JSON-lines log here (schema: docs/LOG.md).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Print the JSON-lines log on stdout (the summary goes to stderr).
    #[arg(long)]
    json: bool,
    /// Draw validation accuracy and loss against wall time (JPDC Fig. 2) to FILE.svg or
    /// FILE.png when the run ends.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// Loads a GNN plan with `--set` overrides for a command that takes GNN plans only (an
/// `[embedding]` plan is named for what it is: issue 28).
pub(super) fn load_plan(path: &Path, set: &[String]) -> Result<Plan> {
    Ok(super::plan_arg(path, set)?.1.into_gnn(path)?)
}

/// `saintflow train PLAN`: the plan's family picks the run (issue 54: the file is read and
/// told apart once, in the plan layer).
pub(super) fn dispatch(a: TrainArgs, registry: &Arc<Registry>, progress: &Progress) -> Result<()> {
    match super::plan_arg(&a.plan, &a.set)?.1 {
        AnyPlan::Embedding(plan) => super::embedding::train(a.embedding(plan)?, progress),
        AnyPlan::Gnn(plan) => run(a, plan, registry, progress).map(|_| ()),
    }
}

/// `accuracy 0.8130  F1-micro 0.8130  F1-macro 0.8021`.
pub(super) fn metrics_text(m: &Metrics) -> String {
    m.text()
}

pub(super) fn run(
    a: TrainArgs,
    plan: Plan,
    registry: &Arc<Registry>,
    progress: &Progress,
) -> Result<TrainOutcome> {
    if a.device != crate::embedding::Device::Cpu {
        return Err(crate::train::TrainError::Run(format!(
            "{}: --device {} applies to [embedding] plans; GNN plans train on the CPU",
            a.plan.display(),
            a.device
        ))
        .into());
    }
    if let Some(dir) = a.partitions.clone() {
        return run_partitions(a, plan, &dir, registry, progress);
    }
    let graph = a
        .graph
        .clone()
        .expect("clap requires --graph without --partitions");
    let store = GraphStore::open(&graph)?;
    let before = Outputs::before(&a);
    let opts = options(&a, &plan, &store, &graph, registry, progress)?;
    let outcome = opts.train().inspect_err(|_| before.undo())?;
    report(&a, &plan, &graph, &outcome)?;
    Ok(outcome)
}

/// What a failed run must not leave behind (issue 28, item 13): the directories made for
/// its outputs, if they are still empty, and a log it created that is still empty.
struct Outputs {
    /// Directories that did not exist, deepest first.
    new_dirs: Vec<PathBuf>,
    /// The log, when it did not exist.
    new_log: Option<PathBuf>,
    /// The claim files (`atomic::claim_output`) the run made in those directories.
    new_claims: Vec<PathBuf>,
}

impl Outputs {
    fn before(a: &TrainArgs) -> Outputs {
        let ck = a.checkpoint.as_deref().map(checkpoint_file);
        let mut new_dirs = Vec::new();
        for path in ck.iter().chain(&a.log).chain(&a.plot) {
            let mut dir = path.parent();
            while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
                if !new_dirs.iter().any(|n: &PathBuf| n == d) {
                    new_dirs.push(d.to_path_buf());
                }
                dir = d.parent();
            }
        }
        new_dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        let new_claims = ck
            .iter()
            .chain(&a.log)
            .filter(|p| p.parent().is_some_and(|d| new_dirs.iter().any(|n| n == d)))
            .map(|p| crate::atomic::claim_file(p))
            .collect();
        Outputs {
            new_dirs,
            new_log: a.log.clone().filter(|l| !l.exists()),
            new_claims,
        }
    }

    /// Removes what the failed run made and left empty; anything with content stays.
    fn undo(&self) {
        for claim in &self.new_claims {
            let _ = std::fs::remove_file(claim);
        }
        if let Some(log) = &self.new_log {
            if std::fs::metadata(log).is_ok_and(|m| m.len() == 0) {
                let _ = std::fs::remove_file(log);
            }
        }
        for d in &self.new_dirs {
            // Only an empty directory is removed.
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// `--partitions` in a build without MPI.
#[cfg(not(feature = "mpi"))]
fn run_partitions(
    _a: TrainArgs,
    _plan: Plan,
    dir: &Path,
    _registry: &Arc<Registry>,
    _progress: &Progress,
) -> Result<TrainOutcome> {
    Err(Error::Train(crate::train::TrainError::Run(format!(
        "--partitions {}: this saintflow was built without distributed training; build it with \
         `cargo build --release --features mpi` (needs an MPI library and libclang: Debian's \
         libopenmpi-dev openmpi-bin libclang-dev) and start it with `mpirun -np P`",
        dir.display()
    ))))
}

/// `mpirun -np P saintflow train PLAN --partitions DIR`: this process is one rank.
#[cfg(feature = "mpi")]
fn run_partitions(
    a: TrainArgs,
    plan: Plan,
    dir: &Path,
    registry: &Arc<Registry>,
    progress: &Progress,
) -> Result<TrainOutcome> {
    use crate::dist::mpi::MpiComm;
    use crate::dist::{Collective, DistJob, JobEval};
    let comm = Arc::new(MpiComm::init()?);
    let (rank, size) = (comm.rank(), comm.size());
    let run = || -> Result<TrainOutcome> {
        let eval = if a.no_eval {
            JobEval::None
        } else if a.eval_parts {
            JobEval::Parts
        } else {
            JobEval::Full
        };
        let job = DistJob::from_partitions(dir, comm.as_ref(), a.graph.as_deref(), eval)?;
        let quiet = Progress::hidden();
        let mut opts = options(
            &a,
            &plan,
            &job.store,
            &job.store_path,
            registry,
            if rank == 0 { progress } else { &quiet },
        )?
        .distributed(job.dist(Arc::clone(&comm) as Arc<dyn Collective>));
        if a.threads.is_none() {
            opts = opts.threads(job.default_threads().get());
        }
        let outcome = opts.train()?;
        if rank == 0 {
            let evaluated = if a.eval_parts { dir } else { &job.full_path };
            report(&a, &plan, evaluated, &outcome)?;
        }
        Ok(outcome)
    };
    match run() {
        Err(e) if size > 1 => {
            // The other ranks wait in a collective call: end the job now, with the reason.
            crate::atomic::stderr_line(&format!("saintflow: rank {rank} of {size}: {e}"));
            comm.abort(1)
        }
        r => r,
    }
}

/// The [`TrainOptions`] the flags give, on `store` (at `graph`).
fn options<'a>(
    a: &TrainArgs,
    plan: &'a Plan,
    store: &'a GraphStore,
    graph: &Path,
    registry: &Arc<Registry>,
    progress: &Progress,
) -> Result<TrainOptions<'a>> {
    if !a.verify && !a.no_verify && !Verify::Auto.runs_check(store) {
        crate::atomic::stderr_line(&format!(
            "note: {} holds {:.1} GiB, more than the 1 GiB checked in full before training by \
             default; only its O(N) sections were verified (pass --verify for the full check)",
            graph.display(),
            store_bytes(store) as f64 / (1u64 << 30) as f64
        ));
    }
    let mut opts = TrainOptions::new(plan, store)
        .registry(Arc::clone(registry))
        .progress(*progress)
        .seed(a.seed)
        .epochs(a.epochs)
        .resume(a.resume)
        .json(a.json)
        .graph_name(graph.display().to_string())
        .max_steps(a.steps)
        .no_eval(a.no_eval)
        .io_hints(!a.no_io_hints)
        .memory_limit(if a.no_memory_check {
            MemoryLimit::Off
        } else {
            MemoryLimit::Detect
        })
        .verify(if a.verify {
            Verify::Full
        } else if a.no_verify {
            Verify::Off
        } else {
            Verify::Auto
        })
        .infer(InferOptions {
            memory_bytes: a.memory << 20,
            buffer_bytes: a.buffer.map(|b| b.saturating_mul(1 << 20)),
            scratch_dir: a.scratch_dir.clone().unwrap_or_else(std::env::temp_dir),
            ..InferOptions::default()
        });
    if let Some(t) = a.threads {
        opts = opts.threads(t.get());
    }
    // A run's output directories are made on demand (`--checkpoint run/ --log run/log.jsonl`).
    let outputs = a.checkpoint.as_deref().map(checkpoint_file);
    // What no flag allows first, then the checkpoint's own message about what it holds,
    // then an existing log or plot.
    guard(a, graph, outputs.as_deref(), false)?;
    // Issue 28, item 12: a finished (or interrupted) run's checkpoint is not replaced
    // silently by a fresh run.
    if let Some(ck) = outputs.as_ref().filter(|_| !a.resume && !a.force) {
        crate::train::checkpoint::refuse_replacing(ck, "--resume", "--force")?;
    }
    guard(a, graph, outputs.as_deref(), true)?;
    for path in outputs.iter().chain(&a.log).chain(&a.plot) {
        crate::atomic::create_parent_dirs(path).map_err(|e| {
            Error::Train(crate::train::TrainError::io(
                path,
                "create the directory of",
                e,
            ))
        })?;
    }
    // Issue 28: a plot that could not be written is known now, not after the run.
    if let Some(path) = &a.plot {
        crate::plot::check_output(path)?;
    }
    if let Some(ck) = outputs {
        opts = opts.checkpoint(ck);
    }
    if let Some(log) = &a.log {
        opts = opts.log(log);
    }
    if let Some(init) = &a.init_from {
        opts = opts.init_from(init);
    }
    Ok(opts)
}

/// Issue 55, item 2: the run's outputs never replace its inputs (the plan, the store, the
/// `--init-from` weights), each other, a store's file, a link or a device; an existing
/// checkpoint or log is continued only by `--resume` (with a checkpoint to resume from)
/// and replaced only with `--force`, an existing plot only with `--force`. `existing`:
/// whether to refuse an existing log or plot too (else only what no flag allows).
fn guard(a: &TrainArgs, graph: &Path, checkpoint: Option<&Path>, existing: bool) -> Result<()> {
    let mut g = crate::atomic::OutputGuard::new();
    g.input("PLAN", &a.plan).input("--graph", graph);
    if let Some(init) = &a.init_from {
        g.input("--init-from", init);
    }
    let resuming = a.resume && checkpoint.is_some_and(Path::exists);
    if let Some(ck) = checkpoint {
        // Whether an existing one may be replaced is `refuse_replacing`'s (it names the
        // checkpoint it finds).
        g.file_or("--checkpoint", ck, true, "")
            .ours("a saintflow checkpoint", super::written::checkpoint);
    }
    if let Some(log) = &a.log {
        g.file_or(
            "--log",
            log,
            !existing || a.force || resuming,
            "a fresh run would truncate it: --resume continues it (with the run's --checkpoint), --force replaces it",
        )
        .ours("a training log", super::written::log);
    }
    if let Some(plot) = &a.plot {
        g.file("--plot", plot, !existing || a.force)
            .ours("a PNG or SVG image", super::written::image);
    }
    Ok(g.check()?)
}

/// The summary line of a finished run, then its plot: a plot that fails late (its
/// destination changed during the run) never hides the result (issue 28).
fn report(a: &TrainArgs, plan: &Plan, graph: &Path, outcome: &TrainOutcome) -> Result<()> {
    // The run's `test` record: evaluated, with None for a role without labelled nodes
    // (issue 55 item 1: said in words, never printed as 0.0000).
    let tested = outcome.records.last().and_then(|r| match r {
        crate::train::Record::Test { val, test, .. } => Some((val, test)),
        _ => None,
    });
    let kept = match (plan.eval.keep, outcome.stopped_at) {
        (crate::plan::Keep::Best, None) => "best validation epoch".to_string(),
        (crate::plan::Keep::Last, None) => "last epoch".to_string(),
        (crate::plan::Keep::Best, Some(at)) => {
            format!("stopped early after epoch {at}; best validation epoch")
        }
        (crate::plan::Keep::Last, Some(at)) => format!("stopped early after epoch {at}; epoch"),
    };
    let line = match tested {
        Some((Some(val), test)) => format!(
            "{} on {}: {kept} {} ({}); test {}",
            plan.name,
            graph.display(),
            outcome.best_epoch,
            metrics_text(val),
            test.as_ref()
                .map_or("not measured: no labelled test nodes".into(), metrics_text)
        ),
        Some((None, test)) => format!(
            "{} on {}: no labelled validation nodes, so the last epoch's parameters (epoch {}); test {}",
            plan.name,
            graph.display(),
            outcome.best_epoch,
            test.as_ref()
                .map_or("not measured: no labelled test nodes".into(), metrics_text)
        ),
        None => format!(
            "{} on {}: {} steps in {} epochs, not evaluated (--no-eval)",
            plan.name,
            graph.display(),
            outcome.steps,
            outcome.epochs
        ),
    };
    if a.json {
        crate::atomic::stderr_line(&line.to_string());
    } else {
        super::out(&format!("{line}\n"))?;
    }
    if let Some(path) = &a.plot {
        let runs = [(plan.name.clone(), outcome.records.clone())];
        let panels = crate::plot::training_panels(&runs)?;
        crate::plot::plot(path, &panels)?;
    }
    Ok(())
}

impl TrainArgs {
    /// An `[embedding]` plan's run (issue 16; `cli/embedding.rs`). Flags that only GNN
    /// training has are refused by name.
    fn embedding(&self, plan: EmbeddingPlan) -> Result<super::embedding::Run> {
        let gnn_only = [
            ("--checkpoint", self.checkpoint.is_some()),
            ("--resume", self.resume),
            ("--log", self.log.is_some()),
            ("--plot", self.plot.is_some()),
            ("--steps", self.steps.is_some()),
            ("--no-eval", self.no_eval),
            ("--partitions", self.partitions.is_some()),
            ("--init-from", self.init_from.is_some()),
        ];
        if let Some((flag, _)) = gnn_only.iter().find(|f| f.1) {
            return Err(super::embedding::refuse(flag, &self.plan));
        }
        // clap requires --graph without --partitions, which is refused above.
        let graph = self.graph.clone().expect("--graph");
        Ok(super::embedding::Run {
            plan,
            graph,
            seed: self.seed,
            threads: self.threads,
            memory_mib: self.memory,
            epochs: self.epochs.map(|e| e as f64),
            json: self.json,
            output: None,
            scratch_dir: self.scratch_dir.clone(),
            holdout: 0.0,
            no_memory_check: self.no_memory_check,
            verify: super::check::VerifyArgs {
                verify: self.verify,
                no_verify: self.no_verify,
            },
            device: self.device,
        })
    }
}
