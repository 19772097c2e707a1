"""Link batches (issue 52 item 5): LinkSampler's targets and negatives against the store's
own edges, exclusion, labels, GraphSAINT weights recomputed from the pre-sampling's counts,
determinism by seed, errors, the held-out split, and a torch GCN trained on the batches."""

import pickle
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import saintflow as sf


@pytest.fixture
def split_store(tmp_path, store):
    return store.split_edges(tmp_path / "split.sf", val=0.1, test=0.1, negatives=20, seed=3)


def adjacency(store, graph="train"):
    indptr, indices = store.csr(graph)
    n = store.n_nodes
    return sp.csr_matrix(
        (np.ones(len(indices)), indices.astype(np.int64), indptr.astype(np.int64)), shape=(n, n)
    )


def keys(n, u, v):
    """One int64 key per directed pair (u, v)."""
    return np.asarray(u, dtype=np.int64) * n + np.asarray(v, dtype=np.int64)


def edge_keys(store, graph="train"):
    indptr, indices = store.csr(graph)
    rows = np.repeat(np.arange(store.n_nodes), np.diff(indptr.astype(np.int64)))
    return keys(store.n_nodes, rows, indices)


def global_pairs(b, cols):
    """Columns `cols` of the batch's edge_label_index in global ids."""
    return b.n_id[b.edge_label_index[0, cols]], b.n_id[b.edge_label_index[1, cols]]


def test_batches_have_the_documented_shapes_and_dtypes(split_store):
    s = sf.LinkSampler(split_store, "edge", batch_size=80, negatives=3, targets=0.5,
                       exclude_targets=True, num_steps=4, threads=2)
    assert s.link == dict(targets=0.5, negatives=3, negative_sampler="uniform",
                          negative_ends="tail", exclude_true=False, exclude_targets=True)
    batches = list(s)
    assert len(batches) == 4
    for b in batches:
        assert isinstance(b, sf.LinkBatch) and isinstance(b, sf.Batch)
        p, k = b.num_positives, b.negatives
        assert k == 3 and p > 0
        assert b.edge_label_index.shape == (2, p * (1 + k)) and b.edge_label_index.dtype == np.int64
        assert b.edge_label.shape == (p * (1 + k),) and b.edge_label.dtype == np.float32
        np.testing.assert_array_equal(b.edge_label[:p], 1.0)
        np.testing.assert_array_equal(b.edge_label[p:], 0.0)
        assert b.edge_label_weight.shape == (p * (1 + k),) and b.edge_label_weight.dtype == np.float32
        assert b.edge_label_index.min() >= 0 and b.edge_label_index.max() < b.num_nodes
        # Negative j of positive i at P + i·K + j, with positive i's source.
        assert b.dst_neg_index.shape == (p, k)
        np.testing.assert_array_equal(b.neg_dst, b.dst_neg_index)
        np.testing.assert_array_equal(b.src_index, b.edge_label_index[0, :p])
        np.testing.assert_array_equal(b.dst_pos_index, b.edge_label_index[1, :p])
        np.testing.assert_array_equal(b.edge_label_index[0, p:].reshape(p, k), np.repeat(b.src_index[:, None], k, 1))
        np.testing.assert_array_equal(b.edge_label_index[1, p:].reshape(p, k), b.dst_neg_index)
        # Each positive once, smaller local id first.
        assert np.all(b.src_index < b.dst_pos_index)
        assert len(np.unique(keys(b.num_nodes, b.src_index, b.dst_pos_index))) == p


@pytest.mark.parametrize("kind,keys_", [("edge", {"batch_size": 80}), ("rw", {"roots": 40, "depth": 2}),
                                        ("node", {"budget": 150})])
