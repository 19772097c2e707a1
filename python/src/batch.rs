//! A batch's arrays and their way into numpy without a copy: `Batch` (what a sampling
//! worker assembles), `YData` (labels as the package hands them out), `lend` (a vector as a
//! numpy array whose base, a `BatchBuffer`, hands the buffer back when numpy frees it) and
//! `Recycle`/`Buffers` (the freed buffers kept for the next batches, fork-safe);
//! `batch_dict`, the dict `SaintSampler` turns into a `Batch` (with a link sampler's pairs,
//! `LinkArrays`, the dict `LinkSampler` turns into a `LinkBatch`).

use std::sync::{Arc, Mutex};

use numpy::ndarray::{Ix1, Ix2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use saintflow::sample::Subgraph;
use saintflow::store::{GraphStore, Labels};

use crate::error::SaintflowError;
use crate::sampler::SamplerSpec;

/// One batch, built on a sampling thread; every array moves into numpy without a copy.
pub(crate) struct Batch {
    pub(crate) index: u64,
    pub(crate) nodes: Vec<i64>,
    pub(crate) indptr: Vec<i64>,
    /// 2 × E: the rows, then the columns (`indices` is its second row).
    pub(crate) edge_index: Vec<i64>,
    pub(crate) x: Vec<f32>,
    pub(crate) roles: Vec<u8>,
    pub(crate) node_norm: Option<Vec<f32>>,
    pub(crate) edge_norm: Option<Vec<f32>>,
    pub(crate) y: YData,
    /// A link sampler's scored pairs (None: a node sampler's batch).
    pub(crate) link: Option<LinkArrays>,
    /// A typed store's batch by node type and relation (None: a homogeneous store's).
    pub(crate) hetero: Option<Box<Hetero>>,
}

/// A typed store's batch as `HeteroData` holds it: each node type's local ids are a
/// contiguous range of the batch's (`type_starts`), each relation's entries in the types'
/// own local ids.
pub(crate) struct Hetero {
    /// Local ids of type t: `type_starts[t]..type_starts[t + 1]`.
    pub(crate) type_starts: Vec<i64>,
    /// Each type's feature rows (width its own; None for a type without features).
    pub(crate) x: Vec<Option<(Vec<f32>, usize)>>,
    /// Per relation: 2 × E_r (sources' type-local ids, then destinations'), and each
    /// entry's PyG edge norm (the batch's `edge_norm` of the same entry).
    pub(crate) relations: Vec<(Vec<i64>, Option<Vec<f32>>)>,
}

impl Hetero {
    /// The typed arrays of `sub` (its relations attached), `edge_norm` the batch's per
    /// entry of its CSR: a relation's entry (u, v) is the CSR's entry (u, v).
    pub(crate) fn of(
        store: &GraphStore,
        sub: &Subgraph,
        edge_norm: Option<&[f32]>,
    ) -> Result<Hetero, String> {
        let typed = sub
            .typed
            .as_ref()
            .ok_or("a typed store's subgraph without its relations")?;
        let starts = &typed.type_starts;
        let mut x = Vec::with_capacity(starts.len() - 1);
        for t in 0..starts.len() - 1 {
            let tf = store.type_features(t);
            if tf.width == 0 {
                x.push(None);
                continue;
            }
            let nodes = &sub.nodes[starts[t] as usize..starts[t + 1] as usize];
            let mut rows = Vec::with_capacity(nodes.len() * tf.width);
            for &v in nodes {
                rows.extend_from_slice(tf.row(v).ok_or_else(|| {
                    format!("node {v} is not of type `{}`", store.node_type_name(t))
                })?);
            }
            x.push(Some((rows, tf.width)));
        }
        let mut relations = Vec::with_capacity(typed.relations.len());
        for r in &typed.relations {
            let (src0, dst0) = (starts[r.src], starts[r.dst]);
            let e = r.n_entries();
            let mut index = Vec::with_capacity(2 * e);
            push_rows(&r.offsets, &mut index);
            index.extend(r.indices.iter().map(|&c| i64::from(c - dst0)));
            let norm = match edge_norm {
                None => None,
                Some(all) => {
                    let mut norm = Vec::with_capacity(e);
                    for k in 0..r.offsets.len() - 1 {
                        let u = (src0 as usize) + k;
                        let (lo, hi) = (sub.offsets[u] as usize, sub.offsets[u + 1] as usize);
                        let row = &sub.indices[lo..hi];
                        for &c in &r.indices[r.offsets[k] as usize..r.offsets[k + 1] as usize] {
                            let at = row.partition_point(|&w| w < c);
                            if row.get(at) != Some(&c) {
                                return Err(format!(
                                    "relation {}'s entry ({u}, {c}) is not an entry of the batch",
                                    store.relation(r.relation).name
                                ));
                            }
                            norm.push(all[lo + at]);
                        }
                    }
                    Some(norm)
                }
            };
            relations.push((index, norm));
        }
        Ok(Hetero {
            type_starts: starts.iter().map(|&s| i64::from(s)).collect(),
            x,
            relations,
        })
    }

    /// The dict `Batch.to_hetero` reads: `node_types` (names), `type_ids` (each type's
    /// first global id), `labelled`, `type_starts`, `x` (an
    /// array or None per type), `edge_types` ((source, relation, destination) names),
    /// `edge_index` and `edge_norm` (per relation).
    fn into_py<'py>(self, py: Python<'py>, store: &GraphStore) -> PyResult<Bound<'py, PyDict>> {
        use numpy::{IntoPyArray, PyArrayMethods};
        let d = PyDict::new(py);
        let types = self.type_starts.len() - 1;
        let names: Vec<&str> = (0..types).map(|t| store.node_type_name(t)).collect();
        d.set_item("node_types", names)?;
        // Each type's first global id (types are contiguous id ranges) and whether it
        // carries labels.
        let first: Vec<u32> = (0..types).map(|t| store.type_range(t).start).collect();
        d.set_item("type_ids", first)?;
        let labelled: Vec<bool> = (0..types)
            .map(|t| store.types().is_some_and(|m| m.node_types[t].labelled))
            .collect();
        d.set_item("labelled", labelled)?;
        d.set_item("type_starts", self.type_starts.into_pyarray(py))?;
        let mut xs = Vec::with_capacity(types);
        for x in self.x {
            xs.push(match x {
                Some((rows, w)) => {
                    let n = rows.len() / w;
                    Some(rows.into_pyarray(py).reshape([n, w])?)
                }
                None => None,
            });
        }
        d.set_item("x", xs)?;
        let mut edge_types = Vec::new();
        let (mut index, mut norms) = (Vec::new(), Vec::new());
        for (r, (ei, norm)) in self.relations.into_iter().enumerate() {
            let rel = store.relation(r);
            edge_types.push((
                store.node_type_name(rel.src),
                rel.name,
                store.node_type_name(rel.dst),
            ));
            let e = ei.len() / 2;
            index.push(ei.into_pyarray(py).reshape([2, e])?);
            norms.push(norm.map(|v| v.into_pyarray(py)));
        }
        d.set_item("edge_types", edge_types)?;
        d.set_item("edge_index", index)?;
        d.set_item("edge_norm", norms)?;
        Ok(d)
    }
}

