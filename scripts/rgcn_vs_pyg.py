#!/usr/bin/env python3
"""Issue 57's side by side: plans/rgcn.toml (R-GCN, Schlichtkrull et al. 2018, entity
classification with basis decomposition) trained by PyTorch Geometric on the same typed
graph, read from the same ogbn-mag layout `saintflow import ogb` reads (what
scripts/cora_typed.py writes).

The model is the plan's, term by term:

* h0 per node type: a type with features through its own projection (no bias), a
  featureless type a learned table (`input.W.<type>`, `input.E.<type>`), both of width
  `hidden`, Glorot-uniform;
* two `RGCNConv` layers (mean aggregation per relation: c_(i,r) = |N_i^r|, a root weight,
  no bias, `num_bases` bases: W_r = Σ_b a_rb·V_b), hidden 16, ReLU between them;
* softmax cross-entropy over the labelled type's training nodes; Adam lr 0.01 with L2
  5·10⁻⁴ on the inputs and the first layer only, 50 epochs, no dropout; the test accuracy
  of the last epoch's weights (`keep = "last"`).

Relations as saintflow's importer makes them: each listed `src___rel___dst` relation, a
relation between one type made symmetric (`cites`), and a reverse `rev_<rel>` for one
between two types. A relation's entries (u, v) — row u aggregates over v — are PyG edges
v → u of that type.

An epoch is one full-batch training step and one evaluation of the validation nodes (as
the plan's `[eval] every = 1`); its wall time is measured around both, and the training
step alone beside it.

`--model rgat` is plans/rgat.toml's model the same way: the same inputs, then per layer
dropout 0.5 on its input, a bias-free root projection plus `RGATConv` (within-relation,
additive self-attention, `dim=1`, `num_bases` bases, no bias), 4 heads of 4 then one head
of `classes`, ReLU between. Stated difference: PyG's `RGATConv` has one query and one key
kernel shared by every relation (`q`, `k` of [H·F', H·D]), where the plan (as the paper's
Q^(r), K^(r)) has a query and a key row per relation and head.

Usage:
  rgcn_vs_pyg.py DATA_DIR --threads T --seed S [--model rgcn|rgat] [--epochs 50]
                 [--hidden 16] [--bases 2]
                                 one JSON line: per-epoch times (median, all), accuracies
"""
import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import argparse
import csv
import gzip
import json
import pathlib
import statistics
import time


def rows(path):
    with gzip.open(path, "rt") as f:
        return [r for r in csv.reader(f) if r]


