#!/usr/bin/env python3
"""Writes a synthetic dataset of ogbn-mag's shape in its layout, for timing `saintflow
import ogb` of a heterogeneous dataset at the real size (issue 57; docs/bench/import.md):
ogbn-mag's node types and counts (paper 736,389, author 1,134,649, institution 8,740,
field_of_study 59,965), its four relations and edge counts (ends drawn uniformly at random),
16 random features per paper (ogbn-mag has 128), a class of 349 per paper, and the time
split's sizes (629,571 / 64,879 / 41,939 papers, drawn at random).

Usage: python3 scripts/ogbn_mag_like.py OUT_DIR   (plain python3; 20–40 s, 177 MB)"""
import gzip
import os
import random
import sys

TYPES = {"paper": 736389, "author": 1134649, "institution": 8740, "field_of_study": 59965}
RELATIONS = [
    ("author", "affiliated_with", "institution", 1043998),
    ("author", "writes", "paper", 7145660),
    ("paper", "cites", "paper", 5416271),
    ("paper", "has_topic", "field_of_study", 7505078),
]
SPLIT = (629571, 64879)  # train, valid; the rest of the papers is test


def gz(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.GzipFile(path, "wb", compresslevel=1, mtime=0) as f:
        for line in lines:
            f.write(line.encode())


def main():
    root = sys.argv[1]
    rng = random.Random(57)
    names = sorted(TYPES)
    header = ",".join(names) + "\n"
    flags = ",".join("True" if n == "paper" else "False" for n in names) + "\n"
    gz(f"{root}/raw/num-node-dict.csv.gz", [header, ",".join(str(TYPES[n]) for n in names) + "\n"])
    gz(f"{root}/raw/triplet-type-list.csv.gz", [f"{s},{r},{d}\n" for s, r, d, _ in RELATIONS])
    for s, r, d, m in RELATIONS:
        a, b = TYPES[s], TYPES[d]
        rel = f"{root}/raw/relations/{s}___{r}___{d}"
        gz(f"{rel}/edge.csv.gz", (f"{rng.randrange(a)},{rng.randrange(b)}\n" for _ in range(m)))
        gz(f"{rel}/num-edge-list.csv.gz", [f"{m}\n"])
    n = TYPES["paper"]
    gz(f"{root}/raw/node-feat/paper/node-feat.csv.gz",
       (",".join(f"{rng.random():.4f}" for _ in range(16)) + "\n" for _ in range(n)))
    gz(f"{root}/raw/nodetype-has-label.csv.gz", [header, flags])
    gz(f"{root}/raw/node-label/paper/node-label.csv.gz", (f"{rng.randrange(349)}\n" for _ in range(n)))
    ids = list(range(n))
    rng.shuffle(ids)
    tr, va = SPLIT
    split = f"{root}/split/time"
    gz(f"{split}/nodetype-has-split.csv.gz", [header, flags])
    for name, part in [("train", ids[:tr]), ("valid", ids[tr:tr + va]), ("test", ids[tr + va:])]:
        gz(f"{split}/paper/{name}.csv.gz", (f"{v}\n" for v in sorted(part)))


if __name__ == "__main__":
    main()
