#!/usr/bin/env bash
# Issue 17's Cora experiment (GAD Table 4): GCN on Cora with GAD's 45/18/37 split, 1 process
# vs 4 MPI ranks on augmented parts vs 4 ranks on plain parts (alpha 0), gad vs loss_variance vs mean
# consensus, rank 0 evaluating the full graph vs every rank its part (--eval-parts), over seeds; then GAD Fig. 9's
# comparison (50 parts on 4 ranks, each consensus); prints one line per run and writes the logs and two loss plots.
#
# Usage: scripts/gad_cora.sh [OUT_DIR] [SEEDS...]   (default: target/gad-cora, seeds 1 2 3)
# Needs: cargo build --release --features mpi; ../shared/data/cora; OpenMPI's mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-target/gad-cora}
shift || true
SEEDS=${*:-1 2 3}
B=target/release/saintflow
MPI=(mpirun --allow-run-as-root --oversubscribe -np 4)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$OUT"
$B import graphsaint ../shared/data/cora -o "$OUT/cora.sf" --force \
  --resplit 0.45,0.18,0.37 --split-seed 1 >/dev/null
$B partition "$OUT/cora.sf" -k 4 -o "$OUT/aug" --plan plans/gcn.toml --force --json > "$OUT/aug.json"
$B partition "$OUT/cora.sf" -k 4 -o "$OUT/plain" --plan plans/gcn.toml --alpha 0 --force --json > "$OUT/plain.json"
acc() { tail -1 "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.4f" % r["test"]["accuracy"])'; }
secs() { tail -1 "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f" % r["time"])'; }
printf "%-34s %5s %9s %8s\n" run seed test_acc seconds
for s in $SEEDS; do
  $B train plans/gcn.toml --graph "$OUT/cora.sf" --seed "$s" --threads 2 --quiet --force \
    --log "$OUT/one-$s.jsonl" >/dev/null
  printf "%-34s %5s %9s %8s\n" "1 process" "$s" "$(acc "$OUT/one-$s.jsonl")" "$(secs "$OUT/one-$s.jsonl")"
  for parts in aug plain; do
    for c in gad loss_variance mean; do
      for e in full parts; do
        if [ "$e" = full ]; then ev=(--graph "$OUT/cora.sf"); else ev=(--eval-parts); fi
        "${MPI[@]}" $B train plans/gcn.toml --partitions "$OUT/$parts" "${ev[@]}" --force \
          --seed "$s" --threads 1 --quiet --set "distributed.consensus=\"$c\"" \
          --log "$OUT/$parts-$c-$e-$s.jsonl" >/dev/null
        printf "%-34s %5s %9s %8s\n" "4 ranks $parts $c eval-$e" "$s" \
          "$(acc "$OUT/$parts-$c-$e-$s.jsonl")" "$(secs "$OUT/$parts-$c-$e-$s.jsonl")"
      done
    done
  done
done
first=$(echo $SEEDS | cut -d' ' -f1)
$B plot "$OUT/aug-gad-full-$first.jsonl" "$OUT/aug-mean-full-$first.jsonl" -o "$OUT/consensus.png" >/dev/null
echo "plot: $OUT/consensus.png (gad vs mean consensus, augmented parts, seed $first)"
# GAD Fig. 9's comparison as far as the data here allows (the paper: Flickr, 50 and 100
# partitions): Cora cut into 50 augmented parts dealt to the 4 ranks (each rank trains the
# union of its parts), every consensus, every seed; the loss curves of the first seed in
# one plot.
$B partition "$OUT/cora.sf" -k 50 --ranks 4 -o "$OUT/k50" --plan plans/gcn.toml --force --json > "$OUT/k50.json"
for s in $SEEDS; do
  for c in gad loss_variance mean; do
    "${MPI[@]}" $B train plans/gcn.toml --partitions "$OUT/k50" --graph "$OUT/cora.sf" --force \
      --seed "$s" --threads 1 --quiet --set "distributed.consensus=\"$c\"" \
      --log "$OUT/k50-$c-$s.jsonl" >/dev/null
    printf "%-34s %5s %9s %8s\n" "4 ranks, 50 parts, $c" "$s" \
      "$(acc "$OUT/k50-$c-$s.jsonl")" "$(secs "$OUT/k50-$c-$s.jsonl")"
  done
done
$B plot "$OUT/k50-gad-$first.jsonl" "$OUT/k50-loss_variance-$first.jsonl" "$OUT/k50-mean-$first.jsonl" \
  -o "$OUT/fig9.png" >/dev/null
echo "plot: $OUT/fig9.png (gad, loss_variance and mean consensus, 50 parts on 4 ranks, seed $first)"
