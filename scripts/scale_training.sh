#!/usr/bin/env bash
# Training out of core (BENCHMARKS.md's out-of-core training row; the record is
# docs/bench/out-of-core.md, issue 7): `saintflow bench scale` with the record's arguments,
# the step time of Kronecker scale 25 (a 9.6 GiB store) against scale 20 under `memcap 4G`,
# 200 steps each, two rounds interleaved. bench scale generates the stores it lacks,
# drops their pages before each run and prints the table (also in OUT/scale.md).
#
# Usage: scripts/scale_training.sh [STORE_DIR]   (default /tmp/saintflow-scale; ≈ 11 GiB
#   for the two stores, generated once: scale 25 takes about a minute)
# Environment: SCALES (default 20,25; the record's |V| series is 20,21,22,23,24,25),
#   DEGREES (default none; the record's degree series is 8,16,32,64,128,256 at scale 20),
#   STEPS (default 200), REPEAT (default 2), OUT (default STORE_DIR/out),
#   MEMCAP (default ../shared/tools/memcap beside the checkout; needs root; without it
#   bench scale runs uncapped and warns), EXTRA (more `bench scale` flags, e.g. a tiny
#   plan for a smoke run: "--degree-scale 8 --warmup 1 --set dims.hidden=8"), SAINTFLOW
#   (default target/release/saintflow, built when absent).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-/tmp/saintflow-scale}
SCALES=${SCALES:-20,25}
DEGREES=${DEGREES:-}
STEPS=${STEPS:-200}
REPEAT=${REPEAT:-2}
OUT=${OUT:-$DIR/out}
MEMCAP=${MEMCAP:-$ROOT/../shared/tools/memcap}
SF=${SAINTFLOW:-$ROOT/target/release/saintflow}
[ -x "$SF" ] || (cd "$ROOT" && cargo build --release -q --bin saintflow)
mkdir -p "$DIR"
lscpu | grep -E "Model name|CPU family|^Model:" || true
degrees=(--degrees)
[ -n "$DEGREES" ] && degrees=(--degrees "$DEGREES")
cd "$ROOT"   # the plan's default path, plans/graphsage.toml, is relative
"$SF" bench scale --dir "$DIR" --scales "$SCALES" "${degrees[@]}" --steps "$STEPS" \
  --repeat "$REPEAT" --memcap "$MEMCAP" -o "$OUT" ${EXTRA:-}
