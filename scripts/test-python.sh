#!/usr/bin/env bash
# The Python package's tests (issue 29): makes a venv (SAINTFLOW_VENV, default
# target/python-venv), installs the package from ./python with its test extras (pip builds
# the Rust extension through maturin, fetched by pip as the build backend, into the
# workspace's target directory), and runs pytest on python/tests. The cross-checks against
# the command line use the `saintflow` binary `cargo test` built (SAINTFLOW_BIN overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
venv="${SAINTFLOW_VENV:-$target/python-venv}"
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
if ! command -v python3 >/dev/null; then
  echo "scripts/test-python.sh: python3 is needed for the Python package's tests" >&2
  exit 1
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "./python[test]"
bin="${SAINTFLOW_BIN:-$target/debug/saintflow}"
[ -x "$bin" ] || cargo build -q --bin saintflow
export SAINTFLOW_BIN="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
# From python/tests' parent, so `import saintflow` is the installed package, not ./python.
cd python/tests
"$venv/bin/python" -m pytest -q .
