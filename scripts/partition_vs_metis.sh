#!/bin/sh
# Our multilevel k-way partitioner against METIS (gpmetis, Debian package `metis`) on Cora
# and a Kronecker scale-16 graph, k = 2, 4, 8: edge cut, balance, partitioning time.
# Usage: scripts/partition_vs_metis.sh  (env: SAINTFLOW=binary, CORA=dataset dir, WORK=dir)
# gpmetis runs with its defaults (k-way, ufactor 30 = ε 0.03, our default); ours with seed 0.
# Times: ours = partition_seconds of partition.json (load + coarsen + initial + refine, not
# the augmentation or the writing of the part stores); METIS = its "Partitioning" time.
set -eu
SF=${SAINTFLOW:-saintflow}
CORA=${CORA:-$(cd "$(dirname "$0")/.." && pwd)/../shared/data/cora}
W=${WORK:-partition-bench}
command -v gpmetis >/dev/null || { echo "gpmetis not found: apt-get install metis" >&2; exit 1; }
mkdir -p "$W"
cd "$W"
[ -d cora.sf ] || "$SF" import graphsaint "$CORA" -o cora.sf -q >/dev/null
[ -d k16.sf ] || "$SF" gen kronecker --scale 16 --degree 16 --features 16 --classes 4 --planted -o k16.sf -q >/dev/null
echo "| graph | k | edges | cut ours | cut METIS | ours/METIS | balance ours | balance METIS | s ours | s METIS |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for g in cora k16; do
  for k in 2 4 8; do
    "$SF" partition "$g.sf" -k "$k" -o "parts-$g-$k" --force --json -q --metis-out "$g.metis" > ours.json
    gpmetis "$g.metis" "$k" > metis.out
    python3 - "$g" "$k" <<'PY'
import json, re, sys
g, k = sys.argv[1], int(sys.argv[2])
o = json.load(open("ours.json"))
m = open("metis.out").read()
cut = int(re.search(r"Edgecut:\s*(\d+)", m).group(1))
t = float(re.search(r"Partitioning:\s*([\d.]+)", m).group(1))
# METIS's balance line: "constraint #0:  1.030 out of 0.00x" — its first number.
bal = float(re.search(r"constraint #0:\s*([\d.]+)", m).group(1))
print(f"| {g} | {k} | {o['n_edges']} | {o['edge_cut']} | {cut} | {o['edge_cut']/max(cut,1):.2f} | {o['balance']:.3f} | {bal:.3f} | {o['partition_seconds']:.2f} | {t:.2f} |")
PY
  done
done
