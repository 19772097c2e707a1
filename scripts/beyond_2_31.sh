#!/usr/bin/env bash
# Past 2^31 edges on one small machine (issue 56; record: docs/bench/scale-2-31.md): a
# Kronecker graph of ogbn-papers100M's shape (scale 27: 134 M nodes, degree 24: 1.61 B
# undirected edges = 3.22 B CSR entries, 32 features, planted labels; a 37.5 GB store)
# generated, checked, trained, evaluated and sampled, every command under
# `memcap CAP` (default 8G), beside the same commands at a smaller scale in the same run.
# Each phase prints wall time, memcap's peak and failcnt, the peak anonymous memory
# (`/usr/bin/time`'s maximum RSS; for mmap readers it counts mapped pages too), the bytes
# read (`File system inputs` × 512) and the peak disk taken (df sampled every 0.5 s).
#
# Usage: scripts/beyond_2_31.sh [WORK_DIR]   (default /tmp/saintflow-2-31; needs ≈ 40 GB free
#   there at scale 27 plus ≈ 9.5 GB for the scale-25 comparison store, deleted after use)
# Environment: PHASES (default "gen check train eval sample"), SCALE (27), SMALL (25: the
#   generator's comparison), BASE (20: training's and sampling's comparison), DEGREE (24),
#   FEATURES (32), CAP (8G), MEMCAP (default ../shared/tools/memcap beside the checkout),
#   HIDDEN (16: the evaluated model's width; its kept layer is N·HIDDEN·4 bytes of scratch,
#   8.6 GB at scale 27, where the plan's 256 would need 137 GB), STEPS (200), PYTHON (a
#   python with the saintflow package, for the Python sampler in phase sample; default
#   target/python-venv/bin/python, skipped when absent), SAINTFLOW
#   (default target/release/saintflow, built when absent). Takes ≈ 40 minutes on 2 cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/saintflow-2-31}
PHASES=${PHASES:-gen check train eval sample}
SCALE=${SCALE:-27}
SMALL=${SMALL:-25}
BASE=${BASE:-20}
DEGREE=${DEGREE:-24}
FEATURES=${FEATURES:-32}
CAP=${CAP:-8G}
HIDDEN=${HIDDEN:-16}
STEPS=${STEPS:-200}
SF=${SAINTFLOW:-$ROOT/target/release/saintflow}
. "$ROOT/scripts/memcap_env.sh"
# No figure here times OpenBLAS; the Python sampler's batches are numpy arrays, so the
# environment is the baseline scripts' anyway (OPENBLAS_CORETYPE/L2_SIZE unset).
. "$ROOT/scripts/blas_env.sh"
[ -x "$SF" ] || (cd "$ROOT" && cargo build --release -q --bin saintflow)
mkdir -p "$WORK/scale" "$WORK/scratch" "$WORK/logs"
cd "$WORK"
lscpu | grep -E "Model name|CPU family|^Model:" || true
G=$WORK/scale/k${SCALE}d$DEGREE.sf
B=$WORK/scale/k${BASE}d$DEGREE.sf
gen_args() { echo --scale "$1" --degree "$DEGREE" --features "$FEATURES" --planted; }

# measure NAME CMD...: the command under memcap and /usr/bin/time, the disk sampled.
measure() {
  local name=$1; shift
  drop
  local used0 peak=0
  used0=$(df -B1 --output=used "$WORK" | tail -1)
  ( while sleep 0.5; do
      u=$(df -B1 --output=used "$WORK" | tail -1)
      [ "$u" -gt "$peak" ] && peak=$u && echo $((peak - used0)) > "logs/$name.disk"
    done ) &
  local sampler=$!
  local rc=0
  /usr/bin/time -v "$MEMCAP" "$CAP" "$@" > "logs/$name.out" 2> "logs/$name.err" || rc=$?
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
  local wall rss inputs cap
  wall=$(grep -F "Elapsed (wall clock)" "logs/$name.err" | awk '{print $NF}')
  rss=$(grep -F "Maximum resident set size" "logs/$name.err" | awk '{printf "%.2f GiB", $NF / 1048576}')
  inputs=$(grep -F "File system inputs" "logs/$name.err" | awk '{printf "%.1f GB", $NF * 512 / 1e9}')
  cap=$(grep "^memcap:" "logs/$name.err" | sed 's/^memcap: //')
  printf '== %s: exit %s, wall %s, max RSS %s, read %s, disk peak %s B; %s\n' \
    "$name" "$rc" "$wall" "$rss" "$inputs" "$(cat "logs/$name.disk" 2>/dev/null || echo 0)" "$cap"
  return "$rc"
}

