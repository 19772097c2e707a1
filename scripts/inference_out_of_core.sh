#!/usr/bin/env bash
# Full-graph inference out of core (BENCHMARKS.md's out-of-core rows; the record is
# docs/bench/inference.md, issue 27): a planted Kronecker graph (scale 22 by default: 4.2 M
# nodes, 1.4 GiB store), the shipped GraphSAGE trained one epoch, then its evaluation
# (the end-of-run validation and test passes) and `embed` of every node, each once
# uncapped (the baseline) and once under `memcap CAP`, the page cache dropped before each
# run when this user may (root). Prints the validation pass (`eval_ms` of the log), each
# pass's own lines (time, bytes read from disk against the plan), wall times, accuracies,
# and the embeddings' md5 (equal capped and uncapped).
#
# Usage: scripts/inference_out_of_core.sh [WORK_DIR]   (default /tmp/saintflow-ooc; needs
#   ≈ 20 GiB free there at scale 22: store, 8 GiB of scratch, an 8.6 GB embedding)
# Environment: DROP (default 1; 0 keeps the page cache: a smoke run on a shared machine),
#   SCALE (default 22), CAP (default 2G; the record's scale 24 ran under 4G),
#   MEMCAP (default ../shared/tools/memcap beside the checkout; needs root),
#   EMBED_ARGS (extra `embed` flags; the record's scale-24 run used --logits: the 512-wide
#   embedding is 34 GB there), SAINTFLOW (default target/release/saintflow, built when
#   absent). Takes ≈ 10 minutes at scale 22 on 2 cores; scale 24 ≈ 1 hour and 70 GiB of disk.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/saintflow-ooc}
SCALE=${SCALE:-22}
CAP=${CAP:-2G}
SF=${SAINTFLOW:-$ROOT/target/release/saintflow}
. "$ROOT/scripts/memcap_env.sh"
[ -x "$SF" ] || (cd "$ROOT" && cargo build --release -q --bin saintflow)
mkdir -p "$WORK/scratch"
cd "$WORK"
lscpu | grep -E "Model name|CPU family|^Model:" || true
G=k$SCALE.sf
[ -d "$G" ] || "$SF" gen kronecker --scale "$SCALE" --degree 16 --features 64 --classes 8 --planted --seed 1 -o "$G" -q
P=$ROOT/plans/graphsage.toml
run() {  # name, command...: wall seconds to name.time, stderr to name.err
  local name=$1; shift
  drop
  /usr/bin/time -f "%e" -o "$name.time" "$@" 2> "$name.err" > "$name.out"
}
run train-uncapped "$SF" train "$P" --graph "$G" --epochs 1 --checkpoint ck --log u.jsonl --scratch-dir scratch --force
run train-capped "$MEMCAP" "$CAP" "$SF" train "$P" --graph "$G" --epochs 1 --checkpoint ckc --log c.jsonl --scratch-dir scratch --force
run embed-uncapped "$SF" embed "$P" --graph "$G" --checkpoint ck -o emb-u.npy --force ${EMBED_ARGS:-}
run embed-capped "$MEMCAP" "$CAP" "$SF" embed "$P" --graph "$G" --checkpoint ck -o emb-c.npy --force ${EMBED_ARGS:-}
python3 - "$CAP" <<'PY'
import json, sys
cap = sys.argv[1]
def log(f):
    recs = [json.loads(l) for l in open(f)]
    ep = [r for r in recs if r["kind"] == "epoch" and "eval_ms" in r][-1]
    t = [r for r in recs if r["kind"] == "test"][-1]
    return ep["eval_ms"] / 1000, t["val"]["accuracy"], t["test"]["accuracy"]
u, c = log("u.jsonl"), log("c.jsonl")
print(f"\n| | uncapped | memcap {cap} | ratio |\n|---|---|---|---|")
print(f"| validation pass (`eval_ms`) | {u[0]:.1f} s | {c[0]:.1f} s | {c[0] / u[0]:.2f}× |")
print(f"| val / test accuracy | {u[1]:.4f} / {u[2]:.4f} | {c[1]:.4f} / {c[2]:.4f} | |")
PY
for r in train-uncapped train-capped embed-uncapped embed-capped; do
  echo "== $r: wall $(cat $r.time) s"
  grep -E "full-graph pass|^memcap" "$r.err" || true
done
echo "embeddings' md5 (uncapped, capped):"
md5sum emb-u.npy emb-c.npy | cut -c1-32