@pytest.mark.parametrize("exclude", [True, False])
def test_positives_are_training_edges_and_leave_the_batch_only_when_excluded(split_store, kind, keys_, exclude):
    n = split_store.n_nodes
    train = edge_keys(split_store)
    held = np.concatenate([split_store.link_split(s).pos_edge_index for s in ("val", "test")], axis=1)
    held = np.concatenate([keys(n, held[0], held[1]), keys(n, held[1], held[0])])
    a = adjacency(split_store)
    s = sf.LinkSampler(split_store, kind, targets=0.5, exclude_targets=exclude, negatives=2,
                       num_steps=4, seed=5, **keys_)
    for b in s:
        p = b.num_positives
        assert p > 0
        u, v = global_pairs(b, slice(0, p))
        pos = keys(n, u, v)
        assert np.all(np.isin(pos, train)), "a positive that is not an edge of the training graph"
        assert not np.any(np.isin(pos, held)), "a held-out edge as a training positive"
        local = keys(b.num_nodes, b.edge_index[0], b.edge_index[1])
        fwd = keys(b.num_nodes, b.src_index, b.dst_pos_index)
        rev = keys(b.num_nodes, b.dst_pos_index, b.src_index)
        induced = a[b.n_id][:, b.n_id].tocoo()
        want = keys(b.num_nodes, induced.row, induced.col)
        if exclude:
            assert not np.any(np.isin(fwd, local)) and not np.any(np.isin(rev, local))
            # Exactly the targets left: the induced subgraph minus both directions.
            np.testing.assert_array_equal(np.sort(local), np.sort(np.setdiff1d(want, np.concatenate([fwd, rev]))))
        else:
            assert np.all(np.isin(fwd, local)) and np.all(np.isin(rev, local))
            np.testing.assert_array_equal(np.sort(local), np.sort(want))
        # indptr/indices are the same structure as edge_index.
        rows = np.repeat(np.arange(b.num_nodes), np.diff(b.indptr))
        np.testing.assert_array_equal(b.edge_index, np.stack([rows, b.indices]))
        if b.edge_norm is not None:
            assert len(b.edge_norm) == b.num_edges


def test_every_edge_is_a_positive_once_at_targets_one(split_store):
    s = sf.LinkSampler(split_store, "rw", roots=30, depth=2, num_steps=3)
    for b in s:
        induced = adjacency(split_store)[b.n_id][:, b.n_id].tocoo()
        upper = induced.row < induced.col
        want = np.sort(keys(b.num_nodes, induced.row[upper], induced.col[upper]))
        np.testing.assert_array_equal(np.sort(keys(b.num_nodes, b.src_index, b.dst_pos_index)), want)


@pytest.mark.parametrize("ends", ["tail", "both"])
@pytest.mark.parametrize("dist", ["uniform", "degree", "in_batch"])
def test_exclude_true_draws_negatives_that_are_no_edges(split_store, dist, ends):
    n = split_store.n_nodes
    train = edge_keys(split_store)

    def true_negatives(exclude_true):
        s = sf.LinkSampler(split_store, "full", negatives=5, negative_sampler=dist,
                           negative_ends=ends, exclude_true=exclude_true, num_steps=2, seed=2)
        hits = 0
        for b in s:
            p = b.num_positives
            u, w = global_pairs(b, slice(p, None))
            hits += int(np.sum(np.isin(keys(n, u, w), train) | (u == w)))
        return hits

    assert true_negatives(True) == 0
    # The check can fail: without exclusion the whole graph's negatives hit edges.
    assert true_negatives(False) > 0


def test_negative_ends_keep_the_source_or_draw_both(split_store):
    # "tail": negative j of positive i is (src_i, w); "both": (w1, w2), the source drawn too.
    for ends in ("tail", "both"):
        s = sf.LinkSampler(split_store, "full", negatives=4, negative_ends=ends, num_steps=2,
                           seed=3)
        same = total = 0
        for b in s:
            p, k = b.num_positives, b.negatives
            src = b.edge_label_index[0]
            same += int(np.sum(src[p:].reshape(p, k) == src[:p, None]))
            total += p * k
        if ends == "tail":
            assert same == total
        else:
            # Uniform sources over the graph's nodes: a few coincide by chance, no more.
            assert same < 0.05 * total, (same, total)
    with pytest.raises(sf.SampleError, match=r'no negative_ends "bth", did you mean `both`'):
        sf.LinkSampler(split_store, "rw", negative_ends="bth")


