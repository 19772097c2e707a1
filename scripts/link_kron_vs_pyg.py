#!/usr/bin/env python3
"""Issue 52's throughput line, PyG's half: link training on a saintflow store (a Kronecker
graph with a `split-edges` split) by PyG's `LinkNeighborLoader` and a `SAGEConv`
encoder with the models of plans/graphsage_link.toml: three SAGEConv layers of `hidden`
(ReLU between them), OGB's LinkPredictor on z_u ⊙ z_v (Linear(hidden, hidden), ReLU,
Linear(hidden, 1)), binary cross-entropy with one uniform negative per positive
(`neg_sampling_ratio=1.0`), Adam.

The store is read with numpy (docs/FORMAT.md): `features.f32` as x, the stored graph
`full.offsets.u64` / `full.indices.u32` (the input minus the held-out edges, both
directions) as `edge_index`, its undirected edges (u < v) as the positives
(`edge_label_index`), shuffled, `batch_size` per batch.

Timing: `time.perf_counter` around each batch's whole work — drawing it from the loader
(neighbour sampling, negatives, feature gather) and the training step — after `warmup`
batches; throughput = positives per second over the timed batches.

Usage: link_kron_vs_pyg.py STORE --threads T [--batches 30] [--warmup 3] [--batch-size 1024]
       [--neighbors 10,10,10] [--hidden 256] [--seed 1]          one JSON line on stdout
"""
import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import argparse
import json
import os
import time


def main():
    blas_env.report()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--neighbors", default="10,10,10")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    import numpy as np
    import torch
    import torch.nn.functional as F
    import torch_geometric
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader
    from torch_geometric.nn import SAGEConv

    if not (torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE):
        raise SystemExit(
            "LinkNeighborLoader needs pyg-lib or torch-sparse (torch_geometric's neighbour "
            "sampling); neither is importable in this environment")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    p = args.store
    off = np.fromfile(os.path.join(p, "full.offsets.u64"), dtype="<u8").astype(np.int64)
    idx = np.fromfile(os.path.join(p, "full.indices.u32"), dtype="<u4").astype(np.int64)
    n = len(off) - 1
    x = np.fromfile(os.path.join(p, "features.f32"), dtype="<f4").reshape(n, -1)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(off))
    edge_index = torch.from_numpy(np.stack([src, idx]))
    pos = edge_index[:, edge_index[0] < edge_index[1]]
    data = Data(x=torch.from_numpy(x), edge_index=edge_index, num_nodes=n)
    fan = [int(k) for k in args.neighbors.split(",")]
    loader = LinkNeighborLoader(
        data, num_neighbors=fan, edge_label_index=pos, neg_sampling_ratio=1.0,
        batch_size=args.batch_size, shuffle=True)

    h = args.hidden

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(
                [SAGEConv(x.shape[1], h), SAGEConv(h, h), SAGEConv(h, h)])

        def forward(self, z, ei):
            for i, conv in enumerate(self.convs):
                z = conv(z, ei)
                if i + 1 < len(self.convs):
                    z = z.relu()
            return z

    class Predictor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.Linear(h, h)
            self.l2 = torch.nn.Linear(h, 1)

        def forward(self, zu, zv):
            return self.l2(self.l1(zu * zv).relu()).squeeze(-1)

    enc, pred = Encoder(), Predictor()
    opt = torch.optim.Adam(list(enc.parameters()) + list(pred.parameters()), lr=5e-4)
    times, positives, losses = [], 0, []
    it = iter(loader)
    for b in range(args.warmup + args.batches):
        t0 = time.perf_counter()
        batch = next(it)
        opt.zero_grad()
        z = enc(batch.x, batch.edge_index)
        ei = batch.edge_label_index
        score = pred(z[ei[0]], z[ei[1]])
        loss = F.binary_cross_entropy_with_logits(score, batch.edge_label)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if b >= args.warmup:
            times.append(dt)
            positives += int(batch.edge_label.sum().item())
            losses.append(loss.item())
    print(json.dumps({
        "side": "pyg", "threads": args.threads, "batch_size": args.batch_size,
        "neighbors": fan, "hidden": h, "batches": len(times), "seconds": sum(times),
        "positives": positives, "positives_per_s": positives / sum(times),
        "ms_per_batch_median": 1e3 * sorted(times)[len(times) // 2],
        "nodes": n, "undirected_edges": int(pos.shape[1]), "loss_last": losses[-1],
        "torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
        "pyg_lib": torch_geometric.typing.WITH_PYG_LIB,
        "torch_sparse": torch_geometric.typing.WITH_TORCH_SPARSE,
    }))


if __name__ == "__main__":
    main()
