"""Issue 29's sampler speed, side by side in one process: `saintflow sample` (the Rust
sampler alone, one thread), the Python sampler's batches (subgraph + gathered x and y +
int64 edge_index and CSR) drained in Rust, the same iterated from Python (handed to numpy,
wrapped as Batch objects), and PyG's GraphSAINTRandomWalkSampler when torch_geometric and
torch_sparse import. Rounds interleaved, medians, batches/s.

Usage: python scripts/sampler_bench.py STORE SAINTFLOW_BIN [--roots R] [--depth D]
       [--count N] [--rounds K] [--threads 1,2]
"""

import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import argparse
import json
import statistics
import subprocess
import time

import saintflow as sf

ap = argparse.ArgumentParser()
ap.add_argument("store")
ap.add_argument("bin")
ap.add_argument("--roots", type=int, default=3000)
ap.add_argument("--depth", type=int, default=2)
ap.add_argument("--count", type=int, default=200)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--threads", default="1,2")
a = ap.parse_args()
threads = [int(t) for t in a.threads.split(",")]
store = sf.Store.open(a.store)
blas_env.report()

try:
    import torch
    import torch_geometric  # noqa: F401
    import torch_sparse  # noqa: F401
    from torch_geometric.data import Data
    from torch_geometric.loader import GraphSAINTRandomWalkSampler

    indptr, indices = store.csr("train")
    import numpy as np

    rows = np.repeat(np.arange(store.n_nodes), np.diff(indptr.astype(np.int64)))
    data = Data(
        edge_index=torch.from_numpy(np.stack([rows, indices.astype(np.int64)])),
        x=torch.from_numpy(store.features_view().copy()),
        num_nodes=store.n_nodes,
    )
    pyg = True
except ImportError as e:
    pyg = False
    print(f"PyG's GraphSAINT sampler not measured: {e}")


def cli():
    out = subprocess.run(
        [a.bin, "sample", a.store, "--sampler", "rw", "--roots", str(a.roots), "--depth", str(a.depth),
         "--count", str(a.count), "--seed", "1", "--json", "--no-verify"],
        check=True, capture_output=True, text=True).stdout
    s = [json.loads(l) for l in out.splitlines() if '"summary"' in l][0]
    return s["subgraphs_per_s"], s["mean_nodes"]


def python(t):
    s = sf.SaintSampler(store, "rw", roots=a.roots, depth=a.depth, threads=t, num_steps=a.count,
                        sample_coverage=0, seed=1)
    t0 = time.perf_counter()
    nodes = 0
    for b in s:
        nodes += b.num_nodes
    return a.count / (time.perf_counter() - t0), nodes / a.count


def rust(t):
    s = sf.SaintSampler(store, "rw", roots=a.roots, depth=a.depth, threads=t, num_steps=a.count,
                        sample_coverage=0, seed=1)
    return a.count / s._s._drain(0, a.count), 0


def pyg_rate(t):
    torch.set_num_threads(t)
    loader = GraphSAINTRandomWalkSampler(data, batch_size=a.roots, walk_length=a.depth,
                                         num_steps=a.count, sample_coverage=0, num_workers=0)
    t0 = time.perf_counter()
    nodes = 0
    for b in loader:
        nodes += b.num_nodes
    return a.count / (time.perf_counter() - t0), nodes / a.count


res = {}
for r in range(a.rounds):
    res.setdefault("saintflow sample (Rust, 1 thread)", []).append(cli())
    for t in threads:
        res.setdefault(f"the same batches drained in Rust, {t} thread(s)", []).append(rust(t))
        res.setdefault(f"sf.SaintSampler, {t} thread(s)", []).append(python(t))
        if pyg:
            res.setdefault(f"PyG GraphSAINTRandomWalkSampler, {t} thread(s)", []).append(pyg_rate(t))
base = statistics.median(x[0] for x in res["saintflow sample (Rust, 1 thread)"])
print(f"store {a.store}: {store.n_nodes} nodes, rw roots {a.roots} depth {a.depth}, {a.count} batches x {a.rounds} rounds")
print(f"{'':48} {'batches/s':>10} {'nodes/batch':>12} {'vs Rust sample':>15}")
for k, v in res.items():
    m = statistics.median(x[0] for x in v)
    print(f"{k:48} {m:10.1f} {statistics.median(x[1] for x in v):12.0f} {m / base:15.3f}")
if pyg:
    for t in threads:
        ours = statistics.median(x[0] for x in res[f"sf.SaintSampler, {t} thread(s)"])
        theirs = statistics.median(x[0] for x in res[f"PyG GraphSAINTRandomWalkSampler, {t} thread(s)"])
        print(f"{f'sf.SaintSampler / PyG, {t} thread(s)':48} {ours / theirs:9.2f}x")