def load(root):
    """(counts by type in order, features by type, relations [(name, src, dst, u, v)],
    labelled type, labels, split ids) from an ogbn-mag layout."""
    raw = root / "raw"
    names, counts = rows(raw / "num-node-dict.csv.gz")
    counts = dict(zip(names, map(int, counts)))
    feats = {}
    for d in sorted((raw / "node-feat").iterdir()):
        feats[d.name] = [[float(x) for x in r] for r in rows(d / "node-feat.csv.gz")]
    rels = []
    for d in sorted((raw / "relations").iterdir()):
        src, rel, dst = d.name.split("___")
        pairs = [(int(a), int(b)) for a, b in rows(d / "edge.csv.gz")]
        rels.append((rel, src, dst, pairs))
    (ltype,) = [d.name for d in (raw / "node-label").iterdir()]
    labels = [int(r[0]) for r in rows(raw / "node-label" / ltype / "node-label.csv.gz")]
    (split_dir,) = [d for d in (root / "split").iterdir() if d.is_dir()]
    split = {
        s: [int(r[0]) for r in rows(split_dir / ltype / f"{s}.csv.gz")]
        for s in ("train", "valid", "test")
    }
    return names, counts, feats, rels, ltype, labels, split


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=pathlib.Path)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--bases", type=int, default=2)
    ap.add_argument("--model", choices=("rgcn", "rgat"), default="rgcn")
    ap.add_argument("--heads", type=int, default=4)
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import RGATConv, RGCNConv

    blas_env.report()  # the BLAS core torch and numpy run on (stderr)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t_start = time.perf_counter()
    names, counts, feats, rels, ltype, labels, split = load(a.data)
    base, n = {}, 0
    for t in names:
        base[t] = n
        n += counts[t]
    # Relations as the importer stores them: symmetric within a type, reversed across.
    src_all, dst_all, type_all = [], [], []
    stored = []
    for rel, s, d, pairs in rels:
        if s == d:
            both = set(pairs) | {(v, u) for u, v in pairs}
            stored.append((rel, s, d, sorted(both)))
        else:
            stored.append((rel, s, d, pairs))
            stored.append(("rev_" + rel, d, s, [(v, u) for u, v in pairs]))
    for r, (rel, s, d, pairs) in enumerate(stored):
        for u, v in pairs:
            # Row u (type s) aggregates over v (type d): a PyG edge v → u.
            src_all.append(base[d] + v)
            dst_all.append(base[s] + u)
            type_all.append(r)
    edge_index = torch.tensor([src_all, dst_all], dtype=torch.long)
    edge_type = torch.tensor(type_all, dtype=torch.long)
    n_rel = len(stored)
    y = torch.tensor(labels, dtype=torch.long)
    classes = int(y.max()) + 1
    idx = {s: torch.tensor(v, dtype=torch.long) + base[ltype] for s, v in split.items()}
    y_of = {s: y[torch.tensor(v, dtype=torch.long)] for s, v in split.items()}
    x = {t: torch.tensor(f, dtype=torch.float32) for t, f in feats.items()}

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            h = a.hidden
            self.proj = torch.nn.ParameterDict()
            self.table = torch.nn.ParameterDict()
            for t in names:
                if t in x:
                    w = torch.empty(x[t].shape[1], h)
                    torch.nn.init.xavier_uniform_(w)
                    self.proj[t] = torch.nn.Parameter(w)
                else:
                    w = torch.empty(counts[t], h)
                    torch.nn.init.xavier_uniform_(w)
                    self.table[t] = torch.nn.Parameter(w)
            if a.model == "rgcn":
                self.conv1 = RGCNConv(h, h, n_rel, num_bases=a.bases, aggr="mean", bias=False)
                self.conv2 = RGCNConv(h, classes, n_rel, num_bases=a.bases, aggr="mean", bias=False)
                return
            att = dict(
                num_bases=a.bases,
                attention_mechanism="within-relation",
                attention_mode="additive-self-attention",
                dim=1,
                bias=False,
            )
            self.conv1 = RGATConv(h, h // a.heads, n_rel, heads=a.heads, **att)
            self.conv2 = RGATConv(h, classes, n_rel, heads=1, **att)
            self.root1 = torch.nn.Linear(h, h, bias=False)
            self.root2 = torch.nn.Linear(h, classes, bias=False)
            for lin in (self.root1, self.root2):
                torch.nn.init.xavier_uniform_(lin.weight)

        def forward(self):
            h0 = torch.cat(
                [x[t] @ self.proj[t] if t in x else self.table[t] for t in names], dim=0
            )
            if a.model == "rgcn":
                h1 = F.relu(self.conv1(h0, edge_index, edge_type))
                return self.conv2(h1, edge_index, edge_type)
            h0 = F.dropout(h0, 0.5, self.training)
            h1 = F.relu(self.root1(h0) + self.conv1(h0, edge_index, edge_type))
            h1 = F.dropout(h1, 0.5, self.training)
            return self.root2(h1) + self.conv2(h1, edge_index, edge_type)

    model = Model()
    decayed = list(model.proj.values()) + list(model.table.values()) + list(model.conv1.parameters())
    others = list(model.conv2.parameters())
    if a.model == "rgat":
        decayed += list(model.root1.parameters())
        others += list(model.root2.parameters())
    opt = torch.optim.Adam(
        [{"params": decayed, "weight_decay": 5e-4}, {"params": others, "weight_decay": 0.0}],
        lr=0.01,
    )
    t_ready = time.perf_counter()
    epoch_s, train_s, val = [], [], []
    for _ in range(a.epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model()
        loss = F.cross_entropy(out[idx["train"]], y_of["train"])
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            pred = model()[idx["valid"]].argmax(1)
            val.append(float((pred == y_of["valid"]).float().mean()))
        t2 = time.perf_counter()
        train_s.append(t1 - t0)
        epoch_s.append(t2 - t0)
    model.eval()
    with torch.no_grad():
        pred = model()[idx["test"]].argmax(1)
        test = float((pred == y_of["test"]).float().mean())
    print(
        json.dumps(
            {
                "side": "pyg",
                "model": a.model,
                "threads": a.threads,
                "seed": a.seed,
                "relations": n_rel,
                "nodes": n,
                "entries": len(type_all),
                "start_s": t_ready - t_start,
                "epoch_ms_median": 1e3 * statistics.median(epoch_s),
                "train_ms_median": 1e3 * statistics.median(train_s),
                "epochs_s": sum(epoch_s),
                "val_last": val[-1],
                "test": test,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
