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

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::Result;
use crate::compile::{
    advise_training, lower_for, plan_hash, schedule, setup_phase, PhaseEnv, PhaseRun,
};
use crate::exec::StepInput;
use crate::exec::{Executor, StepRunner};
use crate::ir::{Params, Value};
use crate::op::{GraphSource, Registry};
use crate::plan::{Lowered, Plan, SamplerPlan};
use crate::progress::Progress;
use crate::store::{Access, GraphStore, Role};

use super::evaluate::{link_split_gives, selection, Evaluator};
use super::log::{Record, RunDist, StepMs};
use super::observer::{EpochLoss, Observer, Validation};
use super::state::{guard_outputs, params_hash, Identity, TrainState};
use super::TrainError;
use crate::dist::{step_sync, Dist, StepSync};
use crate::infer::link::no_split;
use crate::infer::InferOptions;
use crate::machine::MemoryLimit;
use crate::metrics::Metrics;

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
        run(self, registry, runner)
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

/// Trains `opts.plan` on `opts.store` with `registry`'s ops and `runner`: JPDC's Algorithm 2
/// (each step a sampled subgraph, its forward and backward pass, an update), each update
/// agreed with the other parts in a job (GAD's Algorithm 2, through `sync`), a validation
/// every `[eval] every` epochs keeping the best parameters (and stopping early after
/// `[eval] patience` evaluations without progress), a checkpoint after every whole epoch,
/// the test of the kept parameters at the end.
fn run(
    opts: &TrainOptions<'_>,
    registry: &Registry,
    runner: &dyn StepRunner,
) -> Result<TrainOutcome> {
    let (store, plan) = (opts.store, opts.plan);
    if opts.verify.runs_check(store) {
        crate::store::check(store)?;
    }
    let lowered = lower_for(plan, store, registry)?;
    let sched = schedule(plan, opts.epochs);
    check_memory(opts, &lowered, &sched)?;
    if let (Some(_), Some(r)) = (&opts.dist, lowered.running.first()) {
        // Each rank would fold its own batches into them, and the parts' parameters
        // (which carry them) would disagree after the first epoch.
        return Err(TrainError::Run(format!(
            "`batchnorm` (running statistics `{}`) trains in one process: a distributed job does not combine its ranks' running statistics yet",
            r.name
        )));
    }
    let n_train = match &lowered.link {
        // A link plan's epochs count edges (compile::setup_phase), its loss no nodes; its
        // evaluation needs the store's split.
        Some(_) if store.link_split().is_none() => return Err(no_split(store).into()),
        Some(task) => {
            link_split_gives(store, task.metric)?;
            store.n_nodes().max(1)
        }
        None => training_nodes(store)?,
    };
    // Every collective call of the run goes through `sync`, in the order crate::dist::sync
    // documents.
    let mut sync = step_sync(
        opts.dist.as_ref(),
        plan.distributed,
        store,
        n_train,
        opts.seed,
    );
    let eval = Evaluator::new(opts, &lowered, runner_threads(runner))?;
    let id = Identity {
        plan_hash: plan_hash(plan),
        seed: opts.seed,
        graph_id: sync.graph_id(store.identity())?,
        store,
        job: sync.job_name(),
    };
    let writes = sync.writes_outputs();
    let (ckpt, log) = (opts.checkpoint.as_deref(), opts.log.as_deref());
    let _claims = guard_outputs(ckpt, log, writes, &lowered)?;
    let total: usize = sched.iter().map(|p| p.2).sum();
    let (mut state, resumed) = TrainState::start(
        opts.init_from.as_deref(),
        plan.optimizer,
        ckpt.filter(|_| opts.resume),
        &lowered,
        &id,
        sync.as_mut(),
        total,
    )?;
    let record = run_record(opts, runner, id.plan_hash, sync.run_info()?);
    let at = (state.step, state.elapsed);
    let log_to = (log.filter(|_| writes), opts.json && writes);
    let mut obs = Observer::open(log_to, &opts.progress, resumed, record, at, total)?;
    let stop = opts.stop_after.unwrap_or(usize::MAX);
    let max_steps = opts.max_steps.unwrap_or(u64::MAX);
    let every = plan.eval.every.max(1);
    let mut phase: Option<(usize, PhaseRun<'_>)> = None;
    while state.early.stopped_at.is_none()
        && state.epoch < total.min(stop)
        && state.step < max_steps
    {
        state.epoch += 1;
        let (pi, sp) = phase_of(&sched, state.epoch);
        // The optimizer's learning rate times the phase's factor (set every epoch: a resumed
        // run starts in any phase).
        let factor = plan.phases.get(pi).and_then(|p| p.lr_factor);
        state
            .opt
            .set_lr(plan.optimizer.lr() * factor.unwrap_or(1.0));
        // Before the set-up, which samples too (issue 56: 26 s to scale 27's first step).
        advise_training(opts.io_hints, store, &sp, Access::Random);
        if phase.as_ref().is_none_or(|(i, _)| *i != pi) {
            let env = PhaseEnv {
                seed: opts.seed,
                n_train,
                io_hints: opts.io_hints,
                threads: runner_threads(runner),
                link: lowered.link.as_ref().map(|l| l.sampling),
            };
            let mut ph = setup_phase(store, &lowered, &sp, pi, &env)?;
            // Each step being collective, a job steps as often as its largest part wants.
            ph.steps_per_epoch = sync.steps(ph.steps_per_epoch)?;
            phase = Some((pi, ph));
        }
        let ph = &phase.as_ref().expect("set up").1;
        obs.epoch_begins(state.epoch, state.step, ph.steps_per_epoch, stop, max_steps);
        let n_steps = ph.steps_per_epoch.min(max_steps - state.step);
        let step = Step { opts, runner, ph };
        let t_train = Instant::now();
        let train_loss = step.epoch(n_steps, &mut state, sync.as_mut(), &mut obs)?;
        let train_ms = t_train.elapsed().as_secs_f64() * 1e3;
        sync.params_agree(state.epoch, &|| params_hash(&state.params))?;
        let last = state.epoch == total || state.step >= max_steps;
        let evaluates = state.epoch.is_multiple_of(every) || last;
        let mut stops = false;
        let val = match &eval {
            Some(e) if evaluates => {
                advise_training(opts.io_hints, store, &sp, Access::Normal);
                let t = Instant::now();
                // No validation nodes: nothing measured, no best (the last parameters
                // are the run's, issue 55 item 1).
                e.measure(sync.as_ref(), runner, &state.params, Role::Val)?
                    .map(|val| {
                        let verdict = state.record_val(val, &plan.eval, |m| selection(m, &lowered));
                        stops = verdict.stop;
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        Validation {
                            val,
                            best: verdict.best,
                            ms,
                        }
                    })
            }
            _ => None,
        };
        let mut pos = obs.epoch_ends(state.epoch, state.step, (train_loss, train_ms), val)?;
        // Every rank asks at the same epochs; the one that evaluates decides.
        if plan.eval.patience.is_some() && evaluates && sync.stops(stops)? {
            state.early.stopped_at = Some(state.epoch);
            let kept = state.best.as_ref().map(|b| b.epoch);
            pos = obs.stopped(state.epoch, kept, &plan.eval)?;
        }
        // An epoch cut short by `max_steps` is not checkpointed.
        if let Some(path) = ckpt.filter(|_| n_steps == ph.steps_per_epoch) {
            // A job's consensus state, for the checkpoint (a collective call).
            let dist = sync.gather()?;
            if writes {
                state.save(path, &id, obs.now(), log.map(|_| pos), dist)?;
            }
        }
    }
    obs.training_ends();
    let complete =
        state.early.stopped_at.is_some() || state.epoch >= total || state.step >= max_steps;
    finish(state, eval.as_ref(), complete, (sync.as_ref(), runner), obs)
}

/// The outcome of a run that ended in `state`: the best parameters with their validation
/// (the last ones', validated now, when none was), and their test when the run is
/// `complete` (not stopped by `stop_after`). A role without labelled nodes has no metrics
/// (None, `null` in the log's `test` record), never a 0 (issue 55 item 1); without
/// validation nodes the parameters are the last epoch's.
fn finish(
    state: TrainState,
    eval: Option<&Evaluator<'_>>,
    complete: bool,
    (sync, runner): (&dyn StepSync, &dyn StepRunner),
    mut obs: Observer,
) -> Result<TrainOutcome> {
    let (epochs, steps, stopped_at) = (state.epoch, state.step, state.early.stopped_at);
    let (val, test, best_epoch, params) = match eval {
        None => (None, None, epochs, state.params),
        Some(e) => {
            let (val, best_epoch, params) = match state.best {
                Some(b) => (Some(b.val), b.epoch, b.params),
                None => {
                    let val = e.measure(sync, runner, &state.params, Role::Val)?;
                    (val, epochs, state.params)
                }
            };
            let test = match complete {
                true => {
                    let test = e.measure(sync, runner, &params, Role::Test)?;
                    obs.test(best_epoch, val, test)?;
                    test
                }
                false => None,
            };
            (val, test, best_epoch, params)
        }
    };
    Ok(TrainOutcome {
        records: obs.records(),
        val,
        test,
        best_epoch,
        params,
        epochs,
        steps,
        stopped_at,
    })
}

/// The steps of one phase.
struct Step<'s, 'g> {
    opts: &'s TrainOptions<'s>,
    runner: &'s dyn StepRunner,
    ph: &'s PhaseRun<'g>,
}

impl Step<'_, '_> {
    /// One epoch of `n_steps` steps; the mean step loss. The epoch's subgraphs are sampled
    /// ahead on the runner's pool while steps compute.
    fn epoch(
        &self,
        n_steps: u64,
        state: &mut TrainState,
        sync: &mut dyn StepSync,
        obs: &mut Observer,
    ) -> Result<EpochLoss> {
        let steps = state.step..state.step + n_steps;
        let (mut loss_sum, mut mean_sum) = (0.0, Some(0.0));
        let mut result: Result<()> = Ok(());
        self.runner
            .with_prefetch(&self.ph.source, steps, &mut |source| {
                result = (0..n_steps).try_for_each(|_| {
                    let (loss, mean) = self.one(source, state, sync, obs)?;
                    loss_sum += loss;
                    mean_sum = mean_sum.zip(mean).map(|(s, m)| s + m);
                    Ok(())
                });
            });
        result?;
        let n = n_steps as f64;
        Ok(EpochLoss {
            normalised: loss_sum / n,
            mean: mean_sum.map(|s| s / n),
        })
    }

    /// One step, the body of JPDC's Algorithm 2: forward and backward on the step's
    /// subgraph (from `source`), the gradients combined with the other parts' in a job
    /// (GAD's Eq. 15; nothing alone), the update, the step's record. Returns the step's
    /// loss (the job's combined loss in a job) and its plain mean over the subgraph's
    /// training nodes (this part's, in a job).
    fn one(
        &self,
        source: &dyn GraphSource,
        state: &mut TrainState,
        sync: &mut dyn StepSync,
        obs: &mut Observer,
    ) -> Result<(f64, Option<f64>)> {
        let (opts, ph) = (self.opts, self.ph);
        let (epoch, step) = (state.epoch, state.step);
        if opts.interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(TrainError::Interrupted { epoch, step });
        }
        let t0 = Instant::now();
        let vals = self.runner.run_step(
            StepInput::new(&ph.graph, &ph.wanted, &state.params)
                .source(source)
                .step(step, opts.seed)
                .training(true),
        )?;
        let loss = vals
            .get(ph.loss)
            .and_then(|v| v.as_scalar())
            .ok_or_else(|| TrainError::Run("the step gave no loss".into()))?;
        if !loss.is_finite() {
            return Err(TrainError::Run(format!(
                "the loss is {loss} at step {step} (epoch {epoch}); {}: lower the learning rate?",
                self.non_finite_origin(state, step)
            )));
        }
        let mean_loss = self.mean_loss(&vals, source, &state.params, step);
        let t_opt = Instant::now();
        let mut grads = Vec::with_capacity(ph.grads.len());
        for (name, gid) in &ph.grads {
            let g = vals
                .get(*gid)
                .and_then(|v| v.as_dense())
                .ok_or_else(|| TrainError::Run(format!("no gradient of `{name}`")))?;
            // Issue 55 item 7: a non-finite gradient would make the parameters NaN and
            // the next loss NaN far from its cause; O(parameters), beside the update.
            if let Some(i) = g.data.iter().position(|x| !x.is_finite()) {
                return Err(TrainError::Run(format!(
                    "the gradient of `{name}` is {} (value {i}) at step {step} (epoch {epoch}); {}: lower the learning rate?",
                    g.data[i],
                    self.non_finite_origin(state, step)
                )));
            }
            grads.push(g.data.as_slice());
        }
        let t = Instant::now();
        let combined = sync.combine(loss, &grads)?;
        let comm = combined.as_ref().map(|c| (t.elapsed(), c.bytes));
        let loss = combined.as_ref().map_or(loss, |c| c.loss);
        state.update(ph.grads.iter().enumerate().map(|(i, (name, _))| {
            let g = match &combined {
                Some(c) => &c.grads[c.offsets[i]..c.offsets[i] + grads[i].len()],
                None => grads[i],
            };
            (name.as_str(), g)
        }))?;
        // The batchnorms' running statistics, from this step's (state, not parameters).
        for (name, momentum, id) in &ph.running {
            let stats = vals
                .get(*id)
                .and_then(|v| v.as_dense())
                .ok_or_else(|| TrainError::Run(format!("no step statistics of `{name}`")))?;
            crate::op::builtin::update_running(&mut state.params, name, *momentum, stats)
                .map_err(|e| TrainError::Run(e.to_string()))?;
        }
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let times = vals.times;
        obs.step(Record::Step {
            epoch,
            step,
            time: obs.now(),
            loss,
            nodes: vals.bindings.nodes,
            entries: vals.bindings.entries,
            pairs: (vals.bindings.pairs > 0).then_some(vals.bindings.pairs),
            ms: StepMs {
                sampling: ms(times.sampling),
                aggregation: ms(times.aggregation),
                transformation: ms(times.transformation),
                other: ms(times.other),
                optimizer: ms(t_opt.elapsed()),
                wall: ms(t0.elapsed()),
                allreduce: comm.map(|c| ms(c.0)),
            },
            allreduce_bytes: comm.map(|c| c.1),
            mean_loss,
        })?;
        state.step += 1;
        Ok((loss, mean_loss))
    }

    /// Where step `step`'s first non-finite value came from (issue 55 item 7), for the
    /// error that stops the run: a parameter that already holds one, else the first node,
    /// in the graph's order, whose output holds one while its inputs do not — found by
    /// running the step again on the interpreter keeping every value (only on this path:
    /// it holds the whole step's values at once).
    fn non_finite_origin(&self, state: &TrainState, step: u64) -> String {
        let first_bad = |d: &[f32]| d.iter().position(|x| !x.is_finite()).map(|i| (i, d[i]));
        for (name, t) in state.params.iter() {
            if let Some((i, x)) = first_bad(&t.data) {
                return format!("parameter `{name}` already holds {x} (value {i})");
            }
        }
        let graph = &self.ph.graph;
        let order = match graph.topo_order() {
            Ok(o) => o,
            Err(e) => return format!("its origin is unknown ({e})"),
        };
        let vals = match crate::exec::Interpreter.run_step(
            StepInput::new(graph, &order, &state.params)
                .source(&self.ph.source)
                .step(step, self.opts.seed)
                .training(true),
        ) {
            Ok(v) => v,
            Err(e) => return format!("its origin is unknown (the diagnostic pass failed: {e})"),
        };
        for id in order {
            let bad = match vals.get(id) {
                Some(Value::Dense(t)) => first_bad(&t.data),
                Some(Value::Sparse(m)) => first_bad(&m.values.data),
                Some(Value::Scalar(x)) if !x.is_finite() => Some((0, *x as f32)),
                _ => None,
            };
            if let Some((i, x)) = bad {
                let node = graph.node(id);
                return format!(
                    "the first non-finite value is {x} (value {i}) from node {} `{}` (op {}) with finite inputs",
                    id.index(),
                    node.label,
                    node.op.name()
                );
            }
        }
        "a second run of the step on the interpreter gave only finite values".into()
    }

    /// The step's loss with every training node of the subgraph weighted alike (the plain
    /// mean cross-entropy, where the step's loss weights node v by 1/λ_v): the loss op run
    /// again on its logits and targets with uniform weights. None for a plan whose loss
    /// is not a built-in one, or a subgraph without training nodes.
    fn mean_loss(
        &self,
        vals: &crate::exec::StepValues,
        source: &dyn GraphSource,
        params: &crate::ir::Params,
        step: u64,
    ) -> Option<f64> {
        let (z, t) = self.ph.loss_inputs?;
        let (logits, targets) = (vals.get(z)?, vals.get(t)?.as_targets()?);
        let count = targets.weights.iter().filter(|&&w| w > 0.0).count();
        if count == 0 {
            return None;
        }
        let w = 1.0 / count as f32;
        let uniform = Value::Targets(Arc::new(crate::ir::Targets {
            weights: targets
                .weights
                .iter()
                .map(|&x| if x > 0.0 { w } else { 0.0 })
                .collect(),
            ..targets.clone()
        }));
        let ctx = crate::op::Ctx {
            source: Some(source),
            params,
            step,
            seed: self.opts.seed,
            training: true,
            node: self.ph.loss,
            bindings: vals.bindings,
        };
        let op = &self.ph.graph.node(self.ph.loss).op;
        op.forward(&[logits, &uniform], &ctx).ok()?.as_scalar()
    }
}

