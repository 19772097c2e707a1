"""torch's matmul rate at the JPDC step's six GEMM shapes, f32 and bf16 (oneDNN's bf16 GEMM
on a CPU with AVX512_BF16), at 1 and 2 threads: the bf16 floor scripts/step_floor.sh
compares saintflow's bf16 step with. Prints `Tt dtype shape ms GF/s` lines, the rate last."""
import blas_env  # first: unsets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy or torch loads
import time

import torch

blas_env.report()

SHAPES = [("nn", 8000, 512, 512), ("tn", 512, 8000, 512), ("nt", 8000, 512, 512),
          ("nn", 8000, 1024, 512), ("tn", 1024, 8000, 512), ("nt", 8000, 512, 1024)]


def rates(threads, dtype, reps=7):
    torch.set_num_threads(threads)
    for kind, m, k, n in SHAPES:
        if kind == "nn":
            a, b, f = torch.rand(m, k), torch.rand(k, n), lambda a, b: a @ b
        elif kind == "tn":
            a, b, f = torch.rand(k, m), torch.rand(k, n), lambda a, b: a.t() @ b
        else:
            a, b, f = torch.rand(m, k), torch.rand(n, k), lambda a, b: a @ b.t()
        a, b = (a - 0.5).to(dtype), (b - 0.5).to(dtype)
        f(a, b)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f(a, b)
            times.append(time.perf_counter() - t0)
        med = sorted(times)[len(times) // 2]
        yield kind, m, k, n, med, 2 * m * k * n / med / 1e9


for t in (1, 2):
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        for kind, m, k, n, med, gf in rates(t, dtype):
            print(f"{t}t {name} {kind}_{m}x{k}x{n} {med * 1e3:.1f} {gf:.0f}")
