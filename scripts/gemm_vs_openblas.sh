#!/usr/bin/env bash
# GEMM against OpenBLAS in one process (issue 33), every path this CPU has:
#   1. our widest path and the `gemm` crate (used before) against OpenBLAS's widest kernels;
#   2. on an AVX-512 CPU, our AVX2 path against OpenBLAS's AVX2 (Haswell) kernels, the pair
#      an AVX2-only CPU such as a Zen 3 runs;
#   3. both again built without the repo's rustflags (plain x86-64, what a library user
#      who depends on saintflow-ops gets), in a target directory of its own.
# OpenBLAS is the one numpy's wheel bundles, from a venv this script makes (VENV, default
# /tmp/saintflow-gemm-venv). Prints `lscpu`'s model line, then per run the core's FMA bound
# (the machine's limit for every rate below) and one table.
#   REPS (default 9) timed repetitions per cell, THREADS (default 1,2), ROUNDS (default 1);
#   PLAIN=no skips the two plain x86-64 configurations (and their build).
# With ROUNDS > 1 it ends with the median over rounds of each cell's ratio to OpenBLAS, and
# each configuration's lowest median (the acceptance figure: ≥ 95 %).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-1}
export REPS=${REPS:-9} THREADS=${THREADS:-1,2}

. scripts/openblas_lib.sh
echo "numpy $("$VENV/bin/python" -c 'import numpy; print(numpy.__version__)'), OpenBLAS: $OPENBLAS_LIB"
lscpu | grep "Model name" || true
avx512=no
grep -q avx512f /proc/cpuinfo && avx512=yes
echo "AVX-512F: $avx512"

LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
run() { # $1 label, $2 target dir ("" = the repo's), rest: env assignments
  local label=$1 tdir=$2; shift 2
  echo; echo "== $label" | tee -a "$LOG"
  if [ -n "$tdir" ]; then
    env "$@" CARGO_TARGET_DIR="$tdir" RUSTFLAGS="-C target-cpu=x86-64" \
      cargo bench -q -p saintflow-ops --bench gemm_openblas 2>/dev/null | tee -a "$LOG"
  else
    env "$@" cargo bench -q -p saintflow-ops --bench gemm_openblas 2>/dev/null | tee -a "$LOG"
  fi
}

for r in $(seq "$ROUNDS"); do
  echo; echo "#### round $r"
  run "widest paths, repo flags" "" IMPLS=openblas,saintflow,gemm_crate
  if [ $avx512 = yes ]; then
    run "AVX2 paths (OpenBLAS Haswell kernels), repo flags" "" \
      IMPLS=openblas,saintflow_avx2 OPENBLAS_CORETYPE=Haswell SAINTFLOW_ISA=avx2
  fi
  [ "${PLAIN:-yes}" = yes ] || continue
  run "widest paths, plain x86-64 (no repo rustflags)" target/plain-x86-64 \
    IMPLS=openblas,saintflow,gemm_crate
  if [ $avx512 = yes ]; then
    run "AVX2 paths, plain x86-64" target/plain-x86-64 \
      IMPLS=openblas,saintflow_avx2 OPENBLAS_CORETYPE=Haswell SAINTFLOW_ISA=avx2
  fi
done

[ "$ROUNDS" -gt 1 ] || exit 0
echo; echo "#### medians over $ROUNDS rounds of each cell's ratio to OpenBLAS"
"$VENV/bin/python" - "$LOG" <<'PY'
import re, statistics, sys
cells, order, config = {}, [], None
for line in open(sys.argv[1]):
    if line.startswith("== "):
        config = line[3:].strip()
        if config not in order:
            order.append(config)
        continue
    f = [x.strip() for x in line.split("|")]
    if len(f) > 4 and f[1] == "threads":
        names = f[4:-1]
    if len(f) < 6 or not f[1].isdigit():
        continue
    for name, text in zip(names, f[4:-1]):
        m = re.search(r"= (\d+)%", text)
        if m:
            cells.setdefault((config, name), {}).setdefault((f[1], f[2]), []).append(int(m.group(1)))
for config in order:
    for (c, name), rows in cells.items():
        if c != config:
            continue
        print(f"== {config}: {name} against OpenBLAS")
        medians = {k: statistics.median(v) for k, v in rows.items()}
        for (threads, shape), med in medians.items():
            print(f"  {threads} thread(s)  {shape:<28} median {med:5.1f} %  rounds {rows[(threads, shape)]}")
        low = min(medians, key=medians.get)
        print(f"  lowest median: {medians[low]:.1f} % ({low[1]}, {low[0]} thread(s))")
PY
