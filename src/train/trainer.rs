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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::compile::{advise_training, lower_for, plan_hash, schedule, setup_phase, PhaseRun};
use super::Result;
use crate::exec::{Executor, StepRunner};
use crate::ir::Params;
use crate::op::{GraphSource, Registry};
use crate::plan::{Lowered, Optimizer, Plan, SamplerPlan};
use crate::progress::Progress;
use crate::store::{Access, GraphStore, Labels, Role};

use super::blocked::InferOptions;
use super::checkpoint::{load_params, save_params, Checkpoint, SavedTensor};
use super::infer::FullGraph;
use super::log::{LogSink, Record, RunDist, StepMs};
use super::metrics::{Counts, Metrics};
use super::TrainError;
use crate::dist::{Dist, DistEval, Local, Ranks, StepSync};
use crate::machine::MemoryLimit;

/// Epochs of a plan without `[[phase]]`.
pub const DEFAULT_EPOCHS: usize = 50;

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
    plan: &'a Plan,
    store: &'a GraphStore,
    registry: Option<Arc<Registry>>,
    runner: Option<&'a dyn StepRunner>,
    threads: Option<usize>,
    progress: Progress,
    seed: u64,
    epochs: Option<usize>,
    checkpoint: Option<PathBuf>,
    resume: bool,
    init_from: Option<PathBuf>,
    log: Option<PathBuf>,
    json: bool,
    graph_name: Option<String>,
    stop_after: Option<usize>,
    max_steps: Option<u64>,
    no_eval: bool,
    io_hints: bool,
    verify: Verify,
    infer: InferOptions,
    memory_limit: MemoryLimit,
    dist: Option<Dist<'a>>,
    interrupt: Option<&'a AtomicBool>,
}

