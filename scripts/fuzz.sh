#!/usr/bin/env bash
# Runs the fuzz targets (fuzz/, cargo-fuzz + libFuzzer, nightly) one after the other:
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 60 seconds, every target
#
# Builds once (release, debug assertions and overflow checks on, AddressSanitizer), then
# runs each target for SECONDS in ONE process, starting from its committed seed corpus
# (fuzz/corpus/<target>/, read only) and growing a working corpus in
# fuzz/target/corpus/<target>/ (kept between runs, never committed). Prints per target:
# execs, exec/s, corpus size (inputs and bytes), peak RSS and the outcome; a crash,
# timeout or out-of-memory input lands in fuzz/artifacts/<target>/ and makes the script
# exit 1 after the other targets ran. Needs `cargo +nightly` and `cargo install cargo-fuzz`.
#
# Environment: FUZZ_TIMEOUT (seconds one input may take, default 30: a normal execution
# takes milliseconds), FUZZ_RSS_MB (default 4096), FUZZ_ARGS (more libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
[[ $# -gt 0 ]] && shift
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^saintflow-fuzz$')
fi
timeout_s=${FUZZ_TIMEOUT:-30}
rss_mb=${FUZZ_RSS_MB:-4096}

# cargo-fuzz appends its sanitizer flags to RUSTFLAGS, which replaces .cargo/config.toml's
# target flags: keep the crate's x86-64-v2 baseline.
export RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=x86-64-v2"
# One worker thread: one fuzz process is one core.
export RAYON_NUM_THREADS=1
# The one known leak (rayon's use_current_thread, see the file) is suppressed; any other
# leak still fails the run.
export LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fuzz=(cargo +nightly fuzz)
opts=(--fuzz-dir fuzz --target-dir fuzz/target --features libfuzzer -O -a)

"${fuzz[@]}" build "${opts[@]}"

mkdir -p fuzz/target/logs
status=0
printf '%-11s %8s %10s %8s %7s %10s %8s  %s\n' target seconds execs exec/s inputs bytes rss_mb outcome
for t in "${targets[@]}"; do
  work=fuzz/target/corpus/$t
  mkdir -p "$work" "fuzz/artifacts/$t"
  tmp=$(mktemp -d "${FUZZ_TMP:-/dev/shm}/saintflow-fuzz.XXXXXX" 2>/dev/null || mktemp -d)
  log=fuzz/target/logs/$t.log
  set +e
  TMPDIR=$tmp "${fuzz[@]}" run "${opts[@]}" "$t" "$work" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -timeout="$timeout_s" -rss_limit_mb="$rss_mb" \
    -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" ${FUZZ_ARGS:-} >"$log" 2>&1
  rc=$?
  set -e
  rm -rf "$tmp"
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  execs=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  if [[ -z $execs ]]; then  # -fork mode: the last status line ("#N: ... exec/s: R ...")
    execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    [[ -n $execs ]] && rate=$((execs / secs))
  fi
  rss=$(stat peak_rss_mb)
  inputs=$(find "$work" -type f | wc -l)
  bytes=$(find "$work" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  if [[ $rc -eq 0 ]]; then
    outcome=ok
  else
    status=1
    outcome="FAILED (rc $rc): $(grep -m1 -oE 'ERROR: libFuzzer: [a-z-]+|panicked at [^ ]+|ERROR: AddressSanitizer: [a-z-]+' "$log" || echo see "$log"); artifacts: $(ls "fuzz/artifacts/$t" | tr '\n' ' ')"
  fi
  printf '%-11s %8s %10s %8s %7s %10s %8s  %s\n' "$t" "$secs" "${execs:-?}" "${rate:-?}" "$inputs" "$bytes" "${rss:-?}" "$outcome"
done
exit $status
