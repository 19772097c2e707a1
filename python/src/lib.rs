//! `saintflow._native`: the Rust half of the Python package (issue 29). Thin: every
//! function converts arguments, releases the GIL, calls the library and converts the
//! result; what the package adds in Python (argument shapes, masks, PyG/torch adapters)
//! is in `python/saintflow/`. No panic crosses into Python: every entry point runs under
//! `guard`, which turns one into `SaintflowError`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use numpy::ndarray::{Array2, ArrayView1, ArrayView2, Ix1, Ix2};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rayon::prelude::*;

use saintflow::ir::NodeId;
use saintflow::op::{row_wise, Attr, GradBuilder, MatMut, MatRef, OpError, Registry, RowWise};
use saintflow::plan::Plan as RustPlan;
use saintflow::progress::Progress;
use saintflow::sample::config::{self, KINDS};
use saintflow::sample::params::{FieldError, Input};
use saintflow::sample::{
    sample_subgraph, sample_subgraph_into, NormCounts, SamplerConfig, Subgraph,
};
use saintflow::seed::{hash3, stream};
use saintflow::store::import::{
    import_arrays_with, ArrayGraph, ArrayLabels, Edges, TrainGraphMode,
};
use saintflow::store::{GraphStore, Labels, PrivateSection, Role, SectionId};
use saintflow::train::{TrainError as RustTrainError, TrainOptions};

create_exception!(
    _native,
    SaintflowError,
    PyException,
    "Every error saintflow raises."
);
create_exception!(
    _native,
    PlanError,
    SaintflowError,
    "A plan file or override that cannot be used: `.file`, `.line`, `.col` say where."
);
create_exception!(
    _native,
    StoreError,
    SaintflowError,
    "A store that cannot be opened, read or written."
);
create_exception!(
    _native,
    SampleError,
    SaintflowError,
    "A sampler that cannot be built or run."
);
create_exception!(
    _native,
    TrainError,
    SaintflowError,
    "Training or inference that failed."
);

/// The Python exception of a library error, with the message the CLI prints.
fn to_py(e: saintflow::Error) -> PyErr {
    use saintflow::Error as E;
    match e {
        E::Plan(p) | E::Train(RustTrainError::Plan(p)) => plan_error(p),
        E::Store(s) | E::Train(RustTrainError::Store(s)) => StoreError::new_err(s.to_string()),
        E::Sample(s) | E::Train(RustTrainError::Sample(s)) => SampleError::new_err(s.to_string()),
        e @ (E::Train(_) | E::Ir(_) | E::Op(_) | E::Embed(_)) => TrainError::new_err(e.to_string()),
        e => SaintflowError::new_err(e.to_string()),
    }
}

fn plan_error(p: saintflow::plan::PlanError) -> PyErr {
    Python::attach(|py| {
        let err = PlanError::new_err(p.to_string());
        let v = err.value(py);
        // Attributes on a fresh exception object cannot fail short of memory.
        let _ = v.setattr("file", p.file.clone());
        let _ = v.setattr("line", p.line);
        let _ = v.setattr("col", p.col);
        let _ = v.setattr("what", p.what.clone());
        err
    })
}

/// Runs `f`, turning a Rust panic into `SaintflowError` (the interpreter survives).
fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(SaintflowError::new_err(format!(
                "internal error (a bug in saintflow, please report it): {what}"
            )))
        }
    }
}

fn lib<T, E: Into<saintflow::Error>>(r: Result<T, E>) -> PyResult<T> {
    r.map_err(|e| to_py(e.into()))
}

/// The base object of a view of a store's section: its own copy-on-write map of the
/// section's file (`GraphStore::map_private`). numpy sees the view read-only; a writer that
/// ignores the flag (`torch.from_numpy`) writes this process's private pages, never the
/// store, and cannot fault (issue 55 item 11: it was a segmentation fault through the
/// store's read-only map). The map is independent of the `Store`: a view outlives
/// `Store.close()`.
#[pyclass(module = "saintflow._native", frozen)]
struct SectionMap(PrivateSection);

/// Section `id` of `store` mapped privately, as the base of the views made of it.
fn section_map<'py>(
    py: Python<'py>,
    store: &GraphStore,
    id: SectionId,
) -> PyResult<Bound<'py, PyAny>> {
    let m = lib(py.detach(|| store.map_private(id)))?;
    Ok(Bound::new(py, SectionMap(m))?.into_any())
}

/// A read-only numpy view of the section mapped by `owner` (a [`SectionMap`]), no copy.
fn view1<'py, T: numpy::Element + bytemuck::Pod>(
    owner: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    let map = owner.cast::<SectionMap>()?.get();
    let data: &[T] = lib(map.0.as_slice())?;
    let v = ArrayView1::from(data);
    // SAFETY: `data` lives in `owner`'s private map, which `owner` (the array's base) keeps
    // alive and never moves; the map is writable (copy-on-write), so even a write that
    // ignores the read-only flag set below touches only this process's pages.
    let a = unsafe { PyArray1::borrow_from_array(&v, owner.clone()) };
    a.getattr("flags")?.setattr("writeable", false)?;
    Ok(a)
}

fn view2<'py, T: numpy::Element + bytemuck::Pod>(
    owner: &Bound<'py, PyAny>,
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    let map = owner.cast::<SectionMap>()?.get();
    let data: &[T] = lib(map.0.as_slice())?;
    let v = ArrayView2::from_shape((rows, cols), data)
        .map_err(|e| SaintflowError::new_err(format!("view of {rows} × {cols}: {e}")))?;
    // SAFETY: as in `view1`.
    let a = unsafe { PyArray2::borrow_from_array(&v, owner.clone()) };
    a.getattr("flags")?.setattr("writeable", false)?;
    Ok(a)
}

/// The machine's cores (at least 1).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A `threads` argument as a worker count: `None` one per core; 0 or more than
/// [`saintflow::machine::MAX_THREADS`] a `ValueError`, as they are the CLI's usage errors
/// (issue 55 item 5: `threads=10**6` tried to start a million threads and never returned).
fn threads_of(threads: Option<usize>) -> PyResult<usize> {
    match threads {
        None => Ok(cores()),
        Some(0) => Err(PyValueError::new_err(format!(
            "threads = 0: expected 1 ..= {} (None: one per core, {} here)",
            saintflow::machine::MAX_THREADS,
            cores()
        ))),
        Some(t) if t > saintflow::machine::MAX_THREADS => Err(PyValueError::new_err(format!(
            "threads = {t}: expected at most {} (the command line's --threads bound)",
            saintflow::machine::MAX_THREADS
        ))),
        Some(t) => Ok(t),
    }
}