/// Stores up to this many bytes (all sections) get the full check before training by
/// default ([`Verify::Auto`]). `check` reads every byte once (xxh3) and searches each
/// adjacency entry's reverse: 4.7–7.1 s for a 1 GiB store (Kronecker scale 21) on this
/// project's loaded 2-core machine (BENCHMARKS.md, issue 15), small beside training on
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

    /// Takes part in a distributed job as `dist.comm`'s rank: `store` is this rank's part,
    /// gradients are combined by the plan's `[distributed]` consensus after every step,
    /// only rank 0 logs and checkpoints, and `dist.eval` says who evaluates
    /// ([`crate::dist`]). Every rank must be given the same plan, seed, epochs,
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

    /// Trains inside a rayon pool of `threads` workers (0: all cores, rayon's convention;
    /// the CLI refuses `--threads 0`), with the default executor on as many (default: the
    /// calling thread's pool).
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
    /// see [`super::memory`]). [`MemoryLimit::Off`] skips it.
    pub fn memory_limit(mut self, limit: MemoryLimit) -> Self {
        self.memory_limit = limit;
        self
    }

    /// Runs the training (see the module's documentation). Options that mean nothing
    /// (`epochs(0)`, `max_steps(0)`, `stop_after(0)`) are errors; so is a plan whose
    /// parameters and step do not fit the memory limit, found before anything is allocated.
    pub fn train(&self) -> Result<TrainOutcome> {
        for (name, zero) in [
            ("epochs", self.epochs == Some(0)),
            ("max_steps", self.max_steps == Some(0)),
            ("stop_after", self.stop_after == Some(0)),
        ] {
            if zero {
                return Err(TrainError::Run(format!(
                    "TrainOptions::{name}(0): must be at least 1 (None for no limit)"
                )));
            }
        }
        match self.threads {
            Some(t) => crate::exec::rayon_pool(t)
                .map_err(|e| TrainError::Run(format!("thread pool: {e}")))?
                .install(|| self.train_here()),
            None => self.train_here(),
        }
    }

    /// [`train`](Self::train) on the current rayon pool.
    fn train_here(&self) -> Result<TrainOutcome> {
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
                executor = Executor::new(rayon::current_num_threads());
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
    /// with `no_eval`.
    pub val: Option<Metrics>,
    /// The test metrics of those parameters (None when stopped by `stop_after`, or with
    /// `no_eval`).
    pub test: Option<Metrics>,
    /// The epoch of those parameters.
    pub best_epoch: usize,
    /// Those parameters.
    pub params: Params,
    /// Epochs done (the last one partial when cut by `max_steps`).
    pub epochs: usize,
    /// Steps done.
    pub steps: u64,
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

/// The optimiser's state.
struct OptState {
    kind: Optimizer,
    weight_decay: BTreeMap<String, f32>,
    t: u64,
    m: BTreeMap<String, Vec<f32>>,
    v: BTreeMap<String, Vec<f32>>,
}

impl OptState {
    fn new(kind: Optimizer, lowered: &Lowered, params: &Params) -> OptState {
        let zeros: BTreeMap<String, Vec<f32>> = params
            .iter()
            .map(|(n, t)| (n.clone(), vec![0.0; t.data.len()]))
            .collect();
        OptState {
            kind,
            weight_decay: lowered.weight_decay.clone(),
            t: 0,
            v: if matches!(kind, Optimizer::Adam(_)) {
                zeros.clone()
            } else {
                BTreeMap::new()
            },
            m: zeros,
        }
    }

    fn update(&mut self, name: &str, p: &mut [f32], g: &[f32]) -> Result<(), TrainError> {
        let wd = f64::from(self.weight_decay.get(name).copied().unwrap_or(0.0));
        let m = self.m.get_mut(name).expect("state per parameter");
        let r = match self.kind {
            Optimizer::Adam(a) => {
                let v = self.v.get_mut(name).expect("state per parameter");
                saintflow_ops::optim::Adam {
                    weight_decay: wd,
                    ..a
                }
                .step(self.t, p, g, m, v)
            }
            Optimizer::Sgd(s) => saintflow_ops::optim::Sgd {
                weight_decay: wd,
                ..s
            }
            .step(p, g, m),
        };
        r.map_err(|e| TrainError::Run(format!("optimiser on `{name}`: {e}")))
    }

    fn save(map: &BTreeMap<String, Vec<f32>>) -> Vec<SavedTensor> {
        map.iter()
            .map(|(n, d)| SavedTensor {
                name: n.clone(),
                rows: 1,
                cols: d.len(),
                data: d.clone(),
            })
            .collect()
    }

    fn restore(
        map: &mut BTreeMap<String, Vec<f32>>,
        saved: &[SavedTensor],
        path: &std::path::Path,
    ) -> Result<(), TrainError> {
        for (name, buf) in map.iter_mut() {
            let s = saved
                .iter()
                .find(|s| &s.name == name)
                .filter(|s| s.data.len() == buf.len())
                .ok_or_else(|| TrainError::Checkpoint {
                    path: path.to_path_buf(),
                    what: format!("no optimiser state of the right size for `{name}`"),
                })?;
            buf.copy_from_slice(&s.data);
        }
        Ok(())
    }
}

/// xxh3-64 of every parameter's name and bytes, in name order: what the ranks of a
/// distributed run compare each epoch.
fn params_hash(params: &Params) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (name, t) in params.iter() {
        h.update(name.as_bytes());
        for x in &t.data {
            h.update(&x.to_le_bytes());
        }
    }
    h.digest()
}

/// Refuses an evaluation graph whose features or labels differ in shape from the part's.
fn check_same_schema(full: &GraphStore, part: &GraphStore) -> Result<()> {
    let shape = |s: &GraphStore| {
        (
            s.n_features(),
            s.n_classes(),
            matches!(s.labels(), Labels::Multi { .. }),
        )
    };
    if shape(full) != shape(part) {
        return Err(TrainError::Run(format!(
            "{}: the evaluation graph has F = {}, C = {} ({}), the part {} has F = {}, C = {} ({}): not the graph it was cut from",
            full.path().display(),
            full.n_features(),
            full.n_classes(),
            if shape(full).2 { "multi-label" } else { "single-label" },
            part.path().display(),
            part.n_features(),
            part.n_classes(),
            if shape(part).2 { "multi-label" } else { "single-label" },
        )));
    }
    Ok(())
}

fn check_params(
    params: &Params,
    lowered: &Lowered,
    path: &std::path::Path,
) -> Result<(), TrainError> {
    for d in &lowered.params {
        match params.get(&d.name) {
            Some(t) if (t.rows, t.cols) == (d.rows, d.cols) => {}
            Some(t) => {
                return Err(TrainError::Checkpoint {
                    path: path.to_path_buf(),
                    what: format!(
                        "parameter `{}` is {}×{}, the plan declares {}×{}",
                        d.name, t.rows, t.cols, d.rows, d.cols
                    ),
                })
            }
            None => {
                return Err(TrainError::Checkpoint {
                    path: path.to_path_buf(),
                    what: format!("parameter `{}` is missing", d.name),
                })
            }
        }
    }
    Ok(())
}

