#!/usr/bin/env python3
"""Issue 52's side-by-side, PyG's half: PyG's GAE as its examples/autoencoder.py trains it
(GCNConv(in, 32) + relu, GCNConv(32, 16), InnerProductDecoder, recon_loss with
negative_sampling redrawn every epoch, Adam 0.01), full batch, on a saintflow store's link
split (`saintflow split-edges`), read with numpy from docs/FORMAT.md's layout:

* features: `features.f32` (N × F; GraphSAINT's Cora rows already sum to 1, so the
  example's NormalizeFeatures would change nothing and is not applied);
* message passing: the stored graph `train.offsets.u64` / `train.indices.u32` (the input
  minus every held-out edge, both directions), as `edge_index`;
* training positives: the stored graph's undirected edges (u < v), one column each, as
  the example's `train_data.pos_edge_label_index`;
* validation / test: `link.{val,test}.pos.u32` against `link.{val,test}.negpairs.u32`
  for AUC and AP through PyG's own `GAE.test` (scikit-learn on σ(z_u·z_v)), and MRR of
  each positive (u, v) against its K tails `link.*.neg.u32` (u, v′) with OGB's rank
  1 + ½(#{q > p} + #{q ≥ p}) on the raw scores z_u·z_v in f32, as saintflow ranks them.

Best epoch: the highest validation AUC (ties keep the earlier epoch), as plans/gae.toml's
`metric = "auc"` chooses; the test figures are that epoch's.

Diagnostic (`--negatives tail`, not PyG's example): each positive (u, v)'s negative is
(u, v′), v′ uniform over all nodes, the source kept, as plans/gae.toml draws its
negatives (`negatives = 1`, uniform, sharing the target's source), instead of
negative_sampling's pairs with both ends drawn.

Timing: an epoch's training time is `train()` alone (zero_grad, encode, recon_loss with
its negative_sampling, backward, Adam step), `time.perf_counter` around it; evaluation is
timed apart and not included.

Usage:
  link_vs_pyg.py run STORE --threads T --seed S [--epochs 200] [--negatives pyg|tail]
                                                                  one JSON line on stdout
  link_vs_pyg.py summary DIR                                      the table from DIR's runs
"""
import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import argparse
import json
import os
import statistics
import sys
import time


def read_store(path):
    import numpy as np

    def u32(name):
        return np.fromfile(os.path.join(path, name), dtype="<u4")

    off = np.fromfile(os.path.join(path, "train.offsets.u64"), dtype="<u8").astype(np.int64)
    idx = u32("train.indices.u32").astype(np.int64)
    n_nodes = len(off) - 1
    feats = np.fromfile(os.path.join(path, "features.f32"), dtype="<f4")
    feats = feats.reshape(n_nodes, -1)
    src = np.repeat(np.arange(n_nodes, dtype=np.int64), np.diff(off))
    sets = {}
    for s in ("val", "test"):
        pos = u32(f"link.{s}.pos.u32").astype(np.int64).reshape(-1, 2)
        negpairs = u32(f"link.{s}.negpairs.u32").astype(np.int64).reshape(-1, 2)
        tails = u32(f"link.{s}.neg.u32").astype(np.int64).reshape(len(pos), -1)
        sets[s] = (pos, negpairs, tails)
    return feats, np.stack([src, idx]), sets