/// `MemoryError` unless `bytes` for `what` fit the memory this process may use: a size
/// from an argument is checked before anything is allocated (issue 55 item 3: the
/// interpreter aborted on `memory allocation of N bytes failed` instead).
fn fits(what: impl FnOnce() -> String, bytes: u128) -> PyResult<()> {
    match saintflow::machine::allocatable() {
        Some((limit, source)) if bytes > u128::from(limit) => Err(PyMemoryError::new_err(format!(
            "{}: needs {}, more than the memory this process may use ({}, {source})",
            what(),
            saintflow::machine::human(bytes),
            saintflow::machine::human(u128::from(limit))
        ))),
        _ => Ok(()),
    }
}

/// A vector of `len` copies of `v`, or `MemoryError` when the allocation fails (a size
/// that fits the limit may still not fit what is free).
fn try_vec<T: Clone>(what: &str, len: usize, v: T) -> PyResult<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        PyMemoryError::new_err(format!(
            "{what}: cannot allocate {len} values of {} bytes",
            std::mem::size_of::<T>()
        ))
    })?;
    out.resize(len, v);
    Ok(out)
}

/// `memory_mib` in bytes: more than the memory this process may use is a `ValueError`
/// (it was shifted left by 20 bits unchecked).
fn mib_bytes(memory_mib: usize) -> PyResult<usize> {
    let bytes = memory_mib.checked_mul(1 << 20);
    let limit = saintflow::machine::allocatable();
    match (bytes, &limit) {
        (Some(b), Some((l, _))) if b as u128 <= u128::from(*l) => Ok(b),
        (Some(b), None) => Ok(b),
        _ => Err(PyValueError::new_err(format!(
            "memory_mib = {memory_mib}: expected at most the memory this process may use{}",
            limit
                .map(|(l, src)| format!(" ({} MiB, {src})", l >> 20))
                .unwrap_or_default()
        ))),
    }
}

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

/// The pool that calls without a thread count of their own run on (one worker per core).
/// Every library call runs inside a pool the binding built in this process: rayon's global
/// pool, once started, is inherited by a forked child (a PyTorch `DataLoader` worker)
/// without its threads, and any parallel iterator on it waits forever (issue 55 item 11).
/// This pool is rebuilt when the process id changes; the parent's is leaked in the child
/// (dropping it would signal threads that do not exist there). Only touched with the GIL
/// held, so a fork, which Python makes holding the GIL, never copies the mutex locked.
static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

fn default_pool() -> PyResult<Arc<rayon::ThreadPool>> {
    let pid = std::process::id();
    let mut slot = POOL
        .lock()
        .map_err(|_| SaintflowError::new_err("the thread pool's lock was poisoned"))?;
    if let Some((p, pool)) = slot.as_ref() {
        if *p == pid {
            return Ok(pool.clone());
        }
    }
    if let Some(parents) = slot.take() {
        std::mem::forget(parents);
    }
    let pool = Arc::new(pool(cores())?);
    *slot = Some((pid, pool.clone()));
    Ok(pool)
}

/// `f` on the default pool with the GIL released.
fn on_pool<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    let pool = default_pool()?;
    Ok(py.detach(|| pool.install(f)))
}

fn ids_of(store: &GraphStore, ids: &[i64]) -> PyResult<Vec<u32>> {
    let n = store.n_nodes();
    let mut out = Vec::new();
    out.try_reserve_exact(ids.len())
        .map_err(|_| PyMemoryError::new_err(format!("ids: cannot allocate {} ids", ids.len())))?;
    for (k, &v) in ids.iter().enumerate() {
        if v < 0 || v as u64 >= n as u64 {
            return Err(StoreError::new_err(format!(
                "{}: ids[{k}] = {v} is out of range for {n} nodes",
                store.path().display()
            )));
        }
        out.push(v as u32);
    }
    Ok(out)
}

/// A store, memory-mapped (nothing is loaded when opened); `close` lets go of the map.
#[pyclass(module = "saintflow._native", frozen)]
struct Store {
    /// `None` once closed.
    inner: RwLock<Option<Arc<GraphStore>>>,
}

impl Store {
    fn new(s: GraphStore) -> Store {
        Store {
            inner: RwLock::new(Some(Arc::new(s))),
        }
    }

    /// The open store, or a `StoreError` once `close` was called.
    fn get(&self) -> PyResult<Arc<GraphStore>> {
        self.inner
            .read()
            .map_err(|_| SaintflowError::new_err("the store's lock was poisoned"))?
            .clone()
            .ok_or_else(|| {
                StoreError::new_err("the store is closed: open it again (saintflow.Store.open)")
            })
    }
}

#[pymethods]
impl Store {
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Store> {
        guard(|| Ok(Store::new(lib(on_pool(py, || GraphStore::open(&path))?)?)))
    }

