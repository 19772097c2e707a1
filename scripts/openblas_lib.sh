# Sourced by the scripts that time saintflow's GEMM against OpenBLAS (gemm_vs_openblas.sh,
# step_floor.sh): makes the numpy venv VENV (default /tmp/saintflow-gemm-venv) if it is
# missing and exports OPENBLAS_LIB, the OpenBLAS numpy's wheel bundles
# (libscipy_openblas64_*.so), for ops/benches/gemm_openblas.rs to load (which prints the core
# it runs). OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset first (scripts/blas_env.sh).
. "$(dirname "${BASH_SOURCE[0]}")/blas_env.sh"
VENV=${VENV:-/tmp/saintflow-gemm-venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q numpy
fi
OPENBLAS_LIB=$("$VENV/bin/python" - <<'PY'
import glob, os, numpy
d = os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs")
libs = glob.glob(os.path.join(d, "libscipy_openblas64_*.so"))
print(os.path.realpath(libs[0]) if libs else "")
PY
)
[ -n "$OPENBLAS_LIB" ] || { echo "no libscipy_openblas64_ in $VENV's numpy" >&2; exit 1; }
export OPENBLAS_LIB
