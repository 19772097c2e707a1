"""Stores: saintflow's on-disk graphs, memory-mapped."""

import json
import os
import warnings

import numpy as np

from . import _native
from ._native import StoreError
from ._util import count, require, to_numpy

ROLE_NONE, ROLE_TRAIN, ROLE_VAL, ROLE_TEST = 0, 1, 2, 3


class Store:
    """A saintflow store, memory-mapped: opening it reads only the header and the O(N)
    sections' checks; rows are read from the map when asked for.

    ``csr()``, ``roles()`` and ``features_view()`` are read-only numpy views (no copy)
    of a copy-on-write map of the section: a writer that ignores numpy's read-only flag
    (``torch.from_numpy(view)[0] = 1``) changes only this process's copy of the page, never
    the store, and cannot crash the interpreter. ``features(ids)`` and ``labels(ids)``
    gather rows into new arrays.

    ``ids`` are node ids as numpy indexes rows: a 1-D array or list of integers (any
    integer dtype) or a boolean mask of length N. A float id (``1.5``), an id < 0 or ≥ N,
    a mask of another length or an array of more than one dimension raises
    :class:`NodeIdError` (an ``IndexError``, as numpy's, and a :class:`StoreError`).
    Negative ids do not count from the end: a node id is not a position, and −1 is
    "no label" elsewhere.

    ``close()`` lets go of the map (also on leaving a ``with`` block); later calls raise
    :class:`StoreError`. Views and batches already handed out, and samplers built on the
    store, keep their own reference and stay valid.
    """

    __slots__ = ("_s",)

    def __init__(self, native):
        self._s = native

    @classmethod
    def open(cls, path):
        """Opens the store directory ``path`` (``saintflow gen`` / ``import`` wrote it)."""
        return cls(_native.Store.open(os.fspath(path)))

    def close(self):
        """Lets go of the store's map; calling it again does nothing."""
        self._s.close()

    @property
    def closed(self):
        return self._s.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def path(self):
        return self._s.path

    @property
    def n_nodes(self):
        return self._s.n_nodes

    @property
    def n_edges(self):
        """Directed entries of the full graph: each undirected edge counts twice, as in
        PyG's ``num_edges``."""
        return self._s.n_edges

    @property
    def n_features(self):
        return self._s.n_features

    @property
    def n_classes(self):
        return self._s.n_classes

    @property
    def multilabel(self):
        return self._s.multilabel

    def split(self, name):
        """Node ids of the split ``"train"``, ``"val"`` or ``"test"`` (int64, ascending)."""
        return self._s.split(name)

    def roles(self):
        """The role of every node (uint8: 0 none, 1 train, 2 val, 3 test), a view."""
        return self._s.roles()

    def features(self, ids):
        """Feature rows of ``ids`` as a new ``[len(ids), F]`` float32 array."""
        return self._s.features(_ids(ids, self._s))

    def features_view(self):
        """The whole ``[N, F]`` float32 feature matrix: a read-only view of the map."""
        return self._s.features_view()

    def labels(self, ids):
        """Labels of ``ids``: int64 class ids (−1 = none), or float32 0/1 rows
        ``[len(ids), C]`` for a multi-label store."""
        return self._s.labels(_ids(ids, self._s))

    def csr(self, graph="full"):
        """``(indptr, indices)`` of the ``"full"`` or ``"train"`` graph: read-only views of
        the map (uint64, uint32), no copy."""
        return self._s.csr(graph)

    def edge_index(self, graph="full"):
        """The ``"full"`` or ``"train"`` graph as PyG's ``edge_index``: a new ``[2, E]``
        int64 array, the row and the column of every CSR entry in ``csr()``'s order
        (``edge_index[1]`` is ``indices``, widened). It is a copy (16 bytes an entry),
        checked against the memory first (``MemoryError`` naming the bytes); every
        column is checked to be a node id as it is copied."""
        return self._s.edge_index(graph)

    def to_torch(self, graph="full"):
        """The whole graph as a dict of torch tensors, for full-graph evaluation of a
        model trained on a sampler's batches (PyG's ``Data`` fields, without PyG):

        * ``x`` ``[N, F]`` float32: **no copy**, the tensor is over :meth:`features_view`,
          the copy-on-write map of the store's features (pages are read as the model
          reads them; an in-place write changes this process's private copy of the
          page, never the store). ``x.clone()`` for a copy in memory.
        * ``y``: ``[N]`` int64 class ids (−1: no label), or ``[N, C]`` float32 0/1 rows
          for a multi-label store (``labels()`` of every node);
        * ``edge_index`` ``[2, E]`` int64 of ``graph`` (:meth:`edge_index`);
        * ``train_mask``, ``val_mask``, ``test_mask`` ``[N]`` bool, from the roles;
        * ``num_nodes`` (an int).

        Everything but ``x`` is a new array: ``16 × E`` bytes for ``edge_index`` and
        about ``11 × N`` (``3 + 4·C`` per node when multi-label) for the rest, checked
        against the memory this process may use before anything is allocated
        (``MemoryError`` naming the bytes). ``graph="train"`` takes the training
        graph's edges; the nodes, features, labels and masks are all N nodes' either
        way."""
        torch = require("torch", "Store.to_torch")
        return self._tensors(torch, graph, "Store.to_torch")

    def to_pyg(self, graph="full"):
        """:meth:`to_torch`'s tensors as a ``torch_geometric.data.Data`` (``x``, ``y``,
        ``edge_index``, ``train_mask``, ``val_mask``, ``test_mask``, ``num_nodes``): the
        full graph for evaluating, with ``model.eval()``, a model trained on
        ``SaintSampler`` batches. ``x`` is the features' map, not a copy (see
        :meth:`to_torch`)."""
        pyg_data = require("torch_geometric.data", "Store.to_pyg")
        torch = require("torch", "Store.to_pyg")
        return pyg_data.Data(**self._tensors(torch, graph, "Store.to_pyg"))

    def _tensors(self, torch, graph, what):
        edge_index, y, train, val, test = self._s._graph_arrays(graph, what)
        x = self._s.features_view()
        with warnings.catch_warnings():
            # torch warns that a read-only array is not writable through a tensor; this
            # one's memory is a writable copy-on-write map (numpy's flag only keeps
            # numpy from writing by accident), so a write is private, never a fault.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            x = torch.from_numpy(x)
        return {
            "x": x,
            "y": torch.from_numpy(y),
            "edge_index": torch.from_numpy(edge_index),
            "train_mask": torch.from_numpy(train),
            "val_mask": torch.from_numpy(val),
            "test_mask": torch.from_numpy(test),
            "num_nodes": self.n_nodes,
        }

    @property
    def has_link_split(self):
        """Whether the store holds a link split (held-out validation and test edges with
        their negatives: ``saintflow split-edges``, :meth:`split_edges`, ``import ogb-link``)."""
        return self._s.link_info() is not None

    def link_info(self):
        """The link split's record as a dict (``n_val``, ``n_test``, ``negatives`` K per
        positive, ``val_negative_pairs``, ``test_negative_pairs``, ``seed``, ``given``,
        ``allow_isolated``, ``input_edges``), or ``None`` without one."""
        return self._s.link_info()

    def link_split(self, name):
        """The held-out set ``"val"`` or ``"test"`` of the store's link split, for
        evaluation: a :class:`HeldOutLinks` of int64 numpy arrays in global node ids
        (copies). Neither set's edges are in the store's graphs. A store without a link
        split raises :class:`StoreError` naming how to make one."""
        pos, neg_dst, neg_pairs = self._s.link_split(name)
        return HeldOutLinks(name, pos, neg_dst, neg_pairs, self._s.link_info()["given"])

    def split_edges(self, path, *, val=0.05, test=0.1, negatives=1000, seed=0, allow_isolated=False, by_time=False, force=False):
        """Writes a store at ``path`` with a link split, as ``saintflow split-edges``: this
        store's nodes, features, labels and roles, its graph without ``val`` and ``test``
        (fractions of its undirected edges, each in [0, 1), their sum below 1) held out,
        each held-out positive with ``negatives`` K tail negatives (≥ 1) and one negative
        pair, all drawn from ``seed`` (equal arguments give byte-identical stores). An
        edge is held out only while both its ends keep one, unless ``allow_isolated``. With
        ``by_time`` (``--by-time``; the store must have edge times) the latest edges go to
        test and the next latest to validation instead of a random draw. This
        store is not modified; an existing store at ``path`` is replaced only with
        ``force=True``. Returns the new store."""
        path = os.fspath(path)
        for name, x in (("val", val), ("test", test)):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise TypeError(f"{name} = {x!r}: expected a fraction in [0, 1)")
            if not 0 <= x < 1:
                raise ValueError(f"{name} = {x}: expected a fraction in [0, 1)")
        if val + test >= 1:
            raise ValueError(f"val = {val} + test = {test}: expected a sum below 1 (some edges must stay for message passing)")
        k = count(negatives, "negatives")
        if k == 0 or k > 2**32 - 1:
            raise ValueError(f"negatives = {k}: expected 1 ..= {2**32 - 1} tail negatives per positive")
        seed = count(seed, "seed")
        return Store(self._s._split_edges(path, float(val), float(test), k, seed, bool(allow_isolated), bool(by_time), bool(force)))

    def info(self):
        """``saintflow info --json`` as a dict."""
        return json.loads(self._s.info_json())

    def check(self):
        """The full check (``saintflow check``); raises :class:`StoreError` on damage."""
        self._s.check()

    @classmethod
    def create(
        cls,
        path,
        edge_index=None,
        *,
        indptr=None,
        indices=None,
        x=None,
        y=None,
        train_mask=None,
        val_mask=None,
        test_mask=None,
        roles=None,
        n_nodes=None,
        symmetrize=False,
        force=False,
        train_graph="full",
        edge_time=None,
    ):
        """Writes a store from arrays (numpy, or torch tensors) through the importers'
        writer: checked, published atomically (a failed write leaves nothing that looks
        like a store), replacing a store at ``path`` only with ``force=True``.

        The graph: ``edge_index`` (``[2, E]``: entry k from ``edge_index[0, k]`` to
        ``edge_index[1, k]``, PyG's layout) or scipy's CSR ``indptr``/``indices`` (or a
        scipy sparse matrix as ``edge_index``). It must be symmetric unless
        ``symmetrize=True`` adds the reverse of every entry; self loops and duplicates
        are dropped. ``x``: ``[N, F]`` features (float32). ``y``: ``[N]`` class ids
        (negative = unlabelled) or ``[N, C]`` 0/1 multi-label rows. The split:
        ``train_mask``/``val_mask``/``test_mask`` (boolean ``[N]``) or ``roles``
        (``[N]``: 0 none, 1 train, 2 val, 3 test).

        ``train_graph``: ``"full"`` (the default: transductive, as OGB's and PyG's
        Planetoid protocol — the whole graph, training labels only) or ``"induce"`` (the
        edges between training nodes only, GraphSAINT's inductive setting; on a split of
        few training nodes that is almost no edges). ``Store.from_pyg`` and
        ``Store.from_dgl`` take it too.

        ``edge_time``: an integer time per entry of ``edge_index`` (``[E]``) or of
        ``indices``, stored as the edge times that ``split-edges --by-time`` splits on (an
        edge given more than once, in both directions or repeated, keeps the earliest).
        Not with a scipy matrix, whose entries are reordered.
        """
        path = os.fspath(path)
        if train_graph not in ("full", "induce"):
            raise ValueError(f'{path}: train_graph = {train_graph!r}: expected "full" or "induce"')
        edge_index, indptr, indices, x, y = map(to_numpy, (edge_index, indptr, indices, x, y))
        if edge_time is not None:
            if edge_index is not None and hasattr(edge_index, "tocsr"):
                raise StoreError(f"{path}: edge_time with a scipy matrix: give edge_index or indptr/indices")
            edge_time = np.asarray(to_numpy(edge_time))
            if edge_time.ndim != 1 or edge_time.dtype.kind not in "iu":
                raise StoreError(
                    f"{path}: edge_time: expected integer times of shape (E,), got {edge_time.dtype} {edge_time.shape}"
                )
            edge_time = np.ascontiguousarray(edge_time, dtype=np.int64)
        src = dst = None
        if edge_index is not None and hasattr(edge_index, "tocsr"):
            m = edge_index.tocsr()
            if m.shape[0] != m.shape[1]:
                raise StoreError(f"{path}: adjacency matrix is {m.shape[0]} × {m.shape[1]}, expected square")
            m.sort_indices()
            indptr, indices = m.indptr, m.indices
            n_nodes = m.shape[0] if n_nodes is None else n_nodes
        elif edge_index is not None:
            e = np.asarray(edge_index)
            if e.ndim != 2 or e.shape[0] != 2:
                raise StoreError(f"{path}: edge_index has shape {e.shape}, expected (2, E)")
            src = np.ascontiguousarray(e[0], dtype=np.int64)
            dst = np.ascontiguousarray(e[1], dtype=np.int64)
        if (src is None) == (indptr is None or indices is None):
            raise StoreError(f"{path}: give edge_index, or indptr and indices (one of the two)")
        if indptr is not None:
            indptr = np.ascontiguousarray(indptr, dtype=np.int64)
            indices = np.ascontiguousarray(indices, dtype=np.int64)
        if x is not None:
            x = np.asarray(x)
            if x.ndim == 1:
                x = x[:, None]
            if x.ndim != 2:
                raise StoreError(f"{path}: x has shape {x.shape}, expected (N, F)")
            x = np.ascontiguousarray(x, dtype=np.float32)
        y_single = y_multi = None
        if y is not None:
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim == 1:
                if y.dtype.kind == "f":
                    if not np.all(np.isnan(y) | (y == np.round(y))):
                        raise StoreError(f"{path}: y holds non-integer class ids")
                    y = np.where(np.isnan(y), -1, y)
                y_single = np.ascontiguousarray(y, dtype=np.int64)
            elif y.ndim == 2:
                ok = (y == 0) | (y == 1)
                if not np.all(ok):
                    r, c = np.argwhere(~ok)[0]
                    raise StoreError(f"{path}: y[{r}, {c}] = {y[r, c]}: multi-label rows must be 0 or 1")
                y_multi = np.ascontiguousarray(y, dtype=np.uint8)
            else:
                raise StoreError(f"{path}: y has shape {y.shape}, expected (N,) or (N, C)")
        masks = [to_numpy(m) for m in (train_mask, val_mask, test_mask)]
        if any(m is not None for m in masks):
            if roles is not None:
                raise StoreError(f"{path}: give masks or roles, not both")
            roles = _roles_from_masks(path, masks)
        if roles is not None:
            roles = np.ascontiguousarray(to_numpy(roles), dtype=np.uint8)
        n = count(n_nodes, "n_nodes")
        native = _native.Store._create(
            path, n, src, dst, indptr, indices, x, y_single, y_multi, roles, bool(symmetrize), bool(force),
            train_graph == "induce", edge_time,
        )
        return cls(native)

    @classmethod
    def import_graphsaint(cls, directory, path, *, standardize=False, force=False):
        """Imports a GraphSAINT dataset directory (``adj_full.npz``, ``adj_train.npz``,
        ``feats.npy``, ``class_map.json``, ``role.json``), as ``saintflow import graphsaint``."""
        return cls(_native.Store.import_graphsaint(os.fspath(directory), os.fspath(path), standardize, force))

    @classmethod
    def from_pyg(cls, data, path, *, symmetrize=True, force=False, train_graph="full"):
        """A store from a PyTorch Geometric ``Data`` object (``edge_index``, ``x``, ``y``
        and the ``train_mask``/``val_mask``/``test_mask`` it has)."""
        require("torch_geometric", "Store.from_pyg")
        get = lambda k: getattr(data, k, None)  # noqa: E731
        return cls.create(
            path,
            get("edge_index"),
            x=get("x"),
            y=get("y"),
            train_mask=get("train_mask"),
            val_mask=get("val_mask"),
            test_mask=get("test_mask"),
            n_nodes=data.num_nodes,
            symmetrize=symmetrize,
            force=force,
            train_graph=train_graph,
        )

    @classmethod
    def from_dgl(cls, g, path, *, symmetrize=True, force=False, train_graph="full"):
        """A store from a homogeneous DGL graph (``ndata``'s ``feat``, ``label``,
        ``train_mask``/``val_mask``/``test_mask``)."""
        require("dgl", "Store.from_dgl")
        src, dst = g.edges()
        nd = g.ndata
        get = lambda k: nd[k] if k in nd else None  # noqa: E731
        return cls.create(
            path,
            np.stack([to_numpy(src), to_numpy(dst)]),
            x=get("feat"),
            y=get("label"),
            train_mask=get("train_mask"),
            val_mask=get("val_mask"),
            test_mask=get("test_mask"),
            n_nodes=g.num_nodes(),
            symmetrize=symmetrize,
            force=force,
            train_graph=train_graph,
        )

    def __repr__(self):
        return repr(self._s)

    def __reduce__(self):
        return (Store.open, (self.path,))