    /// Lets go of the store's map (the views handed out keep their own); later calls
    /// raise `StoreError`. Closing twice is allowed.
    fn close(&self) -> PyResult<()> {
        let mut slot = self
            .inner
            .write()
            .map_err(|_| SaintflowError::new_err("the store's lock was poisoned"))?;
        *slot = None;
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self
            .inner
            .read()
            .map_err(|_| SaintflowError::new_err("the store's lock was poisoned"))?
            .is_none())
    }

    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(self.get()?.path().to_path_buf())
    }
    #[getter]
    fn n_nodes(&self) -> PyResult<usize> {
        Ok(self.get()?.n_nodes())
    }
    /// Directed entries of the full graph (each undirected edge twice, as PyG counts).
    #[getter]
    fn n_edges(&self) -> PyResult<usize> {
        Ok(self.get()?.full().n_entries())
    }
    #[getter]
    fn n_features(&self) -> PyResult<usize> {
        Ok(self.get()?.n_features())
    }
    #[getter]
    fn n_classes(&self) -> PyResult<usize> {
        Ok(self.get()?.n_classes())
    }
    #[getter]
    fn multilabel(&self) -> PyResult<bool> {
        Ok(matches!(self.get()?.labels(), Labels::Multi { .. }))
    }

    /// The node ids of a split, ascending (int64).
    fn split<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let role = match name {
            "train" => Role::Train,
            "val" | "valid" => Role::Val,
            "test" => Role::Test,
            other => {
                return Err(StoreError::new_err(format!(
                    "no split named {other:?}: expected \"train\", \"val\" or \"test\""
                )))
            }
        };
        let store = self.get()?;
        fits(
            || format!("Store.split: up to {} ids of 12 bytes", store.n_nodes()),
            store.n_nodes() as u128 * 12,
        )?;
        let ids = on_pool(py, move || store.nodes_with_role(role))?;
        Ok(ids
            .into_iter()
            .map(i64::from)
            .collect::<Vec<_>>()
            .into_pyarray(py))
    }

    /// The role byte of every node (0 none, 1 train, 2 val, 3 test), a view.
    fn roles<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let s = self.get()?;
        view1(&section_map(py, &s, SectionId::Roles)?)
    }

    /// Feature rows of `ids`, gathered from the map into a new float32 array.
    fn features<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        guard(|| {
            let store = self.get()?;
            let f = store.n_features();
            let k = ids.len();
            fits(
                || format!("Store.features: {k} rows × {f} features of 4 bytes"),
                k as u128 * f as u128 * 4,
            )?;
            let ids = ids_of(&store, ids.as_slice()?)?;
            let mut out = try_vec("Store.features", k * f, 0f32)?;
            let r = on_pool(py, || store.gather_features(&ids, &mut out))?;
            lib(r)?;
            Ok(Array2::from_shape_vec((k, f), out)
                .expect("k × f values")
                .into_pyarray(py))
        })
    }

    /// The whole feature matrix as a read-only view (N × F float32, copy-on-write).
    fn features_view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let s = self.get()?;
        view2(
            &section_map(py, &s, SectionId::Features)?,
            s.n_nodes(),
            s.n_features(),
        )
    }

    /// Labels of `ids`: int64 class ids (−1 = none), or float32 0/1 rows when multi-label.
    fn labels<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, i64>) -> PyResult<Py<PyAny>> {
        guard(|| {
            let store = self.get()?;
            let k = ids.len();
            let width = match store.labels() {
                Labels::Single(_) => 8,
                Labels::Multi { .. } => 4 * store.n_classes().max(1) as u128,
            };
            fits(
                || format!("Store.labels: {k} rows of {width} bytes"),
                k as u128 * width,
            )?;
            let ids = ids_of(&store, ids.as_slice()?)?;
            Ok(labels_of(py, &store, &ids)?.into())
        })
    }

    /// `(indptr, indices)` of the full or training graph: read-only views (uint64,
    /// uint32, copy-on-write).
    #[pyo3(signature = (graph = "full"))]
    fn csr<'py>(&self, py: Python<'py>, graph: &str) -> PyResult<Py<PyAny>> {
        let s = self.get()?;
        let (offsets, indices) = match graph {
            "full" => (SectionId::FullOffsets, SectionId::FullIndices),
            "train" => (SectionId::TrainOffsets, SectionId::TrainIndices),
            other => {
                return Err(StoreError::new_err(format!(
                    "no graph named {other:?}: expected \"full\" or \"train\""
                )))
            }
        };
        let indptr = view1::<u64>(&section_map(py, &s, offsets)?)?;
        let indices = view1::<u32>(&section_map(py, &s, indices)?)?;
        Ok((indptr, indices).into_pyobject(py)?.into_any().unbind())
    }

    /// `saintflow info --json` as a JSON string (the Python side parses it).
    fn info_json(&self, py: Python<'_>) -> PyResult<String> {
        let store = self.get()?;
        let info = on_pool(py, move || saintflow::store::info::info(&store))?;
        serde_json::to_string(&info).map_err(|e| SaintflowError::new_err(e.to_string()))
    }

    /// The full check (`saintflow check`): every checksum, index and symmetry.
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        guard(|| {
            let store = self.get()?;
            lib(on_pool(py, move || saintflow::store::check::check(&store))?)
        })
    }

    /// Writes a store from arrays (see `saintflow.Store.create`).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, n_nodes, src, dst, indptr, indices, x, y, y_multi, roles, symmetrize, force, induce_train = false))]
    fn _create(
        py: Python<'_>,
        path: PathBuf,
        n_nodes: Option<u64>,
        src: Option<PyReadonlyArray1<'_, i64>>,
        dst: Option<PyReadonlyArray1<'_, i64>>,
        indptr: Option<PyReadonlyArray1<'_, i64>>,
        indices: Option<PyReadonlyArray1<'_, i64>>,
        x: Option<numpy::PyReadonlyArray2<'_, f32>>,
        y: Option<PyReadonlyArray1<'_, i64>>,
        y_multi: Option<numpy::PyReadonlyArray2<'_, u8>>,
        roles: Option<PyReadonlyArray1<'_, u8>>,
        symmetrize: bool,
        force: bool,
        induce_train: bool,
    ) -> PyResult<Store> {
        guard(|| {
            // The node count the writer will allocate for: `n_nodes`, or one past the
            // largest id (a CSR: its rows), checked before the importer allocates for it
            // (issue 55 item 3: an edge to node 4e9 aborted like n_nodes=4e9).
            let (n, what) = match n_nodes {
                Some(n) => (n, format!("n_nodes = {n}")),
                None => {
                    let n = match (&src, &dst, &indptr) {
                        (Some(s), Some(d), _) => {
                            let top = |a: &[i64]| a.iter().copied().max().unwrap_or(-1);
                            let m = top(s.as_slice()?).max(top(d.as_slice()?));
                            u64::try_from(m).map_or(0, |m| m + 1)
                        }
                        (_, _, Some(p)) => p.len().saturating_sub(1) as u64,
                        _ => 0,
                    };
                    (
                        n,
                        format!("{n} nodes (one past the largest id in the edges)"),
                    )
                }
            };
            if n > u64::from(u32::MAX) {
                return Err(PyValueError::new_err(format!(
                    "{}: {what}: expected at most {} (node ids are 32-bit)",
                    path.display(),
                    u32::MAX
                )));
            }
            // What the writer holds per node whatever the arrays given: two offset arrays
            // (8 bytes each), a label (4), a role (1) and the degree and permutation tables
            // of the CSR build (≈ 16): 48 bytes, rounded up.
            fits(
                || format!("{}: {what} at 48 bytes per node", path.display()),
                u128::from(n) * 48,
            )?;
            let edges = match (&src, &dst, &indptr, &indices) {
                (Some(s), Some(d), None, None) => Edges::Coo {
                    src: s.as_slice()?,
                    dst: d.as_slice()?,
                },
                (None, None, Some(p), Some(i)) => Edges::Csr {
                    indptr: p.as_slice()?,
                    indices: i.as_slice()?,
                },
                _ => {
                    return Err(StoreError::new_err(
                        "give edge_index, or indptr and indices (one of the two)",
                    ))
                }
            };
            let features = match &x {
                Some(x) => Some((x.as_slice()?, x.shape()[1])),
                None => None,
            };
            let labels = match (&y, &y_multi) {
                (Some(y), None) => Some(ArrayLabels::Single(y.as_slice()?)),
                (None, Some(m)) => Some(ArrayLabels::Multi {
                    bits: m.as_slice()?,
                    classes: m.shape()[1],
                }),
                _ => None,
            };
            let roles = match &roles {
                Some(r) => Some(r.as_slice()?),
                None => None,
            };
            let graph = ArrayGraph {
                n_nodes,
                edges,
                symmetrize,
                features,
                labels,
                roles,
                source: "saintflow.Store.create (Python)",
            };
            // Never a file, a link or a device, nor a store inside a store (the writer
            // replaces only a store, only with force=True).
            saintflow::atomic::OutputGuard::new()
                .dir("path", &path)
                .check()
                .map_err(|e| SaintflowError::new_err(e.to_string()))?;
            // Ctrl-C sets `flag`; the import stops at its next check before publishing
            // anything (issue 55 item 11: it finished writing, then raised).
            let flag = AtomicBool::new(false);
            let pool = default_pool()?;
            let (r, interrupted) = run_interruptible(py, &flag, || {
                pool.install(|| {
                    let mode = match induce_train {
                        true => TrainGraphMode::Induce,
                        false => TrainGraphMode::Full,
                    };
                    import_arrays_with(&graph, mode, &path, force, &Progress::hidden(), Some(&flag))
                        .and_then(|_| GraphStore::open(&path))
                })
            });
            if let Some(k) = interrupted {
                return Err(k);
            }
            Ok(Store::new(lib(r)?))
        })
    }

    /// Imports a GraphSAINT dataset directory (`saintflow import graphsaint DIR -o PATH`).
    #[staticmethod]
    #[pyo3(signature = (dir, path, standardize = false, force = false))]
    fn import_graphsaint(
        py: Python<'_>,
        dir: PathBuf,
        path: PathBuf,
        standardize: bool,
        force: bool,
    ) -> PyResult<Store> {
        guard(|| {
            let opts = saintflow::store::import::GraphSaintOptions {
                standardize,
                ..Default::default()
            };
            let r = on_pool(py, || {
                saintflow::store::import::import_graphsaint(
                    &dir,
                    &path,
                    &opts,
                    force,
                    &Progress::hidden(),
                )
                .and_then(|_| GraphStore::open(&path))
            })?;
            Ok(Store::new(lib(r)?))
        })
    }

    fn __repr__(&self) -> String {
        match self.get() {
            Ok(s) => format!(
                "Store({:?}, n_nodes={}, n_edges={}, n_features={}, n_classes={})",
                s.path().display().to_string(),
                s.n_nodes(),
                s.full().n_entries(),
                s.n_features(),
                s.n_classes()
            ),
            Err(_) => "Store(closed)".to_string(),
        }
    }
}

