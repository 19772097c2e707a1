//! The training loop: phases of epochs, an epoch being ⌈|V_train| / |V_s|⌉ steps of one
//! sampled subgraph each (GraphSAINT's definition; 1 for the `full` sampler); each step
//! runs the lowered plan (forward, loss, backward) through a [`StepRunner`] and updates the
//! parameters with Adam or SGD, each parameter with its own L2 weight decay. Validation by
//! full-graph inference every `[eval] every` epochs (and after the last), keeping the
//! best-validation parameters; the test set is evaluated with those at the end.
//!
//! Randomness and resume: step T samples subgraph T of the phase's sampler seeded by the
//! run's seed, and its dropout masks are keyed by (seed, T, node, element), so a step's
//! result depends only on the parameters and optimiser state it starts from. Those are in
//! the checkpoint written after every epoch, which is why a resumed run reproduces an
//! uninterrupted one's losses bit for bit (for the same thread count: reductions are split
//! by the pool's size).
//!
//! GraphSAINT normalisation: for every sampler but `full`, C_v and C_{u,v} are estimated
//! before the phase from N_pre pre-sampled subgraphs (seeded apart from the training
//! ones), enough that about 10·N nodes are drawn (between 8 and 200 subgraphs). They
//! weight the loss (1/λ_v) and `A_saint`'s entries; the same pre-sampling gives |V_s|.
//!
//! Here [`TrainOptions`] and the outcome; the run itself (phases, epochs, steps, the
//! validation, the checkpoints) in run.rs.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Result;
use crate::exec::{Executor, StepRunner};
use crate::ir::Params;
use crate::op::Registry;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::store::GraphStore;

use super::log::Record;
use super::TrainError;
use crate::dist::Dist;
use crate::infer::InferOptions;
use crate::machine::MemoryLimit;
use crate::metrics::Metrics;

mod run;

/// How to run a training: a builder over the plan and the store, with defaults for
/// everything else, consumed by [`TrainOptions::train`].
///
/// ```no_run
/// # fn main() -> saintflow::Result<()> {
/// use saintflow::op::Registry;
/// use saintflow::plan::Plan;
/// use saintflow::train::TrainOptions;
/// use saintflow::GraphStore;
///
/// let plan = Plan::load("plans/gcn.toml")?;
/// let store = GraphStore::open("cora.sf")?;
/// let outcome = TrainOptions::new(&plan, &store)
///     .seed(1)
///     .epochs(5)
///     .registry(Registry::with_builtins())
///     .checkpoint("run/checkpoint.bin")
///     .train()?;
/// println!("test {:?}", outcome.test);
/// # Ok(())
/// # }
/// ```
///
/// Defaults: seed 0, the plan's epochs, the built-in ops ([`Registry::with_builtins`]),
/// the work-stealing [`Executor`] on every thread of the current rayon pool (all cores
/// unless called inside another pool, or [`threads`](Self::threads) says), hidden progress,
/// no checkpoint, no log, evaluation on, I/O hints on.
#[derive(Clone)]
pub struct TrainOptions<'a> {
    pub(super) plan: &'a Plan,
    pub(super) store: &'a GraphStore,
    registry: Option<Arc<Registry>>,
    runner: Option<&'a dyn StepRunner>,
    threads: Option<usize>,
    pub(super) progress: Progress,
    pub(super) seed: u64,
    pub(super) epochs: Option<usize>,
    pub(super) checkpoint: Option<PathBuf>,
    pub(super) resume: bool,
    pub(super) init_from: Option<PathBuf>,
    pub(super) log: Option<PathBuf>,
    pub(super) json: bool,
    pub(super) graph_name: Option<String>,
    pub(super) stop_after: Option<usize>,
    pub(super) max_steps: Option<u64>,
    pub(super) no_eval: bool,
    pub(super) io_hints: bool,
    pub(super) verify: Verify,
    pub(super) infer: InferOptions,
    pub(super) memory_limit: MemoryLimit,
    pub(super) dist: Option<Dist<'a>>,
    pub(super) interrupt: Option<&'a AtomicBool>,
}

