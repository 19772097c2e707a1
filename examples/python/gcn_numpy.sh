#!/usr/bin/env bash
# Trains plans/gcn.toml on Cora, exports the best weights as .safetensors and the logits as
# .npy, then reproduces the predictions with numpy alone (gcn_numpy.py). .ci/run runs it.
#
#   examples/python/gcn_numpy.sh SAINTFLOW PYTHON [CORA_DIR]
#
# PYTHON needs numpy and safetensors. CORA_DIR defaults to ../shared/data/cora.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
sf=$1 py=$2 data=${3:-$root/../shared/data/cora}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$sf" import graphsaint "$data" -o "$work/cora.sf" -q
"$sf" train "$root/plans/gcn.toml" --graph "$work/cora.sf" --seed 1 --epochs 100 --checkpoint "$work/run/" -q
"$sf" export "$work/run/" --best -o "$work/model.safetensors"
"$sf" embed "$root/plans/gcn.toml" --graph "$work/cora.sf" --checkpoint "$work/run/" --logits -o "$work/logits.npy"
"$py" "$here/gcn_numpy.py" "$work/model.safetensors" "$data" "$work/logits.npy"