fn labels_of<'py>(py: Python<'py>, store: &GraphStore, ids: &[u32]) -> PyResult<Bound<'py, PyAny>> {
    // Nothing to recycle: one call, its arrays kept by the caller.
    let bufs = Arc::new(Buffers::new(0));
    YData::of(store, ids, &bufs).into_py(py, &bufs)
}

/// A sampler configuration checked against the kind's fields: `kind` and its keys as
/// `saintflow sample`'s flags and a plan's `[sampler]` take them.
fn sampler_config(kind: &str, keys: &Bound<'_, PyDict>) -> PyResult<SamplerConfig> {
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
                        .unwrap_or_default();
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

/// One batch, built on a sampling thread; every array moves into numpy without a copy.
struct Batch {
    index: u64,
    nodes: Vec<i64>,
    indptr: Vec<i64>,
    /// 2 × E: the rows, then the columns (`indices` is its second row).
    edge_index: Vec<i64>,
    x: Vec<f32>,
    roles: Vec<u8>,
    node_norm: Option<Vec<f32>>,
    edge_norm: Option<Vec<f32>>,
    y: YData,
}

impl Batch {
    /// Its buffers back to `bufs`, as numpy hands them back when it frees the arrays.
    fn give_back(self, bufs: &Buffers) {
        bufs.nodes.give(self.nodes);
        bufs.indptr.give(self.indptr);
        bufs.edge_index.give(self.edge_index);
        bufs.x.give(self.x);
        bufs.roles.give(self.roles);
        match self.y {
            YData::Single(y) => bufs.y.give(y),
            YData::Multi(y, _) => bufs.y_multi.give(y),
        }
        if let Some(v) = self.node_norm {
            bufs.node_norm.give(v);
        }
        if let Some(v) = self.edge_norm {
            bufs.edge_norm.give(v);
        }
    }
}

/// Labels of some nodes as the package hands them out.
enum YData {
    /// Class ids, −1 for none.
    Single(Vec<i64>),
    /// n × C rows of 0/1.
    Multi(Vec<f32>, usize),
}

impl YData {
    fn of(store: &GraphStore, ids: &[u32], bufs: &Buffers) -> YData {
        match store.labels() {
            Labels::Single(l) => {
                let mut y = bufs.y.take();
                y.extend(ids.iter().map(|&v| match l[v as usize] {
                    saintflow::store::format::NO_LABEL => -1,
                    c => i64::from(c),
                }));
                YData::Single(y)
            }
            labels @ Labels::Multi { .. } => {
                let c = store.n_classes();
                let mut out = bufs.y_multi.take_len(ids.len() * c);
                for (row, &v) in out.chunks_exact_mut(c.max(1)).zip(ids) {
                    for (k, y) in row.iter_mut().enumerate() {
                        *y = if labels.has_class(v, k as u32) {
                            1.0
                        } else {
                            0.0
                        };
                    }
                }
                YData::Multi(out, c)
            }
        }
    }

    fn into_py<'py>(self, py: Python<'py>, bufs: &Arc<Buffers>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            YData::Single(y) => {
                let n = y.len();
                lend(py, y, Ix1(n), bufs, |b| &b.y)?.into_any()
            }
            YData::Multi(y, c) => {
                let n = y.len() / c.max(1);
                lend(py, y, Ix2(n, c), bufs, |b| &b.y_multi)?.into_any()
            }
        })
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

struct SamplerSpec {
    store: Arc<GraphStore>,
    config: SamplerConfig,
    train_graph: bool,
    seed: u64,
    clip: usize,
    norm: Option<Arc<NormCounts>>,
    will_need: bool,
    buffers: Arc<Buffers>,
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
        Ok(match build {
            true => Item::Built(self.make(index, sub)?),
            false => Item::Drawn(index, sub),
        })
    }

    fn make(&self, index: u64, sub: Subgraph) -> Result<Batch, String> {
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
        for i in 0..sub.n_nodes() {
            let d = (sub.offsets[i + 1] - sub.offsets[i]) as usize;
            edge_index.extend(std::iter::repeat_n(i as i64, d));
        }
        edge_index.extend(sub.indices.iter().map(|&c| i64::from(c)));
        let (mut roles, mut nodes, mut indptr) =
            (bufs.roles.take(), bufs.nodes.take(), bufs.indptr.take());
        roles.extend(sub.nodes.iter().map(|&v| store.role(v) as u8));
        nodes.extend(sub.nodes.iter().map(|&v| i64::from(v)));
        indptr.extend(sub.offsets.iter().map(|&o| i64::from(o)));
        let y = YData::of(store, &sub.nodes, bufs);
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
        })
    }
}

