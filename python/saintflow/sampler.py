"""GraphSAINT samplers as a PyTorch-style loader: node batches (``SaintSampler``) and link
batches (``LinkSampler``: each subgraph with its target edges and their negatives)."""

import numbers
import operator
import os

from . import _native
from ._native import SampleError, StoreError
from ._util import count, require
from .store import ROLE_TEST, ROLE_TRAIN, ROLE_VAL, Store

# PyG's GraphSAINT parameter names → each kind's own.
_PYG_NAMES = {
    "rw": {"batch_size": "roots", "walk_length": "depth"},
    "node": {"batch_size": "budget"},
    "edge": {"batch_size": "edges"},
    "frontier": {"batch_size": "budget"},
}


class Batch:
    """One sampled subgraph, every array numpy (moved from Rust, not copied).

    ``n_id`` the subgraph's nodes as global ids (int64, ascending; local id i is
    ``n_id[i]``); ``edge_index`` ``[2, E]`` local (row, col), PyG's layout, with
    ``indptr``/``indices`` the same CSR; ``x`` ``[n, F]`` float32; ``y`` int64 (−1 =
    unlabelled) or float32 ``[n, C]`` multi-label; ``train_mask``/``val_mask``/``test_mask``;
    ``node_norm`` ``[n]`` and ``edge_norm`` ``[E]`` with exactly PyG's GraphSAINT meaning
    (``None`` when the sampler has ``sample_coverage=0``); ``index`` the subgraph's index
    (subgraph i depends only on the seed and i).

    On a typed store (node and edge types) the same batch also comes by type: ``hetero``,
    a dict of ``node_types`` (names), ``type_starts`` (local ids of type t are
    ``type_starts[t]:type_starts[t + 1]``: types are contiguous), ``x`` (each type's
    feature rows at its own width, ``None`` for a type without features), ``edge_types``
    (``(source, relation, destination)`` names), ``edge_index`` (per relation ``[2, E_r]``
    in the two types' own local ids) and ``edge_norm`` (per relation, each entry's
    ``edge_norm``); ``to_hetero()`` makes it a PyG ``HeteroData``. ``None`` on a
    homogeneous store.
    """

    __slots__ = (
        "index",
        "n_id",
        "indptr",
        "indices",
        "edge_index",
        "x",
        "y",
        "roles",
        "node_norm",
        "edge_norm",
        "hetero",
    )

    # What a batch dict gives (a subclass adds its own); the arrays to_torch converts.
    _FIELDS = __slots__
    _TENSORS = ("n_id", "edge_index", "indptr", "indices", "x", "y", "node_norm", "edge_norm")

    def __init__(self, d):
        for k in self._FIELDS:
            setattr(self, k, d[k])

    @property
    def num_nodes(self):
        return len(self.n_id)

    @property
    def num_edges(self):
        return len(self.indices)

    @property
    def train_mask(self):
        return self.roles == ROLE_TRAIN

    @property
    def val_mask(self):
        return self.roles == ROLE_VAL

    @property
    def test_mask(self):
        return self.roles == ROLE_TEST

    def to_torch(self):
        """A dict of torch tensors sharing the arrays' memory (``torch.from_numpy``)."""
        torch = require("torch", "Batch.to_torch")
        out = {}
        for k in self._TENSORS:
            v = getattr(self, k)
            out[k] = None if v is None else torch.from_numpy(v)
        for k in ("train_mask", "val_mask", "test_mask"):
            out[k] = torch.from_numpy(getattr(self, k))
        return out

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` as PyG's ``GraphSAINTSampler`` yields it
        (``x``, ``y``, ``edge_index``, masks, ``node_norm``, ``edge_norm``) plus ``n_id``."""
        pyg_data = require("torch_geometric.data", "Batch.to_pyg")
        t = self.to_torch()
        data = pyg_data.Data(x=t["x"], y=t["y"], edge_index=t["edge_index"], num_nodes=self.num_nodes)
        for k in ("train_mask", "val_mask", "test_mask", "n_id"):
            data[k] = t[k]
        if self.node_norm is not None:
            data.node_norm = t["node_norm"]
            data.edge_norm = t["edge_norm"]
        return data

    def to_hetero(self):
        """A ``torch_geometric.data.HeteroData`` of a typed store's batch: per node type
        ``n_id`` (ids within the type, as PyG's heterogeneous loaders give them), ``x``
        (absent for a type without features: ``num_nodes`` then), and for a labelled type
        ``y``, the three masks and ``node_norm``; per relation ``(source, relation,
        destination)`` its ``edge_index`` (messages from source to destination) and
        ``edge_norm``. A homogeneous store's batch raises ``ValueError`` (``to_pyg``)."""
        if self.hetero is None:
            raise ValueError("to_hetero: the batch is of a homogeneous store; use to_pyg")
        pyg_data = require("torch_geometric.data", "Batch.to_hetero")
        torch = require("torch", "Batch.to_hetero")
        h = self.hetero
        data = pyg_data.HeteroData()
        starts = h["type_starts"]
        t = self.to_torch()
        for k, name in enumerate(h["node_types"]):
            a, b = int(starts[k]), int(starts[k + 1])
            d = data[name]
            d.n_id = t["n_id"][a:b] - int(h["type_ids"][k])
            if h["x"][k] is not None:
                d.x = torch.from_numpy(h["x"][k])
            else:
                d.num_nodes = b - a
            if h["labelled"][k]:
                d.y = t["y"][a:b]
                for m in ("train_mask", "val_mask", "test_mask"):
                    d[m] = t[m][a:b]
                if t["node_norm"] is not None:
                    d.node_norm = t["node_norm"][a:b]
        for k, et in enumerate(h["edge_types"]):
            s = data[tuple(et)]
            s.edge_index = torch.from_numpy(h["edge_index"][k])
            if h["edge_norm"][k] is not None:
                s.edge_norm = torch.from_numpy(h["edge_norm"][k])
        return data

    def __repr__(self):
        return f"Batch(index={self.index}, num_nodes={self.num_nodes}, num_edges={self.num_edges})"


class SaintSampler:
    """GraphSAINT subgraphs of a store as batches, drawn by saintflow's samplers on their
    own threads, ahead of the consumer and with the GIL released.

    ``kind``: ``"rw"`` (random walks), ``"frontier"``, ``"edge"``, ``"node"`` or
    ``"full"``; its parameters by their saintflow names (``sf.sampler_kinds()``) or PyG's
    (``batch_size``: walk roots / nodes / edges; ``walk_length``). ``graph``:
    ``"train"`` (the training graph, inductive) or ``"full"`` (transductive).
    ``num_steps``: batches per epoch (default: enough to cover the training nodes once,
    as ``saintflow train``). ``sample_coverage``: pre-sampling for the normalisation, as
    PyG's: about ``sample_coverage × N`` nodes drawn (0: no ``node_norm``/``edge_norm``).
    ``clip``: node counts cut to a multiple of this (default 16; 1 = off). Each iteration
    is one epoch; subgraph i of the run depends only on ``(seed, i)``, so batches equal
    ``saintflow sample --seed S`` subgraph for subgraph.

    Bounds (``ValueError`` beyond them): ``threads`` 1 ..= 256, as the command line's ``--threads`` (``None``:
    one per core; 0 is refused, as ``--threads 0``); ``num_steps`` ≥ 1;
    ``sample_coverage`` 0 ..= 10 000. Sizes whose draw buffers cannot fit the memory
    (``walk_length=10**12``) raise ``MemoryError`` before anything is drawn. Ctrl-C
    interrupts the normalisation's pre-sampling.

    Processes: the sampler works in a forked child (``os.fork``, ``multiprocessing``'s
    ``fork`` context, a PyTorch ``DataLoader`` worker), built there or inherited; its
    threads are started in the process that iterates. An epoch's iterator does not cross
    a fork (its sampling thread stays in the parent): iterate again in the child. A sampler
    pickles as its arguments (``spawn``/``forkserver`` workers rebuild it: the store
    opened by path, the pre-sampling redone to the same norms). Indexing
    (``sampler[i]``: subgraph i, as ``subgraph(i)``) makes it a map-style dataset, so
    ``torch.utils.data.DataLoader(sampler, batch_size=None, num_workers=2,
    collate_fn=lambda b: b)`` draws batches in worker processes.
    """

    def __init__(
        self,
        store,
        kind="rw",
        *,
        graph="train",
        seed=1,
        threads=None,
        num_steps=None,
        sample_coverage=50,
        clip=None,
        **keys,
    ):
        self._init(store, kind, dict(graph=graph, seed=seed, threads=threads, num_steps=num_steps,
                                     sample_coverage=sample_coverage, clip=clip), keys, None)

    def _init(self, store, kind, common, keys, link):
        if not isinstance(store, Store):
            store = Store.open(os.fspath(store))
        # What rebuilds it in another process (pickle: a `spawn` or `forkserver` worker).
        self._args = (kind, dict(common, **(link or {}), **keys))
        graph, seed, threads = common["graph"], common["seed"], common["threads"]
        num_steps, sample_coverage, clip = common["num_steps"], common["sample_coverage"], common["clip"]
        names = _PYG_NAMES.get(kind, {})
        native_keys = {}
        for k, v in keys.items():
            if v is None:
                continue
            native_keys[names.get(k, k)] = v
        self.store = store
        self._s = _native.Sampler(
            store._s,
            kind,
            graph,
            int(seed),
            count(threads, "threads"),
            count(num_steps, "num_steps"),
            float(sample_coverage),
            count(clip, "clip"),
            native_keys,
            link,
        )

    def __reduce__(self):
        # The same sampler in the unpickling process: the store opened again by path and
        # the pre-sampling redone, with the same seed, so the same norms and subgraphs.
        return (_rebuild, (type(self), os.fspath(self.store.path), self._args))

    _batch = Batch

    def __iter__(self):
        for d in self._s.epoch_iter():
            yield self._batch(d)

    def __len__(self):
        return self._s.num_steps

    def __getitem__(self, index):
        """Subgraph ``index`` of the run, as ``subgraph(index)``: what a map-style
        ``DataLoader`` asks for. A negative index is an ``IndexError`` (the run has no end
        to count from)."""
        if isinstance(index, bool):
            raise TypeError(f"index = {index!r}: expected an integer")
        i = operator.index(index)
        if i < 0:
            raise IndexError(f"index = {i}: expected a subgraph index ≥ 0")
        return self.subgraph(i)

    def batches(self, first, count):
        """Subgraphs ``first .. first + count`` of the run, in order (drawn ahead)."""
        for d in self._s.iter_range(int(first), int(count)):
            yield self._batch(d)

    def subgraph(self, index, seed=None):
        """Subgraph ``index`` alone (``seed``: another run's)."""
        return self._batch(self._s.subgraph(int(index), seed))

    @property
    def num_steps(self):
        return self._s.num_steps

    @property
    def threads(self):
        return self._s.threads

    @property
    def kind(self):
        return self._s.kind

    @property
    def pre_sampled(self):
        """Subgraphs drawn for the normalisation (their seed: ``norm_seed``)."""
        return self._s.pre_sampled

    @property
    def norm_seed(self):
        return self._s.norm_seed

    def node_counts(self):
        """C_v: how often each node of the sampled graph appeared in the pre-sampling."""
        return self._s.node_counts()

    def edge_counts(self):
        """C_{u,v} of every entry of the sampled graph's CSR."""
        return self._s.edge_counts()

    def __repr__(self):
        return f"SaintSampler(kind={self.kind!r}, num_steps={self.num_steps}, threads={self.threads})"



def _rebuild(cls, path, args):
    kind, keys = args
    return cls(Store.open(path), kind, **keys)


class LinkBatch(Batch):
    """One sampled subgraph with its target edges and their negatives: what PyG's
    ``LinkNeighborLoader`` yields, from a GraphSAINT sampler. Beside :class:`Batch`'s
    arrays (``edge_index`` without the targets when the sampler has
    ``exclude_targets=True``):

    ``edge_label_index`` ``[2, P + P·K]`` int64, subgraph-local ids (index ``x``/``n_id``
    with them): the P positives first, each an undirected edge of the sampled graph once,
    as ``(i, j)`` with ``i < j``; then the negatives, negative ``j`` of positive ``i`` at
    column ``P + i·K + j``, with positive i's source. ``edge_label`` ``[P + P·K]`` float32:
    1.0 for the positives, 0.0 for the negatives (PyG's binary labels).
    ``edge_label_weight`` ``[P + P·K]`` float32 or ``None``: each positive's GraphSAINT
    loss weight 1/λ_e = N_pre / (targets · C_e · M) (M the sampled graph's undirected
    edges, C_e the edge's count in the pre-sampling), each negative its positive's / K, so
    ``(edge_label_weight * bce).sum()`` estimates the mean positive loss over every edge
    of the graph plus the mean negative loss; ``None`` without pre-sampling
    (``sample_coverage=0``, or the ``"full"`` kind), where the plain mean is the estimate.
    ``num_positives`` P and ``negatives`` K. In PyG's triplet layout (a softmax or
    margin loss): ``src_index`` ``[P]``, ``dst_pos_index`` ``[P]`` and ``dst_neg_index``
    ``[P, K]`` (alias ``neg_dst``), views of ``edge_label_index``.
    """

    __slots__ = (
        "edge_label_index",
        "edge_label",
        "edge_label_weight",
        "num_positives",
        "negatives",
    )
    _FIELDS = Batch._FIELDS + __slots__

    _TENSORS = Batch._TENSORS + ("edge_label_index", "edge_label", "edge_label_weight")

    @property
    def pos_weight(self):
        """The positives' weights 1/λ_e ``[P]`` (``None`` without pre-sampling)."""
        w = self.edge_label_weight
        return None if w is None else w[: self.num_positives]

    @property
    def src_index(self):
        """The positives' sources ``[P]`` (local ids), also every negative's source."""
        return self.edge_label_index[0, : self.num_positives]

    @property
    def dst_pos_index(self):
        """The positives' tails ``[P]`` (local ids)."""
        return self.edge_label_index[1, : self.num_positives]

    @property
    def dst_neg_index(self):
        """The negatives' tails ``[P, K]``: row i for positive i (a view)."""
        p, k = self.num_positives, self.negatives
        return self.edge_label_index[1, p:].reshape(p, k)

    neg_dst = dst_neg_index

    def to_torch(self):
        """As :meth:`Batch.to_torch`, with ``edge_label_index``, ``edge_label``,
        ``edge_label_weight`` and the triplet views ``src_index``, ``dst_pos_index``,
        ``dst_neg_index`` (all sharing the arrays' memory)."""
        torch = require("torch", "LinkBatch.to_torch")
        out = super().to_torch()
        for k in ("src_index", "dst_pos_index", "dst_neg_index"):
            out[k] = torch.from_numpy(getattr(self, k))
        return out

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` with :meth:`Batch.to_pyg`'s attributes and
        ``edge_label_index``, ``edge_label`` (LinkNeighborLoader's names), ``src_index``,
        ``dst_pos_index``, ``dst_neg_index`` (its triplet names) and, with pre-sampling,
        ``edge_label_weight``."""
        data = super().to_pyg()
        t = self.to_torch()
        for k in ("edge_label_index", "edge_label", "src_index", "dst_pos_index", "dst_neg_index"):
            data[k] = t[k]
        if self.edge_label_weight is not None:
            data.edge_label_weight = t["edge_label_weight"]
        return data

    def __repr__(self):
        return (
            f"LinkBatch(index={self.index}, num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
            f"num_positives={self.num_positives}, negatives={self.negatives})"
        )


# PyG's LinkNeighborLoader arguments that have no meaning here, with what to use instead.
_PYG_LINK_HINTS = {
    "neg_sampling_ratio": "negatives=K: K negatives per positive (negative_ends=\"tail\" keeps the positive's source, \"both\" draws pairs as PyG)",
    "neg_sampling": "negatives=K, negative_sampler=\"uniform\" | \"degree\" | \"in_batch\" and negative_ends=\"both\" (PyG's pairs) or \"tail\"",
    "edge_label_index": "the targets are the sampled subgraph's own edges (share: targets=)",
    "num_neighbors": "a GraphSAINT sampler's keys (kind=, batch_size=, walk_length=, ...)",
}


class LinkSampler(SaintSampler):
    """GraphSAINT subgraphs as link-prediction batches (:class:`LinkBatch`): PyG's
    ``LinkNeighborLoader`` from saintflow's samplers, drawn as :class:`SaintSampler` draws
    them (same ``kind``, keys, ``graph``, ``seed``, ``threads``, ``sample_coverage``,
    ``clip``; subgraph i depends only on ``(seed, i)``) with the targets and negatives
    of a link plan's ``[task]`` (the same keys and defaults, the same draw as ``saintflow
    train``: ``saintflow.sample.link.attach_targets``):

    ``targets``: the share of a subgraph's edges scored as positives in a step, in
    (0, 1] (default 1.0: every edge). ``negatives``: K negatives per positive, 1 ..=
    65 536 (default 1). ``negative_sampler``: where a negative's tail comes from:
    ``"uniform"`` over the subgraph's nodes (default), ``"degree"`` (∝ deg^0.75 in the
    sampled graph) or ``"in_batch"`` (another positive's tail). ``negative_ends``:
    ``"tail"`` (default: negative (u, w) of positive (u, v), the source kept) or
    ``"both"`` (both ends drawn so, as PyG's ``negative_sampling``). ``exclude_true``: redraw
    a negative that is a true edge of the sampled graph (or a self pair), up to 32 times
    (default False). ``exclude_targets``: take the positives, both directions, out of the
    batch's ``edge_index`` so no target is in the graph its ends aggregate over (default
    False; needs ``targets`` < 1).

    ``require_split`` (default True): refuse a store without a link split (``saintflow
    split-edges``, :meth:`Store.split_edges`), whose every edge would be a training target
    with nothing held out to evaluate on; False for a store whose held-out edges were
    taken out by other means. ``num_steps`` defaults to an epoch that scores every edge
    of the sampled graph once in expectation, as ``saintflow train`` counts a link epoch.
    """

    _batch = LinkBatch

    def __init__(
        self,
        store,
        kind="rw",
        *,
        targets=1.0,
        negatives=1,
        negative_sampler="uniform",
        negative_ends="tail",
        exclude_true=False,
        exclude_targets=False,
        require_split=True,
        graph="train",
        seed=1,
        threads=None,
        num_steps=None,
        sample_coverage=50,
        clip=None,
        **keys,
    ):
        for k in keys:
            if k in _PYG_LINK_HINTS:
                raise SampleError(f"{k} is PyG's LinkNeighborLoader argument; here: {_PYG_LINK_HINTS[k]}")
        if not isinstance(store, Store):
            store = Store.open(os.fspath(store))
        if require_split and not store.has_link_split:
            raise StoreError(
                f"{store.path}: the store has no link split, so every edge would be a training "
                "target and nothing is held out to evaluate on: make one with "
                f"Store.split_edges(OUT) (`saintflow split-edges {store.path} -o OUT`), or pass "
                "require_split=False when the held-out edges were taken out by other means"
            )
        if isinstance(targets, bool) or not isinstance(targets, numbers.Real):
            raise TypeError(f"targets = {targets!r}: expected a number in (0, 1]")
        link = dict(
            targets=float(targets),
            negatives=count(negatives, "negatives"),
            negative_sampler=negative_sampler,
            negative_ends=negative_ends,
            exclude_true=exclude_true,
            exclude_targets=exclude_targets,
        )
        common = dict(graph=graph, seed=seed, threads=threads, num_steps=num_steps,
                      sample_coverage=sample_coverage, clip=clip)
        self._init(store, kind, common, keys, link)
        self._args[1]["require_split"] = require_split

    @property
    def link(self):
        """The targets and negatives, by their plan keys (``targets``, ``negatives``,
        ``negative_sampler``, ``negative_ends``, ``exclude_true``, ``exclude_targets``)."""
        return self._s.link

    def __repr__(self):
        return (
            f"LinkSampler(kind={self.kind!r}, num_steps={self.num_steps}, threads={self.threads}, "
            f"{', '.join(f'{k}={v!r}' for k, v in self.link.items())})"
        )