/// Refuses a plan whose parameters and step do not fit the memory limit, before any
/// parameter, optimiser buffer or evaluation plan is allocated.
fn check_memory(
    opts: &TrainOptions<'_>,
    lowered: &Lowered,
    sched: &[(usize, SamplerPlan, usize)],
) -> Result<()> {
    if let Some((limit, source)) = opts.memory_limit.resolve() {
        let samplers: Vec<SamplerPlan> = sched.iter().map(|p| p.1.clone()).collect();
        let est = crate::compile::memory::estimate(
            lowered,
            Some(&opts.plan.optimizer),
            opts.store,
            &samplers,
        )?;
        crate::compile::memory::check(opts.plan, lowered, &est, limit, &source)?;
    }
    Ok(())
}

/// |V_train|, refused when zero. The message says what to pass when the store was made (issue 54, item 8): labels when
/// it has none, a split when no labelled node has the training role.
fn training_nodes(store: &GraphStore) -> Result<usize> {
    let path = store.path().display();
    match store.role_count(Role::Train) {
        0 if store.n_classes() == 0 => Err(TrainError::Run(format!(
            "{path}: no labels, so no training nodes: a GNN plan learns node classes from labelled training nodes; import the graph with its labels and a split, `saintflow import edgelist EDGES -o {path} --features X.npy --labels Y.npy --split 0.6,0.2,0.2` (labels as .npy or class_map.json; `--roles role.json` for a given split), or learn node vectors without labels with an [embedding] plan (`saintflow train deepwalk --graph {path}`)"
        ))),
        0 => Err(TrainError::Run(format!(
            "{path}: no training nodes (role `train`; the store has labels of {} classes): import the graph with a split that has training nodes, `--split 0.6,0.2,0.2` (fractions of the labelled nodes) or `--roles role.json` (its `tr` list)",
            store.n_classes()
        ))),
        n => Ok(n),
    }
}

