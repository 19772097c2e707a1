"""Issue 29: how slow an op written in Python is. Cora GCN (plans/gcn.toml) with its hidden
activation as the built-in `tanh`, and as `py.tanh` (numpy's tanh and its derivative,
registered with saintflow.register_op), trained in one process, rounds interleaved;
median step wall time of each (the log's `ms.wall`).

Usage: python scripts/python_op_cost.py [CORA_DIR] [--epochs N] [--rounds K] [--threads T]
"""

import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import argparse
import pathlib
import statistics
import tempfile

import numpy as np

blas_env.report()

import saintflow as sf

root = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("cora", nargs="?", default=str(root.parent / "shared" / "data" / "cora"))
ap.add_argument("--epochs", type=int, default=50)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--threads", type=int, default=None)
a = ap.parse_args()

sf.register_op("py.tanh", np.tanh, lambda x, g: g * (1 - np.tanh(x) ** 2))
gcn = (root / "plans" / "gcn.toml").read_text()
with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    store = sf.Store.import_graphsaint(a.cora, tmp / "cora.sf")
    plans = {}
    for name in ("tanh", "py.tanh"):
        p = tmp / f"{name}.toml"
        p.write_text(gcn.replace('out = "relu(A_sym @ x @ W0)"', f'out = "{name}(A_sym @ x @ W0)"'))
        plans[name] = p
    walls = {k: [] for k in plans}
    acc = {}
    for _ in range(a.rounds):
        for name, p in plans.items():
            r = sf.train(p, store, epochs=a.epochs, seed=1, threads=a.threads, progress=False)
            walls[name] += [x["ms"]["wall"] for x in r.records if x["kind"] == "step"]
            acc[name] = r.test["accuracy"]
    base = statistics.median(walls["tanh"])
    print(f"Cora GCN, {a.epochs} epochs x {a.rounds} rounds, threads {a.threads or 'all'}")
    for name, w in walls.items():
        m = statistics.median(w)
        print(f"{name:8} median step {m:7.2f} ms  ({m / base:5.2f}x the built-in)  test accuracy {acc[name]:.4f}")
