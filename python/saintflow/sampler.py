"""GraphSAINT samplers as a PyTorch-style loader."""

import operator
import os

from . import _native
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
    )

    def __init__(self, d):
        for k in self.__slots__:
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
        for k in ("n_id", "edge_index", "indptr", "indices", "x", "y", "node_norm", "edge_norm"):
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
        if not isinstance(store, Store):
            store = Store.open(os.fspath(store))
        # What rebuilds it in another process (pickle: a `spawn` or `forkserver` worker).
        self._args = (kind, dict(graph=graph, seed=seed, threads=threads, num_steps=num_steps,
                                 sample_coverage=sample_coverage, clip=clip, **keys))
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
        )

    def __reduce__(self):
        # The same sampler in the unpickling process: the store opened again by path and
        # the pre-sampling redone, with the same seed, so the same norms and subgraphs.
        return (_rebuild, (os.fspath(self.store.path), self._args))

    def __iter__(self):
        for d in self._s.epoch_iter():
            yield Batch(d)

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
            yield Batch(d)

    def subgraph(self, index, seed=None):
        """Subgraph ``index`` alone (``seed``: another run's)."""
        return Batch(self._s.subgraph(int(index), seed))

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



def _rebuild(path, args):
    kind, keys = args
    return SaintSampler(Store.open(path), kind, **keys)