/// The phase (its index and sampler) that epoch `epoch` (from 1) belongs to.
fn phase_of(sched: &[(usize, SamplerPlan, usize)], epoch: usize) -> (usize, SamplerPlan) {
    let mut acc = 0;
    sched
        .iter()
        .find(|p| {
            acc += p.2;
            epoch <= acc
        })
        .map(|p| (p.0, p.1.clone()))
        .expect("epoch within the schedule")
}

/// The log's first record: what is trained, on what (and a job's facts).
fn run_record(
    opts: &TrainOptions<'_>,
    runner: &dyn StepRunner,
    hash: u64,
    dist: Option<RunDist>,
) -> Record {
    Record::Run {
        plan: opts.plan.name.clone(),
        plan_hash: format!("{hash:016x}"),
        effective_plan: opts.plan.effective_text().to_string(),
        graph: opts
            .graph_name
            .clone()
            .unwrap_or_else(|| opts.store.path().display().to_string()),
        seed: opts.seed,
        threads: runner.threads(),
        runner: runner.name().to_string(),
        dist,
    }
}

/// The runner's worker count as the planner takes it (a runner reports at least one).
fn runner_threads(runner: &dyn StepRunner) -> std::num::NonZeroUsize {
    std::num::NonZeroUsize::new(runner.threads()).unwrap_or(std::num::NonZeroUsize::MIN)
}
