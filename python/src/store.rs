//! `Store`: a graph store from Python. Opened memory-mapped (nothing loaded), closed on
//! request; counts, splits, features and labels gathered into new arrays, and the CSR,
//! roles and feature matrix as read-only numpy views whose base is a private
//! copy-on-write map of the section (`SectionMap`, which outlives `close`); `info_json`,
//! `check`, and stores written from arrays (`_create`) or a GraphSAINT directory; a link
//! split's record and held-out sets (`link_info`, `link_split`, copied to int64 with every
//! id checked) and a split made (`_split_edges`, as `saintflow split-edges`).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use numpy::ndarray::{Array2, ArrayView1, ArrayView2};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;

use saintflow::progress::Progress;
use saintflow::store::import::{
    import_arrays_with, ArrayGraph, ArrayLabels, Edges, TrainGraphMode,
};
use saintflow::store::link::split::{split_edges, SplitEdgesSpec};
use saintflow::store::{Csr, GraphStore, Labels, LinkSet, PrivateSection, Role, SectionId};

use crate::batch::{Buffers, YData};
use crate::error::{guard, lib, SaintflowError, StoreError};
use crate::runtime::{default_pool, fits, on_pool, run_interruptible, try_vec};

/// The base object of a view of a store's section: its own copy-on-write map of the
/// section's file (`GraphStore::map_private`). numpy sees the view read-only; a writer that
/// ignores the flag (`torch.from_numpy`) writes this process's private pages, never the
/// store, and cannot fault (issue 55 item 11: it was a segmentation fault through the
/// store's read-only map). The map is independent of the `Store`: a view outlives
/// `Store.close()`.
#[pyclass(module = "saintflow._native", frozen)]
pub(crate) struct SectionMap(PrivateSection);

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
pub(crate) struct Store {
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
    pub(crate) fn get(&self) -> PyResult<Arc<GraphStore>> {
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
        let (offsets, indices) = match graph_named(graph)? {
            Graph::Full => (SectionId::FullOffsets, SectionId::FullIndices),
            Graph::Train => (SectionId::TrainOffsets, SectionId::TrainIndices),
        };
        let indptr = view1::<u64>(&section_map(py, &s, offsets)?)?;
        let indices = view1::<u32>(&section_map(py, &s, indices)?)?;
        Ok((indptr, indices).into_pyobject(py)?.into_any().unbind())
    }

