#!/usr/bin/env bash
# The Python sampler against PyG's loader (BENCHMARKS.md's sampler row; the record is
# docs/bench/python.md): `sf.SaintSampler` against `torch_geometric.loader.
# GraphSAINTRandomWalkSampler` and against `saintflow sample`, random walks of 3000 roots ×
# depth 2 on Kronecker scale 17 (≈ 7.6k-node subgraphs), at 1 and 2 threads, rounds
# interleaved in one process, batches/s and the ratios (scripts/sampler_bench.py).
#
# Usage: scripts/sampler_vs_pyg.sh [WORK_DIR]     (default /tmp/saintflow-sampler; the store goes there)
# Environment: VENV (default target/sampler-vs-pyg-venv, made here: torch, torch_geometric
#   and numpy from PyPI, then torch-scatter and torch-sparse built from PyPI's sources with
#   --no-build-isolation — PyG's GraphSAINT sampler needs torch_sparse and PyPI has no
#   wheels: about 25 minutes on 2 cores, once — and the saintflow package from ./python);
#   COUNT (batches per measurement, default 200), ROUNDS (default 7), THREADS (default 1,2),
#   SAINTFLOW (default target/release/saintflow, built when absent).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/saintflow-sampler}
VENV=${VENV:-$ROOT/target/sampler-vs-pyg-venv}
COUNT=${COUNT:-200}
ROUNDS=${ROUNDS:-7}
THREADS=${THREADS:-1,2}
SF=${SAINTFLOW:-$ROOT/target/release/saintflow}
. "$ROOT/scripts/blas_env.sh"
if ! "$VENV/bin/python" -c "import torch, torch_geometric" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "setuptools>=77" wheel torch torch_geometric numpy threadpoolctl
fi
if ! "$VENV/bin/python" -c "import torch_sparse, torch_scatter" 2>/dev/null; then
  echo "building torch-scatter and torch-sparse from source (about 25 minutes on 2 cores)" >&2
  "$VENV/bin/pip" install --quiet --no-build-isolation torch-scatter torch-sparse
fi
"$VENV/bin/pip" install --quiet "$ROOT/python"
[ -x "$SF" ] || (cd "$ROOT" && cargo build --release -q --bin saintflow)
mkdir -p "$WORK"
machine_header "$VENV/bin/python"
"$VENV/bin/python" -c "import torch, torch_geometric, torch_sparse; print('torch', torch.__version__, 'torch_geometric', torch_geometric.__version__, 'torch_sparse', torch_sparse.__version__)"
[ -d "$WORK/k17.sf" ] || "$SF" gen kronecker --scale 17 --degree 16 --features 50 --classes 8 \
  --planted --seed 1 -o "$WORK/k17.sf" -q
# Run from outside the checkout, so `import saintflow` is the installed package, not ./python.
cd "$WORK"
OPENBLAS_NUM_THREADS=1 "$VENV/bin/python" "$ROOT/scripts/sampler_bench.py" "$WORK/k17.sf" "$SF" \
  --count "$COUNT" --rounds "$ROUNDS" --threads "$THREADS"
