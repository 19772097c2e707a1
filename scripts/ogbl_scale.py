#!/usr/bin/env python3
"""A synthetic OGB link dataset at ogbl-citation2's per-set scale, for timing `import
ogb-link` (issue 52):

    /tmp/tv/bin/python scripts/ogbl_scale.py DIR [--nodes N] [--edges M] [--positives E]
        [--tails K] [--tensors]

writes DIR/raw/{edge,num-node-list,num-edge-list}.csv.gz and DIR/split/time/*.pt in
citation2's layout: `source_node`, `target_node` (E) and `target_node_neg` (E × K) per
held-out set, as numpy arrays (OGB's DatasetSaver; kept in the pickle as latin-1 text) or,
with --tensors, as torch tensors (storages beside the pickle). Needs numpy and torch (see
scripts/ogbl_fixture.py for the venv). Defaults: 1,000,000 nodes, 4,000,000 training
edges, 86,956 positives per set (citation2's test set) with 1,000 tails each.
"""

import argparse
import gzip
import os

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=4_000_000)
    ap.add_argument("--positives", type=int, default=86_956)
    ap.add_argument("--tails", type=int, default=1000)
    ap.add_argument("--tensors", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    n, m, e = a.nodes, a.edges, a.positives
    # Distinct undirected pairs u < v, the first 2e held out.
    want = m + 2 * e
    src = rng.integers(0, n, size=2 * want)
    dst = rng.integers(0, n, size=2 * want)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keep = lo != hi
    keys = np.unique(lo[keep].astype(np.int64) * n + hi[keep])
    rng.shuffle(keys)
    keys = keys[:want]
    assert len(keys) == want
    u, v = keys // n, keys % n
    os.makedirs(f"{a.dir}/raw", exist_ok=True)
    with gzip.open(f"{a.dir}/raw/edge.csv.gz", "wt", compresslevel=1) as f:
        np.savetxt(f, np.stack([u[2 * e:], v[2 * e:]], axis=1), fmt="%d", delimiter=",")
    for name, count in [("num-node-list", n), ("num-edge-list", m)]:
        with gzip.open(f"{a.dir}/raw/{name}.csv.gz", "wt") as f:
            f.write(f"{count}\n")
    split = f"{a.dir}/split/time"
    os.makedirs(split, exist_ok=True)
    conv = (lambda x: torch.from_numpy(np.ascontiguousarray(x))) if a.tensors else (lambda x: x)
    torch.save({"source_node": conv(u[2 * e:]), "target_node": conv(v[2 * e:])}, f"{split}/train.pt")
    for i, name in enumerate(["valid", "test"]):
        s = slice(i * e, (i + 1) * e)
        tails = rng.integers(0, n, size=(e, a.tails), dtype=np.int64)
        torch.save({"source_node": conv(u[s]), "target_node": conv(v[s]),
                    "target_node_neg": conv(tails)}, f"{split}/{name}.pt")
    print(f"wrote {a.dir}: {n} nodes, {m} edges, 2 x {e} positives x {a.tails} tails"
          f" as {'tensors' if a.tensors else 'numpy arrays'}")


if __name__ == "__main__":
    main()
