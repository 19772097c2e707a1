#!/usr/bin/env python3
"""Writes the shared Cora (GraphSAINT's format) as a typed graph in ogbn-mag's layout, for
`saintflow import ogb` (issue 57's acceptance): node types `paper` (the 2708 papers, with
their features, labels and the Planetoid split) and `word` (each of the 1433 vocabulary
words a node, without features); relations `paper___cites___paper` (each undirected edge
once, u < v) and `paper___has___word` (an entry where the paper's bag-of-words feature is
non-zero). The importer makes `cites` symmetric and adds `word rev_has paper`.

Usage: python3 scripts/cora_typed.py [CORA_DIR] -o OUT_DIR
CORA_DIR defaults to ../shared/data/cora beside the checkout. Plain python3: the .npy and
.npz files are read by hand (no numpy). Equal inputs give byte-identical files (gzip mtime 0).

Written (OUT_DIR/):
  raw/num-node-dict.csv.gz            paper,word / 2708,1433
  raw/triplet-type-list.csv.gz        paper,cites,paper / paper,has,word
  raw/relations/<src>___<rel>___<dst>/{edge.csv.gz,num-edge-list.csv.gz}
  raw/node-feat/paper/node-feat.csv.gz  feats.npy's rows (float32, 9 significant digits)
  raw/nodetype-has-label.csv.gz, raw/node-label/paper/node-label.csv.gz
  split/planetoid/nodetype-has-split.csv.gz, split/planetoid/paper/{train,valid,test}.csv.gz
"""
import argparse
import array
import ast
import gzip
import io
import json
import pathlib
import sys
import zipfile


def read_npy(data):
    """(descr, shape, values) of a C-order .npy's bytes; values an array.array."""
    if data[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy (no magic)")
    major = data[6]
    if major == 1:
        hlen, start = int.from_bytes(data[8:10], "little"), 10
    else:
        hlen, start = int.from_bytes(data[8:12], "little"), 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["fortran_order"]:
        raise ValueError("Fortran order")
    codes = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q", "<u4": "I"}
    descr = header["descr"]
    body = data[start + hlen:]
    if descr not in codes:
        return descr, header["shape"], body
    values = array.array(codes[descr])
    if values.itemsize != int(descr[2:]):
        raise ValueError(f"{descr}: this platform's array item size differs")
    values.frombytes(body)
    if sys.byteorder != "little":
        values.byteswap()
    return descr, header["shape"], values


def read_csr(path):
    """(indptr, indices, n) of a scipy CSR matrix saved with save_npz."""
    with zipfile.ZipFile(path) as z:
        members = {n[:-4]: read_npy(z.read(n)) for n in z.namelist()}
    fmt = members["format"][2]
    if bytes(fmt).strip(b"\0") != b"csr":
        raise ValueError(f"{path}: format {fmt!r}, expected csr")
    n = members["shape"][2][0]
    return members["indptr"][2], members["indices"][2], n


def write_gz(path, lines):
    """`lines` gzip-compressed to `path`, deterministic (mtime 0, no file name)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=6) as z:
        for line in lines:
            z.write(line.encode())
            z.write(b"\n")
    path.write_bytes(buf.getvalue())


def f32(x):
    """A float32 value as text that reads back to the same float32."""
    return "0" if x == 0 else format(x, ".9g")


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cora", nargs="?", default=str(root / ".." / "shared" / "data" / "cora"))
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    cora, out = pathlib.Path(a.cora), pathlib.Path(a.output)

    indptr, indices, n = read_csr(cora / "adj_full.npz")
    descr, shape, feats = read_npy((cora / "feats.npy").read_bytes())
    if descr != "<f4" or len(shape) != 2 or shape[0] != n:
        raise SystemExit(f"{cora / 'feats.npy'}: expected float32 ({n}, F), got {descr} {shape}")
    f = shape[1]
    class_map = json.loads((cora / "class_map.json").read_text())
    role = json.loads((cora / "role.json").read_text())

    raw = out / "raw"
    write_gz(raw / "num-node-dict.csv.gz", ["paper,word", f"{n},{f}"])
    write_gz(raw / "triplet-type-list.csv.gz", ["paper,cites,paper", "paper,has,word"])

    cites = [f"{u},{indices[j]}" for u in range(n)
             for j in range(indptr[u], indptr[u + 1]) if u < indices[j]]
    rel = raw / "relations" / "paper___cites___paper"
    write_gz(rel / "edge.csv.gz", cites)
    write_gz(rel / "num-edge-list.csv.gz", [str(len(cites))])

    has = [f"{p},{w}" for p in range(n) for w in range(f) if feats[p * f + w] != 0]
    rel = raw / "relations" / "paper___has___word"
    write_gz(rel / "edge.csv.gz", has)
    write_gz(rel / "num-edge-list.csv.gz", [str(len(has))])

    write_gz(raw / "node-feat" / "paper" / "node-feat.csv.gz",
             (",".join(f32(feats[p * f + w]) for w in range(f)) for p in range(n)))
    write_gz(raw / "nodetype-has-label.csv.gz", ["paper,word", "True,False"])
    write_gz(raw / "node-label" / "paper" / "node-label.csv.gz",
             [str(class_map[str(p)]) for p in range(n)])
    split = out / "split" / "planetoid"
    write_gz(split / "nodetype-has-split.csv.gz", ["paper,word", "True,False"])
    for name, key in [("train", "tr"), ("valid", "va"), ("test", "te")]:
        write_gz(split / "paper" / f"{name}.csv.gz", [str(v) for v in sorted(role[key])])
    print(f"{out}: paper {n} (F = {f}), word {f}; cites {len(cites)} edges, has {len(has)}; "
          f"split train {len(role['tr'])} / valid {len(role['va'])} / test {len(role['te'])}")


if __name__ == "__main__":
    main()
