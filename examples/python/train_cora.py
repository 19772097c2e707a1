"""Trains plans/gcn.toml on Cora from Python: the same engine, defaults and seed as
`saintflow train plans/gcn.toml --graph cora.sf --seed 1`, so the same test accuracy.

    pip install ./python
    python examples/python/train_cora.py [--data ../shared/data/cora] [--seed 1] [--epochs N]

The GraphSAINT-format Cora directory is imported into a temporary store first (as
`saintflow import graphsaint` does); the line printed last is the one to compare with the
command line's.
"""

import argparse
import pathlib
import tempfile

import saintflow as sf

root = pathlib.Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser()
ap.add_argument("--data", default=str(root.parent / "shared" / "data" / "cora"))
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--epochs", type=int, default=None, help="default: the plan's 200")
a = ap.parse_args()

with tempfile.TemporaryDirectory() as tmp:
    store = sf.Store.import_graphsaint(a.data, pathlib.Path(tmp) / "cora.sf")
    print(store)
    result = sf.train(root / "plans" / "gcn.toml", store, seed=a.seed, epochs=a.epochs, progress=False)
    last = result.history[-1]
    print(f"{result.epochs} epochs, last train loss {last['train_loss']:.4f}, best epoch {result.best_epoch}")
    t = result.test
    print(f"test accuracy {t['accuracy']:.4f} F1-micro {t['f1_micro']:.4f} F1-macro {t['f1_macro']:.4f}")
