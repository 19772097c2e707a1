"""Planetoid's raw files (ind.NAME.{x,y,tx,ty,allx,ally,graph,test.index}, as the Planetoid
authors published them: github.com/kimiyoung/planetoid, data/) to GraphSAINT's directory
format (adj_full.npz, adj_train.npz, feats.npy, class_map.json, role.json), with the
Planetoid split GCN and GAT report on: the first 20·C nodes train, the next 500 validation,
the test.index nodes test.

Citeseer's test.index has gaps (isolated test papers without features): the gaps become
nodes with zero features and no label, as GCN's loader does. Features are row-normalised
(GCN's and GAT's `preprocess_features`). The graph is symmetrised, self-loops dropped.

Usage: python planetoid_to_graphsaint.py RAW_DIR NAME OUT_DIR     (needs numpy, scipy)
"""
import json
import os
import pickle
import sys

import numpy as np
import scipy.sparse as sp


def load(raw, name, part):
    with open(os.path.join(raw, f"ind.{name}.{part}"), "rb") as f:
        return pickle.load(f, encoding="latin1")


def main(raw, name, out):
    x, y, tx, ty, allx, ally, graph = (
        load(raw, name, p) for p in ("x", "y", "tx", "ty", "allx", "ally", "graph")
    )
    test_index = [int(line) for line in open(os.path.join(raw, f"ind.{name}.test.index"))]
    lo, hi = min(test_index), max(test_index)
    n_test_slots = hi - lo + 1
    # Test rows placed at their ids; ids in the range without a row stay empty.
    tx_full = sp.lil_matrix((n_test_slots, tx.shape[1]), dtype=np.float32)
    ty_full = np.zeros((n_test_slots, ty.shape[1]), dtype=np.float32)
    order = np.argsort(test_index)
    for k in order:
        tx_full[test_index[k] - lo] = tx[k]
        ty_full[test_index[k] - lo] = ty[k]
    feats = sp.vstack([allx, tx_full.tocsr()]).tocsr().astype(np.float32)
    labels_1h = np.vstack([ally, ty_full])
    n = feats.shape[0]
    if max(graph) >= n:
        raise SystemExit(f"{name}: the graph names node {max(graph)}, beyond the {n} feature rows")

    rows, cols = [], []
    for u, vs in graph.items():
        for v in vs:
            if u != v:
                rows += [u, v]
                cols += [v, u]
    adj = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1.0  # an edge listed from both ends was summed: back to 0/1

    sums = np.asarray(feats.sum(1)).ravel()
    sums[sums == 0] = 1.0
    feats = sp.diags(1.0 / sums).dot(feats).toarray().astype(np.float32)

    n_classes = y.shape[1]
    train = list(range(20 * n_classes))
    val = list(range(len(y), len(y) + 500))
    test = sorted(test_index)
    has_label = labels_1h.sum(1) > 0
    class_map = {str(i): int(labels_1h[i].argmax()) for i in range(n) if has_label[i]}
    # Nodes without a label (Citeseer's gaps) get class 0 but no role: never trained or scored.
    for i in range(n):
        class_map.setdefault(str(i), 0)

    train_mask = np.zeros(n, bool)
    train_mask[train] = True
    adj_train = adj.multiply(train_mask[:, None]).multiply(train_mask[None, :]).tocsr()
    os.makedirs(out, exist_ok=True)
    sp.save_npz(os.path.join(out, "adj_full.npz"), adj)
    sp.save_npz(os.path.join(out, "adj_train.npz"), adj_train.astype(np.float32))
    np.save(os.path.join(out, "feats.npy"), feats)
    with open(os.path.join(out, "class_map.json"), "w") as f:
        json.dump(class_map, f)
    with open(os.path.join(out, "role.json"), "w") as f:
        json.dump({"tr": train, "va": val, "te": test}, f)
    print(f"{name}: {n} nodes, {adj.nnz // 2} undirected edges, {feats.shape[1]} features, "
          f"{n_classes} classes; train {len(train)}, val {len(val)}, test {len(test)}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
