# Sourced by every script that times a baseline on OpenBLAS (numpy's, scipy's, gensim's
# through scipy): some machines here set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) to an
# older core, which runs OpenBLAS's AVX2 kernels at half the AVX-512 rate and flatters any
# "% of OpenBLAS" or floor taken from it. Both are unset for the baseline (a deliberate
# AVX2 comparison sets OPENBLAS_CORETYPE=Haswell on its own command), and
# `blas_core PYTHON` prints the core OpenBLAS then runs, as threadpoolctl reports it. The
# Python benchmark scripts do the same themselves (`import blas_env` first, scripts/blas_env.py).
if [ -n "${OPENBLAS_CORETYPE:-}${OPENBLAS_L2_SIZE:-}" ]; then
  echo "unset for the OpenBLAS baseline: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-}"
fi
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

blas_core() { # $1: a python whose numpy (and threadpoolctl, if installed) to ask
  "$1" - <<'PY'
try:
    import numpy  # noqa: F401 (loads the BLAS)
    from threadpoolctl import threadpool_info
    cores = [f"{i['internal_api']} {i.get('version')} core {i.get('architecture')}"
             for i in threadpool_info() if i.get("user_api") == "blas"]
    print("BLAS:", "; ".join(cores) or "none loaded")
except ImportError as e:
    print(f"BLAS core: unknown ({e.name} missing: pip install threadpoolctl)")
PY
}

machine_header() { # $1: the python whose OpenBLAS core to print. What every comparison's output starts
  # with: the date and commit, the CPU as lscpu names it (model name, family, model), the
  # OpenBLAS core, the load beside it.
  echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --short HEAD 2>/dev/null || echo '?')"
  lscpu | grep -E "^Model name|^CPU family|^Model:|^CPU\(s\)" | sed 's/  */ /g'
  blas_core "$1"
  echo "load: $(uptime)"
}