/// Stores up to this many bytes (all sections) get the full check before training by
/// default ([`Verify::Auto`]). `check` reads every byte once (xxh3) and searches each
/// adjacency entry's reverse: 4.7–7.1 s for a 1 GiB store (Kronecker scale 21) on this
/// project's loaded 2-core machine (docs/bench/robustness.md), small beside training on
/// such a graph; beyond it, a store that may be larger than memory is not read whole
/// before the first step.
pub const AUTO_VERIFY_BYTES: u64 = 1 << 30;

/// When training runs the store's full [`crate::store::check()`] first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verify {
    /// Stores up to [`AUTO_VERIFY_BYTES`] (`saintflow train` without a flag).
    #[default]
    Auto,
    /// Always (`--verify`).
    Full,
    /// Never (`--no-verify`): only `open`'s checks of the O(N) sections.
    Off,
}

impl Verify {
    /// Whether the full check runs for `store`.
    pub fn runs_check(self, store: &GraphStore) -> bool {
        match self {
            Verify::Full => true,
            Verify::Off => false,
            Verify::Auto => store_bytes(store) <= AUTO_VERIFY_BYTES,
        }
    }
}

/// The bytes of all of a store's sections, from its header.
pub fn store_bytes(store: &GraphStore) -> u64 {
    store
        .header()
        .sections
        .iter()
        .map(|s| s.bytes)
        .fold(0u64, u64::saturating_add)
}

impl std::fmt::Debug for TrainOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainOptions")
            .field("plan", &self.plan.name)
            .field("store", &self.store.path())
            .field("custom_registry", &self.registry.is_some())
            .field("runner", &self.runner.map(|r| r.name()))
            .field("threads", &self.threads)
            .field("seed", &self.seed)
            .field("epochs", &self.epochs)
            .field("checkpoint", &self.checkpoint)
            .field("resume", &self.resume)
            .field("init_from", &self.init_from)
            .field("log", &self.log)
            .field("json", &self.json)
            .field("graph_name", &self.graph_name)
            .field("stop_after", &self.stop_after)
            .field("max_steps", &self.max_steps)
            .field(
                "interrupt",
                &self.interrupt.map(|f| f.load(Ordering::Relaxed)),
            )
            .field("no_eval", &self.no_eval)
            .field("io_hints", &self.io_hints)
            .field("verify", &self.verify)
            .field("infer", &self.infer)
            .field("memory_limit", &self.memory_limit)
            .field("dist", &self.dist)
            .finish()
    }
}

