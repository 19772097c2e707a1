#!/usr/bin/env bash
# Issue 52's throughput line: link training on a Kronecker graph with a stored split,
# saintflow's plans/graphsage_link.toml (GraphSAINT-RW subgraphs, three SAGE layers of 256,
# the MLP predictor, one negative per positive) against PyG's LinkNeighborLoader + SAGEConv
# with the same model sizes (scripts/link_kron_vs_pyg.py), positive edges per second of
# training, at each thread count, the sides alternating round by round (the first
# alternates too). saintflow's figure is from its log: the step records' `pairs` / 2 (one
# negative each) over their `ms.wall`, after 3 warm-up steps, evaluation off; PyG's
# is each batch's loader draw + step, after 3 warm-up batches.
#
# Usage: scripts/link_kron_vs_pyg.sh [OUT_DIR]      (default target/link-kron-vs-pyg)
# Environment: VENV (a venv with torch and torch_geometric, and pyg-lib or torch-sparse,
#   which LinkNeighborLoader needs; default target/link-vs-pyg-venv), SCALE (default 20),
#   THREADS (default "1 2"), ROUNDS (default 3), STEPS (timed steps/batches, default 30),
#   BATCH (PyG's positives per batch, default 1024), NEIGHBORS (default 10,10,10).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$(mkdir -p "${1:-target/link-kron-vs-pyg}" && cd "${1:-target/link-kron-vs-pyg}" && pwd)
VENV=${VENV:-$ROOT/target/link-vs-pyg-venv}
SCALE=${SCALE:-20}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-30}
BATCH=${BATCH:-1024}
NEIGHBORS=${NEIGHBORS:-10,10,10}
. scripts/blas_env.sh
PY="$VENV/bin/python -W ignore"
$PY -c "import torch_geometric.typing as t, sys; sys.exit(0 if (t.WITH_PYG_LIB or t.WITH_TORCH_SPARSE) else 'LinkNeighborLoader needs pyg-lib or torch-sparse in $VENV (pip install --no-build-isolation torch-scatter torch-sparse builds them from source, about 20 min each on 2 cores; pyg-lib wheels are not on PyPI)')"

machine_header "$VENV/bin/python"
$PY -c "import torch, re, torch_geometric as g, torch_geometric.typing as t; print('torch', torch.__version__, re.search('BLAS_INFO=[a-z]+', torch.__config__.show()).group(), '| torch_geometric', g.__version__, '| pyg-lib', t.WITH_PYG_LIB, '| torch-sparse', t.WITH_TORCH_SPARSE)"
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --quiet --bin saintflow
SF=$ROOT/target/release/saintflow
if [ ! -d "$OUT/k$SCALE-link.sf" ]; then
  "$SF" gen kronecker --scale "$SCALE" --degree 16 --features 32 --classes 4 --seed 1 -o "$OUT/k$SCALE.sf" --quiet --force
  "$SF" split-edges "$OUT/k$SCALE.sf" -o "$OUT/k$SCALE-link.sf" --val 0.001 --test 0.001 --negatives 10 --seed 1 --force
fi
STORE=$OUT/k$SCALE-link.sf
mkdir -p "$OUT/runs"
pyg() { OMP_NUM_THREADS=$1 $PY scripts/link_kron_vs_pyg.py "$STORE" --threads "$1" --batches "$STEPS" --batch-size "$BATCH" --neighbors "$NEIGHBORS" > "$OUT/runs/pyg-t$1-r$2.json"; }
sf() { "$SF" train plans/graphsage_link.toml --graph "$STORE" --threads "$1" --seed "$2" --no-eval --epochs 1 --steps $((STEPS + 3)) --json --quiet > "$OUT/runs/sf-t$1-r$2.jsonl"; }
for t in $THREADS; do
  for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then pyg "$t" "$r"; sf "$t" "$r"; else sf "$t" "$r"; pyg "$t" "$r"; fi
    echo "threads $t round $r done; load: $(uptime | sed 's/.*load average: //')"
  done
done
python3 - "$OUT/runs" <<'P'
import glob, json, os, statistics, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "*"))):
    side, t, r = os.path.basename(f).split(".")[0].split("-")
    if side == "pyg":
        j = json.loads(open(f).read())
        v = j["positives_per_s"]
    else:
        steps = [json.loads(l) for l in open(f) if '"kind":"step"' in l][3:]
        v = sum(s["pairs"] / 2 for s in steps) / (sum(s["ms"]["wall"] for s in steps) / 1e3)
    rows.setdefault((t, side), []).append(v)
print("| threads | side | positive edges / s (median; rounds) | saintflow / PyG |")
print("|---|---|---|---|")
for t in sorted({k[0] for k in rows}):
    p, s = statistics.median(rows[(t, "pyg")]), statistics.median(rows[(t, "sf")])
    print(f"| {t[1:]} | PyG LinkNeighborLoader + SAGEConv | {p:,.0f} ({', '.join(f'{x:,.0f}' for x in rows[(t, 'pyg')])}) | |")
    print(f"| {t[1:]} | saintflow graphsage_link | {s:,.0f} ({', '.join(f'{x:,.0f}' for x in rows[(t, 'sf')])}) | **{s / p:.2f}×** |")
P
echo "load: $(uptime)"