class HeldOutLinks:
    """One held-out set of a store's link split (``Store.link_split``), int64 arrays in
    global node ids: ``pos_edge_index`` ``[2, E]`` the positives (u, v); ``neg_dst``
    ``[E, K]`` each positive's K tail negatives, ``(pos_edge_index[0, i], neg_dst[i, j])``
    (MRR and Hits@K, ogbl-citation2's protocol; K = 0 in a given split without them);
    ``neg_edge_index`` ``[2, P]`` the negative pairs (AUC and AP, the GAE protocol; a pool
    of any size in a given split). ``edge_label_index`` ``[2, E + P]`` and ``edge_label``
    (1.0 then 0.0, float32) put positives and pairs together as PyG's ``RandomLinkSplit``
    hands out its validation and test data. ``given``: the negatives are a dataset's own
    (``import ogb-link``), kept as drawn (a few may repeat or be true edges).
    """

    __slots__ = ("name", "pos_edge_index", "neg_dst", "neg_edge_index", "given")

    def __init__(self, name, pos_edge_index, neg_dst, neg_edge_index, given):
        self.name = name
        self.pos_edge_index = pos_edge_index
        self.neg_dst = neg_dst
        self.neg_edge_index = neg_edge_index
        self.given = given

    @property
    def num_positives(self):
        return self.pos_edge_index.shape[1]

    @property
    def negatives(self):
        """Tail negatives per positive K."""
        return self.neg_dst.shape[1]

    @property
    def edge_label_index(self):
        return np.concatenate([self.pos_edge_index, self.neg_edge_index], axis=1)

    @property
    def edge_label(self):
        e, p = self.pos_edge_index.shape[1], self.neg_edge_index.shape[1]
        return np.concatenate([np.ones(e, dtype=np.float32), np.zeros(p, dtype=np.float32)])

    def to_torch(self):
        """A dict of torch tensors: the three arrays, ``edge_label_index`` and ``edge_label``."""
        torch = require("torch", "HeldOutLinks.to_torch")
        return {
            k: torch.from_numpy(getattr(self, k))
            for k in ("pos_edge_index", "neg_dst", "neg_edge_index", "edge_label_index", "edge_label")
        }

    def __repr__(self):
        return (
            f"HeldOutLinks({self.name!r}, positives={self.num_positives}, negatives={self.negatives}, "
            f"negative_pairs={self.neg_edge_index.shape[1]}, given={self.given})"
        )


