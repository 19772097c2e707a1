"""Plans and training: saintflow's own engine, called from Python."""

import json
import os
import tempfile

import numpy as np

from . import _native
from ._native import TrainError
from ._util import count as _count
from .store import Store


def plans():
    """The shipped plans, built into the package: a list of dicts with ``name`` (what
    :meth:`Plan.load` and :func:`train` take: ``sf.train("gcn", store)``), ``task``
    (``node``, ``link`` or ``embedding``), ``cora`` (the Cora figure of plans/README.md,
    or None) and ``description``; as ``saintflow plans``."""
    return _native.shipped_plans()


class Plan:
    """A plan, parsed and typed (errors are :class:`PlanError` with ``.file``, ``.line``
    and ``.col``): a file, or a shipped plan by its name (``"gcn"``; :func:`plans` lists
    them), a file that exists winning over a shipped plan of the same name.
    ``overrides``: ``{"dims.hidden": 64}`` or ``["dims.hidden=64"]``, as ``--set``."""

    __slots__ = ("_p",)

    def __init__(self, native):
        self._p = native

    @classmethod
    def load(cls, path, overrides=None):
        return cls(_native.Plan.load(os.fspath(path), _overrides(overrides)))

    @property
    def path(self):
        return self._p.path

    @property
    def is_embedding(self):
        """An ``[embedding]`` plan (DeepWalk, LINE, node2vec) rather than a GNN."""
        return self._p.is_embedding

    def __repr__(self):
        o = self._p.overrides
        return f"Plan({os.fspath(self.path)!r}{', overrides=' + repr(o) if o else ''})"


class TrainResult:
    """What :func:`train` returns: ``val`` and ``test`` metrics (dicts of ``accuracy``,
    ``f1_micro``, ``f1_macro``, ``loss``, a multi-label store's ``roc_auc``; the kept parameters'), ``best_epoch``,
    ``epochs``, ``steps``, ``stopped_at`` (the epoch ``[eval] patience`` stopped the run
    after, or None), ``history`` (one dict per epoch: ``epoch``, ``step``,
    ``train_loss``, ``train_mean_loss``, ``val``, ``best``, ``time``...) and ``records`` (every log record, as
    ``--log`` writes them: docs/LOG.md)."""

    def __init__(self, d):
        self.val = d["val"]
        self.test = d["test"]
        self.best_epoch = d["best_epoch"]
        self.epochs = d["epochs"]
        self.steps = d["steps"]
        self.stopped_at = d["stopped_at"]
        self.records = [json.loads(r) for r in d["records_json"]]
        self.history = [r for r in self.records if r.get("kind") == "epoch"]

    @property
    def losses(self):
        """The loss of every step, in order."""
        return [r["loss"] for r in self.records if r.get("kind") == "step"]

    def __repr__(self):
        t = self.test and self.test["accuracy"]
        return f"TrainResult(epochs={self.epochs}, best_epoch={self.best_epoch}, test_accuracy={t})"


def train(
    plan,
    store,
    *,
    epochs=None,
    seed=1,
    threads=None,
    checkpoint=None,
    resume=False,
    force=False,
    log=None,
    progress=True,
    max_steps=None,
    overrides=None,
    output=None,
    holdout=0.0,
    memory_mib=256,
):
    """Trains a GNN plan on a store, as ``saintflow train PLAN --graph STORE`` does (the
    same engine, defaults and seed, so the same bits). ``plan``: a :class:`Plan`, a
    path, or a shipped plan's name (``"gcn"``; ``overrides`` apply to a path or a name);
    ``store``: a :class:`Store` or a path.
    ``checkpoint``: a file or directory, written atomically after every epoch;
    ``resume=True`` continues from it; an existing checkpoint is not replaced without
    ``resume`` or ``force``. The call releases the GIL; Ctrl-C stops it at the next step
    boundary with ``KeyboardInterrupt``, the checkpoint as the last whole epoch left it.

    An ``[embedding]`` plan (DeepWalk, LINE, node2vec) returns an
    :class:`EmbeddingResult` whose ``embedding`` is the ``[N, dim]`` float32 matrix
    (``output``: also keep it as a ``.npy`` there, and map it rather than load it;
    ``epochs`` may be fractional; ``holdout``: edges held out for ``eval_embedding``'s link
    prediction; ``memory_mib``: the two sample pools' memory). GNN-only arguments
    (checkpoint, log, ...) are refused for it, and ``output``/``holdout`` for a GNN plan.
    """
    if not isinstance(plan, Plan):
        plan = Plan.load(plan, overrides)
    elif overrides:
        raise TrainError("overrides apply to a plan path; this Plan is already loaded")
    if not isinstance(store, Store):
        store = Store.open(os.fspath(store))
    if plan.is_embedding:
        given = [k for k, v in (("checkpoint", checkpoint), ("resume", resume), ("log", log),
                                ("max_steps", max_steps)) if v]
        if given:
            raise TrainError(f"{plan.path}: an [embedding] plan does not take {', '.join(given)}")
        return _train_embedding(plan, store, epochs, seed, threads, output, holdout, memory_mib, progress, force)
    if output is not None or holdout:
        raise TrainError(f"{plan.path}: output= and holdout= apply to [embedding] plans; "
                         "saintflow.embed writes a GNN's embedding")
    d = _native._train(
        plan._p,
        store._s,
        _count(epochs, "epochs"),
        int(seed),
        _count(threads, "threads"),
        None if checkpoint is None else os.fspath(checkpoint),
        bool(resume),
        bool(force),
        None if log is None else os.fspath(log),
        bool(progress),
        _count(max_steps, "max_steps"),
    )
    return TrainResult(d)