def test_weights_are_graphsaint_edge_normalisation(split_store):
    s = sf.LinkSampler(split_store, "edge", batch_size=60, negatives=4, targets=0.5,
                       exclude_targets=True, num_steps=3, sample_coverage=20, seed=9)
    counts = s.edge_counts()
    indptr, indices = split_store.csr("train")
    indptr = indptr.astype(np.int64)
    m = len(indices) / 2
    for b in s:
        p = b.num_positives
        u, v = global_pairs(b, slice(0, p))
        entry = np.array([indptr[a] + np.searchsorted(indices[indptr[a]:indptr[a + 1]], c) for a, c in zip(u, v)])
        assert np.all(indices[entry] == v)
        c = counts[entry].astype(np.float64)
        scale = s.pre_sampled / (0.5 * m)
        want = np.where(c == 0, scale * 10, scale / np.maximum(c, 1))
        np.testing.assert_allclose(b.pos_weight, want, rtol=1e-6)
        np.testing.assert_allclose(b.edge_label_weight[p:], np.repeat(b.pos_weight / 4, 4), rtol=1e-6)
    # Without pre-sampling (or on the whole graph) there is no weight to give.
    assert sf.LinkSampler(split_store, "edge", batch_size=60, sample_coverage=0, num_steps=1)[0].edge_label_weight is None
    assert sf.LinkSampler(split_store, "full", num_steps=1)[0].edge_label_weight is None


def test_same_seed_same_batches(split_store):
    def run(seed, threads):
        s = sf.LinkSampler(split_store, "rw", roots=30, depth=2, negatives=3, targets=0.5,
                           exclude_targets=True, negative_sampler="degree", seed=seed,
                           threads=threads, num_steps=5)
        return list(s)

    a, b, c = run(7, 1), run(7, 2), run(8, 2)
    fields = ("n_id", "edge_index", "edge_label_index", "edge_label", "edge_label_weight", "x")
    for x, y in zip(a, b):
        for f in fields:
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f), err_msg=f)
    assert not all(np.array_equal(x.edge_label_index, y.edge_label_index) for x, y in zip(a, c))
    # Subgraph i alone is batch i of the run; pickled, the sampler gives the same.
    s = sf.LinkSampler(split_store, "rw", roots=30, depth=2, negatives=3, targets=0.5,
                       exclude_targets=True, negative_sampler="degree", seed=7, num_steps=5)
    np.testing.assert_array_equal(s.subgraph(3).edge_label_index, a[3].edge_label_index)
    np.testing.assert_array_equal(s[4].edge_index, a[4].edge_index)
    t = pickle.loads(pickle.dumps(s))
    assert type(t) is sf.LinkSampler and t.link == s.link
    np.testing.assert_array_equal(t[2].edge_label_index, a[2].edge_label_index)


def test_default_epoch_scores_every_edge_once_in_expectation(split_store):
    s = sf.LinkSampler(split_store, "edge", batch_size=100, targets=0.5, exclude_targets=True)
    positives = sum(b.num_positives for b in s)
    m = split_store.n_edges / 2
    assert 0.7 * m < positives < 1.4 * m, (positives, m, len(s))
    assert len(sf.LinkSampler(split_store, "full")) == 1


def test_bad_input_is_refused_with_a_clear_error(store, split_store):
    with pytest.raises(sf.StoreError, match="no link split.*split_edges.*require_split=False"):
        sf.LinkSampler(store, "rw", roots=10)
    b = sf.LinkSampler(store, "rw", roots=10, num_steps=1, require_split=False)[0]
    assert b.num_positives > 0
    with pytest.raises(sf.SampleError, match=r'no parameter "negativs", did you mean `negatives`'):
        sf.LinkSampler(split_store, "rw", negativs=3)
    with pytest.raises(sf.SampleError, match=r'no negative_sampler "uniformm", did you mean `uniform`'):
        sf.LinkSampler(split_store, "rw", negative_sampler="uniformm")
    with pytest.raises(ValueError, match=r"negatives = 0: .*1 \.\.= 65536"):
        sf.LinkSampler(split_store, "rw", negatives=0)
    with pytest.raises(ValueError, match=r"negatives = 70000"):
        sf.LinkSampler(split_store, "rw", negatives=70000)
    with pytest.raises(TypeError, match="negatives = 2.5"):
        sf.LinkSampler(split_store, "rw", negatives=2.5)
    for t in (0, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"targets = .*\(0, 1\]"):
            sf.LinkSampler(split_store, "rw", targets=t)
    with pytest.raises(ValueError, match="exclude_targets=True with targets=1.0 leaves no edge"):
        sf.LinkSampler(split_store, "rw", exclude_targets=True)
    with pytest.raises(TypeError, match="exclude_true = 'yes'"):
        sf.LinkSampler(split_store, "rw", exclude_true="yes")
    with pytest.raises(sf.SampleError, match="neg_sampling_ratio is PyG's.*negatives=K"):
        sf.LinkSampler(split_store, "rw", neg_sampling_ratio=2.0)
    with pytest.raises(sf.StoreError, match=r"no link split.*split-edges"):
        store.link_split("val")
    with pytest.raises(sf.StoreError, match=r'no held-out set "tset": expected "val" or "test", did you mean `test`'):
        split_store.link_split("tset")
    with pytest.raises(ValueError, match=r"val = 1.2: expected a fraction in \[0, 1\)"):
        store.split_edges(str(split_store.path) + ".x", val=1.2)
    with pytest.raises(ValueError, match="expected a sum below 1"):
        store.split_edges(str(split_store.path) + ".x", val=0.5, test=0.5)
    with pytest.raises(ValueError, match="negatives = 0"):
        store.split_edges(str(split_store.path) + ".x", negatives=0)
    with pytest.raises(sf.StoreError, match=r"candidate negatives .*expected K ≤ \d+"):
        store.split_edges(str(split_store.path) + ".x", negatives=1000)
    with pytest.raises(sf.SaintflowError, match="force"):
        store.split_edges(split_store.path, negatives=5)
    with pytest.raises(sf.SaintflowError, match="input"):
        store.split_edges(store.path, negatives=5, force=True)