/// Buffers of one kind that numpy has freed, for the next batches. A batch's arrays are
/// megabytes; allocated afresh, each 4 KiB page faults in, and glibc gives a buffer freed on
/// another thread back to the kernel: with two sampling threads, 480 000 page faults in 800
/// batches halved the rate (BENCHMARKS.md, "Recycled batch buffers").
///
/// Fork-safe: a forked child (a PyTorch `DataLoader` worker using a sampler built in the
/// parent) may inherit `free` locked by a parent thread that does not exist there, so a
/// process other than the one that made the `Recycle` never touches it (it allocates).
struct Recycle<V> {
    free: Mutex<Vec<V>>,
    keep: usize,
    pid: u32,
}

impl<V: Default> Recycle<V> {
    fn new(keep: usize) -> Self {
        Recycle {
            free: Mutex::new(Vec::new()),
            keep,
            pid: std::process::id(),
        }
    }

    /// A freed value as it was, or a new empty one.
    fn pop(&self) -> V {
        if std::process::id() != self.pid {
            return V::default();
        }
        let v = self.free.lock().ok().and_then(|mut f| f.pop());
        v.unwrap_or_default()
    }

    /// Keeps `v` for a later `pop`, up to `keep` values.
    fn give(&self, v: V) {
        if std::process::id() != self.pid {
            return;
        }
        if let Ok(mut f) = self.free.lock() {
            if f.len() < self.keep {
                f.push(v);
            }
        }
    }
}

impl<T> Recycle<Vec<T>> {
    /// An empty buffer, with the capacity of a freed one when there is one.
    fn take(&self) -> Vec<T> {
        let mut v = self.pop();
        v.clear();
        v
    }

    /// A buffer of `len` elements whose values are unspecified (a freed buffer's, or
    /// zeros): for a caller that overwrites every one, without clearing them first.
    fn take_len(&self, len: usize) -> Vec<T>
    where
        T: Copy + Default,
    {
        let mut v = self.pop();
        if v.len() >= len {
            v.truncate(len);
        } else {
            v.resize(len, T::default());
        }
        v
    }
}

/// One `Recycle` per array of a batch, so a buffer comes back at the size it had.
struct Buffers {
    nodes: Recycle<Vec<i64>>,
    indptr: Recycle<Vec<i64>>,
    edge_index: Recycle<Vec<i64>>,
    x: Recycle<Vec<f32>>,
    roles: Recycle<Vec<u8>>,
    y: Recycle<Vec<i64>>,
    y_multi: Recycle<Vec<f32>>,
    node_norm: Recycle<Vec<f32>>,
    edge_norm: Recycle<Vec<f32>>,
    /// Drawn subgraphs, once assembled: drawn on a worker and dropped by the consumer, their
    /// vectors (≈ 2.4 MB of room for a 7.6k-node subgraph of a skewed graph) were given
    /// back to the kernel and faulted in again for the next (BENCHMARKS.md, "Lockstep
    /// walks").
    subgraphs: Recycle<Subgraph>,
}

impl Buffers {
    /// Keeping up to `keep` freed buffers of each array.
    fn new(keep: usize) -> Self {
        Buffers {
            nodes: Recycle::new(keep),
            indptr: Recycle::new(keep),
            edge_index: Recycle::new(keep),
            x: Recycle::new(keep),
            roles: Recycle::new(keep),
            y: Recycle::new(keep),
            y_multi: Recycle::new(keep),
            node_norm: Recycle::new(keep),
            edge_norm: Recycle::new(keep),
            subgraphs: Recycle::new(keep),
        }
    }
}

/// The base object of a batch's arrays: it owns the buffer they view and, when numpy frees
/// the last of them, hands it back to its `Recycle`.
#[pyclass(module = "saintflow._native", frozen)]
struct BatchBuffer(Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl Drop for BatchBuffer {
    fn drop(&mut self) {
        if let Some(give_back) = self.0.get_mut().ok().and_then(Option::take) {
            give_back();
        }
    }
}

/// `v` as a numpy array of `shape` (no copy), whose buffer goes back to `field` of `bufs`
/// when numpy frees it.
fn lend<'py, T: numpy::Element + Send + 'static, D: numpy::ndarray::Dimension>(
    py: Python<'py>,
    v: Vec<T>,
    shape: D,
    bufs: &Arc<Buffers>,
    field: fn(&Buffers) -> &Recycle<Vec<T>>,
) -> PyResult<Bound<'py, numpy::PyArray<T, D>>> {
    let (ptr, len) = (v.as_ptr(), v.len());
    let bufs = bufs.clone();
    let owner = Bound::new(
        py,
        BatchBuffer(Mutex::new(Some(Box::new(move || field(&bufs).give(v))))),
    )?;
    // SAFETY: moving `v` into the closure moved its handle, not its heap buffer, which
    // nothing touches until `owner` drops: `owner` becomes the array's base, so it lives as
    // long as the array and any view of it.
    let data = unsafe { std::slice::from_raw_parts(ptr, len) };
    let view = numpy::ndarray::ArrayView::from_shape(shape, data)
        .map_err(|e| SaintflowError::new_err(format!("batch array of {len} elements: {e}")))?;
    // SAFETY: as above; `data` is never reallocated while `owner` lives.
    Ok(unsafe { numpy::PyArray::borrow_from_array(&view, owner.into_any()) })
}

