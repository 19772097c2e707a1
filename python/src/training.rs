//! Training and inference from Python, each as its command does it: `_train` (a GNN plan,
//! `TrainOptions` as `saintflow train` sets them; checkpoint and log guarded as the CLI's),
//! `_embed` (`saintflow embed`: a checkpoint's parameters, the forward pass to a `.npy`),
//! `_train_embedding` (an `[embedding]` plan) and `_eval_embedding` (`eval-embedding`).
//! Every long call lets Ctrl-C through: a run stops at its next step and raises
//! `KeyboardInterrupt`, its checkpoint resumable.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::time::Duration;

use numpy::PyUntypedArrayMethods;
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use saintflow::progress::Progress;
use saintflow::store::GraphStore;
use saintflow::train::TrainOptions;

use crate::error::{guard, lib, SaintflowError, TrainError};
use crate::ops::registry;
use crate::plan::Plan;
use crate::runtime::{default_pool, mib_bytes, pool, run_interruptible, threads_of};
use crate::store::Store;

/// The file a checkpoint argument reads, as an input an output must not replace.
fn checkpoint_files(arg: &std::path::Path) -> Vec<(&'static str, PathBuf)> {
    vec![(
        "checkpoint",
        saintflow::train::checkpoint::checkpoint_file(arg),
    )]
}

/// Checks an output path of a call by the command line's rule, through the library's one
/// guard ([`saintflow::atomic::OutputGuard`], issue 55 item 2): never one of `inputs` (the
/// plan, the checkpoint's files) nor a file inside a graph store, never anything but a
/// regular file (a directory, device, FIFO or symbolic link is refused even with `force`),
/// an existing regular file only with `force=True` (or a log's `resume=True`), and then
/// only a file `recognise` says saintflow wrote there (`what`): never a file of the user's.
fn check_output(
    output: &std::path::Path,
    inputs: &[(&str, PathBuf)],
    force: bool,
    what: &'static str,
    recognise: saintflow::atomic::Recognise,
) -> PyResult<()> {
    let mut guard = saintflow::atomic::OutputGuard::new();
    for (name, path) in inputs {
        guard.input(name, path);
    }
    guard
        .file_or("output", output, force, "pass force=True to replace it")
        .ours(what, recognise);
    guard
        .check()
        .map_err(|e| SaintflowError::new_err(e.to_string().replace("--force", "force=True")))
}

/// The directories above an output of `_train` (its checkpoint, its log) made as the CLI
/// makes them, a failure a `TrainError` naming the file.
fn parent_dirs(file: &std::path::Path) -> PyResult<()> {
    saintflow::atomic::create_parent_dirs(file).map_err(|e| {
        TrainError::new_err(format!(
            "{}: cannot create its directory: {e}",
            file.display()
        ))
    })
}

