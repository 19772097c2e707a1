//! `Sampler`: GraphSAINT subgraphs as batches. The kind and its keys are checked by the
//! kinds' own fields (`sampler_config`); building one draws subgraph 0 and pre-samples the
//! normalisation (`NormCounts::estimate`, sized by `sample_coverage`, stopped by Ctrl-C
//! through `Cancellable`). An epoch (`epoch_iter`, `iter_range`) is a thread and a rayon
//! pool drawing batches in index order ahead of the consumer into a bounded channel;
//! `BatchIter` waits for the next with the GIL released, checking for Ctrl-C every 100 ms.
//! Batches `k` of a seed are the same whatever the thread count.
//!
//! A link sampler (`link` given: `saintflow.LinkSampler`) attaches to every subgraph its
//! target edges and their negatives (`attach_targets`, seeded by (seed, index) as the
//! subgraph), with the targets taken out of the subgraph's structure when asked, before
//! the batch's `edge_index` is built; its targets weigh GraphSAINT's 1/λ_e
//! (`saint_target_weight`) when the sampler pre-samples.

use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

use saintflow::sample::config::{self, KINDS};
use saintflow::sample::params::{FieldError, Input};
use saintflow::sample::{
    attach_targets, saint_target_weight, sample_subgraph, sample_subgraph_into, LinkSampling,
    NegativeDist, NegativeEnds, NormCounts, SamplerConfig, Subgraph,
};
use saintflow::seed::{hash3, stream};
use saintflow::store::{GraphStore, Role};

use crate::batch::{batch_dict, push_rows, Batch, Buffers, Hetero, LinkArrays, YData};
use crate::error::{guard, SaintflowError, SampleError};
use crate::runtime::{fits, on_pool, pool, run_interruptible, threads_of, try_vec};
use crate::store::Store;

/// A sampler configuration checked against the kind's fields: `kind` and its keys as
/// `saintflow sample`'s flags and a plan's `[sampler]` take them.
fn sampler_config(kind: &str, keys: &Bound<'_, PyDict>, also: &[&str]) -> PyResult<SamplerConfig> {
    let names: Vec<&str> = config::names().collect();
    let mut cfg = SamplerConfig::default_of(kind).ok_or_else(|| {
        SampleError::new_err(format!(
            "no sampler kind {kind:?}: expected one of {}",
            names.join(", ")
        ))
    })?;
    for (k, v) in keys.iter() {
        let name: String = k.extract()?;
        let input = if let Ok(b) = v.extract::<bool>() {
            Input::Bool(b)
        } else if let Ok(i) = v.extract::<i64>() {
            Input::Int(i)
        } else if let Ok(x) = v.extract::<f64>() {
            Input::Float(x)
        } else if let Ok(t) = v.extract::<String>() {
            // `"paper=500,author=200"`, `"paper,author"`: a flag's text.
            Input::Text(t)
        } else if let Ok(d) = v.extract::<std::collections::BTreeMap<String, i64>>() {
            // A dict of counts (a typed sampler's `budgets`); sorted by name, as a dict's
            // order is the caller's and the draws do not depend on it.
            Input::Counts(d.into_iter().collect())
        } else if let Ok(names) = v.extract::<Vec<String>>() {
            Input::Names(names)
        } else {
            Input::Other
        };
        cfg.set(&name, input).map_err(|e| {
            let kind_name = cfg.name();
            match e {
                FieldError::Unknown => {
                    let fields: Vec<&str> = cfg.fields().iter().map(|f| f.name).collect();
                    let owner = config::owner_of(&name)
                        .map(|k| format!(" ({name} belongs to the {} sampler)", k.name))
                        .unwrap_or_else(|| {
                            // A misspelt key: the nearest of the kind's and the caller's
                            // own (a link sampler's `negatives`, ...).
                            saintflow::suggest::did_you_mean(
                                &name,
                                fields.iter().chain(also).copied(),
                            )
                        });
                    SampleError::new_err(format!(
                        "the {kind_name} sampler has no parameter {name:?}{owner}; its parameters: {}",
                        if fields.is_empty() { "none".to_string() } else { fields.join(", ") }
                    ))
                }
                FieldError::Invalid(t) => SampleError::new_err(format!(
                    "{kind_name} sampler: {name} = {v}: expected {}",
                    t.expected()
                )),
            }
        })?;
    }
    Ok(cfg)
}

