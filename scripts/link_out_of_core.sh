#!/usr/bin/env bash
# Link training with evaluation out of core (BENCHMARKS.md's link row under memcap; the
# record is docs/bench/link-prediction.md, issue 52): Kronecker scale 22 split for link
# prediction, then `plans/rgcn_link.toml` (hidden 64, uniform negatives) trained 60 steps
# and evaluated on 67,051 validation and 134,102 test positives with 100 stored tails each
# (z of 4.2 M × 64 floats written to scratch and mapped), once under `memcap CAP` and once
# uncapped (the baseline), the store's pages dropped before each when this user may (root).
# Prints wall time, the cap's peak and the test figures of both (equal).
#
# Usage: scripts/link_out_of_core.sh [WORK_DIR]    (default /tmp/saintflow-link-ooc; ≈ 3 GiB)
# Environment: DROP (default 1; 0 keeps the page cache: a smoke run on a shared machine),
#   SCALE (default 22), CAP (default 2G), STEPS (default 60), MEMCAP (default
#   ../shared/tools/memcap beside the checkout; needs root), SAINTFLOW (default
#   target/release/saintflow, built when absent). `split-edges` runs outside the cap
#   (it holds the edge list: 3.7 GB at scale 22).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/saintflow-link-ooc}
SCALE=${SCALE:-22}
CAP=${CAP:-2G}
STEPS=${STEPS:-60}
SF=${SAINTFLOW:-$ROOT/target/release/saintflow}
. "$ROOT/scripts/memcap_env.sh"
[ -x "$SF" ] || (cd "$ROOT" && cargo build --release -q --bin saintflow)
mkdir -p "$WORK"
cd "$WORK"
lscpu | grep -E "Model name|CPU family|^Model:" || true
[ -d "k$SCALE.sf" ] || "$SF" gen kronecker --scale "$SCALE" --degree 16 --features 32 --classes 4 --seed 1 -o "k$SCALE.sf" -q
[ -d "k$SCALE-link.sf" ] || "$SF" split-edges "k$SCALE.sf" -o "k$SCALE-link.sf" --val 0.002 --test 0.004 --negatives 100 --seed 1
args=(train "$ROOT/plans/rgcn_link.toml" --graph "k$SCALE-link.sf" --threads 2 --seed 1
      --set dims.hidden=64 --set 'task.negative_sampler="uniform"' --epochs 1 --steps "$STEPS" --quiet --json)
drop
/usr/bin/time -f "%e s, %M KB max RSS" -o capped.time "$MEMCAP" "$CAP" "$SF" "${args[@]}" > capped.jsonl 2> capped.err
drop
/usr/bin/time -f "%e s, %M KB max RSS" -o uncapped.time "$SF" "${args[@]}" > uncapped.jsonl 2> uncapped.err
for r in capped uncapped; do
  echo "== $r: $(tail -1 $r.time)"
  grep '^memcap' "$r.err" || true
  python3 -c 'import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "test"][-1]
print("test", ", ".join("%s %.4f" % (k, t["test"][k]) for k in ("auc", "ap", "mrr", "hits@50")))' "$r.jsonl"
done
