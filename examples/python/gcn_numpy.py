"""Reproduces saintflow's Cora predictions for plans/gcn.toml with numpy alone (issue 32).

The weights come from `saintflow export` as .safetensors, read with `safetensors.numpy`;
the graph, features and split from the GraphSAINT-format dataset directory itself (not
from saintflow's store). The model is the plan's:

    Z = Â · relu(Â · X · W0) · W1,   Â = (I + D)^-1/2 (I + A) (I + D)^-1/2

over the full graph (A binary, symmetric, no self loops: what `saintflow import` keeps),
dropout off. The result is compared with the logits `saintflow embed --logits` wrote:
the argmax must agree on every test node and the logits within 1e-4.

    python gcn_numpy.py MODEL.safetensors DATASET_DIR LOGITS.npy

Exit status 0 when they agree, 1 otherwise.
"""

import json
import sys

import numpy as np
from safetensors.numpy import load_file


def normalized_adjacency(path):
    """Â of the dataset's adj_full.npz (scipy's CSR layout, read without scipy)."""
    z = np.load(path)
    n = int(z["shape"][0])
    indptr, indices = z["indptr"], z["indices"]
    a = np.zeros((n, n))
    rows = np.repeat(np.arange(n), np.diff(indptr))
    a[rows, indices] = 1.0
    a = np.maximum(a, a.T)
    np.fill_diagonal(a, 0.0)
    d = 1.0 / np.sqrt(1.0 + a.sum(axis=1))
    return (a + np.eye(n)) * d[:, None] * d[None, :]


def main(model, data, logits_path):
    w = load_file(model)
    w0, w1 = w["W0"].astype(np.float64), w["W1"].astype(np.float64)
    a = normalized_adjacency(f"{data}/adj_full.npz")
    x = np.load(f"{data}/feats.npy").astype(np.float64)
    z = a @ np.maximum(a @ x @ w0, 0.0) @ w1
    theirs = np.load(logits_path)
    test = np.array(json.load(open(f"{data}/role.json"))["te"])
    labels = json.load(open(f"{data}/class_map.json"))
    y = np.array([labels[str(v)] for v in test])
    ours_pred, their_pred = z[test].argmax(axis=1), theirs[test].argmax(axis=1)
    diff = np.abs(z - theirs).max()
    agree = int((ours_pred == their_pred).sum())
    print(f"numpy: test accuracy {(ours_pred == y).mean():.4f}; saintflow: {(their_pred == y).mean():.4f}")
    print(f"argmax agrees on {agree} of {len(test)} test nodes; max |logit difference| {diff:.2e}")
    return 0 if agree == len(test) and diff <= 1e-4 else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