/// The keys of a link sampler's `link` dict: a plan's `[task]` keys of the same names.
pub(crate) const LINK_KEYS: [&str; 6] = [
    "targets",
    "negatives",
    "negative_sampler",
    "negative_ends",
    "exclude_true",
    "exclude_targets",
];

/// The most negatives per target: a plan's bound (`[task] negatives`).
const MAX_NEGATIVES: i64 = 1 << 16;

/// The choice `v` names among `table` (a link key's value, e.g. `negative_sampler`): a
/// TypeError for a non-string, a SampleError listing the names (with a suggestion) for an
/// unknown one.
fn named<T: Copy>(key: &str, v: &Bound<'_, PyAny>, table: &[(&str, T)]) -> PyResult<T> {
    let name: String = v
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{key} = {v:?}: expected a name")))?;
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            SampleError::new_err(format!(
                "no {key} {name:?}{}: expected one of {}",
                saintflow::suggest::did_you_mean(&name, names.iter().copied()),
                names.join(", ")
            ))
        })
}

/// A link sampler's targets and negatives from its `link` dict (`LINK_KEYS`), checked as
/// a plan's `[task]` checks them: `targets` in (0, 1], `negatives` 1 ..= 65536,
/// `negative_sampler` one of `NegativeDist::ALL`, and not `exclude_targets` with every
/// edge a target.
fn link_sampling(link: &Bound<'_, PyDict>) -> PyResult<LinkSampling> {
    let mut cfg = LinkSampling::default();
    for (k, v) in link.iter() {
        let name: String = k.extract()?;
        let flag = |v: &Bound<'_, PyAny>| -> PyResult<bool> {
            v.extract::<bool>().map_err(|_| {
                PyTypeError::new_err(format!("{name} = {v:?}: expected True or False"))
            })
        };
        match name.as_str() {
            "targets" => {
                let x: f64 = v.extract().map_err(|_| {
                    PyTypeError::new_err(format!("targets = {v:?}: expected a number in (0, 1]"))
                })?;
                if !(x > 0.0 && x <= 1.0) {
                    return Err(PyValueError::new_err(format!(
                        "targets = {x}: the share of a subgraph's edges scored in a step, expected a number in (0, 1]"
                    )));
                }
                cfg.fraction = x;
            }
            "negatives" => {
                if v.extract::<bool>().is_ok() || v.extract::<i64>().is_err() {
                    return Err(PyTypeError::new_err(format!(
                        "negatives = {v:?}: expected an integer (negatives per target)"
                    )));
                }
                let k: i64 = v.extract()?;
                if !(1..=MAX_NEGATIVES).contains(&k) {
                    return Err(PyValueError::new_err(format!(
                        "negatives = {k}: negatives per target, expected 1 ..= {MAX_NEGATIVES}"
                    )));
                }
                cfg.negatives = k as usize;
            }
            "negative_sampler" => cfg.dist = named(&name, &v, &NegativeDist::ALL)?,
            "negative_ends" => cfg.ends = named(&name, &v, &NegativeEnds::ALL)?,
            "exclude_true" => cfg.exclude_true = flag(&v)?,
            "exclude_targets" => cfg.exclude_targets = flag(&v)?,
            other => {
                return Err(SampleError::new_err(format!(
                    "a link sampler has no key {other:?}{}; its keys: {}",
                    saintflow::suggest::did_you_mean(other, LINK_KEYS.iter().copied()),
                    LINK_KEYS.join(", ")
                )))
            }
        }
    }
    if cfg.exclude_targets && cfg.fraction >= 1.0 {
        return Err(PyValueError::new_err(
            "exclude_targets=True with targets=1.0 leaves no edge to pass messages over: score a share of the edges (targets=0.5) or keep them (exclude_targets=False)",
        ));
    }
    Ok(cfg)
}

