#!/usr/bin/env bash
# Issue 53 item 3, time to accuracy end to end: plans/graphsage.toml (GraphSAINT-RW, 3,000
# roots, walks of 2; two GraphSAGE-mean layers of 256 + 256 concatenated; l2norm and a
# dense classifier; dropout 0.2; Adam 0.01) trained on a planted Kronecker scale-20 graph
# (1,048,576 nodes) three ways, each with a full-graph validation after every epoch:
#
#   sf     `saintflow train plans/graphsage.toml --epochs E` (the plan's first phase);
#   pyg    PyG's examples/graph_saint.py loop with `GraphSAINTRandomWalkSampler`
#          (scripts/tta_vs_pyg.py: the same model, sampler sizes, optimiser and steps);
#   pygsf  the same PyG loop fed by saintflow's Python sampler (`saintflow.SaintSampler`).
#
# Every epoch has the same number of steps on every side: saintflow's own epoch (⌈|V_train|
# / mean subgraph nodes⌉ over the subgraphs it pre-samples for the normalisation, computed
# per seed by `tta_vs_pyg.py probe` exactly as the trainer does), and each side pre-samples
# about the trainer's 200 subgraphs for GraphSAINT's normalisation. Time is wall time from
# the start of each process (`tta_vs_pyg.py stamp` starts it and stamps each record of its
# stdout on arrival): start-up (imports, reading the store, the store check), the
# pre-sampling, the steps and every evaluation count. Time to target: the stamp of the
# first epoch whose validation accuracy reaches the target (TARGET, or 98 % of the lowest
# best validation accuracy of any run, cut to 0.1 point); final accuracies are the test of
# the best-validation epoch's parameters on each side. The sides alternate order round
# by round (round r uses seed r).
#
# Usage: scripts/tta_vs_pyg.sh [OUT_DIR]              (default target/tta-vs-pyg)
# Environment: VENV (a venv with torch, torch_geometric, torch-sparse, torch-scatter and the
#   saintflow package; default target/tta-vs-pyg-venv, made here: torch-sparse and
#   torch-scatter are built from PyPI's sources, about 20 min each on 2 cores, once; the
#   saintflow package from ./python when missing), THREADS (default "1 2"), ROUNDS (default
#   1), EPOCHS (default 2, at most the plan's first phase, 40), TARGET (a fraction, e.g. 0.80;
#   default as above), MEMORY (saintflow's `--memory` for evaluation, MiB; default 4096: the
#   N × 512 layer kept in memory as PyG keeps it, not in scratch files), HOMOPHILY (0.5) and
#   SEPARATION (1): the planted graph (`gen kronecker --planted`), NICE (default 10).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$(mkdir -p "${1:-target/tta-vs-pyg}" && cd "${1:-target/tta-vs-pyg}" && pwd)
VENV=${VENV:-$ROOT/target/tta-vs-pyg-venv}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-1}
EPOCHS=${EPOCHS:-2}
MEMORY=${MEMORY:-4096}
HOMOPHILY=${HOMOPHILY:-0.5}
SEPARATION=${SEPARATION:-1}
NICE=${NICE:-10}
[ "$EPOCHS" -ge 1 ] && [ "$EPOCHS" -le 40 ] || { echo "EPOCHS=$EPOCHS: expected 1..=40 (the plan's first phase)" >&2; exit 2; }
. scripts/blas_env.sh   # unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (says so if they were set)

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  # PyPI's Linux torch is the CUDA build (about 4 GB, once); only the CPU is used.
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet torch numpy
fi
if ! "$VENV/bin/python" -c "import torch_geometric, threadpoolctl" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet torch_geometric threadpoolctl
fi
if ! "$VENV/bin/python" -c "import torch_sparse, torch_scatter" 2>/dev/null; then
  # GraphSAINTRandomWalkSampler needs torch-sparse; PyPI has it (and torch-scatter) only
  # as sources, built against the venv's torch.
  "$VENV/bin/pip" install --quiet setuptools wheel
  "$VENV/bin/pip" install --quiet --no-build-isolation torch-scatter torch-sparse
fi
if ! "$VENV/bin/python" -c "import saintflow" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet ./python
fi
PY="$VENV/bin/python -W ignore"
TTA="scripts/tta_vs_pyg.py"

machine_header "$VENV/bin/python"
$PY -c "import torch, re, torch_geometric as g, torch_sparse, saintflow, os; print('torch', torch.__version__, re.search('BLAS_INFO=[a-z]+', torch.__config__.show()).group(), '| torch_geometric', g.__version__, '| torch-sparse', torch_sparse.__version__, '| saintflow package', os.path.dirname(saintflow.__file__))"
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --quiet --bin saintflow
SF=$ROOT/target/release/saintflow
STORE=$OUT/k20-h$HOMOPHILY-s$SEPARATION.sf
if [ ! -d "$STORE" ]; then
  "$SF" gen kronecker --scale 20 --degree 16 --features 32 --classes 4 --planted \
    --homophily "$HOMOPHILY" --separation "$SEPARATION" --seed 1 -o "$STORE" --quiet --force
fi
"$SF" info "$STORE" | grep -E "^(nodes|edges|train edges|split|source) "
rm -rf "$OUT/runs"
mkdir -p "$OUT/runs"
stamp() { python3 "$TTA" stamp "$@"; }
for r in $(seq 1 "$ROUNDS"); do
  # Per seed: saintflow's steps per epoch, and the coverages that pre-sample ~200 subgraphs.
  P=$($PY "$TTA" probe "$STORE" --seed "$r")
  get() { echo "$P" | python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }
  K=$(get steps_per_epoch); CP=$(get coverage_pyg); CS=$(get coverage_saintflow)
  echo "seed $r: $P"
  for t in $THREADS; do
    sf() { stamp "$OUT/runs/sf-t$t-r$r.jsonl" -- nice -n "$NICE" "$SF" train plans/graphsage.toml --graph "$STORE" --threads "$t" --seed "$r" --epochs "$EPOCHS" --memory "$MEMORY" --json --quiet 2> "$OUT/runs/sf-t$t-r$r.log"; }
    pyg() { OMP_NUM_THREADS=$t stamp "$OUT/runs/$1-t$t-r$r.jsonl" -- nice -n "$NICE" $PY "$TTA" run "$STORE" --sampler "$2" --threads "$t" --seed "$r" --epochs "$EPOCHS" --steps-per-epoch "$K" --coverage "$3" 2> "$OUT/runs/$1-t$t-r$r.log"; }
    if [ $((r % 2)) -eq 1 ]; then
      pyg pyg pyg "$CP"; pyg pygsf saintflow "$CS"; sf
    else
      sf; pyg pygsf saintflow "$CS"; pyg pyg pyg "$CP"
    fi
    echo "round $r threads $t done; load: $(uptime | sed 's/.*load average: //')"
  done
done
echo "load: $(uptime)"
python3 "$TTA" summary "$OUT/runs" ${TARGET:+--target "$TARGET"}