def _overrides(o):
    if o is None:
        return []
    if isinstance(o, dict):
        return [f"{k}={_toml(v)}" for k, v in o.items()]
    return [str(s) for s in o]


def _toml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


class EmbeddingResult:
    """What :func:`train` returns for an ``[embedding]`` plan: ``embedding`` (``[N, dim]``
    float32) and the run's summary (``samples``, ``seconds``, ``samples_per_s``,
    ``last_loss``, ``episodes``, ``workers``, ``parts``, ...) as attributes."""

    def __init__(self, embedding, summary):
        self.embedding = embedding
        self.summary = summary
        for k, v in summary.items():
            setattr(self, k, v)

    def __repr__(self):
        return f"EmbeddingResult(shape={self.embedding.shape}, samples={self.summary['samples']})"


def _into_array(output, prefix, write):
    """Runs ``write(path)`` for a ``.npy`` and returns its array: mapped from ``output``
    when given (the file stays), else loaded from a temporary file that is removed."""
    if output is not None:
        output = os.fspath(output)
        result = write(output)
        return np.load(output, mmap_mode="r"), result
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        path = os.path.join(tmp, "embedding.npy")
        result = write(path)
        return np.load(path), result


def _train_embedding(plan, store, epochs, seed, threads, output, holdout, memory_mib, progress, force):
    def run(path):
        summary = _native._train_embedding(
            plan._p, store._s, path, int(seed), _count(threads, "threads"),
            None if epochs is None else float(epochs), _count(memory_mib, "memory_mib"), float(holdout), None,
            bool(progress), bool(force),
        )
        return json.loads(summary)

    embedding, summary = _into_array(output, "saintflow-emb-", run)
    return EmbeddingResult(embedding, summary)


def embed(plan, store, checkpoint, *, output=None, last=False, logits=False, threads=None,
          memory_mib=512, scratch_dir=None, overrides=None, force=False):
    """The embedding of every node of ``store`` by a trained GNN plan (``saintflow
    embed``): the input of the plan's ``[output]`` layer (``logits=True``: the logits),
    with ``checkpoint``'s best-validation parameters (``last=True``: the last ones), by a
    full-graph forward pass in row blocks within ``memory_mib``. Returns ``[N, width]``
    float32; with ``output`` the ``.npy`` is kept there and mapped rather than loaded.

    ``output`` follows ``saintflow embed -o``'s rule: an existing file is replaced only with
    ``force=True``; never the plan, the checkpoint or a file inside the store, and never
    anything but a regular file (a directory, device, FIFO or symbolic link is refused even
    with ``force``)."""
    if not isinstance(plan, Plan):
        plan = Plan.load(plan, overrides)
    if not isinstance(store, Store):
        store = Store.open(os.fspath(store))

    def run(path):
        _native._embed(plan._p, store._s, os.fspath(checkpoint), path, bool(last), bool(logits),
                       _count(threads, "threads"), _count(memory_mib, "memory_mib"),
                       None if scratch_dir is None else os.fspath(scratch_dir), bool(force))

    return _into_array(output, "saintflow-embed-", run)[0]


def eval_embedding(embedding, store, *, ratios=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
                   repeats=5, seed=1, c=1.0, normalize=True, holdout=None, threads=None, split=None):
    """Scores node embeddings as ``saintflow eval-embedding`` does (DeepWalk's protocol):
    one-vs-rest logistic regression at each labelled fraction, Micro/Macro-F1 over
    ``repeats`` shuffles (a list of dicts, one per fraction); or with ``holdout`` (the
    fraction training held out, and its ``seed``) link prediction: ``{"auc", ...}``; with
    ``split="store"`` the Planetoid protocol: fitted on the store's labelled training nodes,
    scored on its labelled test nodes (``{"accuracy", "micro_f1", ..., "unlabelled"}``).
    ``embedding``: an ``[N, d]`` array or a ``.npy`` path."""
    if not isinstance(store, Store):
        store = Store.open(os.fspath(store))
    if isinstance(embedding, (str, os.PathLike)):
        embedding = np.load(os.fspath(embedding), mmap_mode="r")
    emb = np.ascontiguousarray(embedding, dtype=np.float32)
    if emb.ndim != 2:
        raise TrainError(f"embedding has shape {emb.shape}, expected (N, dim)")
    out = _native._eval_embedding(emb, store._s, [float(r) for r in ratios], _count(repeats, "repeats"),
                                  int(seed), float(c), bool(normalize),
                                  None if holdout is None else float(holdout), _count(threads, "threads"), split)
    return json.loads(out)
