#!/usr/bin/env python3
"""Issue 53 item 7: an epoch's full-graph evaluation against its training, two saintflow
binaries (before and after a change) interleaved in one run.

For each plan (APPNP, SGC, GCNII by default) and each seed, each binary trains on the
store at `--threads 1` with `--json`; the runs alternate binary by binary, seed by seed,
so that both see the same machine load. From every run's log:

* train ms/epoch: the sum of the epoch's `step` records' `ms.wall` (the step records are
  in both binaries' logs; the `epoch` record's own `train_ms` is newer), median over
  epochs;
* eval ms/epoch: the `epoch` record's `eval_ms`, median over epochs (the first epoch's
  pass, which also compresses the store's features and fills the parameter-free cache,
  counts like any other).

The table gives, per plan and binary, the median over seeds of those medians, the range
over seeds, and eval/train. It also checks that both binaries give the same validation
figures at every epoch and the same test figures (float reassociation could change an
argmax: any difference is listed). With `--accuracy PLAN`, that plan (GCN by default) is
trained to its end on every seed by both binaries and the test accuracies are printed
side by side.

Usage: scripts/eval_vs_train.py BEFORE AFTER STORE [--seeds 1,2,3,4,5]
           [--plans appnp,sgc,gcnii] [--epochs appnp=300,sgc=100,gcnii=60] [--accuracy gcn]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

PLANS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plans")


def train(binary, plan, store, seed, epochs):
    cmd = [binary, "train", os.path.join(PLANS, plan + ".toml"), "--graph", store,
           "--threads", "1", "--seed", str(seed), "--json", "--quiet"]
    if epochs:
        cmd += ["--epochs", str(epochs)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    steps, evals, vals, test = {}, [], [], None
    for line in out.splitlines():
        r = json.loads(line)
        if r["kind"] == "step":
            steps[r["epoch"]] = steps.get(r["epoch"], 0.0) + r["ms"]["wall"]
        elif r["kind"] == "epoch":
            vals.append(r.get("val"))
            if r.get("eval_ms") is not None:
                evals.append(r["eval_ms"])
        elif r["kind"] == "test":
            test = (r.get("val"), r.get("test"))
    return {
        "train": statistics.median(steps.values()),
        "eval": statistics.median(evals),
        "vals": vals,
        "test": test,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("store")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--plans", default="appnp,sgc,gcnii")
    ap.add_argument("--epochs", default="gcnii=60",
                    help="PLAN=N,...: epochs per plan (default: the plan's own)")
    ap.add_argument("--accuracy", default="gcn",
                    help="a plan trained to its end on every seed by both ('' for none)")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    epochs = dict(kv.split("=") for kv in a.epochs.split(",") if kv)
    bins = {"before": a.before, "after": a.after}
    diffs = []
    print("| plan | epochs | binary | train ms/epoch | eval ms/epoch | eval / train |")
    print("|---|---|---|---|---|---|")
    for plan in a.plans.split(","):
        runs = {k: [] for k in bins}
        for seed in seeds:
            for k, b in bins.items():
                runs[k].append(train(b, plan, a.store, seed, epochs.get(plan)))
            same = runs["before"][-1]["vals"] == runs["after"][-1]["vals"] and \
                runs["before"][-1]["test"] == runs["after"][-1]["test"]
            if not same:
                diffs.append(f"{plan} seed {seed}")
        for k in bins:
            tr = [r["train"] for r in runs[k]]
            ev = [r["eval"] for r in runs[k]]
            t, e = statistics.median(tr), statistics.median(ev)
            print(f"| {plan} | {epochs.get(plan, 'plan')} | {k} | {t:.2f} ({min(tr):.2f}–{max(tr):.2f}) "
                  f"| {e:.2f} ({min(ev):.2f}–{max(ev):.2f}) | {e / t:.2f} |", flush=True)
    print()
    print("validation and test figures, every epoch: " +
          ("the same for both binaries on every seed" if not diffs
           else "differ for " + ", ".join(diffs)))
    if a.accuracy:
        print()
        print(f"| {a.accuracy} seed | test accuracy before | after |")
        print("|---|---|---|")
        for seed in seeds:
            acc = [train(b, a.accuracy, a.store, seed, None)["test"][1]["accuracy"]
                   for b in bins.values()]
            print(f"| {seed} | {acc[0]:.4f} | {acc[1]:.4f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
