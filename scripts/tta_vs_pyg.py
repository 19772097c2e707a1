#!/usr/bin/env python3
"""Issue 53's time to accuracy, PyG's half and the harness's tools: plans/graphsage.toml's
GraphSAGE trained in PyTorch Geometric by the loop of PyG's examples/graph_saint.py, on a
saintflow store, fed either by PyG's `GraphSAINTRandomWalkSampler` or by saintflow's
Python sampler (`saintflow.SaintSampler`), with a full-graph validation after every epoch.

The model is the plan's, term by term (plans/graphsage.toml):

* two layers `relu(concat(x @ W_self, A_mean @ x @ W_neigh))`, hidden 256 (so 512 wide
  out of each), no bias, dropout 0.2 on each layer's input; `A_mean` = D⁻¹A of the
  subgraph in training and of the full graph in evaluation (torch_sparse's
  `matmul(adj, x, reduce="mean")`, what `SAGEConv` runs on a `SparseTensor`);
* the classifier `l2norm(x) @ W_out + b_out` after dropout 0.2;
* Glorot-uniform weights, zero bias (the plan's default init); Adam, lr 0.01;
* the loss: softmax cross-entropy weighted by GraphSAINT's loss normalisation, as the
  example's `use_normalization` branch (`(loss * node_norm).sum()`), scaled so that it is
  the plan's estimate of the mean training loss, N_pre / (C_v · |V_train|) per node (PyG's
  `node_norm` divides by the sampled graph's N instead; a constant factor). The example's
  aggregator normalisation (`edge_norm` in the messages) is not used: the plan's `A_mean`
  has none.

Each product `A_mean @ x @ W` is taken in the cheaper order, (A·X)·W where the input is
narrower than the output, A·(X·W) where it is wider (saintflow's planner chooses the same
way): the order PyG's `SAGEConv` would not choose on its own, so PyG is not charged for it.

Data: read with numpy from the store's files (docs/FORMAT.md), the training graph
`train.*` (the edges among training nodes: GraphSAINT's inductive setting, the plan's
`graph = "train"`) relabelled to the training nodes for PyG's sampler, the full graph
`full.*` for evaluation. Every node of a subgraph is a training node, so the loss is
over all of them.

Usage:
  tta_vs_pyg.py run STORE --sampler pyg|saintflow --threads T --seed S --epochs E
      --steps-per-epoch K [--roots 3000] [--walk-length 2] [--coverage C]
                                     JSON lines on stdout (flushed): `run` after the data is
                                     loaded, an `epoch` record per epoch, `test` at the end
  tta_vs_pyg.py probe STORE --roots R --walk-length L
                                     saintflow's steps per epoch and mean subgraph size
  tta_vs_pyg.py stamp OUT -- CMD...  runs CMD, writing each JSON line of its stdout to OUT
                                     with `wall`, seconds since CMD was started, and
                                     `cpu`, the CPU seconds CMD had used by then
  tta_vs_pyg.py summary DIR [--target A]
                                     the table from DIR's runs
"""
import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

# The number of subgraphs saintflow's trainer pre-samples for the normalisation (at most
# 200: src/compile/mod.rs `setup_phase`); the Python sides are given a coverage that draws
# about as many.
N_PRE = 200


def read_store(path):
    import numpy as np

    def arr(name, dtype):
        return np.fromfile(os.path.join(path, name), dtype=dtype)

    off = arr("full.offsets.u64", "<u8").astype(np.int64)
    n = len(off) - 1
    return {
        "full": (off, arr("full.indices.u32", "<u4").astype(np.int64)),
        "train": (arr("train.offsets.u64", "<u8").astype(np.int64),
                  arr("train.indices.u32", "<u4").astype(np.int64)),
        "x": arr("features.f32", "<f4").reshape(n, -1),
        "y": arr("labels.bin", "<u4").astype(np.int64),
        "roles": arr("roles.u8", "u1"),
    }


def emit(rec):
    print(json.dumps(rec), flush=True)


