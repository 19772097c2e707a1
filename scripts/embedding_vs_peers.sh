#!/usr/bin/env bash
# saintflow's DeepWalk and node2vec vs the peers on BlogCatalog, side by side in one run on
# this machine, same dim (128), walks (10 per node of length 80 for the peers), window (10),
# 2 threads: pecanpy (node2vec, SparseOTF, p = q = 0.25) and gensim Word2Vec over uniform
# walks (DeepWalk). Each run's wall time and peak RSS come from /usr/bin/time -v; every
# embedding is scored by the same `saintflow eval-embedding` (10 % and 50 % labelled, 5
# repeats). Figures go to BENCHMARKS.md by hand, with this command.
#
#   scripts/embedding_vs_peers.sh [WORKDIR]       (default /tmp/saintflow-peers)
#
# The peers are installed into a venv under WORKDIR (PyPI, never in the test suite):
#   python3 -m venv WORKDIR/venv && WORKDIR/venv/bin/pip install numpy scipy gensim pecanpy
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/saintflow-peers}
DATA=${BLOGCATALOG:-$ROOT/../shared/data/blogcatalog}
SF=$ROOT/target/release/saintflow
THREADS=2
mkdir -p "$WORK"; cd "$WORK"
[ -x venv/bin/python ] || { python3 -m venv venv && venv/bin/pip install -q numpy scipy gensim pecanpy; }
PY=venv/bin/python
(cd "$ROOT" && cargo build --release -q)
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
measure() { # NAME CMD...: wall seconds and peak RSS (MiB) of CMD
    local name=$1; shift
    /usr/bin/time -v "$@" 2> "$name.time" >/dev/null || { cat "$name.time"; exit 1; }
    local wall rss
    wall=$(grep 'Elapsed (wall clock)' "$name.time" | awk '{print $NF}')
    rss=$(grep 'Maximum resident set size' "$name.time" | awk '{print $NF}')
    echo "$name: wall $wall, peak RSS $((rss / 1024)) MiB"
}
score() { "$SF" eval-embedding "$1" --graph bc.sf --ratios 0.1,0.5 --repeats 5 | sed "s|^|  $1 |"; }
measure saintflow-deepwalk "$SF" embed "$ROOT/plans/deepwalk.toml" --graph bc.sf -o sf-deepwalk.npy --threads $THREADS -q
measure saintflow-node2vec "$SF" embed "$ROOT/plans/node2vec.toml" --graph bc.sf -o sf-node2vec.npy --threads $THREADS -q
measure gensim-deepwalk $PY deepwalk_gensim.py bc.edg gensim.emb $THREADS
measure pecanpy-node2vec venv/bin/pecanpy --input bc.edg --output pecanpy.emb --mode SparseOTF --p 0.25 --q 0.25 \
    --dimensions 128 --walk-length 80 --num-walks 10 --window-size 10 --workers $THREADS
$PY w2v_to_npy.py gensim.emb gensim-deepwalk.npy "$N"
$PY w2v_to_npy.py pecanpy.emb pecanpy-node2vec.npy "$N"
for e in sf-deepwalk.npy gensim-deepwalk.npy sf-node2vec.npy pecanpy-node2vec.npy; do score $e; done