def run(args):
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numpy as np
    import torch
    from torch_geometric.nn import GAE, GCNConv

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    feats, edge_index, sets = read_store(args.store)
    x = torch.from_numpy(feats)
    edge_index = torch.from_numpy(edge_index)
    # The training positives: each undirected stored edge once (u < v).
    pos_train = edge_index[:, edge_index[0] < edge_index[1]]
    tsets = {
        s: (torch.from_numpy(p.T.copy()), torch.from_numpy(q.T.copy()), torch.from_numpy(t))
        for s, (p, q, t) in sets.items()
    }

    class GCNEncoder(torch.nn.Module):  # examples/autoencoder.py's, out_channels = 16
        def __init__(self, in_channels, out_channels):
            super().__init__()
            bias = not args.no_bias
            self.conv1 = GCNConv(in_channels, 2 * out_channels, cached=True, bias=bias)
            self.conv2 = GCNConv(2 * out_channels, out_channels, cached=True, bias=bias)

        def forward(self, x, edge_index):
            x = self.conv1(x, edge_index).relu()
            return self.conv2(x, edge_index)

    model = GAE(GCNEncoder(x.size(1), 16))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train():
        model.train()
        optimizer.zero_grad()
        z = model.encode(x, edge_index)
        # recon_loss draws negative_sampling(pos_train, N) itself, as the example trains.
        neg = None
        if args.negatives == "tail":
            neg = torch.stack([pos_train[0], torch.randint(0, x.size(0), (pos_train.size(1),))])
        loss = model.recon_loss(z, pos_train, neg)
        loss.backward()
        optimizer.step()
        return float(loss)

    @torch.no_grad()
    def evaluate(z, s):
        pos, negpairs, tails = tsets[s]
        auc, ap = model.test(z, pos, negpairs)  # PyG's own: scikit-learn on σ(z_u·z_v)
        u, v = pos
        p = (z[u] * z[v]).sum(-1)  # raw scores, f32
        q = (z[u].unsqueeze(1) * z[tails]).sum(-1)  # E × K
        above = (q > p.unsqueeze(1)).sum(1).double()
        at_least = (q >= p.unsqueeze(1)).sum(1).double()
        rank = 1.0 + 0.5 * (above + at_least)
        return {"auc": float(auc), "ap": float(ap), "mrr": float((1.0 / rank).mean())}

    train_ms, eval_ms = [], []
    best = None
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        loss = train()
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            z = model.encode(x, edge_index)
        val = evaluate(z, "val")
        if best is None or val["auc"] > best["val"]["auc"]:
            best = {"epoch": epoch, "val": val, "test": evaluate(z, "test")}
        t2 = time.perf_counter()
        train_ms.append(1e3 * (t1 - t0))
        eval_ms.append(1e3 * (t2 - t1))
    print(json.dumps({
        "side": "pyg", "negatives": args.negatives, "bias": not args.no_bias, "seed": args.seed,
        "threads": args.threads, "epochs": args.epochs,
        "loss": loss, "best_epoch": best["epoch"], "val": best["val"], "test": best["test"],
        "train_ms": [round(t, 3) for t in train_ms],
        "eval_ms_median": statistics.median(eval_ms),
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
    }))


def saintflow_record(path):
    """A saintflow --json run: the test record and per-epoch training ms (time deltas minus
    eval_ms), plus the step records' own ms.wall."""
    epochs, steps, test = [], [], None
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r["kind"] == "epoch":
            epochs.append(r)
        elif r["kind"] == "step":
            steps.append(r["ms"])
        elif r["kind"] == "test":
            test = r
    train_ms, prev = [], 0.0
    for r in epochs:
        train_ms.append(1e3 * (r["time"] - prev) - r.get("eval_ms", 0.0))
        prev = r["time"]
    return {
        "best_epoch": test["epoch"], "test": test["test"], "val": test["val"],
        "train_ms": train_ms, "step_wall_ms": [m["wall"] for m in steps], "step_ms": steps,
        "eval_ms_median": statistics.median(r.get("eval_ms", 0.0) for r in epochs),
    }