def run(args):
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numpy as np
    import torch
    import torch.nn.functional as F
    import torch_geometric
    from torch_sparse import SparseTensor, matmul

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    st = read_store(args.store)
    n = len(st["y"])
    roles = st["roles"]
    train = np.flatnonzero(roles == 1)
    x_all = torch.from_numpy(st["x"])
    y_all = torch.from_numpy(st["y"])
    off, idx = (torch.from_numpy(a) for a in st["full"])
    full_adj = SparseTensor(rowptr=off, col=idx, sparse_sizes=(n, n), is_sorted=True,
                            trust_data=True)
    masks = {r: torch.from_numpy(roles == k) for r, k in (("val", 2), ("test", 3))}
    n_classes = int(y_all[y_all >= 0].max()) + 1 if args.classes is None else args.classes
    hidden, p = args.hidden, args.dropout

    class Sage(torch.nn.Module):
        def __init__(self, f):
            super().__init__()
            ins = [f, 2 * hidden]
            self.w_self = torch.nn.ModuleList(torch.nn.Linear(i, hidden, bias=False) for i in ins)
            self.w_neigh = torch.nn.ModuleList(torch.nn.Linear(i, hidden, bias=False) for i in ins)
            self.out = torch.nn.Linear(2 * hidden, n_classes)
            for m in self.modules():
                if isinstance(m, torch.nn.Linear):
                    torch.nn.init.xavier_uniform_(m.weight)
                    if m.bias is not None:
                        torch.nn.init.zeros_(m.bias)

        def layer(self, k, x, adj):
            x = F.dropout(x, p, self.training)
            wn = self.w_neigh[k]
            if wn.in_features <= wn.out_features:
                neigh = wn(matmul(adj, x, reduce="mean"))
            else:
                neigh = matmul(adj, wn(x), reduce="mean")
            return torch.cat([self.w_self[k](x), neigh], dim=-1).relu()

        def head(self, x):
            x = F.dropout(x, p, self.training)
            return self.out(F.normalize(x, dim=-1))

        def forward(self, x, adj):
            for k in range(len(self.w_self)):
                x = self.layer(k, x, adj)
            return self.head(x)

        @torch.no_grad()
        def full_forward(self, x, adj, block=1 << 16):
            """Layer by layer over the whole graph, the last layer and the head in row
            blocks (the widest values, N × 512, kept once)."""
            h = self.layer(0, x, adj)
            neigh = matmul(adj, self.w_neigh[1](h), reduce="mean")
            out = torch.empty(x.shape[0], n_classes)
            for a in range(0, x.shape[0], block):
                b = min(a + block, x.shape[0])
                z = torch.cat([self.w_self[1](h[a:b]), neigh[a:b]], dim=-1).relu()
                out[a:b] = self.head(z)
            return out

    model = Sage(x_all.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    if args.sampler == "pyg":
        from torch_geometric.data import Data
        from torch_geometric.loader import GraphSAINTRandomWalkSampler

        # The training graph relabelled to the training nodes (every edge has both ends
        # among them).
        toff, tidx = st["train"]
        local = np.full(n, -1, dtype=np.int64)
        local[train] = np.arange(len(train))
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(toff))
        ei = torch.from_numpy(np.stack([local[src], local[tidx]]))
        data = Data(x=x_all[train], y=y_all[train], edge_index=ei, num_nodes=len(train))
    emit({"kind": "run", "side": f"pyg+{args.sampler}", "threads": args.threads,
          "seed": args.seed, "load_s": time.perf_counter() - t0, "nodes": n,
          "train_nodes": len(train), "torch": torch.__version__,
          "torch_geometric": torch_geometric.__version__})

    t1 = time.perf_counter()
    if args.sampler == "pyg":
        loader = GraphSAINTRandomWalkSampler(
            data, batch_size=args.roots, walk_length=args.walk_length,
            num_steps=args.steps_per_epoch, sample_coverage=args.coverage, log=False)
        # PyG's node_norm = num_samples / (C_v · N) with N = |V_train| here: the plan's.
        norm_scale = 1.0

        def batches():
            for b in loader:
                adj = SparseTensor(row=b.edge_index[0], col=b.edge_index[1],
                                   sparse_sizes=(b.num_nodes, b.num_nodes), is_sorted=True)
                yield b.x, adj, b.y, b.node_norm
    else:
        import saintflow as sf

        loader = sf.SaintSampler(
            args.store, "rw", graph="train", seed=args.seed, threads=args.threads,
            num_steps=args.steps_per_epoch, sample_coverage=args.coverage,
            batch_size=args.roots, walk_length=args.walk_length)
        # node_norm divides by the sampled graph's nodes, N (the training graph keeps every
        # node id); the plan's weights divide by |V_train|.
        norm_scale = n / len(train)

        def batches():
            for b in loader:
                m = len(b.n_id)
                adj = SparseTensor(rowptr=torch.from_numpy(b.indptr.astype(np.int64)),
                                   col=torch.from_numpy(b.indices), sparse_sizes=(m, m),
                                   is_sorted=True, trust_data=True)
                yield (torch.from_numpy(b.x), adj, torch.from_numpy(b.y),
                       torch.from_numpy(b.node_norm))
    presample_s = time.perf_counter() - t1

    best = None
    for epoch in range(1, args.epochs + 1):
        model.train()
        t2 = time.perf_counter()
        losses, nodes, steps = [], 0, 0
        for x, adj, y, node_norm in batches():
            opt.zero_grad()
            out = model(x, adj)
            loss = (F.cross_entropy(out, y, reduction="none") * node_norm).sum() * norm_scale
            loss.backward()
            opt.step()
            losses.append(loss.item())
            nodes += x.shape[0]
            steps += 1
        t3 = time.perf_counter()
        model.eval()
        pred = model.full_forward(x_all, full_adj).argmax(-1)
        acc = {r: float((pred[m] == y_all[m]).float().mean()) for r, m in masks.items()}
        t4 = time.perf_counter()
        if best is None or acc["val"] > best[1]["val"]:
            best = (epoch, acc)
        emit({"kind": "epoch", "epoch": epoch, "steps": steps,
              "mean_nodes": nodes / max(steps, 1), "train_loss": statistics.fmean(losses),
              "val": {"accuracy": acc["val"]}, "test_of_epoch": {"accuracy": acc["test"]},
              "train_s": t3 - t2, "eval_s": t4 - t3,
              "presample_s": presample_s if epoch == 1 else 0.0})
    emit({"kind": "test", "epoch": best[0], "val": {"accuracy": best[1]["val"]},
          "test": {"accuracy": best[1]["test"]}})


