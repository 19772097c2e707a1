"""Reproduces saintflow's Cora predictions for plans/gcn_batchnorm.toml with numpy alone
(issue 58): the exported running statistics are what evaluation normalises with.

The weights and the BatchNorm's running statistics come from `saintflow export` as
.safetensors, read here without the safetensors package (the format is an 8-byte header
length, a JSON header, then the raw little-endian tensors); the graph, features and split
from the GraphSAINT-format dataset directory itself (not from saintflow's store). The
model is the plan's, in evaluation (dropout off, BatchNorm on its running statistics):

    H = A_hat . X . W0
    Z = A_hat . relu(gamma0 * (H - running_mean) / sqrt(running_var + eps) + beta0) . W1

with A_hat = (I + D)^-1/2 (I + A) (I + D)^-1/2 and the running statistics exported as
`batchnorm.0.running_mean` and `batchnorm.0.running_var`. The result is compared with the
logits `saintflow embed --logits` wrote: the argmax must agree on every test node and the
logits within 1e-4.

    python gcn_batchnorm_numpy.py MODEL.safetensors DATASET_DIR LOGITS.npy

Exit status 0 when they agree, 1 otherwise.
"""

import json
import struct
import sys

import numpy as np

EPS = 1e-5  # the plan's `eps` (PyTorch's default)


def load_safetensors(path):
    """Every tensor of a .safetensors file (F32 only, as saintflow writes) by name."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype="<f4").reshape(t["shape"])
    return out, header.get("__metadata__", {})


def normalized_adjacency(path):
    """A_hat of the dataset's adj_full.npz (scipy's CSR layout, read without scipy)."""
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
    w, meta = load_safetensors(model)
    state = json.loads(meta["state"])
    assert state == ["batchnorm.0.running_mean", "batchnorm.0.running_var"], state
    f = lambda k: w[k].astype(np.float64)
    w0, w1, gamma, beta = f("W0"), f("W1"), f("gamma0"), f("beta0")
    mean, var = f("batchnorm.0.running_mean"), f("batchnorm.0.running_var")
    a = normalized_adjacency(f"{data}/adj_full.npz")
    x = np.load(f"{data}/feats.npy").astype(np.float64)
    h = a @ x @ w0
    h = gamma * (h - mean) / np.sqrt(var + EPS) + beta
    z = a @ np.maximum(h, 0.0) @ w1
    theirs = np.load(logits_path)
    test = np.array(json.load(open(f"{data}/role.json"))["te"])
    labels = json.load(open(f"{data}/class_map.json"))
    y = np.array([labels[str(v)] for v in test])
    ours_pred, their_pred = z[test].argmax(axis=1), theirs[test].argmax(axis=1)
    diff = np.abs(z - theirs).max()
    agree = int((ours_pred == their_pred).sum())
    # Without the running statistics (batch statistics of the whole graph instead) the
    # logits differ: the check can tell the two apart.
    print(f"numpy: test accuracy {(ours_pred == y).mean():.4f}; saintflow: {(their_pred == y).mean():.4f}")
    print(f"argmax agrees on {agree} of {len(test)} test nodes; max |logit difference| {diff:.2e}")
    return 0 if agree == len(test) and diff <= 1e-4 else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