/// The largest `sample_coverage`: the pre-sampling draws about coverage × N nodes, so
/// 10 000 is already 100 × PyG's examples' 100 (issue 55 item 5: 1e12 never returned).
const MAX_COVERAGE: f64 = 10_000.0;

/// A sampler that stops with an error at its next subgraph once `flag` is set: how Ctrl-C
/// ends the normalisation's pre-sampling (the library's loop has no flag of its own).
struct Cancellable<'a> {
    inner: &'a dyn saintflow::sample::Sampler,
    flag: &'a AtomicBool,
}

impl saintflow::sample::Sampler for Cancellable<'_> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn graph(&self) -> saintflow::store::Csr<'_> {
        self.inner.graph()
    }
    fn sample_nodes(
        &self,
        rng: &mut saintflow::sample::SampleRng,
        out: &mut Vec<u32>,
    ) -> Result<(), saintflow::sample::SampleError> {
        if self.flag.load(Ordering::Relaxed) {
            return Err(saintflow::sample::SampleError::Param(
                "interrupted (KeyboardInterrupt)".into(),
            ));
        }
        self.inner.sample_nodes(rng, out)
    }
}

/// What a sampling worker hands on: a drawn subgraph for the consumer to assemble (one
/// sampling thread: the consumer's core is otherwise idle), or the assembled batch (several:
/// the workers then have the cores, and the consumer only wraps arrays); or why not.
type Drawn = Result<Item, String>;

enum Item {
    Drawn(u64, Subgraph),
    Built(Batch),
}

impl Item {
    /// The batch, assembled here if the worker did not.
    fn batch(self, spec: &SamplerSpec) -> Result<Batch, String> {
        match self {
            Item::Drawn(index, sub) => spec.make(index, sub),
            Item::Built(b) => Ok(b),
        }
    }
}

/// What a sampler's batches are drawn from and assembled with, shared by its sampling
/// threads and its iterators.
pub(crate) struct SamplerSpec {
    pub(crate) store: Arc<GraphStore>,
    config: SamplerConfig,
    train_graph: bool,
    seed: u64,
    clip: usize,
    norm: Option<Arc<NormCounts>>,
    /// A link sampler's targets and negatives (None: node batches).
    link: Option<LinkSampling>,
    will_need: bool,
    pub(crate) buffers: Arc<Buffers>,
}

