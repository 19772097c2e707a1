#!/usr/bin/env bash
# The README's test command: the Rust workspace's tests (`cargo test`, which needs nothing
# outside cargo), then the Python package's (scripts/test-python.sh: a venv, the package
# built from ./python, pytest). Arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test "$@"
scripts/test-python.sh