class NodeIdError(StoreError, IndexError):
    """Node ids that are not ids of the store: not integers, out of range, or not 1-D."""


def _ids(ids, native):
    """``ids`` as a contiguous int64 array of node ids in ``0 .. N`` (see :class:`Store`)."""
    n = native.n_nodes
    where = native.path
    a = np.asarray(to_numpy(ids))
    if a.ndim != 1:
        raise NodeIdError(f"{where}: ids has shape {a.shape}, expected a 1-D array of node ids")
    if a.dtype == np.bool_:
        if len(a) != n:
            raise NodeIdError(f"{where}: a boolean mask of {len(a)} entries, expected one per node ({n})")
        return np.flatnonzero(a).astype(np.int64)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind not in "iu":
        raise NodeIdError(
            f"{where}: ids of dtype {a.dtype}, expected integers (or a boolean mask), as numpy "
            "indexes: a float id is not rounded"
        )
    lo, hi = a.min(), a.max()
    if lo < 0 or hi >= n:
        k = int(np.argmax(a < 0)) if lo < 0 else int(np.argmax(a >= n))
        raise NodeIdError(f"{where}: ids[{k}] = {a[k]} is out of range for {n} nodes, expected 0 ..= {n - 1}")
    return np.ascontiguousarray(a, dtype=np.int64)


def _roles_from_masks(path, masks):
    n = next(len(m) for m in masks if m is not None)
    roles = np.zeros(n, dtype=np.uint8)
    seen = np.zeros(n, dtype=bool)
    for name, m, role in zip(("train_mask", "val_mask", "test_mask"), masks, (ROLE_TRAIN, ROLE_VAL, ROLE_TEST)):
        if m is None:
            continue
        m = np.asarray(m).astype(bool).reshape(-1)
        if len(m) != n:
            raise StoreError(f"{path}: {name} has {len(m)} entries, the other masks {n}")
        both = m & seen
        if both.any():
            raise StoreError(f"{path}: node {int(np.argmax(both))} is in {name} and an earlier mask")
        roles[m] = role
        seen |= m
    return roles