impl SamplerSpec {
    fn graph(&self) -> saintflow::store::Csr<'_> {
        if self.train_graph {
            self.store.train()
        } else {
            self.store.full()
        }
    }

    /// Subgraph `index`, drawn on a sampling worker, and assembled there when `build`.
    fn draw(&self, sampler: &dyn saintflow::sample::Sampler, index: u64, build: bool) -> Drawn {
        let mut sub = self.buffers.subgraphs.pop();
        sample_subgraph_into(sampler, self.seed, index, self.clip, &mut sub)
            .map_err(|e| e.to_string())?;
        self.attach(&mut sub, self.seed, index);
        Ok(match build {
            true => Item::Built(self.make(index, sub)?),
            false => Item::Drawn(index, sub),
        })
    }

    /// A link sampler's targets and negatives of subgraph `index` of `seed`, attached to
    /// `sub` (its targets out of its structure when `exclude_targets`); a node sampler's
    /// `sub` is left without (a recycled subgraph may carry an earlier batch's).
    fn attach(&self, sub: &mut Subgraph, seed: u64, index: u64) {
        sub.link = None;
        let Some(cfg) = &self.link else { return };
        let graph = self.graph();
        let weight = self
            .norm
            .as_deref()
            .map(|n| saint_target_weight(n, cfg.fraction, graph));
        attach_targets(
            sub,
            graph,
            cfg,
            seed,
            index,
            weight.as_ref().map(|w| w as &dyn Fn(u64) -> f32),
        );
    }

    fn make(&self, index: u64, mut sub: Subgraph) -> Result<Batch, String> {
        let (store, bufs) = (&self.store, &self.buffers);
        let f = store.n_features();
        if self.will_need {
            // A store larger than the memory: the batch's feature pages asked for at once
            // (a deep I/O queue) just before the gather. Asked for earlier, when the
            // subgraph is drawn, they are evicted again before use under a tight cap
            // (measured: 11 against 17 batches/s under 2 GiB).
            store.will_need_features(&sub.nodes);
        }
        // Every element is written by the gather, so a recycled buffer's old rows stay.
        let mut x = bufs.x.take_len(sub.n_nodes() * f);
        store
            .gather_features(&sub.nodes, &mut x)
            .map_err(|e| e.to_string())?;
        let (node_norm, edge_norm) = match &self.norm {
            Some(n) => {
                let (mut a, mut b) = (bufs.node_norm.take(), bufs.edge_norm.take());
                n.pyg_norms_into(&sub, &mut a, &mut b);
                (Some(a), Some(b))
            }
            None => (None, None),
        };
        // PyG's edge_index: the rows, then the columns, in one allocation.
        let mut edge_index = bufs.edge_index.take();
        edge_index.reserve(2 * sub.n_entries());
        push_rows(&sub.offsets, &mut edge_index);
        edge_index.extend(sub.indices.iter().map(|&c| i64::from(c)));
        let (mut roles, mut nodes, mut indptr) =
            (bufs.roles.take(), bufs.nodes.take(), bufs.indptr.take());
        roles.extend(sub.nodes.iter().map(|&v| store.role(v) as u8));
        nodes.extend(sub.nodes.iter().map(|&v| i64::from(v)));
        indptr.extend(sub.offsets.iter().map(|&o| i64::from(o)));
        let y = YData::of(store, &sub.nodes, bufs);
        // Pairs (local ids): the P targets, then target i's K negatives at P + i·K + j.
        let link = sub.link.take().map(|b| {
            let mut label_index = bufs.label_index.take();
            label_index.reserve(2 * b.len());
            label_index.extend(b.src.iter().map(|&v| i64::from(v)));
            label_index.extend(b.dst.iter().map(|&v| i64::from(v)));
            let mut label = bufs.label.take();
            label.extend((0..b.len()).map(|i| if b.is_positive(i) { 1.0 } else { 0.0 }));
            // Without pre-sampling the engine weighs each target 1/P (the step's mean):
            // not handed out, the consumer's mean is that.
            let weight = self.norm.is_some().then(|| {
                let mut w = bufs.label_weight.take();
                w.extend_from_slice(&b.weights);
                w
            });
            LinkArrays {
                label_index,
                label,
                weight,
                positives: b.positives,
                k: b.k,
            }
        });
        // A typed store's batch also by node type and relation (`Batch.to_hetero`).
        let hetero = if store.is_typed() {
            saintflow::sample::attach_relations(store, &mut sub).map_err(|e| e.to_string())?;
            Some(Box::new(Hetero::of(store, &sub, edge_norm.as_deref())?))
        } else {
            None
        };
        bufs.subgraphs.give(sub);
        Ok(Batch {
            index,
            roles,
            y,
            nodes,
            indptr,
            edge_index,
            x,
            node_norm,
            edge_norm,
            link,
            hetero,
        })
    }
}

