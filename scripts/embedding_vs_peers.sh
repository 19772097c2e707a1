#!/usr/bin/env bash
# saintflow's DeepWalk and node2vec vs the peers on BlogCatalog, side by side in one run on
# this machine, same dim (128), walks (10 per node of length 80 for the peers), window (10),
# 2 threads: pecanpy (node2vec, SparseOTF, p = q = 0.25) and gensim Word2Vec over uniform
# walks (DeepWalk). Each run's wall time and peak RSS come from /usr/bin/time -v; every
# embedding is scored by the same `saintflow eval-embedding` (10 % and 50 % labelled,
# REPEATS shuffles). saintflow runs at each of EPOCHS, and the script prints the time to
# each peer's quality. Figures go to BENCHMARKS.md by hand, with this command.
#
#   [EPOCHS="250 300 400 500"] [REPEATS=10] [THREADS=2] [SF=BINARY] scripts/embedding_vs_peers.sh [WORKDIR]
#   (WORKDIR: default /tmp/saintflow-peers; SF: a saintflow binary to time instead of this
#   checkout's, which is then not built: a kept "before" binary, for interleaved runs;
#   SAINTFLOW_ISA=avx2 in the environment runs our AVX2 kernels on an AVX-512 CPU)
#
# Every side is timed end to end, start-up, reading the graph and writing the embedding
# included; each also reports its phases: gensim its walks and its Word2Vec, pecanpy
# (`--verbose`) its loading, preprocessing, walks and training, saintflow its training
# (walks and SGD overlapped, two pools). The table adds each run's CPU seconds (user +
# system), which other load on the machine moves far less than the wall time.
#
# The peers are installed into a venv under WORKDIR (PyPI, never in the test suite):
#   python3 -m venv WORKDIR/venv && WORKDIR/venv/bin/pip install "numpy<2" scipy gensim pecanpy threadpoolctl
# numpy is held below 2: pecanpy 2.0.9 calls `np.bool8`, which numpy 2 removed (it fails
# on its first walk). The versions installed are printed with the BLAS core.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/saintflow-peers}
DATA=${BLOGCATALOG:-$ROOT/../shared/data/blogcatalog}
THREADS=${THREADS:-2}
. "$ROOT/scripts/blas_env.sh"   # gensim's BLAS (scipy's OpenBLAS) at the CPU's own core
mkdir -p "$WORK"; cd "$WORK"
[ -x venv/bin/python ] || { python3 -m venv venv && venv/bin/pip install -q "numpy<2" scipy gensim pecanpy threadpoolctl; }
PY=venv/bin/python
lscpu | grep -E "Model name|CPU family|^Model:" || true
blas_core "$PY"
$PY -c "import importlib.metadata as m; print(*(f'{p} {m.version(p)}' for p in ['numpy', 'scipy', 'gensim', 'pecanpy']), sep=', ')"
if [ -z "${SF:-}" ]; then
    (cd "$ROOT" && cargo build --release -q)
    SF=$ROOT/target/release/saintflow
fi
echo "saintflow: $SF, ${THREADS} threads, SAINTFLOW_ISA=${SAINTFLOW_ISA:-(unset: the widest)}; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -d bc.sf ] || "$SF" import graphsaint "$DATA" -o bc.sf -q
# The edge list the peers read (one undirected edge per line, node ids = store ids).
[ -f bc.edg ] || $PY -c "
import scipy.sparse as sp; a = sp.load_npz('$DATA/adj_full.npz').tocoo()
with open('bc.edg', 'w') as f:
    for u, v in zip(a.row, a.col):
        if u < v: f.write(f'{u}\t{v}\n')"
cat > w2v_to_npy.py <<'PY'
import sys, numpy as np
rows = {}
with open(sys.argv[1]) as f:
    n, d = map(int, f.readline().split())
    for line in f:
        t = line.split(); rows[int(t[0])] = np.array(t[1:], dtype=np.float32)
n = int(sys.argv[3]); e = np.zeros((n, d), np.float32)
for k, v in rows.items(): e[k] = v
np.save(sys.argv[2], e)
PY
cat > deepwalk_gensim.py <<'PY'
# DeepWalk as its authors run it: 10 uniform walks of 80 nodes from every node, then
# skip-gram (window 10, 5 negatives, 1 epoch) by gensim's Word2Vec on THREADS workers.
import sys, time, numpy as np
from gensim.models import Word2Vec
edg, out, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
nb = {}
for line in open(edg):
    u, v = line.split(); nb.setdefault(u, []).append(v); nb.setdefault(v, []).append(u)
rng = np.random.default_rng(1); nodes = list(nb); walks = []
t0 = time.time()
for _ in range(10):
    for s in rng.permutation(nodes):
        w = [s]
        while len(w) < 80:
            r = nb[w[-1]]; w.append(r[rng.integers(len(r))])
        walks.append(w)
