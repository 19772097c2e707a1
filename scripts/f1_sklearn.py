"""Cross-check of `saintflow eval-embedding` with scikit-learn (the protocol of DeepWalk /
node2vec: one-vs-rest logistic regression, top-k labels with k = the node's true count).
Usage: f1_sklearn.py EMB.npy CLASS_MAP.json RATIO [REPEATS]"""
import json, sys
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

emb = np.load(sys.argv[1])
cm = json.load(open(sys.argv[2]))
Y = np.zeros((emb.shape[0], len(next(iter(cm.values())))), dtype=int)
for k, v in cm.items():
    Y[int(k)] = v
ratio, reps = float(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 2
rng = np.random.default_rng(0)
mi, ma = [], []
for _ in range(reps):
    p = rng.permutation(emb.shape[0]); n = int(round(ratio * len(p)))
    tr, te = p[:n], p[n:]
    # One binary regression per label (a label absent from the training rows never wins).
    s = np.full((len(te), Y.shape[1]), -1e9)
    for c in range(Y.shape[1]):
        if 0 < Y[tr, c].sum() < len(tr):
            s[:, c] = LogisticRegression(C=1.0, max_iter=2000).fit(emb[tr], Y[tr, c]).decision_function(emb[te])
    pred = np.zeros_like(Y[te])
    for i, k in enumerate(Y[te].sum(1)):
        pred[i, np.argsort(-s[i])[:k]] = 1
    mi.append(f1_score(Y[te], pred, average="micro")); ma.append(f1_score(Y[te], pred, average="macro", zero_division=0))
print(f"ratio {ratio}: Micro-F1 {np.mean(mi):.4f}  Macro-F1 {np.mean(ma):.4f}")
