#!/usr/bin/env bash
# Issue 33's acceptance, the step against the GEMM floor, in one run: ROUNDS rounds (default
# 5), each measuring
#   1. OpenBLAS's f32 rate at the step's six GEMM shapes (numpy's wheel, loaded into
#      ops/benches/gemm_openblas.rs; and saintflow's bf16 GEMM there where the CPU has
#      AVX512_BF16), at 1 and 2 threads;
#   2. the JPDC Table-3 step on the executor (benches/step.rs, STEP_BENCH_QUICK=1: f32, and
#      bf16 where the CPU has it), at 1 and 2 threads.
# The floor of a round is 6.51 MFLOP per subgraph node at that round's best OpenBLAS rate
# over the six shapes (the issue's definition: never saintflow's own GEMM); bf16's floor
# is the same FLOPs at the best bf16 rate measured (saintflow's bf16 GEMM, and torch's
# when TORCH_PYTHON names a python with torch: its bf16 matmul through oneDNN). Each round
# prints its ratios; the last lines are the medians over rounds. A step's time at 1 thread
# is its CPU time, at 2 threads its wall time.
#   ROUNDS (default 5), REPS (GEMM repetitions per cell, default 5), VENV (numpy's venv,
#   default /tmp/saintflow-gemm-venv), TORCH_PYTHON (optional); ISA=avx2: the forced-AVX2
#   pair on an AVX-512 CPU (what an AVX2-only CPU such as a Zen 3 runs): OpenBLAS's Haswell
#   kernels for the floor, SAINTFLOW_ISA=avx2 for the step, no bf16.
# The first round prints the GEMM paths it ran (saintflow's, and OpenBLAS's core) and how
# the bench timed them: back to back by default, as the step runs its products and as
# torch's rate is timed; WARM=no times the first call after a pause (BENCHMARKS.md note 5).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
export REPS=${REPS:-5}
MFLOP_PER_NODE=6.51

. scripts/openblas_lib.sh
lscpu | grep "Model name" || true
bf16=no
grep -q avx512_bf16 /proc/cpuinfo && bf16=yes
echo "AVX512_BF16: $bf16"
gemm_env=() step_env=()
if [ "${ISA:-}" = avx2 ]; then
  gemm_env=(OPENBLAS_CORETYPE=Haswell SAINTFLOW_ISA=avx2)
  step_env=(SAINTFLOW_ISA=avx2 STEP_BENCH_F32=1)
  bf16=no
  echo "forced AVX2: OpenBLAS Haswell kernels, saintflow's AVX2 path"
fi
impls=openblas
[ $bf16 = yes ] && impls=openblas,saintflow_bf16
cargo bench -q -p saintflow-ops --bench gemm_openblas --no-run 2>/dev/null
cargo bench -q --bench step --no-run 2>/dev/null
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# best GF/s of column $2 (1 = the first library) at $1 threads in a gemm_openblas table.
best() {
  awk -F'|' -v t="$1" -v col="$2" '
    $2 + 0 == t && $4 ~ /GF\/s/ {
      split($(3 + col), f, "= "); split(f[2], g, " "); if (g[1] + 0 > m) m = g[1] + 0
    } END { print m }' "$3"
}

for r in $(seq "$ROUNDS"); do
  env ${gemm_env[@]+"${gemm_env[@]}"} IMPLS=$impls cargo bench -q -p saintflow-ops --bench gemm_openblas 2>/dev/null > "$W/gemm.txt"
  [ "$r" = 1 ] && grep -E "GEMM path|^timing" "$W/gemm.txt"
  if [ -n "${TORCH_PYTHON:-}" ] && [ $bf16 = yes ]; then
    "$TORCH_PYTHON" scripts/torch_bf16_gemm.py > "$W/torch.txt"
  fi
  env ${step_env[@]+"${step_env[@]}"} STEP_BENCH_QUICK=1 cargo bench -q --bench step -- nomatch 2>&1 \
    | grep "^executor, pre-sampled" > "$W/step.txt"
  for t in 1 2; do
    blas=$(best "$t" 1 "$W/gemm.txt")
    line=$(grep ", ${t}t:" "$W/step.txt")
    step=$(echo "$line" | sed 's/.*f32 \([0-9.]*\) ms.*/\1/')
    floor=$(echo "$MFLOP_PER_NODE $blas" | awk '{ printf "%.1f", $1 * 1e6 * 1000 / ($2 * 1e9) * 1e3 }')
    ratio=$(echo "$step $floor" | awk '{ printf "%.3f", $1 / $2 }')
    echo "round $r, ${t}t: step $step ms per 1000 nodes, OpenBLAS best $blas GF/s, floor $floor: $ratio x"
    echo "$t $ratio" >> "$W/ratios.txt"
    if [ $bf16 = yes ]; then
      h=$(echo "$line" | sed 's/.*bf16 \([0-9.]*\) (.*/\1/')
      ours=$(best "$t" 2 "$W/gemm.txt")
      torch=0
      [ -f "$W/torch.txt" ] && torch=$(awk -v t="$t" '$1 == t"t" && $2 == "bf16" { if ($NF + 0 > m) m = $NF + 0 } END { print m + 0 }' "$W/torch.txt")
      rate=$(echo "$ours $torch" | awk '{ print ($1 > $2) ? $1 : $2 }')
      hfloor=$(echo "$MFLOP_PER_NODE $rate" | awk '{ printf "%.1f", $1 * 1e6 * 1000 / ($2 * 1e9) * 1e3 }')
      hratio=$(echo "$h $hfloor" | awk '{ printf "%.3f", $1 / $2 }')
      echo "round $r, ${t}t: bf16 step $h, bf16 GEMM best ours $ours / torch $torch GF/s, floor $hfloor: $hratio x"
      echo "$t $hratio" >> "$W/bf16.txt"
    fi
  done
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for t in 1 2; do
  echo "median over $ROUNDS rounds, ${t}t: f32 step / floor = $(awk -v t="$t" '$1 == t { print $2 }' "$W/ratios.txt" | median)"
  if [ $bf16 = yes ]; then
    echo "median over $ROUNDS rounds, ${t}t: bf16 step / bf16 floor = $(awk -v t="$t" '$1 == t { print $2 }' "$W/bf16.txt" | median)"
  fi
done
