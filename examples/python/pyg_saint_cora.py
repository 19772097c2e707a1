"""A plain PyTorch Geometric model trained on Cora with saintflow's GraphSAINT batches
instead of PyG's GraphSAINTRandomWalkSampler: PyG's own example (examples/graph_saint.py:
GraphConv layers, `edge_weight = edge_norm`, the loss weighted by `node_norm`) with only
the loader changed. `--sampler pyg` runs PyG's loader instead where torch_sparse imports.

    pip install ./python torch torch_geometric
    python examples/python/pyg_saint_cora.py [--data ../shared/data/cora] [--seeds 1,2,3]
"""

import argparse
import pathlib
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GraphConv

import saintflow as sf

root = pathlib.Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser()
ap.add_argument("--data", default=str(root.parent / "shared" / "data" / "cora"))
ap.add_argument("--seeds", default="1,2,3")
ap.add_argument("--epochs", type=int, default=50)
ap.add_argument("--sampler", choices=["saintflow", "pyg"], default="saintflow")
ap.add_argument("--roots", type=int, default=300)
ap.add_argument("--walk-length", type=int, default=2)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--coverage", type=float, default=100)
a = ap.parse_args()


class Net(torch.nn.Module):
    """PyG's GraphSAINT example model: three GraphConv layers, their outputs concatenated."""

    def __init__(self, f, c, hidden=256):
        super().__init__()
        self.conv1 = GraphConv(f, hidden)
        self.conv2 = GraphConv(hidden, hidden)
        self.conv3 = GraphConv(hidden, hidden)
        self.lin = torch.nn.Linear(3 * hidden, c)

    def set_aggr(self, aggr):
        for conv in (self.conv1, self.conv2, self.conv3):
            conv.aggr = aggr

    def forward(self, x, edge_index, edge_weight=None):
        x1 = F.dropout(F.relu(self.conv1(x, edge_index, edge_weight)), p=0.2, training=self.training)
        x2 = F.dropout(F.relu(self.conv2(x1, edge_index, edge_weight)), p=0.2, training=self.training)
        x3 = F.dropout(F.relu(self.conv3(x2, edge_index, edge_weight)), p=0.2, training=self.training)
        return F.log_softmax(self.lin(torch.cat([x1, x2, x3], dim=-1)), dim=-1)


with tempfile.TemporaryDirectory() as tmp:
    store = sf.Store.import_graphsaint(a.data, pathlib.Path(tmp) / "cora.sf")
    n = store.n_nodes
    indptr, indices = store.csr("full")
    rows = np.repeat(np.arange(n), np.diff(indptr.astype(np.int64)))
    roles = store.roles()
    full = Data(
        x=torch.from_numpy(store.features(np.arange(n))),
        y=torch.from_numpy(store.labels(np.arange(n))),
        edge_index=torch.from_numpy(np.stack([rows, indices.astype(np.int64)])),
        train_mask=torch.from_numpy(roles == 1),
        val_mask=torch.from_numpy(roles == 2),
        test_mask=torch.from_numpy(roles == 3),
    )
    results = []
    for seed in (int(s) for s in a.seeds.split(",")):
        torch.manual_seed(seed)
        if a.sampler == "saintflow":
            loader = sf.SaintSampler(store, "rw", graph="full", batch_size=a.roots, walk_length=a.walk_length,
                                     num_steps=a.steps, sample_coverage=a.coverage, seed=seed, clip=1)
            batches = lambda: (b.to_pyg() for b in loader)  # noqa: E731
        else:
            from torch_geometric.loader import GraphSAINTRandomWalkSampler

            pyg = GraphSAINTRandomWalkSampler(full, batch_size=a.roots, walk_length=a.walk_length,
                                              num_steps=a.steps, sample_coverage=a.coverage)
            batches = lambda: iter(pyg)  # noqa: E731
        model = Net(store.n_features, store.n_classes)
        opt = torch.optim.Adam(model.parameters(), lr=0.001)
        best_val, test_at_best = 0.0, 0.0
        for epoch in range(1, a.epochs + 1):
            model.train()
            model.set_aggr("add")
            for data in batches():
                opt.zero_grad()
                out = model(data.x, data.edge_index, data.edge_norm)
                loss = F.nll_loss(out, data.y, reduction="none")
                loss = (loss * data.node_norm)[data.train_mask].sum()
                loss.backward()
                opt.step()
            model.eval()
            model.set_aggr("mean")
            with torch.no_grad():
                pred = model(full.x, full.edge_index).argmax(dim=-1)
            acc = [float((pred[m] == full.y[m]).float().mean()) for m in (full.val_mask, full.test_mask)]
            if acc[0] > best_val:
                best_val, test_at_best = acc
        results.append(test_at_best)
        print(f"seed {seed}: best val {best_val:.4f}, test {test_at_best:.4f}")
    print(f"{a.sampler} sampler, {len(results)} seeds: test accuracy {np.mean(results):.4f} ± {np.std(results):.4f}")
