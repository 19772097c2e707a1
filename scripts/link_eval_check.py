#!/usr/bin/env python3
"""Issue 52: an independent recomputation of `saintflow eval-link`'s CN and AA figures on a
store's test set, from the section files alone (pure Python, no numpy): brute-force AUC
over all (positive, negative pair) pairs, scikit-learn's step-wise AP, OGB's rank
1 + (#neg > pos + #neg >= pos) / 2 for MRR and Hits@20, and ogbl-collab's pool Hits@20.
Usage: scripts/link_eval_check.py STORE.sf"""
import struct, math, sys
d = sys.argv[1]
def u32(f): b=open(f"{d}/{f}","rb").read(); return list(struct.unpack(f"<{len(b)//4}I", b))
def u64(f): b=open(f"{d}/{f}","rb").read(); return list(struct.unpack(f"<{len(b)//8}Q", b))
off, idx = u64("train.offsets.u64"), u32("train.indices.u32")
nb = [set(idx[off[i]:off[i+1]]) for i in range(len(off)-1)]
pos = u32("link.test.pos.u32"); neg = u32("link.test.neg.u32"); pairs = u32("link.test.negpairs.u32")
E = len(pos)//2; K = len(neg)//E
for name, w in [("cn", lambda x: 1.0), ("aa", lambda x: 1/math.log(len(nb[x])))]:
    s = lambda u, v: sum(w(x) for x in nb[u] & nb[v])
    P = [s(pos[2*i], pos[2*i+1]) for i in range(E)]
    N = [s(pairs[2*i], pairs[2*i+1]) for i in range(E)]
    auc = sum((p > n) + 0.5*(p == n) for p in P for n in N) / (E*E)
    # AP as sklearn: thresholds descending
    lab = sorted([(p,1) for p in P] + [(n,0) for n in N], key=lambda t: -t[0])
    ap=0; tp=fp=0; prev=0; i=0
    while i < len(lab):
        j=i
        while j < len(lab) and lab[j][0]==lab[i][0]: j+=1
        tp += sum(l for _,l in lab[i:j]); fp += (j-i) - sum(l for _,l in lab[i:j])
        r = tp/E; ap += (r-prev)*tp/(tp+fp); prev=r; i=j
    ranks=[]
    for i in range(E):
        u = pos[2*i]; t = [s(u, x) for x in neg[i*K:(i+1)*K]]
        ranks.append(1 + 0.5*(sum(q > P[i] for q in t) + sum(q >= P[i] for q in t)))
    mrr = sum(1/r for r in ranks)/E
    h20 = sum(r <= 20 for r in ranks)/E
    kth = sorted(N, reverse=True)[19]
    pool20 = sum(p > kth for p in P)/E
    print(f"{name}: AUC {auc:.4f} AP {ap:.4f} MRR {mrr:.4f} Hits@20 {h20:.4f} pool Hits@20 {pool20:.4f}")