def summary(args):
    med = statistics.median
    rows = []
    for t in sorted({int(f.split("-t")[1].split("-")[0]) for f in os.listdir(args.dir)
                     if f.startswith(("pyg-t", "sf-t", "pygtail-t"))}):
        pyg, sf, tail = [], [], []
        for f in sorted(os.listdir(args.dir)):
            p = os.path.join(args.dir, f)
            if f.startswith(f"pyg-t{t}-") and f.endswith(".json"):
                pyg.append(json.loads(open(p).read().strip().splitlines()[-1]))
            elif f.startswith(f"pygtail-t{t}-") and f.endswith(".json"):
                tail.append(json.loads(open(p).read().strip().splitlines()[-1]))
            elif f.startswith(f"sf-t{t}-") and f.endswith(".jsonl"):
                sf.append(saintflow_record(p))
        for name, runs in (("PyG", pyg), ("saintflow", sf),
                           ("PyG, tail negatives (diagnostic)", tail)):
            if not runs:
                continue
            row = {"side": name, "threads": t, "seeds": len(runs)}
            for m in ("auc", "ap", "mrr"):
                row[m] = med(r["test"][m] for r in runs)
            row["best_epochs"] = [r["best_epoch"] for r in runs]
            # Median over every epoch of every seed, and the spread of the per-seed medians.
            row["epoch_ms"] = med(x for r in runs for x in r["train_ms"])
            per_seed = [med(r["train_ms"]) for r in runs]
            row["epoch_ms_seed_range"] = (min(per_seed), max(per_seed))
            if name == "saintflow":
                row["step_wall_ms"] = med(x for r in runs for x in r["step_wall_ms"])
            row["eval_ms"] = med(r["eval_ms_median"] for r in runs)
            rows.append(row)
    print("| threads | side | test AUC | AP | MRR (1,000 tails) | best epochs | ms / epoch "
          "(median; per-seed range) | eval ms | saintflow / PyG |")
    print("|---|---|---|---|---|---|---|---|---|")
    by = {(r["threads"], r["side"]): r for r in rows}
    for r in rows:
        ratio = ""
        if r["side"] == "saintflow" and (r["threads"], "PyG") in by:
            ratio = f"**{r['epoch_ms'] / by[(r['threads'], 'PyG')]['epoch_ms']:.2f}**"
        lo, hi = r["epoch_ms_seed_range"]
        extra = f" (step ms.wall {r['step_wall_ms']:.2f})" if "step_wall_ms" in r else ""
        print(f"| {r['threads']} | {r['side']} | {r['auc']:.4f} | {r['ap']:.4f} | "
              f"{r['mrr']:.4f} | {', '.join(map(str, r['best_epochs']))} | "
              f"{r['epoch_ms']:.2f} ({lo:.2f}–{hi:.2f}){extra} | {r['eval_ms']:.2f} | {ratio} |")
    for t in sorted({r["threads"] for r in rows}):
        a, b = by.get((t, "saintflow")), by.get((t, "PyG"))
        if a and b:
            print(f"threads {t}: test AUC {100 * (a['auc'] - b['auc']):+.2f} points, "
                  f"AP {100 * (a['ap'] - b['ap']):+.2f}, MRR {100 * (a['mrr'] - b['mrr']):+.2f} "
                  f"(saintflow − PyG); time per epoch saintflow / PyG "
                  f"{a['epoch_ms'] / b['epoch_ms']:.3f}")
    # Where saintflow's step goes: the step records' stage medians (docs/LOG.md).
    for f in sorted(os.listdir(args.dir)):
        if f.startswith("sf-t") and f.endswith("-s1.jsonl"):
            steps = saintflow_record(os.path.join(args.dir, f))["step_ms"]
            stages = ("sampling", "aggregation", "transformation", "other", "optimizer", "wall")
            print(f"saintflow {f.split('-')[1]} seed 1, step ms medians: " + ", ".join(
                f"{k} {med(m[k] for m in steps):.2f}" for k in stages))


def main():
    blas_env.report()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("store")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--epochs", type=int, default=200)
    r.add_argument("--negatives", choices=("pyg", "tail"), default="pyg")
    r.add_argument("--no-bias", action="store_true",
                   help="GCNConv without its bias, as plans/gae.toml (a diagnostic)")
    s = sub.add_parser("summary")
    s.add_argument("dir")
    args = ap.parse_args()
    (run if args.cmd == "run" else summary)(args)


if __name__ == "__main__":
    sys.exit(main())
