"""The JPDC Table-3 training step in PyTorch, two ways, on saintflow's own subgraphs.

The subgraphs are the step bench's pre-sampled ones (`STEP_BENCH_EXPORT=DIR cargo bench
--bench step`: Kronecker scale 17, frontier sampler m = 1000, n = 8000), so the three
frameworks train on the very same nodes and edges. The model is plans/graphsage.toml at
hidden 512, as the bench plans it:

    SAGE(50 → 512 ‖ 512, ReLU) → SAGE(1024 → 512 ‖ 512, ReLU) → L2 norm → dense 1024 → 2

with dropout 0.2 before each layer, softmax cross-entropy, and Adam (lr 0.01). A step is
forward, backward and the optimiser's update.

* `torch`: written by hand with `torch.sparse.mm` on the mean-normalised adjacency (COO).
  Each layer takes the cheaper order, (A·X)·W or A·(X·W), as saintflow's planner does.
* `pyg`: PyG's `SAGEConv` (mean aggregation, `root_weight=False`) for the neighbour path,
  and a `Linear` for the self path, concatenated. This is what a PyG user writes; it
  aggregates before projecting, whatever the widths.

Prints, per variant and thread count, the median step time per 1000 subgraph nodes
(over STEPS timed steps after WARMUP), then one JSON line with every figure.

    python torch_step.py DIR [--threads 1,2] [--steps 24]
"""

import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HIDDEN = 512
DROPOUT = 0.2
WARMUP = 4


def load(dir_):
    subs = []
    k = 0
    while (Path(dir_) / f"sub{k}.offsets.npy").exists():
        p = lambda s: str(Path(dir_) / f"sub{k}.{s}.npy")  # noqa: E731
        off, idx = np.load(p("offsets")), np.load(p("indices"))
        x, y = np.load(p("x")), np.load(p("y"))
        n = len(off) - 1
        rows = np.repeat(np.arange(n), np.diff(off))
        deg = np.diff(off).astype(np.float32)
        vals = (1.0 / np.maximum(deg, 1.0))[rows]
        ei = torch.from_numpy(np.stack([idx, rows]))  # PyG: messages from source to target
        a = torch.sparse_coo_tensor(
            torch.from_numpy(np.stack([rows, idx])), torch.from_numpy(vals), (n, n)
        ).coalesce()
        subs.append((torch.from_numpy(x), torch.from_numpy(y), a, ei))
        k += 1
    if not subs:
        raise SystemExit(f"{dir_}: no sub0.offsets.npy (run the step bench with STEP_BENCH_EXPORT)")
    return subs


class Sage(nn.Module):
    """relu(concat(x·W_self, A_mean·x·W_neigh)), the product in the cheaper order."""

    def __init__(self, fin, fout):
        super().__init__()
        self.w_self = nn.Parameter(torch.empty(fin, fout))
        self.w_neigh = nn.Parameter(torch.empty(fin, fout))
        nn.init.xavier_uniform_(self.w_self)
        nn.init.xavier_uniform_(self.w_neigh)

    def forward(self, x, a):
        hs = x @ self.w_self
        if self.w_neigh.shape[1] < x.shape[1]:
            hn = torch.sparse.mm(a, x @ self.w_neigh)
        else:
            hn = torch.sparse.mm(a, x) @ self.w_neigh
        return F.relu(torch.cat([hs, hn], dim=1))


class TorchModel(nn.Module):
    def __init__(self, fin, classes):
        super().__init__()
        self.l1, self.l2 = Sage(fin, HIDDEN), Sage(2 * HIDDEN, HIDDEN)
        self.out = nn.Linear(2 * HIDDEN, classes)

    def forward(self, x, a, ei):
        h = self.l1(F.dropout(x, DROPOUT, self.training), a)
        h = self.l2(F.dropout(h, DROPOUT, self.training), a)
        h = F.dropout(F.normalize(h, dim=1), DROPOUT, self.training)
        return self.out(h)


class PygModel(nn.Module):
    def __init__(self, fin, classes):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.s1, self.n1 = nn.Linear(fin, HIDDEN, bias=False), SAGEConv(
            fin, HIDDEN, aggr="mean", root_weight=False, bias=False
        )
        self.s2, self.n2 = nn.Linear(2 * HIDDEN, HIDDEN, bias=False), SAGEConv(
            2 * HIDDEN, HIDDEN, aggr="mean", root_weight=False, bias=False
        )
        self.out = nn.Linear(2 * HIDDEN, classes)

    def forward(self, x, a, ei):
        x = F.dropout(x, DROPOUT, self.training)
        h = F.relu(torch.cat([self.s1(x), self.n1(x, ei)], dim=1))
        h = F.dropout(h, DROPOUT, self.training)
        h = F.relu(torch.cat([self.s2(h), self.n2(h, ei)], dim=1))
        h = F.dropout(F.normalize(h, dim=1), DROPOUT, self.training)
        return self.out(h)


def measure(model_cls, subs, threads, steps):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    fin, classes = subs[0][0].shape[1], 2
    model = model_cls(fin, classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    times = []
    for s in range(WARMUP + steps):
        x, y, a, ei = subs[s % len(subs)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x, a, ei), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if s >= WARMUP:
            times.append(1000.0 * dt / x.shape[0] * 1000.0)  # ms per 1000 nodes
    return statistics.median(times)


def main():
    blas_env.report()
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=24)
    args = ap.parse_args()
    subs = load(args.dir)
    nodes = sum(s[0].shape[0] for s in subs) / len(subs)
    print(f"{len(subs)} subgraphs, {nodes:.0f} nodes on average; torch {torch.__version__}")
    out = {"torch_version": torch.__version__, "nodes": nodes, "ms_per_1000_nodes": {}}
    for t in [int(v) for v in args.threads.split(",")]:
        for name, cls in [("torch", TorchModel), ("pyg", PygModel)]:
            ms = measure(cls, subs, t, args.steps)
            out["ms_per_1000_nodes"][f"{name}/{t}"] = ms
            print(f"{name:6} {t} thread(s): {ms:8.1f} ms per 1000 subgraph nodes")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
