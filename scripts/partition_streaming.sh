#!/usr/bin/env bash
# Issue 56 item 5: `saintflow partition` on a Kronecker store (scale $SCALE, degree 24, 32
# features, planted), k = 4, the multilevel first level against the streaming one, with
# /usr/bin/time -v: each twice (multilevel under `memcap $ML_CAP`, streaming under `memcap
# 8G`), then `--method auto --assignment-only` under 8G, then (TRAIN=1) 20 training steps of
# plans/graphsage.toml on the second streaming run's part 0.
# Usage: [SCALE=22] [ML_CAP=8G] [TRAIN=1] scripts/partition_streaming.sh [DIR]
# (SAINTFLOW=binary, MEMCAP=memcap script). Each run's --json report and its stderr (time -v,
# memcap's line) go to DIR/sSCALE-NAME.{json,err}, and one summary line per run to stdout;
# part stores are removed after each run (disk) but the second streaming run's.
set -euo pipefail
DIR=${1:-/tmp/h56p}
SCALE=${SCALE:-22}
ML_CAP=${ML_CAP:-8G}
SF=${SAINTFLOW:-target/release/saintflow}
MEMCAP=${MEMCAP:-/work/shared/tools/memcap}
STORE="$DIR/k$SCALE.sf"
mkdir -p "$DIR"
[ -d "$STORE" ] || nice -n 19 "$SF" gen kronecker --scale "$SCALE" --degree 24 --features 32 \
  --planted -o "$STORE"
run() { # NAME CAP ARGS...
  local name="s$SCALE-$1" cap=$2; shift 2
  rm -rf "${DIR:?}/$name"
  nice -n 19 "$MEMCAP" "$cap" /usr/bin/time -v "$SF" partition "$STORE" -k 4 \
    -o "$DIR/$name" --json "$@" > "$DIR/$name.json" 2> "$DIR/$name.err" || true
  python3 - "$DIR/$name" <<'PY'
import json, re, sys
name = sys.argv[1]
err = open(name + ".err").read()
cap = re.search(r"memcap: (.*)", err).group(1)
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1))
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", err).group(1)
try:
    r = json.load(open(name + ".json"))
except ValueError:
    print(f"{name.split('/')[-1]}: failed after {wall}, maxrss {rss / 1048576:.2f} GiB; {cap}")
    sys.exit(0)
print(f"{name.split('/')[-1]}: {r['method']} ({r['method_reason']}) cut {r['edge_cut']} "
      f"({100 * r['cut_ratio']:.2f}%) initial {r['initial_cut']} levels {r['levels']} "
      f"passes {r.get('pass_cuts', [])} balance {r['balance']:.4f} "
      f"repl {r['replication_factor']:.4f} partition {r['partition_seconds']:.2f} s "
      f"total {r['total_seconds']:.2f} s wall {wall} maxrss {rss / 1048576:.2f} GiB; {cap}")
PY
}
for i in 1 2; do
  run "multilevel-$i" "$ML_CAP" --method multilevel
  rm -rf "${DIR:?}/s$SCALE-multilevel-$i"
  run "streaming-$i" 8G --method streaming
  [ "$i" = 2 ] || rm -rf "${DIR:?}/s$SCALE-streaming-$i"
done
run auto-8G 8G --method auto --assignment-only
if [ "${TRAIN:-0}" = 1 ]; then
  nice -n 19 "$SF" train plans/graphsage.toml --graph "$DIR/s$SCALE-streaming-2/part-0.sf" \
    --steps 20 > "$DIR/s$SCALE-train-part0.out" 2>&1
  tail -n 3 "$DIR/s$SCALE-train-part0.out"
fi
rm -rf "${DIR:?}/s$SCALE-streaming-2"