impl<'a> TrainOptions<'a> {
    /// Training `plan` on `store` with the defaults (see the type's documentation).
    pub fn new(plan: &'a Plan, store: &'a GraphStore) -> TrainOptions<'a> {
        TrainOptions {
            plan,
            store,
            registry: None,
            runner: None,
            threads: None,
            progress: Progress::hidden(),
            seed: 0,
            epochs: None,
            checkpoint: None,
            resume: false,
            init_from: None,
            log: None,
            json: false,
            graph_name: None,
            stop_after: None,
            max_steps: None,
            no_eval: false,
            io_hints: true,
            verify: Verify::Auto,
            infer: InferOptions::default(),
            memory_limit: MemoryLimit::Detect,
            dist: None,
            interrupt: None,
        }
    }

    /// Stops at the next step boundary once `flag` is set (a Ctrl-C handler's flag, the
    /// Python package's KeyboardInterrupt): the run ends with [`TrainError::Interrupted`],
    /// the checkpoint as the last whole epoch left it (written atomically, so loadable).
    pub fn interrupt(mut self, flag: &'a AtomicBool) -> Self {
        self.interrupt = Some(flag);
        self
    }

    /// Takes part in the distributed job `dist` ([`crate::dist`]): `store` is this
    /// process's part, gradients are combined by the plan's `[distributed]` consensus after
    /// every step, the job writes one log and one checkpoint, and `dist.eval` says who
    /// evaluates. Every process of the job must be given the same plan, seed, epochs,
    /// steps, evaluation and checkpoint options.
    pub fn distributed(mut self, dist: Dist<'a>) -> Self {
        self.dist = Some(dist);
        self
    }

    /// The ops the plan's names are made from (default: the built-ins). A user crate passes
    /// the built-ins plus its own ops here.
    pub fn registry(mut self, registry: impl Into<Arc<Registry>>) -> Self {
        self.registry = Some(registry.into());
        self
    }

    /// What runs the steps (default: the work-stealing [`Executor`]; the reference is
    /// [`Interpreter`](crate::exec::Interpreter)).
    pub fn runner(mut self, runner: &'a dyn StepRunner) -> Self {
        self.runner = Some(runner);
        self
    }

    /// Trains inside a rayon pool of exactly `threads` workers, with the default executor
    /// and the planner told as many (default: one per core, `machine::cores`). 0 is an
    /// error of [`train`](Self::train), as for the other counts.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Progress bars (default: hidden).
    pub fn progress(mut self, progress: Progress) -> Self {
        self.progress = progress;
        self
    }

    /// Seed of everything random: parameters, subgraphs, dropout (default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Total epochs instead of the plan's phases' sum (the last phase is cut or extended);
    /// `None`: the plan's. `Some(0)` is refused by [`train`](Self::train).
    pub fn epochs(mut self, epochs: impl Into<Option<usize>>) -> Self {
        self.epochs = epochs.into();
        self
    }

    /// The checkpoint file, written after every epoch.
    pub fn checkpoint(mut self, path: impl Into<PathBuf>) -> Self {
        self.checkpoint = Some(path.into());
        self
    }

    /// Continue from the checkpoint, if it exists.
    pub fn resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// Start from the weights in a `.safetensors` file (`saintflow export`'s, or any
    /// file with the plan's parameter names and shapes: [`super::export::load_safetensors`])
    /// instead of the seeded initialisation; a fresh optimiser. A run resumed from its
    /// checkpoint continues from the checkpoint's parameters instead.
    pub fn init_from(mut self, path: impl Into<PathBuf>) -> Self {
        self.init_from = Some(path.into());
        self
    }

    /// The JSON-lines log file (schema: docs/LOG.md).
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// Also print the log on stdout.
    pub fn json(mut self, json: bool) -> Self {
        self.json = json;
        self
    }

    /// The graph's name in the log (default: the store's path).
    pub fn graph_name(mut self, name: impl Into<String>) -> Self {
        self.graph_name = Some(name.into());
        self
    }

    /// Stop (after the checkpoint) once this many epochs are done, without testing: an
    /// interrupted run, for tests. `None`: run to the end.
    pub fn stop_after(mut self, epochs: impl Into<Option<usize>>) -> Self {
        self.stop_after = epochs.into();
        self
    }

    /// Stop once this many steps are done in total (counting those of a resumed run's
    /// earlier sessions), cutting the epoch short. The cut epoch gets its `epoch` record
    /// and is evaluated as the last one, but no checkpoint: checkpoints stay at whole
    /// epochs, so a resume repeats the cut epoch's steps. `None`: no limit.
    pub fn max_steps(mut self, steps: impl Into<Option<u64>>) -> Self {
        self.max_steps = steps.into();
        self
    }

    /// No full-graph pass at all: no validation, no final test (the last log record is
    /// the last `epoch` record). For timing runs.
    pub fn no_eval(mut self, no_eval: bool) -> Self {
        self.no_eval = no_eval;
        self
    }

    /// Access hints to the kernel (default on; see [`crate::store::Access`]): the sampled
    /// graph's CSR and the features are advised `Random` while training, and every
    /// subgraph's feature rows are asked for (`MADV_WILLNEED`) when it is drawn. Off only
    /// to measure what they do.
    pub fn io_hints(mut self, on: bool) -> Self {
        self.io_hints = on;
        self
    }

    /// Whether the store's full verification ([`crate::store::check()`]: every checksum,
    /// every CSR index, symmetry, finite features) runs before training, refusing a store
    /// that fails it. Default [`Verify::Auto`]: for stores up to [`AUTO_VERIFY_BYTES`].
    /// Without it, `open` has verified the O(N) sections (header, offsets, labels, roles,
    /// checksums included) and reads of the large ones (indices, features) are
    /// bounds-checked, so damage there gives an error or, where it stays in range, trains on
    /// the damaged values.
    pub fn verify(mut self, verify: Verify) -> Self {
        self.verify = verify;
        self
    }

    /// How evaluation's row-blocked full-graph passes use memory and scratch disk.
    pub fn infer(mut self, infer: InferOptions) -> Self {
        self.infer = infer;
        self
    }

    /// The plan.
    pub fn plan(&self) -> &'a Plan {
        self.plan
    }

    /// The store.
    pub fn store(&self) -> &'a GraphStore {
        self.store
    }

    /// What the memory check compares the estimate with (default: the machine's memory;
    /// see [`crate::compile::memory`]). [`MemoryLimit::Off`] skips it.
    pub fn memory_limit(mut self, limit: MemoryLimit) -> Self {
        self.memory_limit = limit;
        self
    }

    /// Runs the training (see the module's documentation). Options that mean nothing
    /// (`epochs(0)`, `max_steps(0)`, `stop_after(0)`, `threads(0)`) are errors; so is a plan whose
    /// parameters and step do not fit the memory limit, found before anything is allocated.
    pub fn train(&self) -> Result<TrainOutcome> {
        for (name, zero) in [
            ("epochs", self.epochs == Some(0)),
            ("max_steps", self.max_steps == Some(0)),
            ("stop_after", self.stop_after == Some(0)),
            ("threads", self.threads == Some(0)),
        ] {
            if zero {
                return Err(TrainError::Run(format!(
                    "TrainOptions::{name}(0): must be at least 1 (None for no limit)"
                )));
            }
        }
        let threads =
            crate::machine::threads_or_cores(self.threads.and_then(std::num::NonZeroUsize::new));
        crate::exec::rayon_pool(threads)
            .map_err(|e| TrainError::Run(format!("thread pool: {e}")))?
            .install(|| self.train_on(threads))
    }

    /// [`train`](Self::train) inside its pool of `threads` workers.
    fn train_on(&self, threads: std::num::NonZeroUsize) -> Result<TrainOutcome> {
        let builtins;
        let registry = match &self.registry {
            Some(r) => r.as_ref(),
            None => {
                builtins = Registry::with_builtins();
                &builtins
            }
        };
        let executor;
        let runner = match self.runner {
            Some(r) => r,
            None => {
                executor = Executor::new(threads);
                &executor as &dyn StepRunner
            }
        };
        run::run(self, registry, runner)
    }
}