/// GraphSAINT subgraphs as batches (see `saintflow.SaintSampler`).
#[pyclass(module = "saintflow._native", frozen)]
pub(crate) struct Sampler {
    spec: Arc<SamplerSpec>,
    threads: usize,
    num_steps: u64,
    epoch: std::sync::atomic::AtomicU64,
    pre_sampled: u64,
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (store, kind, graph, seed, threads, num_steps, sample_coverage, clip, keys, link = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: &Store,
        kind: &str,
        graph: &str,
        seed: u64,
        threads: Option<usize>,
        num_steps: Option<u64>,
        sample_coverage: f64,
        clip: Option<usize>,
        keys: &Bound<'_, PyDict>,
        link: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Sampler> {
        guard(|| {
            let store = store.get()?;
            let link = link.map(link_sampling).transpose()?;
            let also: &[&str] = if link.is_some() { &LINK_KEYS } else { &[] };
            let config = sampler_config(kind, keys, also)?;
            let train_graph = match graph {
                "train" => true,
                "full" => false,
                other => {
                    return Err(SampleError::new_err(format!(
                    "graph = {other:?}: expected \"train\" (inductive) or \"full\" (transductive)"
                )))
                }
            };
            if !(0.0..=MAX_COVERAGE).contains(&sample_coverage) {
                return Err(PyValueError::new_err(format!(
                    "sample_coverage = {sample_coverage}: expected 0 ..= {MAX_COVERAGE} \
                     (0: no normalisation; PyG's examples use 100)"
                )));
            }
            if num_steps == Some(0) {
                return Err(PyValueError::new_err(
                    "num_steps = 0: expected at least 1 (None: enough batches to cover the \
                     training nodes once)",
                ));
            }
            let whole = config.whole_graph();
            let clip = match clip {
                Some(0) => {
                    return Err(SampleError::new_err(
                        "clip = 0: expected ≥ 1 (1: no clipping)",
                    ))
                }
                Some(c) => c,
                None => config.kind().default_clip(),
            };
            let threads = threads_of(threads)?.get();
            // Each of the 2 × threads subgraphs in flight has a draw buffer of the sizes'
            // product (roots × walk length, ...): checked before one is drawn.
            let draw = saintflow::compile::memory::sampler_bytes(&config);
            fits(
                || {
                    format!(
                        "{} sampler: {} subgraphs in flight with draw buffers of {}",
                        config.name(),
                        2 * threads,
                        saintflow::machine::human(draw)
                    )
                },
                draw.saturating_mul(2 * threads as u128),
            )?;
            if beyond_memory(&store) {
                // Rows and feature rows read at random (issue 56): no read-ahead window
                // around each page fault; the CSR read whole when it fits.
                store.advise_sampling(train_graph);
            }
            let mut spec = SamplerSpec {
                store: store.clone(),
                config,
                train_graph,
                seed,
                clip,
                norm: None,
                link,
                will_need: beyond_memory(&store),
                // Enough for the batches in flight (a chunk being drawn, the channel, the
                // consumer's) before a freed buffer is dropped.
                buffers: Arc::new(Buffers::new(4 * threads + 4)),
            };
            let pool = pool(NonZeroUsize::new(threads).expect("threads_of gives at least 1"))?;
            // Subgraph 0 sizes the pre-sampling (coverage × N nodes drawn, as PyG) and the
            // default steps per epoch (the training nodes once, as `saintflow train`).
            // Ctrl-C stops the pre-sampling at its next subgraph (`Cancellable`).
            let flag = AtomicBool::new(false);
            let r = run_interruptible(py, &flag, || {
                pool.install(|| -> Result<(Option<NormCounts>, u64, u64), String> {
                    let inner = spec
                        .config
                        .build(&spec.store, spec.graph())
                        .map_err(|e| e.to_string())?;
                    let sampler = Cancellable {
                        inner: inner.as_ref(),
                        flag: &flag,
                    };
                    let s0 =
                        sample_subgraph(&sampler, seed, 0, spec.clip).map_err(|e| e.to_string())?;
                    let n = spec.graph().n_nodes() as f64;
                    let size = s0.n_nodes().max(1) as f64;
                    let n_pre = if whole || sample_coverage == 0.0 {
                        0
                    } else {
                        (sample_coverage * n / size).ceil().max(1.0) as u64
                    };
                    let norm = if n_pre == 0 {
                        None
                    } else {
                        Some(
                            NormCounts::estimate(
                                &sampler,
                                n_pre,
                                hash3(seed, stream::NORM, 0),
                                spec.clip,
                            )
                            .map_err(|e| e.to_string())?,
                        )
                    };
                    let n_train = spec.store.role_count(Role::Train) as f64;
                    let steps = match &spec.link {
                        _ if whole => 1,
                        // A link epoch scores every edge of the sampled graph once in
                        // expectation, as `saintflow train` counts it: the graph's entries
                        // over the targets' share of a subgraph's (the pre-sampling's mean,
                        // else subgraph 0's).
                        Some(cfg) => {
                            let per_step = match &norm {
                                Some(c) => c.edge.total() as f64 / c.meta.subgraphs.max(1) as f64,
                                None => s0.n_entries() as f64,
                            };
                            let entries = spec.graph().n_entries() as f64;
                            (entries / (cfg.fraction * per_step).max(1.0))
                                .ceil()
                                .max(1.0) as u64
                        }
                        None => (n_train / size).ceil().max(1.0) as u64,
                    };
                    Ok((norm, n_pre, steps))
                })
            })?;
            let (norm, pre_sampled, steps) = r.map_err(SampleError::new_err)?;
            spec.norm = norm.map(Arc::new);
            Ok(Sampler {
                spec: Arc::new(spec),
                threads,
                num_steps: num_steps.unwrap_or(steps),
                epoch: Default::default(),
                pre_sampled,
            })
        })
    }

    #[getter]
    fn num_steps(&self) -> u64 {
        self.num_steps
    }
    #[getter]
    fn pre_sampled(&self) -> u64 {
        self.pre_sampled
    }
    #[getter]
    fn threads(&self) -> usize {
        self.threads
    }
    #[getter]
    fn clip(&self) -> usize {
        self.spec.clip
    }
    #[getter]
    fn kind(&self) -> &'static str {
        self.spec.config.name()
    }
    /// A link sampler's settings by their plan keys (None for a node sampler).
    #[getter]
    fn link<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(cfg) = &self.spec.link else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("targets", cfg.fraction)?;
        d.set_item("negatives", cfg.negatives)?;
        d.set_item("negative_sampler", cfg.dist.name())?;
        d.set_item("negative_ends", cfg.ends.name())?;
        d.set_item("exclude_true", cfg.exclude_true)?;
        d.set_item("exclude_targets", cfg.exclude_targets)?;
        Ok(Some(d))
    }

    /// C_v of the pre-sampling (`None` without normalisation), for checks.
    fn node_counts<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<u32>>>> {
        let Some(norm) = self.spec.norm.as_ref() else {
            return Ok(None);
        };
        let n = self.spec.graph().n_nodes();
        let mut out = try_vec("SaintSampler.node_counts", n, 0u32)?;
        for (v, c) in out.iter_mut().enumerate() {
            *c = norm.node_count(v as u32);
        }
        Ok(Some(out.into_pyarray(py)))
    }

    /// C_{u,v} of every entry of the sampled graph's CSR (`None` without normalisation).
    fn edge_counts<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<u32>>>> {
        let Some(norm) = self.spec.norm.as_ref() else {
            return Ok(None);
        };
        let e = self.spec.graph().n_entries();
        let mut out = try_vec("SaintSampler.edge_counts", e, 0u32)?;
        for (k, c) in out.iter_mut().enumerate() {
            *c = norm.edge_count(k as u64);
        }
        Ok(Some(out.into_pyarray(py)))
    }

    /// The seed of the pre-sampling: its subgraphs are `subgraph(i, seed=this)`.
    #[getter]
    fn norm_seed(&self) -> u64 {
        hash3(self.spec.seed, stream::NORM, 0)
    }

    /// Subgraph `index` as a batch dict (for checks; iteration is the fast path).
    #[pyo3(signature = (index, seed = None))]
    fn subgraph<'py>(
        &self,
        py: Python<'py>,
        index: u64,
        seed: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let spec = self.spec.clone();
            let b = on_pool(py, move || {
                let sampler = spec
                    .config
                    .build(&spec.store, spec.graph())
                    .map_err(|e| e.to_string())?;
                let seed = seed.unwrap_or(spec.seed);
                let mut sub = sample_subgraph(sampler.as_ref(), seed, index, spec.clip)
                    .map_err(|e| e.to_string())?;
                spec.attach(&mut sub, seed, index);
                spec.make(index, sub)
            })?;
            batch_dict(py, &self.spec, b.map_err(SampleError::new_err)?)
        })
    }

    /// The batches of the next epoch: subgraphs `e·num_steps ..` of epoch `e`, drawn
    /// ahead on `threads` threads while Python consumes them.
    fn epoch_iter(&self) -> PyResult<BatchIter> {
        let e = self.epoch.fetch_add(1, Ordering::Relaxed);
        let first = e.checked_mul(self.num_steps).ok_or_else(|| {
            PyValueError::new_err(format!(
                "epoch {e} of {} steps: past the last subgraph index (2^64 − 1)",
                self.num_steps
            ))
        })?;
        self.iter_range(first, self.num_steps)
    }

    /// Batches `first .. first + count`, in order.
    fn iter_range(&self, first: u64, count: u64) -> PyResult<BatchIter> {
        if first.checked_add(count).is_none() {
            return Err(PyValueError::new_err(format!(
                "batches {first} + {count}: past the last subgraph index (2^64 − 1)"
            )));
        }
        let (rx, stop) = self.produce(first, count)?;
        Ok(BatchIter {
            spec: self.spec.clone(),
            rx: Mutex::new(Some(rx)),
            stop,
            left: std::sync::atomic::AtomicU64::new(count),
            pid: std::process::id(),
        })
    }

    /// Batches `first .. first + count` drawn as `iter_range` draws them but consumed in
    /// Rust (nothing handed to Python): seconds taken. What the Python loop adds is the
    /// iteration's time beyond this (`scripts/sampler_bench.py`).
    fn _drain(&self, py: Python<'_>, first: u64, count: u64) -> PyResult<f64> {
        if first.checked_add(count).is_none() {
            return Err(PyValueError::new_err("first + count: past 2^64 − 1"));
        }
        let (rx, _stop) = self.produce(first, count)?;
        let spec = self.spec.clone();
        let start = std::time::Instant::now();
        py.detach(move || -> Result<f64, String> {
            for _ in 0..count {
                let item = rx
                    .recv()
                    .map_err(|_| "the sampling thread stopped early".to_string())??;
                // Freed at once, as a Python loop frees the batch before it.
                std::hint::black_box(item.batch(&spec)?).give_back(&spec.buffers);
            }
            Ok(start.elapsed().as_secs_f64())
        })
        .map_err(SampleError::new_err)
    }

    fn __len__(&self) -> usize {
        self.num_steps as usize
    }
}

