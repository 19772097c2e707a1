#!/usr/bin/env python3
"""Writes the README's "your own data" example (standard library only, seeded): a graph of
120 nodes in 3 planted classes, `edges.txt` (one `u v` pair per line, 70 % of the edges
inside a class), `features.npy` ([120, 8] float32: the class's centroid plus noise) and
`labels.npy` ([120] int64 class ids). Run from anywhere: the files go beside this script."""
import os
import random
import struct

N, C, F, DEGREE, HOMOPHILY = 120, 3, 8, 4, 0.7
HERE = os.path.dirname(os.path.abspath(__file__))


def npy(path, descr, shape, body):
    dims = "(%d,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(map(str, shape))
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + body)


def main():
    rng = random.Random(1)
    labels = [v % C for v in range(N)]
    by_class = [[v for v in range(N) if labels[v] == c] for c in range(C)]
    edges = set()
    for u in range(N):
        for _ in range(DEGREE // 2):
            pool = by_class[labels[u]] if rng.random() < HOMOPHILY else range(N)
            v = rng.choice(list(pool))
            if u != v:
                edges.add((min(u, v), max(u, v)))
    with open(os.path.join(HERE, "edges.txt"), "w") as f:
        f.write("# u v: an undirected edge per line (saintflow import edgelist --symmetrize)\n")
        for u, v in sorted(edges):
            f.write("%d %d\n" % (u, v))
    centroids = [[rng.gauss(0, 1) for _ in range(F)] for _ in range(C)]
    rows = [[centroids[labels[v]][k] + rng.gauss(0, 3.0) for k in range(F)] for v in range(N)]
    body = b"".join(struct.pack("<%df" % F, *r) for r in rows)
    npy(os.path.join(HERE, "features.npy"), "<f4", (N, F), body)
    npy(os.path.join(HERE, "labels.npy"), "<i8", (N,), struct.pack("<%dq" % N, *labels))


if __name__ == "__main__":
    main()
