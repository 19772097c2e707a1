"""DeepWalk embeddings from saintflow into scikit-learn: train plans/deepwalk.toml on a
graph from Python, then classify the nodes with scikit-learn's LogisticRegression (one
vs rest, DeepWalk's protocol: a labelled fraction for training, Micro/Macro-F1 on the
rest), beside saintflow's own `eval_embedding` on the same embedding.

    pip install ./python scikit-learn
    python examples/python/deepwalk_sklearn.py [--data ../shared/data/cora] [--epochs 200]
"""

import argparse
import pathlib
import tempfile

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import normalize

import saintflow as sf

root = pathlib.Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser()
ap.add_argument("--data", default=str(root.parent / "shared" / "data" / "cora"))
ap.add_argument("--epochs", type=float, default=200)
ap.add_argument("--dim", type=int, default=64)
ap.add_argument("--ratio", type=float, default=0.5, help="labelled fraction")
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()

with tempfile.TemporaryDirectory() as tmp:
    store = sf.Store.import_graphsaint(a.data, pathlib.Path(tmp) / "g.sf")
    plan = sf.Plan.load(root / "plans" / "deepwalk.toml", {"embedding.dim": a.dim})
    run = sf.train(plan, store, epochs=a.epochs, seed=a.seed, progress=False)
    emb = normalize(run.embedding)
    print(f"DeepWalk on {a.data}: {run.embedding.shape[0]} nodes x {run.embedding.shape[1]}, "
          f"{run.samples} samples in {run.seconds:.2f} s")

    y_all = store.labels(np.arange(store.n_nodes))
    labelled = np.flatnonzero(y_all.max(axis=1) > 0 if store.multilabel else y_all >= 0)
    y = y_all[labelled]
    rng = np.random.default_rng(a.seed)
    order = rng.permutation(len(labelled))
    k = int(a.ratio * len(labelled))
    tr, te = labelled[order[:k]], labelled[order[k:]]
    ytr, yte = y[order[:k]], y[order[k:]]
    clf = OneVsRestClassifier(LogisticRegression(C=1.0, max_iter=1000))
    if store.multilabel:
        clf.fit(emb[tr], ytr)
        scores = clf.decision_function(emb[te])
        # DeepWalk's protocol: each node's k top-scoring labels, k its true label count.
        pred = np.zeros_like(yte)
        for i, row in enumerate(scores):
            pred[i, np.argsort(-row)[: int(yte[i].sum())]] = 1
    else:
        clf.fit(emb[tr], ytr)
        pred = clf.predict(emb[te])
    micro = f1_score(yte, pred, average="micro")
    macro = f1_score(yte, pred, average="macro")
    print(f"scikit-learn, {a.ratio:.0%} labelled: Micro-F1 {micro:.4f}  Macro-F1 {macro:.4f}")
    own = sf.eval_embedding(run.embedding, store, ratios=[a.ratio], repeats=5, seed=a.seed)[0]
    print(f"saintflow eval_embedding (5 repeats): Micro-F1 {own['micro_f1']:.4f}  Macro-F1 {own['macro_f1']:.4f}")
