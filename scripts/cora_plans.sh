#!/usr/bin/env bash
# Cora test accuracy of the shipped node-classification plans (BENCHMARKS.md's accuracy and
# bf16 rows; the figures of plans/README.md): GraphSAINT's Cora imported once, then
# `saintflow train plans/P.toml --graph cora.sf --seed S --threads T --json` for every plan
# and seed, the test accuracy of the best-validation epoch (the log's `test` record). Prints
# one table row per plan: the seeds' figures, mean ± sd.
#
# Usage: scripts/cora_plans.sh [OUT_DIR]        (default /tmp/saintflow-cora; the store goes there)
# Environment: DATA (GraphSAINT-format Cora; default ../shared/data/cora beside the checkout),
#   PLANS (default "gcn graphsage sgc appnp jknet gcnii gat mixhop graphsage_max mlp"),
#   SEEDS (default "1 2 3 4 5"), THREADS (default 2), PRECISION (f32 or bf16: adds
#   `--set compute.precision=…`; default: the plan's own, f32), SAINTFLOW (the binary;
#   default target/release/saintflow, built when absent), STORE (the store's name, default cora).
#   Needs python3 (standard library only).
# gcnii (64 layers, 1000 epochs) takes minutes a seed on 2 cores; the others seconds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-/tmp/saintflow-cora}
DATA=${DATA:-$ROOT/../shared/data/cora}
PLANS=${PLANS:-gcn graphsage sgc appnp jknet gcnii gat mixhop graphsage_max mlp}
SEEDS=${SEEDS:-1 2 3 4 5}
THREADS=${THREADS:-2}
SF=${SAINTFLOW:-$ROOT/target/release/saintflow}
STORE=${STORE:-cora}
[ -d "$DATA" ] || { echo "Cora not found at $DATA: set DATA" >&2; exit 1; }
[ -x "$SF" ] || (cd "$ROOT" && cargo build --release -q --bin saintflow)
mkdir -p "$OUT"
set_precision=()
[ -n "${PRECISION:-}" ] && set_precision=(--set "compute.precision=$PRECISION")
lscpu | grep -E "Model name|CPU family|^Model:" || true
echo "saintflow $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?'), threads $THREADS, precision ${PRECISION:-as planned}"
"$SF" import graphsaint "$DATA" -o "$OUT/$STORE.sf" --force -q
echo
echo "| plan | test accuracy, seeds $SEEDS | mean ± sd |"
echo "|---|---|---|"
for p in $PLANS; do
  accs=()
  for s in $SEEDS; do
    a=$("$SF" train "$ROOT/plans/$p.toml" --graph "$OUT/$STORE.sf" --seed "$s" --threads "$THREADS" \
          "${set_precision[@]}" --json 2>/dev/null |
        python3 -c 'import json, sys
t = [r for r in map(json.loads, sys.stdin) if r.get("kind") == "test"]
print("%.1f" % (100 * t[-1]["test"]["accuracy"]))')
    accs+=("$a")
  done
  python3 - "$p" "${accs[@]}" <<'PY'
import statistics, sys
p, xs = sys.argv[1], [float(x) for x in sys.argv[2:]]
sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
print(f"| `{p}.toml` | {', '.join(sys.argv[2:])} | {statistics.mean(xs):.2f} ± {sd:.2f} |")
PY
done