impl Sampler {
    /// Starts the sampling thread for batches `first .. first + count`: a rayon pool of
    /// `threads` workers drawing chunks of 2 × threads batches in parallel, sent in index
    /// order into a channel of that many; a set `stop` (the iterator dropped) ends it.
    #[allow(clippy::type_complexity)]
    fn produce(&self, first: u64, count: u64) -> PyResult<(Receiver<Drawn>, Arc<AtomicBool>)> {
        let (tx, rx) = sync_channel::<Drawn>(2 * self.threads);
        let stop = Arc::new(AtomicBool::new(false));
        let (spec, threads, stop2) = (self.spec.clone(), self.threads, stop.clone());
        let pool = pool(NonZeroUsize::new(threads).expect("threads_of gave at least 1"))?;
        std::thread::Builder::new()
            .name("saintflow-sampler".into())
            .spawn(move || {
                // The whole loop on the pool (its first worker sends, between chunks, what
                // the others drew with it): the build scans the graph with a parallel
                // iterator, and off the pool that would be rayon's global pool, whose
                // threads a forked child does not have.
                pool.install(|| {
                    let sampler = match spec.config.build(&spec.store, spec.graph()) {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let sampler = sampler.as_ref();
                    let chunk = (2 * threads) as u64;
                    let mut next = first;
                    while next < first + count && !stop2.load(Ordering::Relaxed) {
                        let k = chunk.min(first + count - next);
                        let batches: Vec<Drawn> = (next..next + k)
                            .into_par_iter()
                            .map(|i| {
                                catch_unwind(AssertUnwindSafe(|| {
                                    spec.draw(sampler, i, threads > 1)
                                }))
                                .unwrap_or_else(|_| {
                                    Err("internal error: the sampler panicked (a bug in saintflow)"
                                        .into())
                                })
                            })
                            .collect();
                        for b in batches {
                            let failed = b.is_err();
                            if tx.send(b).is_err() || failed {
                                return;
                            }
                        }
                        next += k;
                    }
                })
            })
            .map_err(|e| {
                SaintflowError::new_err(format!("cannot start the sampling thread: {e}"))
            })?;
        Ok((rx, stop))
    }
}

/// Whether the store's sections exceed the memory this process may use (the machine's, or
/// a lower cgroup limit): measured on a Kronecker scale-22 store of 2.6 GB, asking for a
/// batch's feature pages at once is 4.8× faster under a 2 GiB cap and 2.2× slower when the
/// store fits (the kernel's readahead then fills the cache faster; BENCHMARKS.md).
fn beyond_memory(store: &GraphStore) -> bool {
    saintflow::machine::MemoryLimit::Detect
        .resolve()
        .is_some_and(|(bytes, _)| saintflow::train::trainer::store_bytes(store) > bytes)
}

/// The batches of one epoch, produced ahead by a sampling thread.
#[pyclass(module = "saintflow._native")]
pub(crate) struct BatchIter {
    spec: Arc<SamplerSpec>,
    rx: Mutex<Option<Receiver<Drawn>>>,
    stop: Arc<AtomicBool>,
    left: std::sync::atomic::AtomicU64,
    /// The process whose thread produces the batches: in a forked child that thread does
    /// not exist, and waiting for it would hang.
    pid: u32,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        guard(|| self.next_batch(py))
    }

