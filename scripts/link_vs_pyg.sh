#!/usr/bin/env bash
# Issue 52's side-by-side with PyTorch Geometric, in one run: GAE on Cora's stored link
# split (split-edges --val 0.05 --test 0.1 --negatives 1000 --seed 1), PyG's GAE as its
# examples/autoencoder.py trains it (scripts/link_vs_pyg.py) against plans/gae.toml, seeds
# 1..20 at 1 and 2 threads, interleaved seed by seed (the side that goes first alternates),
# then the medians: test AUC / AP / MRR of the best-validation-AUC epoch and the wall time
# per training epoch, defined alike for both: one step's forward, backward and optimizer
# (negatives drawn inside it), evaluation excluded. PyG: perf_counter around train();
# saintflow: the epoch records' `time` deltas minus their `eval_ms` (runs with evaluation
# every epoch, so the same runs give the figures), its step records' `ms.wall` beside it.
#
# Usage: scripts/link_vs_pyg.sh [OUT_DIR]          (default target/link-vs-pyg; rewritten)
# Environment: VENV (a venv with torch; default target/link-vs-pyg-venv, made here;
#   torch_geometric and scikit-learn are installed into it when missing), SEEDS (default
#   1..20: the per-seed MRR varies by about a point on both sides, so a 5-seed median moves
#   by a point from noise alone; BENCHMARKS.md), THREADS (default "1 2"), DATA (default
#   ../shared/data/cora), TAIL
#   (default 1: also PyG with saintflow's kind of negatives, the source kept and the tail
#   drawn, at 1 thread: a diagnostic of the MRR gap, not part of the comparison; 0: skip),
#   ENDS (default both: plans/gae.toml trained with `negative_ends = "both"`, pairs with both
#   ends drawn as the example's negative_sampling draws them, so the two sides train the
#   same objective; tail: the plan as shipped, its negatives keeping the positive's source).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$(mkdir -p "${1:-target/link-vs-pyg}" && cd "${1:-target/link-vs-pyg}" && pwd)
VENV=${VENV:-$ROOT/target/link-vs-pyg-venv}
SEEDS=${SEEDS:-$(seq -s " " 1 20)}
THREADS=${THREADS:-1 2}
DATA=${DATA:-$ROOT/../shared/data/cora}
ENDS=${ENDS:-both}
. scripts/blas_env.sh   # unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (says so if they were set)

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  # PyPI's Linux torch is the CUDA build (about 4 GB, once); only the CPU is used.
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet torch numpy
fi
if ! "$VENV/bin/python" -c "import torch_geometric, sklearn, threadpoolctl" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet torch_geometric scikit-learn threadpoolctl
fi
PY="$VENV/bin/python -W ignore"

machine_header "$VENV/bin/python"
$PY -c "import torch, torch_geometric, sklearn, re; print('torch', torch.__version__, re.search('BLAS_INFO=[a-z]+', torch.__config__.show()).group(), '| torch_geometric', torch_geometric.__version__, '| scikit-learn', sklearn.__version__)"

CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --quiet --bin saintflow
SF=$ROOT/target/release/saintflow
rm -rf "$OUT/cora.sf" "$OUT/cora-link.sf" "$OUT/runs"
mkdir -p "$OUT/runs"
"$SF" import graphsaint "$DATA" -o "$OUT/cora.sf" > /dev/null
"$SF" split-edges "$OUT/cora.sf" -o "$OUT/cora-link.sf" --val 0.05 --test 0.1 --negatives 1000 --seed 1 > /dev/null
"$SF" info "$OUT/cora-link.sf" --json | $PY -c "import json,sys; h=json.load(sys.stdin); print('store:', {k: h[k] for k in h if k in ('nodes', 'edges', 'features', 'link')})" || true

pyg() { OMP_NUM_THREADS=$1 $PY scripts/link_vs_pyg.py run "$OUT/cora-link.sf" --threads "$1" --seed "$2" > "$OUT/runs/pyg-t$1-s$2.json"; }
sf() { "$SF" train plans/gae.toml --graph "$OUT/cora-link.sf" --set "task.negative_ends=\"$ENDS\"" --threads "$1" --seed "$2" --json > "$OUT/runs/sf-t$1-s$2.jsonl" 2> "$OUT/runs/sf-t$1-s$2.log"; }
for t in $THREADS; do
  for s in $SEEDS; do
    if [ $((s % 2)) -eq 1 ]; then pyg "$t" "$s"; sf "$t" "$s"; else sf "$t" "$s"; pyg "$t" "$s"; fi
    echo "threads $t seed $s done; load: $(uptime | sed 's/.*load average: //')"
  done
done
echo "load: $(uptime)"
if [ "${TAIL:-1}" = 1 ]; then
  for s in $SEEDS; do
    OMP_NUM_THREADS=1 $PY scripts/link_vs_pyg.py run "$OUT/cora-link.sf" --threads 1 --seed "$s" --negatives tail > "$OUT/runs/pygtail-t1-s$s.json"
  done
fi
$PY scripts/link_vs_pyg.py summary "$OUT/runs"