/// What a run checks and holds before it touches its outputs (issue 28): the checkpoint
/// is not inside a store (item 12); the checkpoint and the log are claimed for the run's
/// life, a second writer refused naming the holder (item 10; rank 0 only writes them); the
/// checkpoint's disk is there (item 13). Returns the claims, held until dropped.
fn guard_outputs(
    ckpt: Option<&std::path::Path>,
    log: Option<&std::path::Path>,
    rank0: bool,
    lowered: &Lowered,
) -> Result<Vec<crate::atomic::OutputLock>, TrainError> {
    // Issue 28, item 12: a checkpoint never goes into a store's directory.
    if let Some(path) = ckpt {
        if let Some(dir) = path
            .parent()
            .filter(|d| crate::store::writer::is_store_dir(d))
        {
            return Err(TrainError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "{} is a graph store: a checkpoint goes in a directory of its own (e.g. --checkpoint run/)",
                    dir.display()
                ),
            });
        }
    }
    // Issue 28, item 10: one writer per checkpoint and log, held for the whole run; a
    // second run sharing either is refused, naming the holder, before it reads or
    // truncates anything.
    let claims = {
        let mut claims = Vec::new();
        let outputs = [
            (ckpt.filter(|_| rank0), "--checkpoint"),
            (log.filter(|_| rank0), "--log"),
        ];
        for (path, flag) in outputs.into_iter().filter_map(|(p, f)| Some((p?, f))) {
            let claim = crate::atomic::claim_output(path)
                .map_err(|e| TrainError::io(path, "claim (lock)", e))?;
            match claim {
                Ok(lock) => claims.push(lock),
                Err(pid) => {
                    return Err(TrainError::Run(format!(
                        "{}: another run is writing it ({}); wait for it to end, or give this run another {flag}",
                        path.display(),
                        pid.map_or("PID unknown".into(), |p| format!("PID {p}"))
                    )))
                }
            }
        }
        claims
    };
    // Issue 28, item 13: the checkpoint's disk before any work: the parameters, Adam's two
    // moments and the best parameters, twice while a new one replaces the old atomically.
    if let Some(path) = ckpt.filter(|_| rank0) {
        let values: u64 = lowered
            .params
            .iter()
            .map(|d| (d.rows * d.cols) as u64)
            .sum();
        let need = 2 * (4 * 4 * values + (64 << 10));
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        if let Ok(free) = fs4::available_space(dir) {
            if need > free {
                return Err(TrainError::Checkpoint {
                    path: path.to_path_buf(),
                    what: format!(
                        "needs about {} of disk while written ({values} parameter values, with Adam's moments and the best parameters, twice while replaced atomically); {} has {} free",
                        crate::machine::human(u128::from(need)),
                        dir.display(),
                        crate::machine::human(u128::from(free))
                    ),
                });
            }
        }
    }
    Ok(claims)
}