/// A link batch's scored pairs in local ids: the P targets, then target i's K negatives
/// at P + i·K + j (`saintflow::sample::LinkBatch`'s order).
pub(crate) struct LinkArrays {
    /// 2 × P(1 + K): the sources, then the tails.
    pub(crate) label_index: Vec<i64>,
    /// 1 for a target, 0 for a negative.
    pub(crate) label: Vec<f32>,
    /// Each pair's loss weight (targets 1/λ_e, a negative its target's / K); None without
    /// normalisation counts.
    pub(crate) weight: Option<Vec<f32>>,
    pub(crate) positives: usize,
    pub(crate) k: usize,
}

impl Batch {
    /// Its buffers back to `bufs`, as numpy hands them back when it frees the arrays.
    pub(crate) fn give_back(self, bufs: &Buffers) {
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
        if let Some(l) = self.link {
            bufs.label_index.give(l.label_index);
            bufs.label.give(l.label);
            if let Some(w) = l.weight {
                bufs.label_weight.give(w);
            }
        }
    }
}

/// A CSR's row of each entry, in entry order: the first row of PyG's `edge_index`.
pub(crate) fn push_rows(offsets: &[u32], out: &mut Vec<i64>) {
    for (i, w) in offsets.windows(2).enumerate() {
        out.extend(std::iter::repeat_n(i as i64, (w[1] - w[0]) as usize));
    }
}