/// Runs the training `opts` describes: [`TrainOptions::train`].
pub fn train(opts: &TrainOptions<'_>) -> Result<TrainOutcome> {
    opts.train()
}

/// What a training returns.
#[derive(Clone, Debug)]
pub struct TrainOutcome {
    /// Every log record of the run (those of earlier sessions included on resume).
    pub records: Vec<Record>,
    /// The best validation metrics (or the last parameters' when never evaluated); None
    /// with `no_eval`, and when the graph has no labelled validation node (the parameters
    /// are then the last epoch's).
    pub val: Option<Metrics>,
    /// The test metrics of those parameters (None when stopped by `stop_after`, with
    /// `no_eval`, and when the graph has no labelled test node: never a 0 measured over
    /// nothing).
    pub test: Option<Metrics>,
    /// The epoch of those parameters.
    pub best_epoch: usize,
    /// Those parameters.
    pub params: Params,
    /// Epochs done (the last one partial when cut by `max_steps`).
    pub epochs: usize,
    /// Steps done.
    pub steps: u64,
    /// The epoch after which `[eval] patience` stopped the run (None: it ran its epochs).
    pub stopped_at: Option<usize>,
}

impl TrainOutcome {
    /// The loss of every step, in order.
    pub fn losses(&self) -> Vec<f64> {
        self.records
            .iter()
            .filter_map(|r| match r {
                Record::Step { loss, .. } => Some(*loss),
                _ => None,
            })
            .collect()
    }
}