def test_held_out_sets_are_out_of_the_graph_with_true_negatives(store, split_store):
    info = split_store.link_info()
    assert info["negatives"] == 20 and info["seed"] == 3 and not info["given"]
    assert store.link_info() is None and not store.has_link_split and split_store.has_link_split
    n = store.n_nodes
    before, after = edge_keys(store, "full"), edge_keys(split_store, "full")
    for name, e in (("val", info["n_val"]), ("test", info["n_test"])):
        h = split_store.link_split(name)
        assert h.pos_edge_index.shape == (2, e) and h.pos_edge_index.dtype == np.int64
        assert h.neg_dst.shape == (e, 20) and h.neg_dst.dtype == np.int64
        assert h.neg_edge_index.shape == (2, e) and h.negatives == 20 and h.num_positives == e
        u, v = h.pos_edge_index
        assert np.all(np.isin(keys(n, u, v), before)), "a held-out positive that is no edge of the input"
        assert not np.any(np.isin(keys(n, u, v), after)) and not np.any(np.isin(keys(n, v, u), after))
        tails = keys(n, np.repeat(u, 20), h.neg_dst.ravel())
        assert not np.any(np.isin(tails, before)) and np.all(np.repeat(u, 20) != h.neg_dst.ravel())
        assert not np.any(np.isin(keys(n, *h.neg_edge_index), before))
        assert h.edge_label_index.shape == (2, 2 * e)
        np.testing.assert_array_equal(h.edge_label, np.r_[np.ones(e), np.zeros(e)].astype(np.float32))
    m = store.n_edges // 2
    assert info["input_edges"] == m and split_store.n_edges // 2 == m - info["n_val"] - info["n_test"]


