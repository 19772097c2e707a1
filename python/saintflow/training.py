"""Plans and training: saintflow's own engine, called from Python."""

import json
import os

from . import _native
from ._native import TrainError
from .store import Store


class Plan:
    """A plan file, parsed and typed (errors are :class:`PlanError` with ``.file``,
    ``.line`` and ``.col``). ``overrides``: ``{"dims.hidden": 64}`` or
    ``["dims.hidden=64"]``, as ``--set``."""

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
    ``f1_micro``, ``f1_macro``; the best-validation parameters'), ``best_epoch``,
    ``epochs``, ``steps``, ``history`` (one dict per epoch: ``epoch``, ``step``,
    ``train_loss``, ``val``, ``best``, ``time``...) and ``records`` (every log record, as
    ``--log`` writes them: docs/LOG.md)."""

    def __init__(self, d):
        self.val = d["val"]
        self.test = d["test"]
        self.best_epoch = d["best_epoch"]
        self.epochs = d["epochs"]
        self.steps = d["steps"]
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
):
    """Trains a GNN plan on a store, as ``saintflow train PLAN --graph STORE`` does (the
    same engine, defaults and seed, so the same bits). ``plan``: a :class:`Plan` or a
    path (``overrides`` apply to a path); ``store``: a :class:`Store` or a path.
    ``checkpoint``: a file or directory, written atomically after every epoch;
    ``resume=True`` continues from it; an existing checkpoint is not replaced without
    ``resume`` or ``force``. The call releases the GIL; Ctrl-C stops it at the next step
    boundary with ``KeyboardInterrupt``, the checkpoint as the last whole epoch left it.
    """
    if not isinstance(plan, Plan):
        plan = Plan.load(plan, overrides)
    elif overrides:
        raise TrainError("overrides apply to a plan path; this Plan is already loaded")
    if not isinstance(store, Store):
        store = Store.open(os.fspath(store))
    d = _native._train(
        plan._p,
        store._s,
        epochs,
        int(seed),
        None if threads is None else int(threads),
        None if checkpoint is None else os.fspath(checkpoint),
        bool(resume),
        bool(force),
        None if log is None else os.fspath(log),
        bool(progress),
        None if max_steps is None else int(max_steps),
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
