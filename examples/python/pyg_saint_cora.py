"""A plain PyTorch Geometric model trained on Cora with saintflow's GraphSAINT batches
instead of PyG's GraphSAINTRandomWalkSampler: PyG's own example (examples/graph_saint.py:
GraphConv layers, `edge_weight = edge_norm`, the loss weighted by `node_norm`) with only
the loader changed, and evaluated on the whole graph, `store.to_pyg()`. `--sampler pyg`
runs PyG's loader instead where torch_sparse imports.

The norms, as PyG's sampler gives them (C: how often a pre-sampling drew a node or an
edge; docs/PYTHON.md has the formulas): a batch is a sampled subgraph, biased towards
what the sampler draws often. `edge_norm` (C_row / C_e) weights each message of a layer
that *adds* its messages, an edge drawn often counting for less (GraphSAINT's aggregator
normalisation in PyG's form, docs/PYTHON.md says how it differs from the paper's);
`node_norm` (∝ 1 / C_v) weights each node's loss, so `(loss * node_norm)[train_mask].sum()`
estimates the training loss over the whole graph, not over the nodes drawn most. The
evaluation samples nothing: the layers switch to the `mean` aggregator, without weights.

    pip install ./python torch torch_geometric
    python examples/python/pyg_saint_cora.py [--data ../shared/data/cora] [--seeds 1,2,3]
"""

import argparse
import pathlib
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
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
    # The whole graph for evaluation (and for PyG's own sampler): x over the store's map,
    # edge_index from its CSR, y, and the masks from its roles.
    full = store.to_pyg()
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
                out = model(data.x, data.edge_index, data.edge_norm)  # messages × edge_norm, added
                loss = F.nll_loss(out, data.y, reduction="none")
                loss = (loss * data.node_norm)[data.train_mask].sum()  # ≈ the graph's mean loss
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
