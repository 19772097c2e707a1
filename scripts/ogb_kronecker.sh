#!/usr/bin/env bash
# Issue 32's acceptance run: Kronecker graphs written in OGB's csv.gz node-property layout
# (raw/edge.csv.gz, num-node-list, num-edge-list, node-feat, node-label, split/kron/), then
# imported by `saintflow import ogb` under `memcap 2G` and loaded by pandas as OGB's loader
# does (`pd.read_csv(..., compression="gzip", header=None).values` for the edges, counts,
# features, labels and split), both under `/usr/bin/time -v`. Prints one table row per scale:
# undirected edges, seconds and edges/s of each, peak RSS of each, memcap's peak and
# failcnt, and the ratio pandas seconds / saintflow seconds (medians of REPEAT runs).
# The imported store is checked (`saintflow check`) and compared with the generated one:
# `info --json` counts, and the header's xxh3 of both CSRs, labels and roles (equal bit for
# bit); features to within the 6 decimals written.
#
# Usage: scripts/ogb_kronecker.sh [VENV_DIR]   (default /tmp/saintflow-ogb)
# Environment: SCALES (default "20 22"), REPEAT (runs per measurement, default 2),
#   SAINTFLOW (binary, default `saintflow` on PATH), WORK (scratch directory, default
#   /tmp/ogb-kronecker; stores and csv.gz files go there: ~1.5 GiB at scale 22),
#   MEMCAP (default ../shared/tools/memcap beside the repository; needs root).
# Graphs: `saintflow gen kronecker --scale S --degree 16 --features 8 --classes 4` (seed 1).
# The edge file lists each undirected edge once (u < v) in a random order (seed 0), as real
# OGB files are not sorted; features are written "%.6f" (ogbn-arxiv's text); gzip level 6.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-/tmp/saintflow-ogb}
SCALES=${SCALES:-20 22}
REPEAT=${REPEAT:-2}
SF=${SAINTFLOW:-saintflow}
WORK=${WORK:-/tmp/ogb-kronecker}
MEMCAP=${MEMCAP:-$ROOT/../shared/tools/memcap}
command -v "$SF" >/dev/null || { echo "saintflow binary not found: set SAINTFLOW" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time not found: apt-get install time" >&2; exit 1; }
[ -x "$MEMCAP" ] || { echo "memcap not found at $MEMCAP: set MEMCAP" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet numpy pandas
fi
PY="$VENV/bin/python"
mkdir -p "$WORK"
cd "$WORK"

# ---- helpers (Python), written once into the scratch directory

# write_ogb.py STORE DIR: the store in OGB's csv.gz layout, streamed in chunks.
cat > write_ogb.py <<'PY'
import gzip, json, os, shutil, struct, sys
import numpy as np

store, out = sys.argv[1], sys.argv[2]
with open(os.path.join(store, "header.sf"), "rb") as f:
    b = f.read()
assert b[:8] == b"SAINTFLW", "not a saintflow store"
h = json.loads(b[24:24 + struct.unpack_from("<I", b, 12)[0]])
n, nf = h["n_nodes"], h["n_features"]
assert h["label_kind"] == "single", "this writer handles single-label stores"
tmp = out + ".tmp"
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(os.path.join(tmp, "raw"))

def gz(name, chunks):
    """Writes the text chunks (each a list of lines) gzip-compressed to tmp/name."""
    path = os.path.join(tmp, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.GzipFile(path, "wb", compresslevel=6, mtime=0) as z:
        for lines in chunks:
            if lines:
                z.write(("\n".join(lines) + "\n").encode())

# Edges u < v of the full CSR: 8 bytes each in memory (268 MB at scale 22), no text held.
off = np.fromfile(os.path.join(store, "full.offsets.u64"), "<u8")
idx = np.memmap(os.path.join(store, "full.indices.u32"), "<u4", mode="r")
src, dst = [], []
rows = 1 << 16
for r0 in range(0, n, rows):
    r1 = min(n, r0 + rows)
    d = np.asarray(idx[off[r0]:off[r1]])
    s = np.repeat(np.arange(r0, r1, dtype=np.uint32), np.diff(off[r0:r1 + 1]).astype(np.int64))
    keep = s < d
    src.append(s[keep]); dst.append(d[keep])
src, dst = np.concatenate(src), np.concatenate(dst)
perm = np.random.default_rng(0).permutation(len(src))
src, dst = src[perm], dst[perm]
e = len(src)
assert 2 * e == h["n_entries"], (e, h["n_entries"])
step = 1 << 20
gz("raw/edge.csv.gz", ([f"{u},{v}" for u, v in zip(src[i:i + step].tolist(), dst[i:i + step].tolist())]
                       for i in range(0, e, step)))
del src, dst, perm
gz("raw/num-node-list.csv.gz", [[str(n)]])
gz("raw/num-edge-list.csv.gz", [[str(e)]])
feat = np.memmap(os.path.join(store, "features.f32"), "<f4", mode="r").reshape(n, nf)
fmt = ",".join(["%.6f"] * nf)
gz("raw/node-feat.csv.gz", ([fmt % tuple(r) for r in feat[i:i + step].tolist()]
                            for i in range(0, n, step)))
lab = np.fromfile(os.path.join(store, "labels.bin"), "<u4")
gz("raw/node-label.csv.gz", (["nan" if c == 0xFFFFFFFF else str(c) for c in lab[i:i + step].tolist()]
                             for i in range(0, n, step)))
roles = np.fromfile(os.path.join(store, "roles.u8"), "u1")
for name, role in (("train", 1), ("valid", 2), ("test", 3)):
    ids = np.flatnonzero(roles == role)
    gz(f"split/kron/{name}.csv.gz", ([str(v) for v in ids[i:i + step].tolist()]
                                     for i in range(0, len(ids), step)))
os.rename(tmp, out)
print(f"{out}: {n} nodes, {e} edges, {nf} features", file=sys.stderr)
PY

# pandas_load.py DIR: what OGB's csv.gz loader (read_csv_graph_raw, NodePropPredDataset,
# get_idx_split) does with pandas.
cat > pandas_load.py <<'PY'
import os.path as osp, sys, time
import numpy as np, pandas as pd

t0 = time.perf_counter()  # after the imports: the wall time of /usr/bin/time includes them
d = sys.argv[1]
raw = osp.join(d, "raw")
edge = pd.read_csv(osp.join(raw, "edge.csv.gz"), compression="gzip", header=None).values.T.astype(np.int64)
num_node_list = pd.read_csv(osp.join(raw, "num-node-list.csv.gz"), compression="gzip", header=None).astype(np.int64)[0].tolist()
num_edge_list = pd.read_csv(osp.join(raw, "num-edge-list.csv.gz"), compression="gzip", header=None).astype(np.int64)[0].tolist()
node_feat = pd.read_csv(osp.join(raw, "node-feat.csv.gz"), compression="gzip", header=None).values
node_feat = node_feat.astype(np.int64) if "int" in str(node_feat.dtype) else node_feat.astype(np.float32)
node_label = pd.read_csv(osp.join(raw, "node-label.csv.gz"), compression="gzip", header=None).values
split = {k: pd.read_csv(osp.join(d, "split", "kron", f"{k}.csv.gz"), compression="gzip", header=None).values.T[0]
         for k in ("train", "valid", "test")}
assert edge.shape == (2, num_edge_list[0]) and node_feat.shape[0] == num_node_list[0]
print(f"pandas: {edge.shape[1]} edges, features {node_feat.shape}, labels {node_label.shape}, "
      f"split {[len(v) for v in split.values()]} in {time.perf_counter() - t0:.2f} s after the imports")
PY

# compare.py A B: the imported store B against the generated A.
cat > compare.py <<'PY'
import json, os, struct, subprocess, sys
import numpy as np

sf, a, b = sys.argv[1:4]
info = lambda s: json.loads(subprocess.run([sf, "info", "--json", s], check=True, capture_output=True, text=True).stdout)
def sections(s):
    with open(os.path.join(s, "header.sf"), "rb") as f:
        raw = f.read()
    h = json.loads(raw[24:24 + struct.unpack_from("<I", raw, 12)[0]])
    return {x["name"]: x["xxh3"] for x in h["sections"]}
ia, ib = info(a), info(b)
bad = [k for k in ("nodes", "edges", "train_edges", "features", "classes", "label_kind", "split") if ia[k] != ib[k]]
sa, sb = sections(a), sections(b)
bad += [k for k in ("full.offsets", "full.indices", "train.offsets", "train.indices", "labels", "roles") if sa[k] != sb[k]]
fa = np.fromfile(os.path.join(a, "features.f32"), "<f4")
fb = np.fromfile(os.path.join(b, "features.f32"), "<f4")
# "%.6f" is within 5e-7 of the f32; parsing it back adds half an ulp of f32.
same = len(fa) == len(fb) and bool(np.all(np.abs(fa - fb) <= 5e-7 + np.spacing(np.abs(fa))))
diff = float(np.abs(fa - fb).max()) if len(fa) == len(fb) and len(fa) else 0.0
if not same:
    bad.append(f"features (max |diff| {diff:.3g})")
if bad:
    sys.exit(f"{b} differs from {a}: {', '.join(bad)}")
print(f"{b}: same as {a} ({ia['nodes']} nodes, {ia['edges']['undirected']} edges; CSRs, labels, roles bit for bit; features within {diff:.2g})")
PY

# time_v LOG: "wall_seconds peak_rss_kib" from /usr/bin/time -v's report in LOG.
time_v() {
  awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i] }
              /Maximum resident set size/ { rss = $2 }
              END { printf "%.2f %d\n", s, rss }' "$1"
}
# peak_anon PID: the largest RssAnon (KiB) of PID's deepest descendant (memcap → time →
# saintflow), polled every 50 ms while PID lives. time -v's RSS also counts the store's
# mapped file pages that the writer's final checks read; RssAnon is what the process holds.
peak_anon() {
  local max=0 p v kids
  while kill -0 "$1" 2>/dev/null; do
    p=$1
    while kids=$(cat /proc/"$p"/task/*/children 2>/dev/null) && [ -n "$kids" ]; do p=${kids%% *}; done
    v=$(awk '/^RssAnon:/ { print $2 }' /proc/"$p"/status 2>/dev/null || true)
    [ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
    sleep 0.05
  done
  echo "$max"
}
# median of the arguments
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

: > results.tsv
for S in $SCALES; do
  G="k$S.sf"
  [ -d "$G" ] || "$SF" gen kronecker --scale "$S" --degree 16 --features 8 --classes 4 -o "$G" -q >/dev/null
  D="k$S-ogb"
  [ -d "$D" ] || "$PY" write_ogb.py "$G" "$D"
  E=$(zcat "$D/raw/num-edge-list.csv.gz")
  sf_s=() sf_rss=() sf_anon=() cap_peak=() cap_fail=() pd_s=() pd_rss=()
  for r in $(seq "$REPEAT"); do
    rm -rf "k$S-import.sf"
    "$MEMCAP" 2G /usr/bin/time -v "$SF" import ogb "$D" -o "k$S-import.sf" -q > "sf$S.$r.out" 2> "sf$S.$r.log" &
    pid=$!
    anon=$(peak_anon "$pid")
    if ! wait "$pid"; then
      cat "sf$S.$r.out" "sf$S.$r.log" >&2; exit 1
    fi
    read -r s rss < <(time_v "sf$S.$r.log")
    sf_s+=("$s"); sf_rss+=("$rss"); sf_anon+=("$anon")
    line=$(grep '^memcap:' "sf$S.$r.log")
    cap_peak+=("$(sed -E 's/.*peak=([0-9]+).*/\1/' <<<"$line")")
    cap_fail+=("$(sed -E 's/.*failcnt=(.*[^ ]) *exit=.*/\1/' <<<"$line")")
    echo "scale $S run $r: saintflow $s s, RSS $rss KiB, anon $anon KiB; $line" >&2
    if ! /usr/bin/time -v "$PY" pandas_load.py "$D" > "pd$S.$r.out" 2> "pd$S.$r.log"; then
      cat "pd$S.$r.out" "pd$S.$r.log" >&2; exit 1
    fi
    read -r s rss < <(time_v "pd$S.$r.log")
    pd_s+=("$s"); pd_rss+=("$rss")
    echo "scale $S run $r: pandas $s s, RSS $rss KiB" >&2
  done
  "$SF" check "k$S-import.sf" -q >/dev/null
  "$PY" compare.py "$SF" "$G" "k$S-import.sf" >&2
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$S" "$E" \
    "$(median "${sf_s[@]}")" "$(median "${sf_rss[@]}")" "$(median "${cap_peak[@]}")" \
    "$(IFS=+; echo "${cap_fail[*]}")" "$(median "${pd_s[@]}")" "$(median "${pd_rss[@]}")" \
    "$(IFS=/; echo "${sf_s[*]}")" "$(IFS=/; echo "${pd_s[*]}")" "$(median "${sf_anon[@]}")" >> results.tsv
done

echo "| scale | edges | saintflow s (runs) | saintflow edges/s | saintflow RSS (anon) | memcap peak (failcnt) | pandas s (runs) | pandas edges/s | pandas RSS | pandas s / saintflow s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk -F'\t' '{ mib = 1024
  printf "| %s | %d | %.1f (%s) | %.2fM | %d MiB (%d MiB) | %d MiB (%s) | %.1f (%s) | %.2fM | %d MiB | %.2f× |\n",
    $1, $2, $3, $9, $2 / $3 / 1e6, $4 / mib, $11 / mib, $5 / mib / mib, $6, $7, $10, $2 / $7 / 1e6, $8 / mib, $7 / $3 }' results.tsv
