#!/usr/bin/env bash
# Paper fidelity on data the plans were not tuned on (issue 53 item 6): a Planetoid citation
# dataset other than Cora (default citeseer) with the Planetoid split, converted from the
# Planetoid authors' raw files to GraphSAINT's format (scripts/planetoid_to_graphsaint.py),
# then every plan's test accuracy over seeds by scripts/cora_plans.sh.
#
# Usage: scripts/planetoid_heldout.sh RAW_DIR [NAME] [OUT_DIR]
#   RAW_DIR: a directory with ind.NAME.{x,y,tx,ty,allx,ally,graph,test.index}, e.g. the
#   `data/` of github.com/kimiyoung/planetoid (git clone it; not fetched here).
#   NAME: citeseer (default), pubmed or cora. OUT_DIR: default /tmp/saintflow-NAME.
# Environment: PLANS (default "gcn sgc appnp gat mixhop"), SEEDS, THREADS, SAINTFLOW as
#   scripts/cora_plans.sh takes them. Makes a venv with numpy and scipy under OUT_DIR (PyPI).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RAW=${1:?usage: scripts/planetoid_heldout.sh RAW_DIR [NAME] [OUT_DIR]}
NAME=${2:-citeseer}
OUT=${3:-/tmp/saintflow-$NAME}
mkdir -p "$OUT"
[ -x "$OUT/venv/bin/python" ] || { python3 -m venv "$OUT/venv" && "$OUT/venv/bin/pip" install -q numpy scipy threadpoolctl; }
# numpy only converts here (nothing of it is timed); the environment is the baselines' all the same.
. "$ROOT/scripts/blas_env.sh"
blas_core "$OUT/venv/bin/python"
"$OUT/venv/bin/python" -W ignore "$ROOT/scripts/planetoid_to_graphsaint.py" "$RAW" "$NAME" "$OUT/graphsaint"
PLANS=${PLANS:-gcn sgc appnp gat mixhop} STORE=$NAME DATA="$OUT/graphsaint" "$ROOT/scripts/cora_plans.sh" "$OUT"
