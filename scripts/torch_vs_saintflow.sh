#!/usr/bin/env bash
# Issue 33's side-by-side, in one run: the JPDC Table-3 training step (GraphSAGE, hidden 512,
# frontier sampler 1000/8000 on Kronecker scale 17) in saintflow (the step bench's
# executor), in PyTorch written by hand with torch.sparse.mm, and in PyG (SAGEConv), on
# the same pre-sampled subgraphs, at 1 and 2 threads, in ms per 1000 subgraph nodes.
#
# Usage: scripts/torch_vs_saintflow.sh [VENV_DIR]     (default /tmp/saintflow-torch)
# Environment: THREADS (default "1,2"), STEPS (torch steps timed, default 24).
# Installs torch and torch_geometric from PyPI into the venv (PyPI's Linux torch is the
# CUDA build and will not import without its CUDA packages: about 4 GB, once; only the
# CPU is used). Name the CPU beside the figures (printed).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-/tmp/saintflow-torch}
THREADS=${THREADS:-1,2}
STEPS=${STEPS:-24}
. "$ROOT/scripts/blas_env.sh"   # torch's and numpy's BLAS at the CPU's own core
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch, torch_geometric" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "setuptools>=77" torch torch_geometric numpy threadpoolctl
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*\(avx512f\).*/Flags: ... avx512f .../' | cut -c1-120
blas_core "$VENV/bin/python"
cd "$ROOT"
cargo bench --bench step --no-run --quiet 2>/dev/null
BENCH=$(ls -t target/release/deps/step-* | grep -v '\.d$' | head -1)
echo "== saintflow (the step bench's summary; executor rows are saintflow's step)"
STEP_BENCH_EXPORT="$W/subs" STEP_BENCH_THREADS="$THREADS" "$BENCH" --bench nomatch 2>&1 \
  | grep -v "^$" | grep -v "^Benchmarking\|^Gnuplot"
echo "== torch (sparse.mm, cheaper order) and PyG (SAGEConv) on the same subgraphs"
"$VENV/bin/python" scripts/torch_step.py "$W/subs" --threads "$THREADS" --steps "$STEPS"