/// Trains a GNN plan (see `saintflow.train`); returns a dict of the outcome.
#[pyfunction]
#[pyo3(signature = (plan, store, epochs, seed, threads, checkpoint, resume, force, log, progress, max_steps))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _train<'py>(
    py: Python<'py>,
    plan: &Plan,
    store: &Store,
    epochs: Option<usize>,
    seed: u64,
    threads: Option<usize>,
    checkpoint: Option<PathBuf>,
    resume: bool,
    force: bool,
    log: Option<PathBuf>,
    progress: bool,
    max_steps: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let Some(p) = plan.gnn() else {
            return Err(TrainError::new_err(format!(
                "{}: an [embedding] plan: use saintflow.train_embedding",
                plan.path.display()
            )));
        };
        let flag = AtomicBool::new(false);
        let store_arc = store.get()?;
        let store_ref: &GraphStore = &store_arc;
        let mut opts = TrainOptions::new(p, store_ref)
            .registry(registry()?)
            .seed(seed)
            .epochs(epochs)
            .resume(resume)
            .max_steps(max_steps)
            .progress(Progress::new(!progress))
            .graph_name(store_ref.path().display().to_string())
            .interrupt(&flag);
        if let Some(t) = threads {
            opts = opts.threads(threads_of(Some(t))?.get());
        }
        if let Some(c) = &checkpoint {
            // As `saintflow train`: a finished or interrupted run's checkpoint is not
            // replaced silently by a fresh run.
            let file = saintflow::train::checkpoint::checkpoint_file(c);
            if !resume && !force {
                lib(saintflow::train::checkpoint::refuse_replacing(
                    &file,
                    "resume=True",
                    "force=True",
                ))?;
            }
            // `checkpoint="run/"` names a directory that the run makes, as the CLI's.
            parent_dirs(&file)?;
            opts = opts.checkpoint(file);
        }
        if let Some(l) = &log {
            // `--log`'s rule (issue 55 item 2): never the plan, the checkpoint or a store's
            // file; an existing log is continued by `resume=True` or replaced by
            // `force=True`, never truncated silently by a fresh run.
            let mut inputs = vec![("plan", plan.path.clone())];
            if let Some(c) = &checkpoint {
                inputs.extend(checkpoint_files(c));
            }
            check_output(
                l,
                &inputs,
                force || resume,
                "a training log",
                saintflow::atomic::written::log,
            )?;
            parent_dirs(l)?;
        }
        if let Some(l) = &log {
            opts = opts.log(l.clone());
        }
        // Run inside our fork-safe pool, as every native call of the package does.
        let pool = default_pool()?;
        let result = run_interruptible(py, &flag, || pool.install(|| opts.train()))?;
        let out = lib(result)?;
        let d = PyDict::new(py);
        let metrics =
            |m: Option<saintflow::metrics::Metrics>| -> PyResult<Option<Bound<'py, PyDict>>> {
                m.map(|m| {
                    let d = PyDict::new(py);
                    d.set_item("accuracy", m.accuracy)?;
                    d.set_item("f1_micro", m.f1_micro)?;
                    d.set_item("f1_macro", m.f1_macro)?;
                    if let Some(loss) = m.loss {
                        d.set_item("loss", loss)?;
                    }
                    // A multi-label store's ROC-AUC (OGB's ogbn-proteins figure).
                    if let Some(a) = m.roc_auc {
                        d.set_item("roc_auc", a)?;
                    }
                    // A link plan's figures (None where its split cannot give one), as the
                    // log writes them.
                    if let Some(l) = m.link {
                        for (name, v) in l.figures() {
                            d.set_item(name, v)?;
                        }
                        d.set_item("negatives", l.negatives)?;
                        d.set_item("negative_pairs", l.negative_pairs)?;
                        d.set_item("positives", l.positives)?;
                    }
                    Ok(d)
                })
                .transpose()
            };
        d.set_item("val", metrics(out.val)?)?;
        d.set_item("test", metrics(out.test)?)?;
        d.set_item("best_epoch", out.best_epoch)?;
        d.set_item("epochs", out.epochs)?;
        d.set_item("steps", out.steps)?;
        d.set_item("stopped_at", out.stopped_at)?;
        let records = PyList::empty(py);
        for r in &out.records {
            records.append(
                serde_json::to_string(r).map_err(|e| SaintflowError::new_err(e.to_string()))?,
            )?;
        }
        d.set_item("records_json", records)?;
        Ok(d)
    })
}