def test_split_edges_equals_the_command_line(tmp_path, store, split_store, saintflow_bin):
    out = tmp_path / "cli.sf"
    subprocess.run([saintflow_bin, "split-edges", store.path, "-o", str(out), "--val", "0.1", "--test", "0.1",
                    "--negatives", "20", "--seed", "3"], check=True, capture_output=True)
    cli = sf.Store.open(out)
    for name in ("val", "test"):
        a, b = cli.link_split(name), split_store.link_split(name)
        for f in ("pos_edge_index", "neg_dst", "neg_edge_index"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    for g in ("full", "train"):
        for x, y in zip(cli.csr(g), split_store.csr(g)):
            np.testing.assert_array_equal(x, y)


def test_to_torch_and_to_pyg_use_link_neighbor_loader_names(split_store):
    torch = pytest.importorskip("torch", reason="torch is not installed here (CI's venv has numpy only)")
    b = sf.LinkSampler(split_store, "edge", batch_size=60, negatives=2, targets=0.5,
                       exclude_targets=True, num_steps=1)[0]
    t = b.to_torch()
    for k in ("edge_label_index", "edge_label", "edge_label_weight", "src_index", "dst_pos_index", "dst_neg_index",
              "edge_index", "x", "n_id"):
        np.testing.assert_array_equal(t[k].numpy(), getattr(b, k), err_msg=k)
    assert t["edge_label_index"].dtype == torch.int64 and t["edge_label"].dtype == torch.float32
    assert t["edge_label_index"].data_ptr() == b.edge_label_index.ctypes.data
    h = split_store.link_split("test").to_torch()
    assert h["edge_label_index"].shape[0] == 2 and h["neg_dst"].dtype == torch.int64
    pytest.importorskip("torch_geometric")
    d = b.to_pyg()
    for k in ("edge_label_index", "edge_label", "edge_label_weight", "src_index", "dst_pos_index", "dst_neg_index",
              "edge_index", "x", "n_id", "train_mask"):
        assert k in d, k
        np.testing.assert_array_equal(d[k].numpy(), getattr(b, k), err_msg=k)
    assert d.num_nodes == b.num_nodes
    d = sf.LinkSampler(split_store, "edge", batch_size=60, sample_coverage=0, num_steps=1)[0].to_pyg()
    assert "edge_label_weight" not in d and "edge_label" in d


def test_a_torch_gcn_learns_links_from_the_batches(split_store):
    """A 2-layer GCN (Â = D^-½(A + I)D^-½ per batch) with a dot decoder, trained on
    GraphSAINT link batches whose targets are out of message passing: the loss falls, and
    the held-out validation edges score above their stored negatives (AUC)."""
    torch = pytest.importorskip("torch", reason="torch is not installed here (CI's venv has numpy only)")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    f = split_store.n_features

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w0 = torch.nn.Linear(f, 32)
            self.w1 = torch.nn.Linear(32, 16)

        def forward(self, x, edge_index, n):
            loops = torch.arange(n)
            ei = torch.cat([edge_index, torch.stack([loops, loops])], 1)
            deg = torch.zeros(n).index_add_(0, ei[0], torch.ones(ei.shape[1]))
            val = (deg[ei[0]].rsqrt() * deg[ei[1]].rsqrt())[:, None]

            def propagate(h):  # Â·h: row i sums its entries (i, j) of h_j
                return torch.zeros_like(h).index_add_(0, ei[0], val * h[ei[1]])

            return propagate(self.w1(torch.relu(propagate(self.w0(x)))))

    model = GCN()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    s = sf.LinkSampler(split_store, "edge", batch_size=150, targets=0.5, exclude_targets=True,
                       negatives=2, exclude_true=True, num_steps=15, seed=4)
    bce = torch.nn.functional.binary_cross_entropy_with_logits

    def loss_of(t, n):
        z = model(t["x"], t["edge_index"], n)
        src, dst = t["edge_label_index"]
        score = (z[src] * z[dst]).sum(-1)
        return (t["edge_label_weight"] * bce(score, t["edge_label"], reduction="none")).sum()

    def auc():
        # The held-out validation edges against their negative pairs, on the whole
        # training graph.
        indptr, indices = split_store.csr("train")
        rows = np.repeat(np.arange(split_store.n_nodes), np.diff(indptr.astype(np.int64)))
        ei = torch.from_numpy(np.stack([rows, indices.astype(np.int64)]))
        with torch.no_grad():
            z = model(torch.from_numpy(split_store.features_view().copy()), ei, split_store.n_nodes)
        h = split_store.link_split("val").to_torch()
        pos = (z[h["pos_edge_index"][0]] * z[h["pos_edge_index"][1]]).sum(-1).numpy()
        neg = (z[h["neg_edge_index"][0]] * z[h["neg_edge_index"][1]]).sum(-1).numpy()
        return np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :])

    # The same batches scored before and after training (an epoch of the run is new
    # subgraphs, so their losses are not comparable one to one).
    held = [b.to_torch() | {"n": b.num_nodes} for b in s.batches(10_000, 10)]

    def held_loss():
        with torch.no_grad():
            return float(np.mean([float(loss_of(t, t["n"])) for t in held]))

    before, auc_before = held_loss(), auc()
    for _ in range(6):
        for b in s:
            loss = loss_of(b.to_torch(), b.num_nodes)
            opt.zero_grad()
            loss.backward()
            opt.step()
    after, auc_after = held_loss(), auc()
    assert after < 0.9 * before, (before, after)
    # An untrained GCN already scores neighbours alike (its features are smoothed over
    # them): training must still raise it.
    assert auc_after > 0.75 and auc_after > auc_before + 0.01, (auc_before, auc_after)
