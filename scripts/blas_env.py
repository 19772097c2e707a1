"""The Python side of scripts/blas_env.sh, imported first by the benchmark scripts that time
numpy, torch or PyG (before either loads its BLAS): some machines here set
OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) to an older core, which runs OpenBLAS's AVX2
kernels at half the AVX-512 rate and flatters any comparison taken against it. Both are
unset at import, saying so on stderr; `report()` prints the BLAS core in use (threadpoolctl,
where installed), for the script's output."""
import os
import sys

UNSET = {k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
if UNSET:
    print("unset for the OpenBLAS baseline: "
          + " ".join(f"{k}={v}" for k, v in UNSET.items()), file=sys.stderr)


def report(out=sys.stderr):
    """Prints the BLAS libraries loaded and their cores (after numpy or torch is imported)."""
    try:
        import numpy  # noqa: F401 (loads its BLAS, if nothing has yet)
        from threadpoolctl import threadpool_info
    except ImportError:
        print("BLAS core: unknown (pip install threadpoolctl)", file=out)
        return
    cores = [f"{i['internal_api']} {i.get('version')} core {i.get('architecture')}"
             for i in threadpool_info() if i.get("user_api") == "blas"]
    print("BLAS: " + ("; ".join(cores) or "none loaded"), file=out)