for phase in $PHASES; do case $phase in
gen)
  # The comparison scale first (its store is removed after), then the large one.
  S=$WORK/scale/k${SMALL}d$DEGREE.sf
  measure "gen-$SMALL" "$SF" gen kronecker $(gen_args "$SMALL") -o "$S" --force
  tail -1 "logs/gen-$SMALL.out"
  rm -rf "$S"
  [ -d "$B" ] || "$SF" gen kronecker -q $(gen_args "$BASE") -o "$B"
  measure "gen-$SCALE" "$SF" gen kronecker $(gen_args "$SCALE") -o "$G" --force
  tail -1 "logs/gen-$SCALE.out"
  ;;
check)
  big=$(ls -S "$G" | head -1)
  drop
  echo "== sequential read of $big (dd, direct I/O, 8 GiB):"
  dd if="$G/$big" of=/dev/null bs=16M count=512 iflag=direct 2>&1 | tail -1
  measure "check-$SCALE" "$SF" check "$G"
  measure "info-$SCALE" "$SF" info "$G"
  ;;
train)
  # JPDC Fig. 5's setting (frontier sampler m = 1000, n = 8000, hidden 512): the median step
  # at the large scale against the base scale, the same subgraph size.
  measure "train-bench" "$SF" bench scale --dir "$WORK/scale" --scales "$BASE,$SCALE" \
    --scales-degree "$DEGREE" --degrees --steps "$STEPS" --repeat 2 --cap "$CAP" \
    --memcap "$MEMCAP" -o "$WORK/bench" -q || true
  cat "$WORK/bench/scale.md"
  python3 - "$WORK/bench/logs" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.log")):
    steps = [r for r in map(json.loads, open(f)) if r.get("kind") == "step"][5:]
    if not steps:
        continue
    ms = [s["ms"] for s in steps]
    total = sum(m["wall"] for m in ms)
    sample = sum(m.get("sampling", 0) for m in ms)
    print(f"{f.split('/')[-1]}: sampling {100 * sample / max(total, 1e-9):.1f} % of the steps' wall time")
PY
  ;;
eval)
  # A narrow GraphSAGE (HIDDEN) trained STEPS steps, then its validation and test passes
  # (blocked, kept values in scratch files), then `embed --logits` of every node.
  P=$ROOT/plans/graphsage.toml
  measure "train-eval-$SCALE" "$SF" train "$P" --graph "$G" --set "dims.hidden=$HIDDEN" \
    --steps "$STEPS" --checkpoint "$WORK/ck" --log "$WORK/logs/eval.jsonl" \
    --scratch-dir "$WORK/scratch" --force || true
  grep -E "full-graph pass|test" "logs/train-eval-$SCALE.err" | tail -6 || true
  measure "embed-$SCALE" "$SF" embed "$P" --graph "$G" --set "dims.hidden=$HIDDEN" \
    --checkpoint "$WORK/ck" --logits -o "$WORK/logits.npy" --force || true
  grep -E "full-graph pass" "logs/embed-$SCALE.err" | tail -3 || true
  rm -f "$WORK/logits.npy"
  ;;
sample)
  for s in "$BASE" "$SCALE"; do
    st=$WORK/scale/k${s}d$DEGREE.sf
    measure "sample-$s" "$SF" sample "$st" --sampler rw --roots 3000 --depth 2 --count 200 --json
    python3 - "logs/sample-$s.out" <<'PY'
import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if "index" in r]
ms = sorted(r["ms"] for r in recs)
summary = [r for r in map(json.loads, open(sys.argv[1])) if r.get("summary")][0]
print(f"{len(recs)} subgraphs, median {ms[len(ms) // 2]:.2f} ms, mean nodes {sum(r['nodes'] for r in recs) / len(recs):.0f}, {summary['subgraphs_per_s']:.1f} subgraphs/s")
PY
  done
  PY=${PYTHON:-$ROOT/target/python-venv/bin/python}
  if [ -x "$PY" ]; then
    for s in "$BASE" "$SCALE"; do
      measure "pysampler-$s" "$PY" "$ROOT/scripts/sampler_out_of_core.py" \
        "$WORK/scale/k${s}d$DEGREE.sf" 200 0 || true
      cat "logs/pysampler-$s.out"
    done
  fi
  ;;
*) echo "unknown phase $phase (gen check train eval sample)" >&2; exit 2 ;;
esac; done
