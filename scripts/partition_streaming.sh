#!/usr/bin/env bash
# Issue 56 item 5: `saintflow partition` at Kronecker scale 22, k = 4, the multilevel first
# level against the streaming one with /usr/bin/time -v: the multilevel one once under
# `memcap 8G` (it is killed there) and twice under 12G, the streaming one twice under 8G,
# then `--method auto --assignment-only` under 8G, then 20 training steps on one streaming
# part store.
# Usage: scripts/partition_streaming.sh [DIR]  (SAINTFLOW=binary, MEMCAP=memcap script).
# Each run's stdout (the --json report), stderr (time -v, memcap's line) go to DIR/NAME.*;
# the part stores of every run but the last streaming one are removed (disk).
set -euo pipefail
DIR=${1:-/tmp/h56p}
SF=${SAINTFLOW:-target/release/saintflow}
MEMCAP=${MEMCAP:-/work/shared/tools/memcap}
mkdir -p "$DIR"
[ -d "$DIR/k22.sf" ] || nice -n 19 "$SF" gen kronecker --scale 22 --degree 24 --features 32 \
  --planted -o "$DIR/k22.sf"
run() { # NAME CAP ARGS...
  local name=$1 cap=$2; shift 2
  rm -rf "${DIR:?}/$name"
  nice -n 19 "$MEMCAP" "$cap" /usr/bin/time -v "$SF" partition "$DIR/k22.sf" -k 4 \
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
      f"({100 * r['cut_ratio']:.2f}%) initial {r['initial_cut']} passes {r.get('pass_cuts', [])} "
      f"balance {r['balance']:.4f} repl {r['replication_factor']:.4f} "
      f"partition {r['partition_seconds']:.2f} s total {r['total_seconds']:.2f} s "
      f"wall {wall} maxrss {rss / 1048576:.2f} GiB; {cap}")
PY
}
run multilevel-8G 8G --method multilevel
for i in 1 2; do
  run "multilevel-$i" 12G --method multilevel
  rm -rf "${DIR:?}/multilevel-$i"
  run "streaming-$i" 8G --method streaming
  [ "$i" = 2 ] || rm -rf "${DIR:?}/streaming-$i"
done
run auto-8G 8G --method auto --assignment-only
nice -n 19 "$SF" train plans/graphsage.toml --graph "$DIR/streaming-2/part-0.sf" --steps 20 \
  > "$DIR/train-part0.out" 2>&1
tail -n 5 "$DIR/train-part0.out"