/// GraphSAINT subgraphs as batches (see `saintflow.SaintSampler`).
#[pyclass(module = "saintflow._native", frozen)]
struct Sampler {
    spec: Arc<SamplerSpec>,
    threads: usize,
    num_steps: u64,
    epoch: std::sync::atomic::AtomicU64,
    pre_sampled: u64,
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (store, kind, graph, seed, threads, num_steps, sample_coverage, clip, keys))]
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
    ) -> PyResult<Sampler> {
        guard(|| {
            let store = store.get()?;
            let config = sampler_config(kind, keys)?;
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
            let threads = threads_of(threads)?;
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
            let mut spec = SamplerSpec {
                store: store.clone(),
                config,
                train_graph,
                seed,
                clip,
                norm: None,
                will_need: beyond_memory(&store),
                // Enough for the batches in flight (a chunk being drawn, the channel, the
                // consumer's) before a freed buffer is dropped.
                buffers: Arc::new(Buffers::new(4 * threads + 4)),
            };
            let pool = pool(threads)?;
            // Subgraph 0 sizes the pre-sampling (coverage × N nodes drawn, as PyG) and the
            // default steps per epoch (the training nodes once, as `saintflow train`).
            // Ctrl-C stops the pre-sampling at its next subgraph (`Cancellable`).
            let flag = AtomicBool::new(false);
            let (r, interrupted) = run_interruptible(py, &flag, || {
                pool.install(|| -> Result<(Option<NormCounts>, u64, u64), String> {
                    let inner = spec.config.build(spec.graph()).map_err(|e| e.to_string())?;
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
                    let steps = if whole {
                        1
                    } else {
                        (n_train / size).ceil().max(1.0) as u64
                    };
                    Ok((norm, n_pre, steps))
                })
            });
            if let Some(k) = interrupted {
                return Err(k);
            }
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
                let sampler = spec.config.build(spec.graph()).map_err(|e| e.to_string())?;
                let sub = sample_subgraph(
                    sampler.as_ref(),
                    seed.unwrap_or(spec.seed),
                    index,
                    spec.clip,
                )
                .map_err(|e| e.to_string())?;
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
        let pool = pool(threads)?;
        std::thread::Builder::new()
            .name("saintflow-sampler".into())
            .spawn(move || {
                // The whole loop on the pool (its first worker sends, between chunks, what
                // the others drew with it): the build scans the graph with a parallel
                // iterator, and off the pool that would be rayon's global pool, whose
                // threads a forked child does not have.
                pool.install(|| {
                    let sampler = match spec.config.build(spec.graph()) {
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

/// A pool of `threads` workers (0: one per core): the engine's own `exec::rayon_pool`.
fn pool(threads: usize) -> PyResult<rayon::ThreadPool> {
    saintflow::exec::rayon_pool(threads)
        .map_err(|e| SaintflowError::new_err(format!("cannot start {threads} threads: {e}")))
}

fn batch_dict<'py>(py: Python<'py>, spec: &SamplerSpec, b: Batch) -> PyResult<Bound<'py, PyDict>> {
    // Only wrapping here (the GIL is held): every array was built by the worker or, with
    // one sampling thread, by `__next__` with the GIL released.
    let d = PyDict::new(py);
    let bufs = &spec.buffers;
    let (n, e, f) = (
        b.nodes.len(),
        b.edge_index.len() / 2,
        spec.store.n_features(),
    );
    d.set_item("index", b.index)?;
    d.set_item("n_id", lend(py, b.nodes, Ix1(n), bufs, |b| &b.nodes)?)?;
    d.set_item(
        "indptr",
        lend(py, b.indptr, Ix1(n + 1), bufs, |b| &b.indptr)?,
    )?;
    let edge_index = lend(py, b.edge_index, Ix2(2, e), bufs, |b| &b.edge_index)?;
    // `indices`: the second row of `edge_index`, a view (no copy).
    d.set_item("indices", edge_index.get_item(1)?)?;
    d.set_item("edge_index", edge_index)?;
    d.set_item("x", lend(py, b.x, Ix2(n, f), bufs, |b| &b.x)?)?;
    d.set_item("roles", lend(py, b.roles, Ix1(n), bufs, |b| &b.roles)?)?;
    d.set_item("y", b.y.into_py(py, bufs)?)?;
    let norm = |v: Option<Vec<f32>>, field: fn(&Buffers) -> &Recycle<Vec<f32>>| {
        v.map(|v| {
            let k = v.len();
            lend(py, v, Ix1(k), bufs, field)
        })
        .transpose()
    };
    d.set_item("node_norm", norm(b.node_norm, |b| &b.node_norm)?)?;
    d.set_item("edge_norm", norm(b.edge_norm, |b| &b.edge_norm)?)?;
    Ok(d)
}

/// The batches of one epoch, produced ahead by a sampling thread.
#[pyclass(module = "saintflow._native")]
struct BatchIter {
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

/// A plan (GNN or `[embedding]`), parsed and typed.
#[pyclass(module = "saintflow._native", frozen)]
struct Plan {
    path: PathBuf,
    overrides: Vec<String>,
    gnn: Option<RustPlan>,
}

#[pymethods]
impl Plan {
    #[staticmethod]
    #[pyo3(signature = (path, overrides = Vec::new()))]
    fn load(path: PathBuf, overrides: Vec<String>) -> PyResult<Plan> {
        guard(|| {
            let gnn = if saintflow::plan::embedding::is_embedding_plan(&path) {
                let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
                lib(saintflow::plan::embedding::EmbeddingPlan::load_with_overrides(&path, &o))?;
                None
            } else {
                let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
                Some(lib(RustPlan::load_with_overrides(&path, &o))?)
            };
            Ok(Plan {
                path,
                overrides,
                gnn,
            })
        })
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }
    #[getter]
    fn is_embedding(&self) -> bool {
        self.gnn.is_none()
    }
    #[getter]
    fn overrides(&self) -> Vec<String> {
        self.overrides.clone()
    }
}

/// Trains a GNN plan (see `saintflow.train`); returns a dict of the outcome.
#[pyfunction]
#[pyo3(signature = (plan, store, epochs, seed, threads, checkpoint, resume, force, log, progress, max_steps))]
#[allow(clippy::too_many_arguments)]
fn _train<'py>(
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
        let Some(p) = plan.gnn.as_ref() else {
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
            opts = opts.threads(threads_of(Some(t))?);
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
            saintflow::atomic::create_parent_dirs(&file).map_err(|e| {
                TrainError::new_err(format!(
                    "{}: cannot create its directory: {e}",
                    file.display()
                ))
            })?;
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
            saintflow::atomic::create_parent_dirs(l).map_err(|e| {
                TrainError::new_err(format!("{}: cannot create its directory: {e}", l.display()))
            })?;
        }
        if let Some(l) = &log {
            opts = opts.log(l.clone());
        }
        // Without a thread count the trainer runs on the caller's pool: ours (fork-safe).
        let pool = default_pool()?;
        let (result, interrupted) = run_interruptible(py, &flag, || pool.install(|| opts.train()));
        if let Some(k) = interrupted {
            return Err(k);
        }
        let out = lib(result)?;
        let d = PyDict::new(py);
        let metrics =
            |m: Option<saintflow::metrics::Metrics>| -> PyResult<Option<Bound<'py, PyDict>>> {
                m.map(|m| {
                    let d = PyDict::new(py);
                    d.set_item("accuracy", m.accuracy)?;
                    d.set_item("f1_micro", m.f1_micro)?;
                    d.set_item("f1_macro", m.f1_macro)?;
                    Ok(d)
                })
                .transpose()
            };
        d.set_item("val", metrics(out.val)?)?;
        d.set_item("test", metrics(out.test)?)?;
        d.set_item("best_epoch", out.best_epoch)?;
        d.set_item("epochs", out.epochs)?;
        d.set_item("steps", out.steps)?;
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
fn _embed(
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
        let Some(p) = plan.gnn.as_ref() else {
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
        let pool = pool(threads_of(threads)?)?;
        let registry = registry()?;
        let r = py.detach(|| {
            pool.install(|| {
                let runner = saintflow::exec::Executor::new(rayon::current_num_threads());
                saintflow::infer::embed(store, p, &registry, &params, &runner, opts, which, &output)
                    .map_err(RustTrainError::from)
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
fn _train_embedding(
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
        if plan.gnn.is_some() {
            return Err(TrainError::new_err(format!(
                "{}: a GNN plan: saintflow.train trains it",
                plan.path.display()
            )));
        }
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
        let o: Vec<&str> = plan.overrides.iter().map(String::as_str).collect();
        let ep =
            lib(saintflow::plan::embedding::EmbeddingPlan::load_with_overrides(&plan.path, &o))?;
        let scratch = scratch_dir.unwrap_or_else(|| match output.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::env::temp_dir(),
        });
        let opts = saintflow::embedding::EmbedOptions {
            seed,
            threads: threads_of(threads)?,
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
        let (r, interrupted) = run_interruptible(py, &flag, || {
            saintflow::embedding::train_interruptible(&ep, store, &opts, &flag)
        });
        if let Some(k) = interrupted {
            return Err(k);
        }
        let out = lib(r)?;
        serde_json::to_string(&out).map_err(|e| SaintflowError::new_err(e.to_string()))
    })
}

/// Scores an embedding (`saintflow eval-embedding`): node classification at each labelled
/// fraction, or link prediction with `holdout`; returns JSON.
#[pyfunction]
#[pyo3(signature = (embedding, store, ratios, repeats, seed, c, normalize, holdout, threads, split))]
#[allow(clippy::too_many_arguments)]
fn _eval_embedding(
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
        let pool = pool(threads_of(threads)?)?;
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

/// Runs `f` on a scoped thread with the GIL released, checking for Ctrl-C every 50 ms:
/// on KeyboardInterrupt, `flag` is set, `f` is waited for (it stops at its next step), and
/// the interrupt is returned beside `f`'s result.
fn run_interruptible<T: Send>(
    py: Python<'_>,
    flag: &AtomicBool,
    f: impl FnOnce() -> T + Send,
) -> (T, Option<PyErr>) {
    let mut interrupted = None;
    let result = py.detach(|| {
        std::thread::scope(|s| {
            let h = s.spawn(f);
            while !h.is_finished() {
                std::thread::sleep(Duration::from_millis(50));
                if interrupted.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        flag.store(true, Ordering::Relaxed);
                        interrupted = Some(e);
                    }
                }
            }
            match h.join() {
                Ok(v) => v,
                Err(p) => std::panic::resume_unwind(p),
            }
        })
    });
    (result, interrupted)
}

// ------------------------------------------------------------------ ops in Python

/// An op written in Python (`saintflow.register_op`): forward and backward are callables
/// on float32 numpy row blocks.
struct PyOpDef {
    name: String,
    forward: Py<PyAny>,
    backward: Option<Py<PyAny>>,
    arity: usize,
    attrs: Vec<String>,
    doc: String,
}

/// The Python ops registered in this process, in registration order.
static PY_OPS: Mutex<Vec<Arc<PyOpDef>>> = Mutex::new(Vec::new());

/// A Python op (or, with `grad_of = Some(i)`, its gradient with respect to input i) as a
/// row-wise op: row block in, row block out, the GIL taken for the call.
struct PyRowOp {
    def: Arc<PyOpDef>,
    attrs: Vec<(String, Attr)>,
    grad_of: Option<usize>,
    label: String,
}

impl std::fmt::Debug for PyRowOp {
    // The CSE key: the name, the attributes and which gradient (not the callables' ids).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PyRowOp({}, {:?}, {:?})",
            self.label, self.attrs, self.grad_of
        )
    }
}

impl RowWise for PyRowOp {
    fn name(&self) -> &str {
        &self.label
    }

    fn attrs(&self) -> String {
        self.attrs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn arity(&self) -> usize {
        self.def.arity + usize::from(self.grad_of.is_some())
    }

    fn flops_per_element(&self) -> f64 {
        // A call into Python per block: costed high, so the planner never prefers it.
        100.0
    }

    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        let (rows, cols) = (y.n_rows(), y.n_cols());
        let mut call = |py: Python<'_>| -> PyResult<()> {
            let args: Vec<Bound<'_, PyAny>> = x
                .iter()
                .map(|m| {
                    let v = Array2::from_shape_vec((m.n_rows(), m.n_cols()), m.to_vec())
                        .expect("a block's rows × cols");
                    v.into_pyarray(py).into_any()
                })
                .collect();
            let kwargs = PyDict::new(py);
            for (k, v) in &self.attrs {
                match v {
                    Attr::Num(n) => kwargs.set_item(k, n)?,
                    Attr::Str(s) => kwargs.set_item(k, s)?,
                    Attr::Bool(b) => kwargs.set_item(k, b)?,
                }
            }
            let f = match self.grad_of {
                None => &self.def.forward,
                Some(_) => self
                    .def
                    .backward
                    .as_ref()
                    .expect("a gradient op has a backward"),
            };
            let args = pyo3::types::PyTuple::new(py, args)?;
            let mut out = f.bind(py).call(args, Some(&kwargs))?;
            if let Some(i) = self.grad_of {
                if self.def.arity > 1 || out.is_instance_of::<pyo3::types::PyTuple>() {
                    out = out.get_item(i)?;
                }
            }
            let np = py.import("numpy")?;
            let arr = np.call_method1("ascontiguousarray", (out, "float32"))?;
            let arr: numpy::PyReadonlyArray2<'_, f32> = arr.extract().map_err(|_| {
                PyException::new_err(format!(
                    "returned an array that is not 2-D, expected ({rows}, {cols})"
                ))
            })?;
            if arr.shape() != [rows, cols] {
                let got = arr.shape();
                return Err(PyException::new_err(format!(
                    "returned shape ({}, {}), expected ({rows}, {cols})",
                    got[0], got[1]
                )));
            }
            let src = arr.as_slice()?;
            for r in 0..rows {
                y.row_mut(r).copy_from_slice(&src[r * cols..(r + 1) * cols]);
            }
            Ok(())
        };
        Python::attach(&mut call).map_err(|e| {
            OpError::Source(format!(
                "{}: the Python {} raised {e}",
                self.label,
                if self.grad_of.is_some() {
                    "backward"
                } else {
                    "forward"
                }
            ))
        })
    }

    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if self.grad_of.is_some() {
            return Err(OpError::NoBackward {
                op: self.label.clone(),
            });
        }
        if self.def.backward.is_none() {
            return Err(OpError::NoBackward {
                op: self.label.clone(),
            });
        }
        let k = self.def.arity;
        let mut inputs: Vec<NodeId> = (0..k).map(|i| g.input(i)).collect();
        inputs.push(grad);
        let mut out = Vec::with_capacity(k);
        for i in 0..k {
            if !g.needs_grad(i) {
                out.push(None);
                continue;
            }
            let label = if k == 1 {
                format!("{}_backward", self.def.name)
            } else {
                format!("{}_backward{i}", self.def.name)
            };
            let op = row_wise(PyRowOp {
                def: self.def.clone(),
                attrs: self.attrs.clone(),
                grad_of: Some(i),
                label,
            });
            out.push(Some(g.add_arc(op, &inputs)?));
        }
        Ok(out)
    }
}

/// The built-in ops and every Python op registered so far.
fn registry() -> PyResult<Registry> {
    let mut r = Registry::with_builtins();
    let defs = PY_OPS
        .lock()
        .map_err(|_| SaintflowError::new_err("the op table was poisoned"))?
        .clone();
    for def in defs {
        let names: Vec<&str> = def.attrs.iter().map(String::as_str).collect();
        let d = def.clone();
        r.register(&def.name, &names, &def.doc, move |attrs| {
            Ok(row_wise(PyRowOp {
                def: d.clone(),
                attrs: attrs
                    .0
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                grad_of: None,
                label: d.name.clone(),
            }))
        })
        .map_err(|e| SaintflowError::new_err(e.to_string()))?;
    }
    Ok(r)
}

/// The widest input `check_op_gradients` takes: its central differences perturb every
/// entry of inputs of a few dozen rows, so a width is a handful, not millions (issue 55
/// item 3: `cols=10**12` aborted on allocation; `cols=0` passed without checking anything).
const MAX_CHECK_COLS: usize = 256;

/// Registers a Python op under `name` (see `saintflow.register_op`).
#[pyfunction]
#[pyo3(signature = (name, forward, backward, arity, attrs, doc))]
fn _register_op(
    name: String,
    forward: Py<PyAny>,
    backward: Option<Py<PyAny>>,
    arity: usize,
    attrs: Vec<String>,
    doc: String,
) -> PyResult<()> {
    if arity == 0 {
        return Err(SaintflowError::new_err(format!(
            "{name}: arity 0: an op takes at least one input"
        )));
    }
    if Registry::with_builtins().contains(&name) {
        return Err(SaintflowError::new_err(format!(
            "{name} is a built-in op: give the Python op another name (e.g. py.{name})"
        )));
    }
    let mut ops = PY_OPS
        .lock()
        .map_err(|_| SaintflowError::new_err("the op table was poisoned"))?;
    // Registering a name again replaces it (a notebook cell run twice).
    ops.retain(|d| d.name != name);
    ops.push(Arc::new(PyOpDef {
        name,
        forward,
        backward,
        arity,
        attrs,
        doc,
    }));
    Ok(())
}

/// The registered Python ops' names.
#[pyfunction]
fn registered_ops() -> PyResult<Vec<String>> {
    Ok(PY_OPS
        .lock()
        .map_err(|_| SaintflowError::new_err("the op table was poisoned"))?
        .iter()
        .map(|d| d.name.clone())
        .collect())
}

/// The finite-difference gradient check every Rust op passes (`testing::check_op_gradients`),
/// on a registered op with `cols` columns per input and the given attributes.
#[pyfunction]
#[pyo3(signature = (name, cols, attrs))]
fn _check_op_gradients(
    py: Python<'_>,
    name: String,
    cols: usize,
    attrs: &Bound<'_, PyDict>,
) -> PyResult<()> {
    guard(|| {
        if !(1..=MAX_CHECK_COLS).contains(&cols) {
            return Err(PyValueError::new_err(format!(
                "{name}: cols = {cols}: expected 1 ..= {MAX_CHECK_COLS} (the check perturbs \
                 every entry of its small inputs, so its work grows with cols²)"
            )));
        }
        let reg = registry()?;
        let mut a = saintflow::op::Attrs::new();
        for (k, v) in attrs.iter() {
            let k: String = k.extract()?;
            let v = if let Ok(b) = v.extract::<bool>() {
                Attr::Bool(b)
            } else if let Ok(x) = v.extract::<f64>() {
                Attr::Num(x)
            } else {
                Attr::Str(v.extract::<String>()?)
            };
            a = a.with(&k, v);
        }
        let op = reg
            .make(&name, &a)
            .map_err(|e| SaintflowError::new_err(e.to_string()))?;
        let arity = PY_OPS
            .lock()
            .map_err(|_| SaintflowError::new_err("the op table was poisoned"))?
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.arity)
            .ok_or_else(|| {
                SaintflowError::new_err(format!(
                    "{name}: no Python op of that name (saintflow.register_op registers one)"
                ))
            })?;
        let args: Vec<saintflow::testing::Arg> = (0..arity)
            .map(|_| saintflow::testing::Arg::Nodes(cols))
            .collect();
        on_pool(py, || saintflow::testing::check_op_gradients(op, &args))?
            .map_err(|e| TrainError::new_err(format!("{name}: gradient check failed: {e}")))
    })
}

/// Panics on purpose: the test that a Rust panic reaches Python as `SaintflowError`.
#[pyfunction]
fn _panic_for_tests() -> PyResult<()> {
    guard(|| panic!("deliberate panic from saintflow._native._panic_for_tests"))
}

/// The sampler kinds and their parameters with defaults: `{kind: {param: default}}`.
#[pyfunction]
fn sampler_kinds(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SaintflowError", py.get_type::<SaintflowError>())?;
    m.add("PlanError", py.get_type::<PlanError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("SampleError", py.get_type::<SampleError>())?;
    m.add("TrainError", py.get_type::<TrainError>())?;
    m.add_class::<Store>()?;
    m.add_class::<Sampler>()?;
    m.add_class::<BatchIter>()?;
    m.add_class::<SectionMap>()?;
    m.add_class::<Plan>()?;
    m.add_function(wrap_pyfunction!(_train, m)?)?;
    m.add_function(wrap_pyfunction!(_register_op, m)?)?;
    m.add_function(wrap_pyfunction!(registered_ops, m)?)?;
    m.add_function(wrap_pyfunction!(_check_op_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(_embed, m)?)?;
    m.add_function(wrap_pyfunction!(_train_embedding, m)?)?;
    m.add_function(wrap_pyfunction!(_eval_embedding, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(sampler_kinds, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
