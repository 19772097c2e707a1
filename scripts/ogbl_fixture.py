#!/usr/bin/env python3
"""Writes the tiny OGB link-property datasets of tests/import_ogb_link.rs (issue 52):

    tests/data/ogbl/collab/     ogbl-collab's layout: raw/edge.csv.gz (with a repeated
                                pair, as collab's years repeat), edge_weight, edge_year,
                                node-feat; split/time/{train,valid,test}.pt holding torch
                                tensors `edge`, `weight`, `year`, `edge_neg`
    tests/data/ogbl/citation2/  ogbl-citation2's layout: split/time/*.pt holding numpy
                                arrays (as OGB's DatasetSaver writes them) `source_node`,
                                `target_node`, `target_node_neg`
    tests/data/ogbl/pt/         single .pt files of the reader's other paths: a numpy array
                                long enough to stay in the pickle (latin-1 text with bytes
                                above 0x7f), pickle protocol 3 (BINBYTES), a transposed
                                (strided) tensor, a view at an offset, int32

The .pt files are written by real torch.save (the bytes the Rust reader must accept), and
each is loaded back by torch.load to check it. The files are checked in, so `cargo test`
needs no Python; rerun this only to regenerate them:

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install numpy torch
    /tmp/tv/bin/python scripts/ogbl_fixture.py tests/data/ogbl

The graph (8 nodes, the training edges) and the held-out sets are small enough that the
test computes common neighbours and its AUC, AP, MRR and Hits@K by hand:

    0-1 0-2 1-2 1-3 2-3 3-4 4-5 5-6 6-7 4-6
    valid positives (0,3) (5,7)   test positives (2,4) (4,7)
"""

import gzip
import os
import sys

import numpy as np
import torch

EDGES = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (4, 6)]
N = 8


def gz(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # mtime=0: the same bytes on every run.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write("".join(line + "\n" for line in lines).encode())


def save(obj, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(obj, path)
    back = torch.load(path, weights_only=False)
    assert back.keys() == obj.keys(), path
    for k in obj:
        a, b = np.asarray(obj[k]), np.asarray(back[k])
        assert a.shape == b.shape and (a == b).all(), (path, k)


def raw(root, edges, extra):
    gz(f"{root}/raw/edge.csv.gz", [f"{u},{v}" for u, v in edges])
    gz(f"{root}/raw/num-node-list.csv.gz", [str(N)])
    gz(f"{root}/raw/num-edge-list.csv.gz", [str(len(edges))])
    gz(f"{root}/raw/node-feat.csv.gz", [f"{0.5 * v},{1.0 - 0.25 * v}" for v in range(N)])
    for name, lines in extra.items():
        gz(f"{root}/raw/{name}", lines)


def collab(root):
    # The pair 0-1 twice (two years), as collab repeats a pair once per year.
    edges = EDGES + [(1, 0)]
    years = [2010 + i % 8 for i in range(len(edges))]
    raw(root, edges, {
        "edge_weight.csv.gz": ["1"] * len(edges),
        "edge_year.csv.gz": [str(y) for y in years],
    })
    t = lambda x: torch.tensor(x, dtype=torch.int64)
    split = f"{root}/split/time"
    save({"edge": t(edges), "weight": t([1] * len(edges)), "year": t(years)}, f"{split}/train.pt")
    save({"edge": t([[0, 3], [5, 7]]), "weight": t([1, 2]), "year": t([2018, 2018]),
          "edge_neg": t([[0, 7], [1, 6], [2, 5]])}, f"{split}/valid.pt")
    # Test negatives: (7, 3) reversed (stored as (3, 7)), (3, 4) a true edge (kept: OGB's
    # pool is random pairs and its evaluator counts them all as negatives).
    save({"edge": t([[2, 4], [4, 7]]), "weight": t([1, 1]), "year": t([2019, 2019]),
          "edge_neg": t([[0, 5], [7, 3], [3, 4], [1, 4]])}, f"{split}/test.pt")


def citation2(root):
    raw(root, EDGES, {"node_year.csv.gz": [str(2000 + v) for v in range(N)]})
    a = lambda x: np.array(x, dtype=np.int64)
    split = f"{root}/split/time"
    src, dst = zip(*EDGES)
    save({"source_node": a(src), "target_node": a(dst)}, f"{split}/train.pt")
    save({"source_node": a([0, 5]), "target_node": a([3, 7]),
          "target_node_neg": a([[4, 5, 6], [0, 1, 2]])}, f"{split}/valid.pt")
    # Row 1's tails hold 3, a true edge of source 4 (kept as given).
    save({"source_node": a([2, 4]), "target_node": a([4, 7]),
          "target_node_neg": a([[5, 7, 6], [1, 3, 0]])}, f"{split}/test.pt")


def pt_cases(root):
    """Each holds key `a`; tests/import_ogb_link.rs knows the values."""
    big = (np.arange(700, dtype=np.int64) * 977) % 70001  # 5,600 bytes, many above 0x7f
    save({"a": big}, f"{root}/numpy_big.pt")
    os.makedirs(root, exist_ok=True)
    torch.save({"a": np.arange(10, dtype=np.int64), "b": torch.arange(4)}, f"{root}/proto3.pt",
               pickle_protocol=3)
    assert (torch.load(f"{root}/proto3.pt", weights_only=False)["a"] == np.arange(10)).all()
    t = torch.arange(6, dtype=torch.int64).reshape(2, 3).t()  # (3, 2), stride (1, 3)
    assert t.stride() == (1, 3)
    save({"a": t}, f"{root}/strided.pt")
    save({"a": torch.arange(10, dtype=torch.int64)[3:7]}, f"{root}/offset.pt")
    save({"a": torch.tensor([-1, 0, 2**31 - 1], dtype=torch.int32)}, f"{root}/int32.pt")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/ogbl"
    collab(f"{out}/collab")
    citation2(f"{out}/citation2")
    pt_cases(f"{out}/pt")
    print(f"wrote {out}/collab and {out}/citation2 with torch {torch.__version__}")