/// Trains `opts.plan` on `opts.store` with `registry`'s ops and `runner`.
fn run(
    opts: &TrainOptions<'_>,
    registry: &Registry,
    runner: &dyn StepRunner,
) -> Result<TrainOutcome> {
    let (store, plan_, progress) = (opts.store, opts.plan, &opts.progress);
    if opts.verify.runs_check(store) {
        crate::store::check(store)?;
    }
    let lowered = lower_for(plan_, store, registry)?;
    let hash = plan_hash(plan_);
    let sched = schedule(plan_, opts.epochs);
    // Before any parameter, optimiser buffer or evaluation plan is allocated.
    if let Some((limit, source)) = opts.memory_limit.resolve() {
        let samplers: Vec<SamplerPlan> = sched.iter().map(|p| p.1.clone()).collect();
        let est = super::memory::estimate(&lowered, Some(&plan_.optimizer), store, &samplers)?;
        super::memory::check(plan_, &lowered, &est, limit, &source)?;
    }
    let total: usize = sched.iter().map(|p| p.2).sum();
    let n_train = store.role_count(Role::Train);
    if n_train == 0 {
        return Err(TrainError::Run(format!(
            "{}: no training nodes (role `train`)",
            store.path().display()
        )));
    }
    let dist = opts.dist.as_ref();
    // Every collective call of the run goes through `sync` (crate::dist::sync).
    let mut sync: Box<dyn StepSync + '_> = match dist {
        Some(d) => Box::new(Ranks::new(d, plan_.distributed, store, n_train, opts.seed)),
        None => Box::new(Local),
    };
    let rank0 = sync.rank() == 0;
    // No full-graph pass is even planned without evaluation, nor on ranks other than 0
    // when rank 0 evaluates the full graph; without one, each rank evaluates its part.
    let eval_parts = dist.is_some_and(|d| matches!(d.eval, DistEval::Parts));
    let full_eval = match dist.map(|d| d.eval) {
        Some(DistEval::Rank0(full)) => full,
        _ => None,
    };
    let eval = if opts.no_eval || (!eval_parts && !rank0) {
        None
    } else {
        let on = match full_eval {
            Some(full) => {
                check_same_schema(full, store)?;
                full
            }
            None => store,
        };
        Some(FullGraph::new(on, &lowered)?.with_options(InferOptions {
            progress: opts.progress,
            ..opts.infer.clone()
        }))
    };
    // What a checkpoint is tied to: the store, or every rank's part.
    let graph_id = sync.graph_id(store.identity())?;
    // The metrics of `role`: of the evaluation graph, or summed over every rank's part.
    let measure = |sync: &dyn StepSync,
                   eval: &FullGraph<'_>,
                   params: &Params,
                   role: Role|
     -> Result<Metrics> {
        if eval_parts {
            let mut flat = eval.counts(runner, params, &[role])?[0].flat();
            sync.sum_counts(&mut flat)?;
            Ok(Counts::from_flat(&flat).metrics())
        } else {
            Ok(eval.metrics(runner, params, &[role])?[0])
        }
    };
    let every = plan_.eval.every.max(1);

    // State: fresh, or from the checkpoint.
    let mut params = match &opts.init_from {
        Some(path) => super::export::load_safetensors(path, &lowered.params)?,
        None => Params::init(&lowered.params, opts.seed),
    };
    let mut opt = OptState::new(plan_.optimizer, &lowered, &params);
    let mut epoch = 0usize;
    let mut step = 0u64;
    let mut best: Option<(Metrics, usize, Params)> = None;
    let mut elapsed0 = 0.0;
    let ckpt = opts.checkpoint.clone();
    let _claims = guard_outputs(ckpt.as_deref(), opts.log.as_deref(), rank0, &lowered)?;
    let resumed = match &ckpt {
        Some(path) if opts.resume && path.exists() => {
            let c = Checkpoint::load(path)?;
            c.check_matches(path, hash, opts.seed)?;
            match dist {
                Some(_) => c.check_graph_id(
                    path,
                    graph_id,
                    &format!("this job's {} parts", sync.ranks()),
                )?,
                None => c.check_graph(path, store)?,
            }
            sync.restore(c.dist.as_ref(), path)?;
            params = load_params(&c.params);
            check_params(&params, &lowered, path)?;
            OptState::restore(&mut opt.m, &c.opt_m, path)?;
            OptState::restore(&mut opt.v, &c.opt_v, path)?;
            opt.t = c.opt_t;
            epoch = c.epoch;
            step = c.step;
            elapsed0 = c.elapsed;
            if let (Some(bp), Some(bv)) = (&c.best_params, c.best_val) {
                best = Some((bv, c.best_epoch, load_params(bp)));
            }
            Some(c.log_pos)
        }
        _ => None,
    };
    // Only rank 0 writes the log.
    let log_path = opts.log.as_deref().filter(|_| rank0);
    let json = opts.json && rank0;
    let (mut log, fresh) = match resumed {
        Some(Some(pos)) => (LogSink::resume(log_path, pos, json)?, false),
        _ => (LogSink::create(log_path, json)?, true),
    };
    let run_dist = sync.run_info()?.map(|info| RunDist {
        ranks: info.ranks,
        transport: info.transport,
        consensus: plan_.distributed.consensus.name().into(),
        beta: plan_.distributed.beta,
        replica_bytes: info.replica_bytes,
        zeta: info.zeta,
    });
    if fresh {
        log.push(Record::Run {
            plan: plan_.name.clone(),
            plan_hash: format!("{hash:016x}"),
            effective_plan: plan_.effective_text().to_string(),
            graph: opts
                .graph_name
                .clone()
                .unwrap_or_else(|| store.path().display().to_string()),
            seed: opts.seed,
            threads: runner.threads(),
            runner: runner.name().to_string(),
            dist: run_dist,
        })?;
    }

    let start = Instant::now();
    let now = |start: &Instant| elapsed0 + start.elapsed().as_secs_f64();
    let mut phase_run: Option<(usize, PhaseRun<'_>)> = None;
    let stop = opts.stop_after.unwrap_or(usize::MAX);
    let max_steps = opts.max_steps.unwrap_or(u64::MAX);
    // Steps of this session: the total is estimated from each phase's steps per epoch as
    // it is set up, and capped by `--steps` (issue 27: an ETA that respects it).
    let first_step = step;
    let ticker = progress.ticker(0, "train", "steps");
    while epoch < total && epoch < stop && step < max_steps {
        epoch += 1;
        // The phase of this epoch.
        let mut acc = 0;
        let (pi, sp) = sched
            .iter()
            .find(|p| {
                acc += p.2;
                epoch <= acc
            })
            .map(|p| (p.0, p.1.clone()))
            .expect("epoch within the schedule");
        if phase_run.as_ref().is_none_or(|(i, _)| *i != pi) {
            let mut ph = setup_phase(store, &lowered, &sp, pi, opts.seed, n_train, opts.io_hints)?;
            // Every rank steps as often as the one with the most (each step is collective).
            ph.steps_per_epoch = sync.steps(ph.steps_per_epoch)?;
            phase_run = Some((pi, ph));
        }
        let ph = &phase_run.as_ref().expect("set up").1;
        let epochs_left = (total.min(stop) - epoch + 1) as u64;
        ticker.set_total(
            (step - first_step + epochs_left * ph.steps_per_epoch)
                .min(max_steps.saturating_sub(first_step)),
        );
        ticker.set_message(format!("epoch {epoch}/{total}"));
        if opts.io_hints {
            advise_training(store, &sp, Access::Random);
        }
        let mut loss_sum = 0.0;
        // The epoch's subgraphs are sampled ahead on the runner's pool while steps compute.
        let n_steps = ph.steps_per_epoch.min(max_steps - step);
        let cut = n_steps < ph.steps_per_epoch;
        let steps = step..step + n_steps;
        let mut run_epoch = |source: &dyn GraphSource| -> Result<()> {
            for _ in 0..n_steps {
                if opts.interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
                    return Err(TrainError::Interrupted { epoch, step });
                }
                let t0 = Instant::now();
                let vals = runner.run_step(
                    &ph.graph,
                    &ph.wanted,
                    Some(source),
                    &params,
                    step,
                    opts.seed,
                    true,
                )?;
                let loss = vals
                    .get(ph.loss)
                    .and_then(|v| v.as_scalar())
                    .ok_or_else(|| TrainError::Run("the step gave no loss".into()))?;
                if !loss.is_finite() {
                    return Err(TrainError::Run(format!(
                    "the loss is {loss} at step {step} (epoch {epoch}): lower the learning rate?"
                )));
                }
                let t_opt = Instant::now();
                opt.t += 1;
                let mut grads = Vec::with_capacity(ph.grads.len());
                for (name, gid) in &ph.grads {
                    let g = vals
                        .get(*gid)
                        .and_then(|v| v.as_dense())
                        .ok_or_else(|| TrainError::Run(format!("no gradient of `{name}`")))?;
                    grads.push(g.data.as_slice());
                }
                // A distributed step: one allreduce, then every rank the same update.
                let mut comm = None;
                let mut loss = loss;
                let t = Instant::now();
                let combined = sync.combine(loss, &grads)?;
                if let Some(c) = &combined {
                    comm = Some((t.elapsed(), c.bytes));
                    loss = c.loss;
                }
                for (i, (name, _)) in ph.grads.iter().enumerate() {
                    let g = match &combined {
                        Some(c) => &c.grads[c.offsets[i]..c.offsets[i] + grads[i].len()],
                        None => grads[i],
                    };
                    let p = params.get_mut(name).expect("every parameter initialised");
                    opt.update(name, &mut p.data, g)?;
                }
                let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
                let times = vals.times;
                log.push(Record::Step {
                    epoch,
                    step,
                    time: now(&start),
                    loss,
                    nodes: vals.bindings.nodes,
                    entries: vals.bindings.entries,
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
                })?;
                loss_sum += loss;
                step += 1;
                ticker.inc(1);
            }
            Ok(())
        };
        let mut epoch_result = Ok(());
        runner.with_prefetch(&ph.source, steps, &mut |s| epoch_result = run_epoch(s));
        epoch_result?;
        let train_loss = loss_sum / n_steps as f64;
        if let Some(h) = sync.params_differ(&|| params_hash(&params))? {
            return Err(TrainError::Run(format!(
                "distributed: the ranks' parameters differ after epoch {epoch} (rank {}'s hash {h:016x}): a rank applied another update",
                sync.rank()
            )));
        }
        let last = epoch == total || step >= max_steps;
        let (val, eval_ms, is_best) = if let Some(eval) = eval
            .as_ref()
            .filter(|_| epoch.is_multiple_of(every) || last)
        {
            if opts.io_hints {
                advise_training(store, &sp, Access::Normal);
            }
            let t = Instant::now();
            let m = measure(sync.as_ref(), eval, &params, Role::Val)?;
            let better = best.as_ref().is_none_or(|b| m.f1_micro > b.0.f1_micro);
            if better {
                best = Some((m, epoch, params.clone()));
            }
            (Some(m), Some(t.elapsed().as_secs_f64() * 1e3), better)
        } else {
            (None, None, false)
        };
        log.push(Record::Epoch {
            epoch,
            step: step - 1,
            time: now(&start),
            train_loss,
            val,
            best: is_best,
            eval_ms,
        })?;
        let pos = log.sync()?;
        // The epoch's line: above the bar on a terminal (the history stays), on stderr
        // off one.
        ticker.println(format_args!(
            "epoch {epoch}/{total}  step {step}  loss {train_loss:.4} (GraphSAINT-normalised){}  time {:.1}s",
            val.map_or(String::new(), |m| format!(
                "  val accuracy {:.4} F1-micro {:.4}",
                m.accuracy, m.f1_micro
            )),
            now(&start)
        ));
        // Every rank's consensus state, for rank 0's checkpoint (a collective call).
        let dist_state = match ckpt {
            Some(_) if !cut => sync.gather()?,
            _ => None,
        };
        if let Some(path) = ckpt.as_ref().filter(|_| !cut && rank0) {
            Checkpoint {
                plan_hash: hash,
                seed: opts.seed,
                epoch,
                step,
                params: save_params(&params),
                opt_m: OptState::save(&opt.m),
                opt_v: OptState::save(&opt.v),
                opt_t: opt.t,
                best_params: best.as_ref().map(|b| save_params(&b.2)),
                best_epoch: best.as_ref().map_or(0, |b| b.1),
                best_val: best.as_ref().map(|b| b.0),
                elapsed: now(&start),
                log_pos: opts.log.as_ref().map(|_| pos),
                graph_id,
                dist: dist_state,
            }
            .save(path)?;
        }
    }
    ticker.finish();
    let Some(eval) = eval else {
        return Ok(TrainOutcome {
            records: log.into_records(),
            val: None,
            test: None,
            best_epoch: epoch,
            params,
            epochs: epoch,
            steps: step,
        });
    };
    let (val, best_epoch, best_params) = match best {
        Some(b) => b,
        None => {
            let m = measure(sync.as_ref(), &eval, &params, Role::Val)?;
            (m, epoch, params.clone())
        }
    };
    if epoch < total && step < max_steps {
        return Ok(TrainOutcome {
            records: log.into_records(),
            val: Some(val),
            test: None,
            best_epoch,
            params: best_params,
            epochs: epoch,
            steps: step,
        });
    }
    let test = measure(sync.as_ref(), &eval, &best_params, Role::Test)?;
    log.push(Record::Test {
        epoch: best_epoch,
        time: now(&start),
        val,
        test,
    })?;
    log.sync()?;
    Ok(TrainOutcome {
        records: log.into_records(),
        val: Some(val),
        test: Some(test),
        best_epoch,
        params: best_params,
        epochs: epoch,
        steps: step,
    })
}
