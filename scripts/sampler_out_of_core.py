"""Issue 29: iterate sf.SaintSampler over a store (e.g. under memcap). Usage: python scripts/sampler_out_of_core.py STORE BATCHES COVERAGE"""
import os, sys, time, resource
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas_env  # noqa: F401 (before numpy loads OpenBLAS: OPENBLAS_CORETYPE/L2_SIZE unset)
import saintflow as sf
s = sf.Store.open(sys.argv[1])
t = time.time()
smp = sf.SaintSampler(s, "rw", roots=3000, depth=2, threads=2, num_steps=int(sys.argv[2]), sample_coverage=float(sys.argv[3]))
t1 = time.time()
n = 0; xs = 0.0
for b in smp:
    n += b.num_nodes; xs += float(b.x[:, 0].sum())
t2 = time.time()
print(f"{s}\npre-sampling {smp.pre_sampled} subgraphs in {t1-t:.1f} s; {len(smp)} batches, {n/len(smp):.0f} nodes each, {len(smp)/(t2-t1):.1f} batches/s; maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MiB")
blas_env.report(sys.stdout)