/// The store's node embedding by a GNN plan's forward pass with a checkpoint's parameters
/// (`saintflow embed`), written to `output` as an `[N, width]` f32 `.npy`; returns
/// `(rows, cols, why in memory)`.
#[pyfunction]
#[pyo3(signature = (plan, store, checkpoint, output, last, logits, threads, memory_mib, scratch_dir, force = false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _embed(
    py: Python<'_>,
    plan: &Plan,
    store: &Store,
    checkpoint: PathBuf,
    output: PathBuf,
    last: bool,
    logits: bool,
    threads: Option<usize>,
    memory_mib: usize,
    scratch_dir: Option<PathBuf>,
    force: bool,
) -> PyResult<(usize, usize, Option<String>)> {
    guard(|| {
        let Some(p) = plan.gnn() else {
            return Err(TrainError::new_err(format!(
                "{}: an [embedding] plan is trained, not evaluated: saintflow.train returns its embedding",
                plan.path.display()
            )));
        };
        let store_arc = store.get()?;
        let store: &GraphStore = &store_arc;
        let memory_bytes = mib_bytes(memory_mib)?;
        let mut inputs: Vec<(&str, PathBuf)> = vec![("plan", plan.path.clone())];
        inputs.extend(checkpoint_files(&checkpoint));
        check_output(
            &output,
            &inputs,
            force,
            "a .npy file",
            saintflow::atomic::written::npy,
        )?;
        let label = plan.path.display().to_string();
        let params = lib(saintflow::train::checkpoint::params_for(
            &checkpoint,
            p,
            &label,
            store,
            last,
        ))?;
        let opts = saintflow::infer::InferOptions {
            memory_bytes,
            scratch_dir: scratch_dir.unwrap_or_else(std::env::temp_dir),
            ..Default::default()
        };
        let which = if logits {
            saintflow::infer::Output::Logits
        } else {
            saintflow::infer::Output::Embedding
        };
        let threads = threads_of(threads)?;
        let pool = pool(threads)?;
        let registry = registry()?;
        let r = py.detach(|| {
            pool.install(|| {
                let runner = saintflow::exec::Executor::new(threads);
                saintflow::infer::embed(store, p, &registry, &params, &runner, opts, which, &output)
                    .map_err(saintflow::train::TrainError::from)
            })
        });
        let e = lib(r)?;
        Ok((e.rows, e.cols, e.in_memory))
    })
}

/// Trains an `[embedding]` plan (`saintflow train` of a DeepWalk/LINE/node2vec plan),
/// publishing the vertex matrix to `output`; returns the run's summary as JSON.
#[pyfunction]
#[pyo3(signature = (plan, store, output, seed, threads, epochs, memory_mib, holdout, scratch_dir, progress, force = false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _train_embedding(
    py: Python<'_>,
    plan: &Plan,
    store: &Store,
    output: PathBuf,
    seed: u64,
    threads: Option<usize>,
    epochs: Option<f64>,
    memory_mib: usize,
    holdout: f64,
    scratch_dir: Option<PathBuf>,
    progress: bool,
    force: bool,
) -> PyResult<String> {
    guard(|| {
        let Some(ep) = plan.embedding() else {
            return Err(TrainError::new_err(format!(
                "{}: a GNN plan: saintflow.train trains it",
                plan.path.display()
            )));
        };
        if !(0.0..1.0).contains(&holdout) {
            return Err(TrainError::new_err(format!(
                "holdout = {holdout}: expected a fraction in [0, 1)"
            )));
        }
        if let Some(e) = epochs.filter(|e| !(*e > 0.0 && e.is_finite())) {
            return Err(TrainError::new_err(format!(
                "epochs = {e}: expected a positive number"
            )));
        }
        let store_arc = store.get()?;
        check_output(
            &output,
            &[("plan", plan.path.clone())],
            force,
            "a .npy file",
            saintflow::atomic::written::npy,
        )?;
        let scratch = scratch_dir.unwrap_or_else(|| match output.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::env::temp_dir(),
        });
        let opts = saintflow::embedding::EmbedOptions {
            seed,
            threads: Some(threads_of(threads)?),
            memory_bytes: mib_bytes(memory_mib)?,
            output: Some(output),
            scratch_dir: scratch,
            epochs,
            progress: Progress::new(!progress),
            holdout,
            memory_limit: saintflow::machine::MemoryLimit::Detect,
            device: saintflow::embedding::Device::Cpu,
        };
        let flag = AtomicBool::new(false);
        let store: &GraphStore = &store_arc;
        let r = run_interruptible(py, &flag, || {
            saintflow::embedding::train_interruptible(ep, store, &opts, &flag)
        })?;
        let out = lib(r)?;
        serde_json::to_string(&out).map_err(|e| SaintflowError::new_err(e.to_string()))
    })
}