def probe(args):
    """`saintflow train`'s steps per epoch for these sampler sizes and seed, computed as the
    trainer does (src/compile/mod.rs `setup_phase`): ⌈|V_train| / mean nodes⌉ over the
    N_PRE subgraphs it pre-samples for the normalisation, which are the Python sampler's
    `subgraph(i, seed=norm_seed)` (the same seed stream, the same clip)."""
    import saintflow as sf

    s = sf.SaintSampler(args.store, "rw", graph="train", seed=args.seed, threads=args.threads,
                        sample_coverage=0, batch_size=args.roots, walk_length=args.walk_length)
    nodes = [s.subgraph(i, seed=s.norm_seed).num_nodes for i in range(N_PRE)]
    mean = sum(nodes) / N_PRE
    n_train, n = len(s.store.split("train")), s.store.n_nodes
    # The trainer draws min(200, ⌈10 · N / expected⌉) subgraphs (N: the training graph's
    # node ids, every node's); at these sizes the cap.
    assert 10 * n / mean >= N_PRE, "the trainer would pre-sample fewer than N_PRE subgraphs"
    print(json.dumps({"steps_per_epoch": math.ceil(n_train / mean), "mean_nodes": mean,
                      "train_nodes": n_train, "nodes": n,
                      # coverages that pre-sample about N_PRE subgraphs, as the trainer:
                      # PyG's counts nodes of its graph (the training nodes), saintflow's
                      # of the sampled graph's ids (all N)
                      "coverage_pyg": N_PRE * mean / n_train,
                      "coverage_saintflow": N_PRE * mean / n}))


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid`, all its threads (/proc/PID/stat fields
    14 and 15); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stamp(args):
    """`wall`: seconds since CMD was started; `cpu`: the CPU seconds CMD had used by then
    (its threads together), which the machine's other load does not inflate as it does the
    wall time. CMD may be `nice … PROGRAM`: nice execs it, so the pid is the program's."""
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    with open(args.out, "w") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            wall = time.monotonic() - t0
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                rec["wall"] = wall
                rec["cpu"] = cpu_seconds(proc.pid)
                out.write(json.dumps(rec) + "\n")
                out.flush()
        rc = proc.wait()
        use = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.write(json.dumps({"kind": "exit", "wall": time.monotonic() - t0, "rc": rc,
                              "cpu": use.ru_utime + use.ru_stime}) + "\n")
    sys.exit(rc)


SIDES = {"sf": "saintflow train (CLI)", "pyg": "PyG + GraphSAINTRandomWalkSampler",
         "pygsf": "PyG + saintflow.SaintSampler"}


def read_run(path):
    recs = [json.loads(line) for line in open(path)]
    epochs = [r for r in recs if r["kind"] == "epoch"]
    test = [r for r in recs if r["kind"] == "test"]
    end = [r for r in recs if r["kind"] == "exit"]
    if not test or not end or end[-1]["rc"] != 0:
        return None
    steps = [r for r in recs if r["kind"] == "step"]
    run = next(r for r in recs if r["kind"] == "run")
    out = {
        "curve": [(r["wall"], r["val"]["accuracy"], r.get("cpu")) for r in epochs],
        "end_cpu": end[-1].get("cpu"),
        "val": test[-1]["val"]["accuracy"], "test": test[-1]["test"]["accuracy"],
        "end": end[-1]["wall"], "startup": run["wall"],
        "epochs": len(epochs),
    }
    if steps:  # saintflow's CLI: its step and epoch records
        out["steps"] = len(steps)
        out["eval"] = sum(r["eval_ms"] for r in epochs) / 1e3
        out["train"] = sum(r["ms"]["wall"] for r in steps) / 1e3
        out["mean_nodes"] = statistics.fmean(r["nodes"] for r in steps)
    else:
        out["steps"] = sum(r["steps"] for r in epochs)
        out["eval"] = sum(r["eval_s"] for r in epochs)
        out["train"] = sum(r["train_s"] for r in epochs)
        out["presample"] = sum(r["presample_s"] for r in epochs)
        out["mean_nodes"] = statistics.fmean(r["mean_nodes"] for r in epochs)
    return out


def summary(args):
    med = statistics.median
    runs = {}
    for f in sorted(os.listdir(args.dir)):
        if not f.endswith(".jsonl"):
            continue
        side, t, r = f[:-6].split("-")
        rec = read_run(os.path.join(args.dir, f))
        if rec is None:
            print(f"{f}: failed or incomplete, left out")
            continue
        runs.setdefault((int(t[1:]), side), []).append(rec)
    if not runs:
        sys.exit("no complete runs")
    # The target: given, or 98 % of the lowest best validation accuracy of any run, cut
    # to a tenth of a point (every run reaches it).
    lowest = min(x["val"] for rs in runs.values() for x in rs)
    target = args.target if args.target is not None else math.floor(980 * lowest) / 1000
    how = ("given" if args.target is not None else "98 % of the lowest best validation "
           f"accuracy of any run, {100 * lowest:.2f} %, cut to 0.1 point")
    print(f"target validation accuracy: {100 * target:.1f} % ({how})")

    def reach(rec, cpu=False):
        got = next(((c if cpu else w) for w, a, c in rec["curve"] if a >= target), math.inf)
        return math.inf if got is None else got

    def fmt(v):
        return "–" if v is None or v == math.inf else f"{v:.1f}"

    print("| threads | side | time to target, s (median; rounds) | saintflow CLI / this | "
          "CPU s to target | CLI / this, CPU | end to end, s | val acc | test acc | steps | "
          "nodes / step | start-up (+ pre-sampling) / training / evaluation, s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t in sorted({k[0] for k in runs}):
        sf = runs.get((t, "sf"))
        sf_tt = med(reach(x) for x in sf) if sf else None
        sf_cpu = med(reach(x, True) for x in sf) if sf else None
        for side in ("pyg", "pygsf", "sf"):
            rs = runs.get((t, side))
            if not rs:
                continue
            tt = [reach(x) for x in rs]
            cpu = med(reach(x, True) for x in rs)
            ratio = f"**{sf_tt / med(tt):.2f}×**" if sf and side != "sf" else ""
            cpu_ratio = (f"{sf_cpu / cpu:.2f}×" if sf and side != "sf"
                         and math.isfinite(sf_cpu) and math.isfinite(cpu) else "")
            if side == "sf":
                split = (f"{med(x['startup'] for x in rs):.1f} / "
                         f"{med(x['train'] for x in rs):.1f} (steps' ms.wall; pre-sampling in "
                         f"the first) / {med(x['eval'] for x in rs):.1f}")
            else:
                split = (f"{med(x['startup'] + x['presample'] for x in rs):.1f} / "
                         f"{med(x['train'] for x in rs):.1f} / {med(x['eval'] for x in rs):.1f}")
            print(f"| {t} | {SIDES[side]} | {med(tt):.1f} ({', '.join(fmt(v) for v in tt)}) | "
                  f"{ratio} | {fmt(cpu)} | {cpu_ratio} | {med(x['end'] for x in rs):.1f} | "
                  f"{100 * med(x['val'] for x in rs):.2f} | {100 * med(x['test'] for x in rs):.2f} | "
                  f"{rs[0]['steps']} | {med(x['mean_nodes'] for x in rs):.0f} | {split} |")


def main():
    blas_env.report()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd_name", required=True)
    r = sub.add_parser("run")
    r.add_argument("store")
    r.add_argument("--sampler", choices=("pyg", "saintflow"), required=True)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--epochs", type=int, required=True)
    r.add_argument("--steps-per-epoch", type=int, required=True)
    r.add_argument("--roots", type=int, default=3000)
    r.add_argument("--walk-length", type=int, default=2)
    r.add_argument("--coverage", type=float, default=2.0)
    r.add_argument("--hidden", type=int, default=256)
    r.add_argument("--dropout", type=float, default=0.2)
    r.add_argument("--lr", type=float, default=0.01)
    r.add_argument("--classes", type=int, default=None)
    p = sub.add_parser("probe")
    p.add_argument("store")
    p.add_argument("--roots", type=int, default=3000)
    p.add_argument("--walk-length", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    s = sub.add_parser("stamp")
    s.add_argument("out")
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    m = sub.add_parser("summary")
    m.add_argument("dir")
    m.add_argument("--target", type=float, default=None)
    args = ap.parse_args()
    {"run": run, "probe": probe, "stamp": stamp, "summary": summary}[args.cmd_name](args)


if __name__ == "__main__":
    main()