t1 = time.time()
m = Word2Vec(walks, vector_size=128, window=10, min_count=0, sg=1, hs=0, negative=5, workers=threads, epochs=1, seed=1)
t2 = time.time()
m.wv.save_word2vec_format(out)
print(f"gensim deepwalk: walks {t1 - t0:.1f} s, word2vec {t2 - t1:.1f} s", file=sys.stderr)
PY
N=$("$SF" info bc.sf --json | $PY -c "import json,sys; print(json.load(sys.stdin)['nodes'])")
measure() { # NAME CMD...: wall seconds, CPU seconds and peak RSS (MiB) of CMD, into
    # NAME.time (stderr and time's report) and NAME.out (stdout), and the run's phases
    local name=$1; shift
    /usr/bin/time -v "$@" 2> "$name.time" > "$name.out" || { cat "$name.time"; exit 1; }
    local wall rss cpu
    wall=$(grep 'Elapsed (wall clock)' "$name.time" | awk '{print $NF}')
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.1f", s}' "$name.time")
    rss=$(grep 'Maximum resident set size' "$name.time" | awk '{print $NF}')
    echo "$name: wall $wall, CPU $cpu s, peak RSS $((rss / 1024)) MiB"
    { grep -h -E '^(gensim deepwalk:|Took )' "$name.time" "$name.out"; grep -h -o 'positive samples in [0-9.]* s ([^)]*)' "$name.out"; } \
        | sed 's/^/    /' || true
}
# Every embedding is scored the same way: 10 % and 50 % labelled, REPEATS shuffles (the
# DeepWalk paper's 10 by default; the 10 % column moves ±0.5 point between shuffle seeds).
REPEATS=${REPEATS:-10}
score() { "$SF" eval-embedding "$1.npy" --graph bc.sf --ratios 0.1,0.5 --repeats "$REPEATS" --json > "$1.f1.json"; }
# The peers first, then saintflow at each of EPOCHS (× |E| samples; the pools take 64 MiB).
measure gensim-deepwalk $PY deepwalk_gensim.py bc.edg gensim.emb $THREADS
measure pecanpy-node2vec venv/bin/pecanpy --input bc.edg --output pecanpy.emb --mode SparseOTF --p 0.25 --q 0.25 \
    --dimensions 128 --walk-length 80 --num-walks 10 --window-size 10 --workers $THREADS --verbose
$PY w2v_to_npy.py gensim.emb gensim-deepwalk.npy "$N"
$PY w2v_to_npy.py pecanpy.emb pecanpy-node2vec.npy "$N"
EPOCHS=${EPOCHS:-"250 300 400 500"}
# A rerun in the same WORKDIR replaces the embeddings this script wrote before (saintflow
# refuses to replace an output unasked).
for ep in $EPOCHS; do
    measure saintflow-deepwalk-$ep "$SF" embed "$ROOT/plans/deepwalk.toml" --graph bc.sf -o saintflow-deepwalk-$ep.npy \
        --threads $THREADS --epochs "$ep" --memory 64 -q --force
    measure saintflow-node2vec-$ep "$SF" embed "$ROOT/plans/node2vec.toml" --graph bc.sf -o saintflow-node2vec-$ep.npy \
        --threads $THREADS --epochs "$ep" --memory 64 -q --force
done
for e in gensim-deepwalk pecanpy-node2vec; do score $e; done
for ep in $EPOCHS; do score saintflow-deepwalk-$ep; score saintflow-node2vec-$ep; done
# The table, and time to the peer's quality: the first epoch count whose Micro-F1 at 10 %
# and Macro-F1 at 50 % both reach the peer's.
$PY - "$EPOCHS" <<'PY'
import json, re, sys
def run(name):
    t = open(f"{name}.time").read()
    wall = t.split("Elapsed (wall clock) time (h:mm:ss or m:ss): ")[1].split()[0].split(":")
    secs = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1024
    cpu = sum(float(re.search(rf"{k} time \(seconds\): ([0-9.]+)", t).group(1)) for k in ("User", "System"))
    rows = {r["ratio"]: r for r in json.load(open(f"{name}.f1.json"))["classification"]}
    return secs, rss, rows[0.1]["micro_f1"], rows[0.5]["macro_f1"], cpu
print("| run | wall | CPU | peak RSS | Micro-F1 10 % | Macro-F1 50 % |\n|---|---|---|---|---|---|")
for peer, ours in [("gensim-deepwalk", "saintflow-deepwalk"), ("pecanpy-node2vec", "saintflow-node2vec")]:
    p = run(peer)
    print(f"| {peer} | {p[0]:.1f} s | {p[4]:.1f} s | {p[1]:.0f} MiB | {p[2]:.4f} | {p[3]:.4f} |")
    hit = None
    for ep in sys.argv[1].split():
        o = run(f"{ours}-{ep}")
        print(f"| {ours}, {ep} epochs | {o[0]:.1f} s | {o[4]:.1f} s | {o[1]:.0f} MiB | {o[2]:.4f} | {o[3]:.4f} |")
        if hit is None and o[2] >= p[2] and o[3] >= p[3]:
            hit = (ep, o[0], o[4])
    print(f"time to {peer}'s quality: " + (f"{hit[0]} epochs, {hit[1]:.1f} s: {p[0] / hit[1]:.2f}x faster (CPU time {p[4] / hit[2]:.2f}x)" if hit else "not reached"))
PY