    /// The full or training graph's entries as PyG's `edge_index`: a new `[2, E]` int64
    /// array (row, then column, of every CSR entry in the CSR's order), every column id
    /// checked `< N` as it is copied.
    #[pyo3(signature = (graph = "full"))]
    fn edge_index<'py>(&self, py: Python<'py>, graph: &str) -> PyResult<Bound<'py, PyArray2<i64>>> {
        guard(|| {
            let store = self.get()?;
            let graph = graph_named(graph)?;
            let e = graph.csr(&store).n_entries();
            fits(
                || format!("Store.edge_index: [2, {e}] int64"),
                16 * e as u128,
            )?;
            edge_index_of(py, &store, graph)
        })
    }

    /// What `Store.to_torch`/`to_pyg` copy, checked against the memory as one size first
    /// (`what` names the caller in the message): `(edge_index [2, E] int64, y, train_mask,
    /// val_mask, test_mask)`, y as `labels` gives it for every node, the masks bool `[N]`
    /// from the roles. The features are not here: they stay the map's view.
    fn _graph_arrays<'py>(
        &self,
        py: Python<'py>,
        graph: &str,
        what: &str,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        guard(|| {
            let store = self.get()?;
            let graph = graph_named(graph)?;
            let n = store.n_nodes();
            let e = graph.csr(&store).n_entries();
            let y_width: u128 = match store.labels() {
                Labels::Single(_) => 8,
                Labels::Multi { .. } => 4 * store.n_classes() as u128,
            };
            // edge_index 16 bytes an entry; per node: y, three masks, and the 4-byte id
            // list the labels are gathered through.
            let bytes = 16 * e as u128 + n as u128 * (y_width + 3 + 4);
            fits(
                || {
                    format!(
                        "{what}: edge_index [2, {e}] int64 ({}), y and masks of {n} nodes \
                         ({}; the features are a map, not counted)",
                        saintflow::machine::human(16 * e as u128),
                        saintflow::machine::human(n as u128 * (y_width + 3)),
                    )
                },
                bytes,
            )?;
            let edge_index = edge_index_of(py, &store, graph)?;
            let ids: Vec<u32> = {
                let mut ids = try_vec("labels' node ids", n, 0u32)?;
                ids.iter_mut().zip(0u32..).for_each(|(v, i)| *v = i);
                ids
            };
            let y = labels_of(py, &store, &ids)?;
            drop(ids);
            let roles = store.roles();
            let mask = |role: Role| -> PyResult<Bound<'py, PyArray1<bool>>> {
                let mut m = try_vec("a mask", n, false)?;
                m.iter_mut()
                    .zip(roles)
                    .for_each(|(m, &r)| *m = r == role as u8);
                Ok(m.into_pyarray(py))
            };
            let masks = (mask(Role::Train)?, mask(Role::Val)?, mask(Role::Test)?);
            pyo3::types::PyTuple::new(
                py,
                [
                    edge_index.into_any(),
                    y,
                    masks.0.into_any(),
                    masks.1.into_any(),
                    masks.2.into_any(),
                ],
            )
        })
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

    /// The link split's record (`saintflow info`'s `link`) as a dict, or None without one.
    fn link_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDict>>> {
        let store = self.get()?;
        let Some(split) = store.link_split() else {
            return Ok(None);
        };
        let m = split.meta;
        let d = pyo3::types::PyDict::new(py);
        d.set_item("n_val", m.n_val)?;
        d.set_item("n_test", m.n_test)?;
        d.set_item("negatives", m.negatives)?;
        d.set_item("val_negative_pairs", split.val.n_negpairs())?;
        d.set_item("test_negative_pairs", split.test.n_negpairs())?;
        d.set_item("seed", m.seed)?;
        d.set_item("given", m.given)?;
        d.set_item("allow_isolated", m.allow_isolated)?;
        d.set_item("input_edges", m.input_edges)?;
        Ok(Some(d))
    }

    /// Held-out set `name` of the link split: `(pos [2, E], neg_dst [E, K], neg_pairs
    /// [2, P])`, int64 copies (global ids; every id checked < N, the tails too, which
    /// `open` leaves to `check`).
    #[allow(clippy::type_complexity)]
    fn link_split<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<(
        Bound<'py, PyArray2<i64>>,
        Bound<'py, PyArray2<i64>>,
        Bound<'py, PyArray2<i64>>,
    )> {
        guard(|| {
            let set = match name {
                "val" | "valid" => LinkSet::Val,
                "test" => LinkSet::Test,
                other => {
                    return Err(StoreError::new_err(format!(
                        "no held-out set {other:?}: expected \"val\" or \"test\"{}",
                        saintflow::suggest::did_you_mean(other, ["val", "test"].into_iter())
                    )))
                }
            };
            let store = self.get()?;
            let split = store.link_split().ok_or_else(|| {
                let p = store.path().display();
                StoreError::new_err(format!(
                    "{p}: the store has no link split (held-out validation and test edges with \
                     their negatives): make one with Store.split_edges(OUT) or `saintflow \
                     split-edges {p} -o OUT`"
                ))
            })?;
            let edges = split.set(set);
            let (e, k, p) = (edges.len(), edges.k(), edges.n_negpairs());
            fits(
                || {
                    format!("Store.link_split({name:?}): {e} positives, {e} × {k} negatives and {p} negative pairs of 8 bytes per id")
                },
                (2 * e as u128 + e as u128 * k as u128 + 2 * p as u128) * 8,
            )?;
            let store2 = store.clone();
            let r = on_pool(py, move || -> PyResult<_> {
                let edges = store2
                    .link_split()
                    .expect("checked above: the store has a split")
                    .set(set);
                let rows = |flat: &[u32], n: usize| -> PyResult<Array2<i64>> {
                    // [n, 2] pairs to PyG's [2, n]: the sources, then the tails.
                    let mut out = try_vec("Store.link_split", 2 * n, 0i64)?;
                    for (i, pair) in flat.chunks_exact(2).enumerate() {
                        out[i] = i64::from(pair[0]);
                        out[n + i] = i64::from(pair[1]);
                    }
                    Ok(Array2::from_shape_vec((2, n), out).expect("2 × n values"))
                };
                let pos = rows(edges.positives(), e)?;
                let pairs = rows(edges.negative_pairs(), p)?;
                let mut neg = try_vec("Store.link_split", e * k, 0i64)?;
                for i in 0..e {
                    let tails = lib(edges.checked_tails(i))?;
                    for (o, &t) in neg[i * k..(i + 1) * k].iter_mut().zip(tails) {
                        *o = i64::from(t);
                    }
                }
                let neg = Array2::from_shape_vec((e, k), neg).expect("e × k values");
                Ok((pos, neg, pairs))
            })?;
            let (pos, neg, pairs) = r?;
            Ok((
                pos.into_pyarray(py),
                neg.into_pyarray(py),
                pairs.into_pyarray(py),
            ))
        })
    }

    /// A new store at `output`: this one's nodes, features, labels and roles, its graph
    /// without the held-out validation and test edges, and the link split (`saintflow
    /// split-edges`; see `saintflow.Store.split_edges`).
    #[allow(clippy::too_many_arguments)]
    fn _split_edges(
        &self,
        py: Python<'_>,
        output: PathBuf,
        val: f64,
        test: f64,
        negatives: u64,
        seed: u64,
        allow_isolated: bool,
        by_time: bool,
        force: bool,
    ) -> PyResult<Store> {
        guard(|| {
            let input = self.get()?;
            // The command's output rule: never the input, a store inside a store, a link
            // or a device; an existing store replaced only with force=True.
            saintflow::atomic::OutputGuard::new()
                .input("store", input.path())
                .dir("output", &output)
                .check()
                .map_err(|e| SaintflowError::new_err(e.to_string()))?;
            let spec = SplitEdgesSpec {
                val,
                test,
                negatives,
                seed,
                allow_isolated,
                by_time,
            };
            let r = on_pool(py, || {
                split_edges(&input, &output, &spec, force, saintflow::store::check)
                    .and_then(|_| GraphStore::open(&output))
            })?;
            Ok(Store::new(lib(r)?))
        })
    }

    /// Writes a store from arrays (see `saintflow.Store.create`).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, n_nodes, src, dst, indptr, indices, x, y, y_multi, roles, symmetrize, force, induce_train = false, edge_time = None))]
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
        edge_time: Option<PyReadonlyArray1<'_, i64>>,
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
            let edge_time = match &edge_time {
                Some(t) => Some(t.as_slice()?),
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
                edge_time,
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
            let r = run_interruptible(py, &flag, || {
                pool.install(|| {
                    let mode = match induce_train {
                        true => TrainGraphMode::Induce,
                        false => TrainGraphMode::Full,
                    };
                    import_arrays_with(&graph, mode, &path, force, &Progress::hidden(), Some(&flag))
                        .and_then(|_| GraphStore::open(&path))
                })
            })?;
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

/// A store's two graphs, by the names the Python API gives them.
#[derive(Clone, Copy)]
enum Graph {
    Full,
    Train,
}

impl Graph {
    fn csr(self, store: &GraphStore) -> Csr<'_> {
        match self {
            Graph::Full => store.full(),
            Graph::Train => store.train(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Graph::Full => "full",
            Graph::Train => "train",
        }
    }
}

fn graph_named(name: &str) -> PyResult<Graph> {
    match name {
        "full" => Ok(Graph::Full),
        "train" => Ok(Graph::Train),
        other => Err(StoreError::new_err(format!(
            "no graph named {other:?}: expected \"full\" or \"train\""
        ))),
    }
}

/// Entries per task when `edge_index` is filled: 2¹⁶ entries are 512 KiB of each output row
/// (a task long next to rayon's cost of one, and a few hundred tasks on a million edges).
const EDGE_CHUNK: usize = 1 << 16;

/// `graph`'s CSR as a new `[2, E]` int64 array, filled on the default pool with the GIL
/// released: row k is the node whose offsets range holds entry k (found once per chunk by
/// a binary search over the offsets, then walked), column k the entry's neighbour, checked
/// `< N` (`open` checks the offsets, not the indices: a damaged index is a `StoreError`,
/// not an out-of-range id handed to PyG). The caller has checked the size.
fn edge_index_of<'py>(
    py: Python<'py>,
    store: &GraphStore,
    graph: Graph,
) -> PyResult<Bound<'py, PyArray2<i64>>> {
    let csr = graph.csr(store);
    let (offsets, indices) = (csr.offsets(), csr.indices());
    let (n, e) = (csr.n_nodes(), csr.n_entries());
    let mut out = try_vec("Store.edge_index", 2 * e, 0i64)?;
    let first_bad = on_pool(py, || {
        use rayon::prelude::*;
        let (rows, cols) = out.split_at_mut(e);
        rows.par_chunks_mut(EDGE_CHUNK)
            .enumerate()
            .for_each(|(c, rows)| {
                let start = (c * EDGE_CHUNK) as u64;
                // The last node whose range starts at or before `start` (offsets[0] = 0).
                let mut v = offsets.partition_point(|&o| o <= start) - 1;
                for (pos, r) in (start..).zip(rows.iter_mut()) {
                    while offsets[v + 1] <= pos {
                        v += 1;
                    }
                    *r = v as i64;
                }
            });
        cols.par_chunks_mut(EDGE_CHUNK)
            .zip(indices.par_chunks(EDGE_CHUNK))
            .enumerate()
            .filter_map(|(c, (cols, idx))| {
                let mut bad = None;
                for (k, (d, &s)) in cols.iter_mut().zip(idx).enumerate() {
                    if s as usize >= n && bad.is_none() {
                        bad = Some((c * EDGE_CHUNK + k, s));
                    }
                    *d = i64::from(s);
                }
                bad
            })
            .min()
    })?;
    if let Some((k, v)) = first_bad {
        return Err(StoreError::new_err(format!(
            "{}: the {} graph's indices[{k}] = {v}, expected < {n} (the store is damaged: \
             `saintflow check` says where)",
            store.path().display(),
            graph.name()
        )));
    }
    Ok(Array2::from_shape_vec((2, e), out)
        .expect("2 × e values")
        .into_pyarray(py))
}

fn labels_of<'py>(py: Python<'py>, store: &GraphStore, ids: &[u32]) -> PyResult<Bound<'py, PyAny>> {
    // Nothing to recycle: one call, its arrays kept by the caller.
    let bufs = Arc::new(Buffers::new(0));
    YData::of(store, ids, &bufs).into_py(py, &bufs)
}