    fn __len__(&self) -> usize {
        self.left.load(Ordering::Relaxed) as usize
    }
}

impl BatchIter {
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.left.load(Ordering::Relaxed) == 0 {
            return Ok(None);
        }
        if std::process::id() != self.pid {
            return Err(SampleError::new_err(format!(
                "this epoch's iterator was started in process {} before a fork: its sampling \
                 thread is not in this process; start a new iteration here (iter(sampler))",
                self.pid
            )));
        }
        let mut slot = self
            .rx
            .lock()
            .map_err(|_| SaintflowError::new_err("the batch queue was poisoned"))?;
        // Wait with the GIL released, waking to let Ctrl-C through.
        let got = loop {
            let rx = slot.take().ok_or_else(|| {
                SampleError::new_err("the sampling thread stopped early (an earlier error)")
            })?;
            let (r, rx) = py.detach(move || (rx.recv_timeout(Duration::from_millis(100)), rx));
            *slot = Some(rx);
            match r {
                Ok(b) => break b,
                Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(RecvTimeoutError::Disconnected) => {
                    *slot = None;
                    return Err(SampleError::new_err("the sampling thread stopped early"));
                }
            }
        };
        self.left.fetch_sub(1, Ordering::Relaxed);
        let item = got.map_err(SampleError::new_err)?;
        // With one sampling thread the batch is assembled here (features gathered, ids
        // widened), with the GIL released, while the worker draws the next subgraph.
        let spec = self.spec.clone();
        let b = py
            .detach(move || item.batch(&spec))
            .map_err(SampleError::new_err)?;
        Ok(Some(batch_dict(py, &self.spec, b)?))
    }
}

impl Drop for BatchIter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if std::process::id() != self.pid {
            // A parent's channel, maybe locked by its (absent) sampling thread: left as is.
            if let Some(rx) = self.rx.get_mut().ok().and_then(Option::take) {
                std::mem::forget(rx);
            }
        }
    }
}

/// The sampler kinds and their parameters with defaults: `{kind: {param: default}}`.
#[pyfunction]
pub(crate) fn sampler_kinds(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for k in KINDS {
        let p = PyDict::new(py);
        for f in k.fields {
            p.set_item(f.name, (f.default)())?;
        }
        d.set_item(k.name, p)?;
    }
    Ok(d)
}
