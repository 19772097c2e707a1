#!/usr/bin/env bash
# Issue 17's scaling run: one plan on a planted Kronecker graph, 1 process vs 2 and 4 MPI
# ranks (parts from `saintflow partition`); prints test accuracy, median seconds per epoch
# (training steps only, from the log) and bytes allreduced per step.
#
# Usage: scripts/gad_kron.sh [SCALE] [EPOCHS] [OUT_DIR]   (default 18, 3, target/gad-kron)
# Needs: cargo build --release --features mpi; OpenMPI's mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${1:-18}
EPOCHS=${2:-3}
OUT=${3:-target/gad-kron}
B=target/release/saintflow
PLAN=plans/graphsage.toml
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$OUT"
G="$OUT/k$SCALE.sf"
[ -e "$G" ] || $B gen --quiet kronecker --scale "$SCALE" --planted -o "$G" >/dev/null
for k in 2 4; do
  [ -e "$OUT/p$k" ] || $B partition "$G" -k "$k" -o "$OUT/p$k" --plan "$PLAN" >/dev/null 2>&1
done
summ() {
  python3 - "$1" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if r["kind"] == "step"]
ep = {}
for r in steps:
    ep.setdefault(r["epoch"], 0.0)
    ep[r["epoch"]] += r["ms"]["wall"] / 1e3
test = [r for r in recs if r["kind"] == "test"][-1]["test"]["accuracy"]
b = [r.get("allreduce_bytes", 0) for r in steps]
run = recs[0].get("dist") or {}
print("%.4f %8.2f %6d %10d %12d" % (test, statistics.median(ep.values()), len(steps) // len(ep),
      statistics.median(b), run.get("replica_bytes", 0)))
PY
}
printf "%-10s %7s %8s %6s %10s %12s\n" run test s/epoch steps bytes/step replica_bytes
$B train $PLAN --graph "$G" --epochs "$EPOCHS" --seed 1 --threads 2 --quiet --force --log "$OUT/one.jsonl" >/dev/null
printf "%-10s %s\n" "1 process" "$(summ "$OUT/one.jsonl")"
for k in 2 4; do
  mpirun --allow-run-as-root --oversubscribe -np "$k" $B train $PLAN --partitions "$OUT/p$k" --force \
    --graph "$G" --epochs "$EPOCHS" --seed 1 --quiet --log "$OUT/r$k.jsonl" >/dev/null
  printf "%-10s %s\n" "$k ranks" "$(summ "$OUT/r$k.jsonl")"
done
