#!/usr/bin/env bash
# Issue 57's side by side: plans/rgcn.toml trained by saintflow and by PyTorch Geometric
# (`RGCNConv`, the same model term by term: scripts/rgcn_vs_pyg.py) on the typed Cora
# (papers with their features, each vocabulary word a featureless `word` node; `paper cites
# paper`, `paper has word` and its reverse), written in ogbn-mag's layout by
# scripts/cora_typed.py and imported by `saintflow import ogb`. Per seed and thread count:
# the test accuracy of the last epoch's weights and the median wall time of an epoch (one
# full-batch training step and one validation), saintflow's from its log records
# (`train_ms` + `eval_ms`), PyG's measured around the same two. Sides interleaved.
#
# Usage: scripts/rgcn_vs_pyg.sh [OUT_DIR]            (default target/rgcn-vs-pyg)
# Environment: CORA (default ../shared/data/cora), VENV (a venv with torch and
#   torch_geometric; default target/rgcn-vs-pyg-venv, made here), SEEDS (default 1 to 20:
#   140 training labels make single runs differ by ±6 points, so 5 seeds cannot resolve
#   a 1-point difference), THREADS (default "1 2"), MODEL (rgcn, the default, or rgat:
#   plans/rgat.toml against PyG's `RGATConv`, see scripts/rgcn_vs_pyg.py).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$(mkdir -p "${1:-target/rgcn-vs-pyg}" && cd "${1:-target/rgcn-vs-pyg}" && pwd)
CORA=${CORA:-$ROOT/../shared/data/cora}
VENV=${VENV:-$ROOT/target/rgcn-vs-pyg-venv}
SEEDS=${SEEDS:-$(seq -s " " 1 20)}
THREADS=${THREADS:-1 2}
MODEL=${MODEL:-rgcn}
[ -d "$CORA" ] || { echo "no Cora at $CORA (set CORA=<GraphSAINT-format Cora directory>)" >&2; exit 2; }
. scripts/blas_env.sh   # unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (says so if they were set)
if ! "$VENV/bin/python" -c "import torch, torch_geometric" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet torch numpy torch_geometric
fi
machine_header "$VENV/bin/python"
"$VENV/bin/python" -W ignore -c "import torch, torch_geometric as g; print('torch', torch.__version__, '| torch_geometric', g.__version__)"
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --quiet --bin saintflow
SF=$ROOT/target/release/saintflow
python3 scripts/cora_typed.py "$CORA" -o "$OUT/raw"
"$SF" import ogb "$OUT/raw" -o "$OUT/cora_typed.sf" --quiet --force
mkdir -p "$OUT/runs"
for t in $THREADS; do
  for s in $SEEDS; do
    "$SF" train "$MODEL" --graph "$OUT/cora_typed.sf" --seed "$s" --threads "$t" --json --quiet \
      > "$OUT/runs/sf-t$t-s$s.jsonl"
    "$VENV/bin/python" -W ignore scripts/rgcn_vs_pyg.py "$OUT/raw" --threads "$t" --seed "$s" --model "$MODEL" \
      > "$OUT/runs/pyg-t$t-s$s.json"
  done
done
python3 - "$OUT/runs" "$THREADS" "$SEEDS" "$MODEL" <<'EOF'
import json, pathlib, statistics, sys
runs, threads, seeds = pathlib.Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
conv = {"rgcn": "RGCNConv", "rgat": "RGATConv"}[sys.argv[4]]
def sf(t, s):
    recs = [json.loads(l) for l in open(runs / f"sf-t{t}-s{s}.jsonl") if l.strip()]
    ep = [r for r in recs if r["kind"] == "epoch"]
    test = [r for r in recs if r["kind"] == "test"][0]["test"]["accuracy"]
    return statistics.median(r["train_ms"] + r["eval_ms"] for r in ep), test
def pyg(t, s):
    r = json.loads(open(runs / f"pyg-t{t}-s{s}.json").read().strip().splitlines()[-1])
    return r["epoch_ms_median"], r["test"]
print("| threads | side | epoch ms (median over epochs; median over seeds) | saintflow / PyG | test accuracy % per seed | mean |")
print("|---|---|---|---|---|---|")
for t in threads:
    a = [sf(t, s) for s in seeds]
    b = [pyg(t, s) for s in seeds]
    ms_a, ms_b = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
    for name, xs, ms, ratio in (("saintflow", a, ms_a, f"**{ms_a / ms_b:.2f}×**"), (f"PyG {conv}", b, ms_b, "")):
        accs = ", ".join(f"{100 * x[1]:.1f}" for x in xs)
        mean = 100 * statistics.mean(x[1] for x in xs)
        print(f"| {t} | {name} | {ms:.1f} | {ratio} | {accs} | {mean:.2f} |")
EOF