/// Scores an embedding (`saintflow eval-embedding`): node classification at each labelled
/// fraction, or link prediction with `holdout`; returns JSON.
#[pyfunction]
#[pyo3(signature = (embedding, store, ratios, repeats, seed, c, normalize, holdout, threads, split))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _eval_embedding(
    py: Python<'_>,
    embedding: numpy::PyReadonlyArray2<'_, f32>,
    store: &Store,
    ratios: Vec<f64>,
    repeats: usize,
    seed: u64,
    c: f64,
    normalize: bool,
    holdout: Option<f64>,
    threads: Option<usize>,
    split: Option<String>,
) -> PyResult<String> {
    use saintflow::embedding::eval::{score, ClassifyOptions, Embedding, Scores, Scoring};
    guard(|| {
        let shape = embedding.shape();
        let (rows, dim) = (shape[0], shape[1]);
        let src = embedding.as_slice()?;
        let mut data: Vec<f32> = Vec::new();
        data.try_reserve_exact(src.len()).map_err(|_| {
            PyMemoryError::new_err(format!(
                "eval_embedding: cannot allocate a copy of the {rows} × {dim} embedding"
            ))
        })?;
        data.extend_from_slice(src);
        if let Some(i) = data.iter().position(|x| !x.is_finite()) {
            return Err(TrainError::new_err(format!(
                "embedding: row {}, column {} is not finite",
                i / dim.max(1),
                i % dim.max(1)
            )));
        }
        let emb = Embedding { data, rows, dim };
        let scoring = match (holdout, split.as_deref()) {
            (Some(_), Some(_)) => {
                return Err(TrainError::new_err("give holdout or split, not both"));
            }
            (Some(fraction), None) => Scoring::Link { fraction, seed },
            (None, Some("store")) => Scoring::Split {
                opts: ClassifyOptions {
                    c,
                    ..ClassifyOptions::default()
                },
                normalize,
            },
            (None, Some(other)) => {
                return Err(TrainError::new_err(format!(
                    "split = {other:?}: the one split is \"store\" (its training and test nodes)"
                )));
            }
            (None, None) => Scoring::Classify {
                opts: ClassifyOptions {
                    ratios,
                    repeats,
                    seed,
                    c,
                    ..ClassifyOptions::default()
                },
                normalize,
            },
        };
        let store = store.get()?;
        let threads = threads_of(threads)?;
        let pool = pool(threads)?;
        // On a thread of its own, so that Ctrl-C returns at once (issue 55 item 11): the
        // scoring has no stop flag, so an interrupted one finishes in the background and
        // its result is dropped (it writes nothing).
        let (tx, rx) = sync_channel(1);
        std::thread::Builder::new()
            .name("saintflow-eval".into())
            .spawn(move || {
                let r = catch_unwind(AssertUnwindSafe(|| {
                    pool.install(|| score(emb, "embedding", &store, &scoring))
                }));
                let _ = tx.send(r);
            })
            .map_err(|e| SaintflowError::new_err(format!("cannot start a thread: {e}")))?;
        let mut rx = rx;
        let r = loop {
            let (got, back) = py.detach(move || (rx.recv_timeout(Duration::from_millis(50)), rx));
            rx = back;
            match got {
                Ok(Ok(r)) => break r,
                Ok(Err(_)) => return Err(SaintflowError::new_err(
                    "internal error (a bug in saintflow, please report it): the scoring panicked",
                )),
                Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(SaintflowError::new_err("the scoring thread stopped early"))
                }
            }
        };
        let json = match lib(r)? {
            Scores::Link { auc, edges } => {
                serde_json::json!({"auc": auc, "held_out_edges": edges, "fraction": holdout})
            }
            Scores::Classify(rows) => serde_json::json!(rows),
            Scores::Split(s) => serde_json::json!(s),
        };
        Ok(json.to_string())
    })
}