/// Labels of some nodes as the package hands them out.
pub(crate) enum YData {
    /// Class ids, −1 for none.
    Single(Vec<i64>),
    /// n × C rows of 0/1.
    Multi(Vec<f32>, usize),
}

impl YData {
    pub(crate) fn of(store: &GraphStore, ids: &[u32], bufs: &Buffers) -> YData {
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

    pub(crate) fn into_py<'py>(
        self,
        py: Python<'py>,
        bufs: &Arc<Buffers>,
    ) -> PyResult<Bound<'py, PyAny>> {
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

/// Buffers of one kind that numpy has freed, for the next batches. A batch's arrays are
/// megabytes; allocated afresh, each 4 KiB page faults in, and glibc gives a buffer freed on
/// another thread back to the kernel: with two sampling threads, 480 000 page faults in 800
/// batches halved the rate (docs/bench/python.md, "Recycled batch buffers").
///
/// Fork-safe: a forked child (a PyTorch `DataLoader` worker using a sampler built in the
/// parent) may inherit `free` locked by a parent thread that does not exist there, so a
/// process other than the one that made the `Recycle` never touches it (it allocates).
pub(crate) struct Recycle<V> {
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
    pub(crate) fn pop(&self) -> V {
        if std::process::id() != self.pid {
            return V::default();
        }
        let v = self.free.lock().ok().and_then(|mut f| f.pop());
        v.unwrap_or_default()
    }

    /// Keeps `v` for a later `pop`, up to `keep` values.
    pub(crate) fn give(&self, v: V) {
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
    pub(crate) fn take(&self) -> Vec<T> {
        let mut v = self.pop();
        v.clear();
        v
    }

    /// A buffer of `len` elements whose values are unspecified (a freed buffer's, or
    /// zeros): for a caller that overwrites every one, without clearing them first.
    pub(crate) fn take_len(&self, len: usize) -> Vec<T>
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
pub(crate) struct Buffers {
    pub(crate) nodes: Recycle<Vec<i64>>,
    pub(crate) indptr: Recycle<Vec<i64>>,
    pub(crate) edge_index: Recycle<Vec<i64>>,
    pub(crate) x: Recycle<Vec<f32>>,
    pub(crate) roles: Recycle<Vec<u8>>,
    pub(crate) y: Recycle<Vec<i64>>,
    pub(crate) y_multi: Recycle<Vec<f32>>,
    pub(crate) node_norm: Recycle<Vec<f32>>,
    pub(crate) edge_norm: Recycle<Vec<f32>>,
    pub(crate) label_index: Recycle<Vec<i64>>,
    pub(crate) label: Recycle<Vec<f32>>,
    pub(crate) label_weight: Recycle<Vec<f32>>,
    /// Drawn subgraphs, once assembled: drawn on a worker and dropped by the consumer, their
    /// vectors (≈ 2.4 MB of room for a 7.6k-node subgraph of a skewed graph) were given
    /// back to the kernel and faulted in again for the next (docs/bench/python.md, "Lockstep
    /// walks").
    pub(crate) subgraphs: Recycle<Subgraph>,
}

impl Buffers {
    /// Keeping up to `keep` freed buffers of each array.
    pub(crate) fn new(keep: usize) -> Self {
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
            label_index: Recycle::new(keep),
            label: Recycle::new(keep),
            label_weight: Recycle::new(keep),
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

pub(crate) fn batch_dict<'py>(
    py: Python<'py>,
    spec: &SamplerSpec,
    b: Batch,
) -> PyResult<Bound<'py, PyDict>> {
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
    if let Some(l) = b.link {
        let pairs = l.label.len();
        d.set_item(
            "edge_label_index",
            lend(py, l.label_index, Ix2(2, pairs), bufs, |b| &b.label_index)?,
        )?;
        d.set_item(
            "edge_label",
            lend(py, l.label, Ix1(pairs), bufs, |b| &b.label)?,
        )?;
        d.set_item("edge_label_weight", norm(l.weight, |b| &b.label_weight)?)?;
        d.set_item("num_positives", l.positives)?;
        d.set_item("negatives", l.k)?;
    }
    let hetero = b.hetero.map(|h| h.into_py(py, &spec.store)).transpose()?;
    d.set_item("hetero", hetero)?;
    Ok(d)
}
