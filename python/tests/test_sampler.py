import json
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import saintflow as sf


def induced(store, nodes, graph="train"):
    indptr, indices = store.csr(graph)
    n = store.n_nodes
    a = sp.csr_matrix((np.ones(len(indices)), indices.astype(np.int64), indptr.astype(np.int64)), shape=(n, n))
    return a[nodes][:, nodes].tocsr()


@pytest.mark.parametrize("kind,keys", [("rw", {"batch_size": 40, "walk_length": 2}),
                                       ("frontier", {"frontier": 20, "budget": 120}),
                                       ("edge", {"batch_size": 60}),
                                       ("node", {"batch_size": 100})])
def test_batches_are_induced_subgraphs_with_their_rows(store, kind, keys):
    s = sf.SaintSampler(store, kind, num_steps=5, threads=2, **keys)
    batches = list(s)
    assert len(batches) == 5 == len(s)
    assert any(not b.train_mask.all() for b in batches)
    for b in batches:
        assert np.all(np.diff(b.n_id) > 0)
        a = induced(store, b.n_id)
        np.testing.assert_array_equal(b.indptr, a.indptr)
        np.testing.assert_array_equal(b.indices, a.indices)
        rows = np.repeat(np.arange(b.num_nodes), np.diff(b.indptr))
        np.testing.assert_array_equal(b.edge_index, np.stack([rows, b.indices]))
        np.testing.assert_array_equal(b.x, store.features(b.n_id))
        np.testing.assert_array_equal(b.y, store.labels(b.n_id))
        np.testing.assert_array_equal(b.train_mask, store.roles()[b.n_id] == 1)
        # The training graph of Store.create is the full graph (issue 55): every role.
        assert b.num_nodes % 16 == 0  # clipped to a multiple of 16 by default
        assert b.edge_index.dtype == np.int64 and b.x.dtype == np.float32


def test_pyg_names_map_to_the_kinds_own(store):
    s = sf.SaintSampler(store, "rw", batch_size=10, walk_length=1, clip=1, num_steps=20)
    # 10 roots and one step each: at most 20 distinct nodes.
    assert max(b.num_nodes for b in s) <= 20
    with pytest.raises(sf.SampleError, match=r'the rw sampler has no parameter "budget" \(budget belongs to the frontier sampler\); its parameters: roots, depth'):
        sf.SaintSampler(store, "rw", budget=5)
    with pytest.raises(sf.SampleError, match="roots = -3: expected"):
        sf.SaintSampler(store, "rw", roots=-3)
    with pytest.raises(sf.SampleError, match='no sampler kind "walk"'):
        sf.SaintSampler(store, "walk")


def test_same_seed_same_batches_whatever_the_threads(store):
    a = [b.n_id for b in sf.SaintSampler(store, "rw", roots=30, seed=7, threads=1, num_steps=6)]
    b = [b.n_id for b in sf.SaintSampler(store, "rw", roots=30, seed=7, threads=2, num_steps=6)]
    c = [b.n_id for b in sf.SaintSampler(store, "rw", roots=30, seed=8, threads=2, num_steps=6)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_epochs_continue_the_run(store):
    s = sf.SaintSampler(store, "rw", roots=30, num_steps=3)
    e0 = [b.index for b in s]
    e1 = [b.index for b in s]
    assert e0 == [0, 1, 2] and e1 == [3, 4, 5]
    np.testing.assert_array_equal(s.subgraph(4).n_id, list(s.batches(4, 1))[0].n_id)


def test_batches_equal_the_cli_sampler(store, saintflow_bin):
    """The same seed gives the same subgraphs as `saintflow sample` (sizes per index)."""
    out = subprocess.run(
        [saintflow_bin, "sample", store.path, "--sampler", "rw", "--roots", "25", "--depth", "3",
         "--count", "8", "--seed", "11", "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    records = [json.loads(l) for l in out.splitlines() if l.strip()]
    records = [r for r in records if not r.get("summary")]
    s = sf.SaintSampler(store, "rw", roots=25, depth=3, seed=11, num_steps=8)
    got = [(b.index, b.num_nodes, b.num_edges // 2) for b in s]
    assert got == [(r["index"], r["nodes"], r["edges"]) for r in records]


def test_norms_are_pygs_from_the_presampled_counts(store):
    s = sf.SaintSampler(store, "rw", roots=20, depth=2, sample_coverage=10, num_steps=4)
    n_pre = s.pre_sampled
    assert n_pre >= 1
    # Count C_v and C_{u,v} ourselves over the pre-sampling's subgraphs.
    indptr, indices = store.csr("train")
    indptr = indptr.astype(np.int64)
    n, e = store.n_nodes, len(indices)
    node_count = np.zeros(n)
    edge_count = np.zeros(e)
    for i in range(n_pre):
        b = s.subgraph(i, seed=s.norm_seed)
        node_count[b.n_id] += 1
        # The parent entry of each local (row, col): position of col in row's list.
        for r in range(b.num_nodes):
            u = b.n_id[r]
            cols = b.n_id[b.indices[b.indptr[r]:b.indptr[r + 1]]]
            lo = indptr[u]
            pos = lo + np.searchsorted(indices[lo:indptr[u + 1]], cols)
            edge_count[pos] += 1
    np.testing.assert_array_equal(s.node_counts(), node_count)
    np.testing.assert_array_equal(s.edge_counts(), edge_count)
    for b in s:
        c = node_count[b.n_id]
        # PyG's num_samples counts subgraphs (num_steps per pass), not the nodes drawn.
        want_node = n_pre / np.where(c == 0, 0.1, c) / n
        np.testing.assert_allclose(b.node_norm, want_node, rtol=1e-6)
        rows = b.edge_index[0]
        u = b.n_id[rows]
        pos = np.array([indptr[a] + np.searchsorted(indices[indptr[a]:indptr[a + 1]], b.n_id[c_])
                        for a, c_ in zip(u, b.indices)], dtype=np.int64)
        c_uv = edge_count[pos].astype(np.float32)
        c_row = node_count[u].astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            want_edge = np.clip(c_row / c_uv, 0, 1e4)
        want_edge[np.isnan(want_edge)] = 0.1
        np.testing.assert_array_equal(b.edge_norm, want_edge)


def test_norms_equal_pygs_own_compute_norm_on_the_same_subgraphs(store):
    # PyG's GraphSAINTSampler._compute_norm itself, fed the node sets of our pre-sampling
    # (one pass of n_pre steps), must give our node_norm and edge_norm.
    pytest.importorskip("torch_sparse")
    torch = pytest.importorskip("torch")
    from torch_geometric.data import Data
    from torch_geometric.loader import GraphSAINTSampler

    s = sf.SaintSampler(store, "rw", roots=20, depth=2, sample_coverage=10, num_steps=3)
    n_pre = s.pre_sampled
    sets = [s.subgraph(i, seed=s.norm_seed).n_id for i in range(n_pre)]
    indptr, indices = store.csr("train")
    indptr = indptr.astype(np.int64)
    rows = np.repeat(np.arange(store.n_nodes), np.diff(indptr))
    data = Data(edge_index=torch.from_numpy(np.stack([rows, indices.astype(np.int64)])),
                num_nodes=store.n_nodes)

    class Ours(GraphSAINTSampler):
        def __init__(self, *a, **k):
            self.queue = list(sets)
            super().__init__(*a, **k)

        def _sample_nodes(self, batch_size):
            return torch.from_numpy(self.queue.pop(0))

    # Coverage just under what one pass draws, so PyG makes exactly one pass.
    cover = sum(len(v) for v in sets) / store.n_nodes * (1 - 1e-9)
    pyg = Ours(data, batch_size=1, num_steps=n_pre, sample_coverage=cover, log=False)
    assert not pyg.queue
    for b in s:
        np.testing.assert_allclose(b.node_norm, pyg.node_norm.numpy()[b.n_id], rtol=1e-6)
        u = b.n_id[b.edge_index[0]]
        pos = np.array([indptr[a] + np.searchsorted(indices[indptr[a]:indptr[a + 1]], b.n_id[c])
                        for a, c in zip(u, b.indices)], dtype=np.int64)
        np.testing.assert_allclose(b.edge_norm, pyg.edge_norm.numpy()[pos], rtol=1e-6)


def test_no_coverage_no_norms(store):
    b = next(iter(sf.SaintSampler(store, "rw", roots=20, sample_coverage=0, num_steps=1)))
    assert b.node_norm is None and b.edge_norm is None


def test_batch_arrays_are_moved_not_copied(store):
    b = next(iter(sf.SaintSampler(store, "rw", roots=20, num_steps=1)))
    for a in (b.n_id, b.edge_index, b.x, b.y, b.node_norm, b.edge_norm):
        # Memory allocated by Rust and handed to numpy: the base is the buffer's owner,
        # which hands it back for a later batch once numpy frees every view of it.
        assert not a.flags.owndata
        owner = a.base if a.base is not None and type(a.base).__name__ == "BatchBuffer" else a.base.base
        assert type(owner).__name__ == "BatchBuffer"
        assert a.flags.writeable  # the batch is the consumer's to change


@pytest.mark.parametrize("threads", [1, 3])
def test_recycled_buffers_hold_each_batch_alone(store, threads):
    # Batches dropped as the loop goes (their buffers recycled into later batches, larger
    # or smaller) equal the same subgraphs drawn alone; arrays kept, and a view kept
    # after its batch is gone, are never written over by later batches.
    s = sf.SaintSampler(store, "node", batch_size=60, num_steps=16, threads=threads, seed=3)
    kept, view, view_copy = [], None, None
    for i, b in enumerate(s):
        alone = s.subgraph(b.index)
        for k in ("n_id", "indptr", "edge_index", "x", "y", "roles", "node_norm", "edge_norm"):
            np.testing.assert_array_equal(getattr(b, k), getattr(alone, k), err_msg=f"{k} of batch {i}")
        if i % 5 == 0:
            kept.append((b, b.x.copy(), b.edge_norm.copy()))
        if i == 2:
            view, view_copy = b.x[1:4], b.x[1:4].copy()
        if i % 5 != 0 and i != 2:
            b.x[:] = -7.0  # the consumer's to change; the next batch must not see it
    for b, x, e in kept:
        np.testing.assert_array_equal(b.x, x)
        np.testing.assert_array_equal(b.edge_norm, e)
    np.testing.assert_array_equal(view, view_copy)


def test_full_graph_and_default_steps(store):
    s = sf.SaintSampler(store, "rw", graph="full", roots=50)
    # Default steps: the training nodes covered once in expectation.
    assert s.num_steps >= 1
    b = next(iter(s))
    a = induced(store, b.n_id, graph="full")
    np.testing.assert_array_equal(b.indices, a.indices)
    assert (~b.train_mask).any()  # the full graph reaches other nodes


def test_to_torch_and_to_pyg_share_the_batch_memory(store):
    torch = pytest.importorskip("torch", reason="torch is not installed here (CI's venv has numpy only)")
    b = next(iter(sf.SaintSampler(store, "rw", roots=20, num_steps=1)))
    t = b.to_torch()
    assert t["x"].data_ptr() == b.x.__array_interface__["data"][0]  # no copy
    assert t["edge_index"].dtype == torch.int64 and t["train_mask"].dtype == torch.bool
    pytest.importorskip("torch_geometric", reason="torch_geometric is not installed here")
    d = b.to_pyg()
    assert d.num_nodes == b.num_nodes and d.edge_index.shape == (2, b.num_edges)
    assert torch.equal(d.node_norm, torch.from_numpy(b.node_norm))
    assert torch.equal(d.edge_norm, torch.from_numpy(b.edge_norm))


@pytest.fixture
def typed_store(tmp_path, saintflow_bin):
    """A typed Kronecker store (3 node types, the first with 4 features and labels, the
    others without; a relation per type pair and its reverse), made by the command line."""
    path = tmp_path / "typed.sf"
    subprocess.run(
        [saintflow_bin, "gen", "kronecker", "--scale", "9", "--degree", "6", "--types", "3",
         "--features", "4", "--planted", "-o", str(path), "-q"],
        check=True,
    )
    return sf.Store.open(path)


def test_homogeneous_batches_have_no_types(store):
    b = next(iter(sf.SaintSampler(store, "rw", roots=20, depth=2, num_steps=1, sample_coverage=0)))
    assert b.hetero is None
    with pytest.raises(ValueError, match="homogeneous"):
        b.to_hetero()


@pytest.mark.parametrize("kind, keys", [
    ("rw", dict(roots=40, depth=2)),
    ("node", dict(budget=120)),
    ("typed_node", dict(budgets={"t0": 60, "t2": 30})),
    ("typed_edge", dict(budgets={"r0_1": 30, "r2_2": 20})),
    ("typed_rw", dict(roots=30, root_types=["t1"])),
])
def test_typed_batches_come_by_node_type_and_relation(typed_store, kind, keys):
    """Issue 57 item 4: each type's rows are a contiguous range of the batch, its nodes of
    that type, its features the store's rows at the type's own width; every relation's
    entries, in the two types' own local ids, are entries of the batch between them, the
    relations together are every entry of the batch, and each carries its entry's
    edge_norm."""
    info = typed_store.info()["types"]
    ntypes = [t["name"] for t in info["node_types"]]
    sampler = sf.SaintSampler(typed_store, kind, graph="full", num_steps=4, sample_coverage=20, **keys)
    for b in sampler:
        h = b.hetero
        assert h["node_types"] == ntypes
        starts = h["type_starts"]
        assert starts[0] == 0 and starts[-1] == b.num_nodes and np.all(np.diff(starts) >= 0)
        for k, t in enumerate(info["node_types"]):
            ids = b.n_id[starts[k]:starts[k + 1]]
            lo, hi = t["ids"]
            assert h["type_ids"][k] == lo
            assert np.all((ids >= lo) & (ids < hi)), t["name"]
            assert h["labelled"][k] == t["labelled"]
            if t["features"]:
                # The store's own section (docs/FORMAT.md: row k is node start(t) + k).
                raw = np.fromfile(typed_store.path / f"type{k}.features.f32", dtype=np.float32)
                rows = raw.reshape(t["nodes"], t["features"])[ids - lo]
                np.testing.assert_array_equal(h["x"][k], rows)
            else:
                assert h["x"][k] is None
        edges = {(int(i), int(j)): e for e, (i, j) in enumerate(b.edge_index.T)}
        seen = set()
        assert [tuple(et) for et in h["edge_types"]] == [
            (r["src"], r["name"], r["dst"]) for r in info["relations"]
        ]
        for k, (src, _, dst) in enumerate(h["edge_types"]):
            s, d = ntypes.index(src), ntypes.index(dst)
            ei = h["edge_index"][k]
            # Relation k's entries in the store (rel<k>: row i is node start(src) + i).
            off = np.fromfile(typed_store.path / f"rel{k}.offsets.u64", dtype=np.uint64).astype(np.int64)
            col = np.fromfile(typed_store.path / f"rel{k}.indices.u32", dtype=np.uint32)
            s0 = info["node_types"][s]["ids"][0]
            rel = {(s0 + i, int(c)) for i in range(len(off) - 1) for c in col[off[i]:off[i + 1]]}
            ns, nd = b.n_id[starts[s]:starts[s + 1]], b.n_id[starts[d]:starts[d + 1]]
            pairs = {(int(ns[i]), int(nd[j])) for i, j in ei.T}
            assert len(pairs) == ei.shape[1] and pairs <= rel, (src, dst)
            # Every entry of r between the batch's nodes is there (the induced subgraph).
            members = set(ns.tolist()), set(nd.tolist())
            assert pairs == {(u, v) for u, v in rel if u in members[0] and v in members[1]}
            assert ei.shape[0] == 2 and ei.dtype == np.int64
            assert np.all(ei[0] < starts[s + 1] - starts[s]) and np.all(ei[1] < starts[d + 1] - starts[d])
            for e, (i, j) in enumerate(ei.T):
                local = (int(i) + int(starts[s]), int(j) + int(starts[d]))
                assert local in edges, (src, dst, local)
                seen.add(local)
                assert h["edge_norm"][k][e] == b.edge_norm[edges[local]]
        assert seen == set(edges), "the relations cover every entry of the batch"


def test_typed_kinds_take_budgets_by_name(typed_store):
    """The typed samplers' budgets name node types and relations (a dict, or a flag's
    text): a type not named has no node in a batch, and a name the store lacks is an
    error with the nearest name."""
    for budgets in ({"t0": 60, "t2": 30}, "t0=60,t2=30"):
        sampler = sf.SaintSampler(typed_store, "typed_node", graph="full", num_steps=3, budgets=budgets)
        for b in sampler:
            starts = b.hetero["type_starts"]
            assert starts[2] - starts[1] == 0 and starts[1] > 0 and starts[3] > starts[2]
    with pytest.raises(sf.SampleError, match=r"no node type `t5`.*did you mean"):
        sf.SaintSampler(typed_store, "typed_node", graph="full", budgets={"t0": 5, "t5": 1})
    with pytest.raises(sf.SampleError, match=r"no relation `r0_3`"):
        sf.SaintSampler(typed_store, "typed_edge", graph="full", budgets={"r0_3": 5})
    with pytest.raises(sf.SampleError, match=r"budgets"):
        sf.SaintSampler(typed_store, "typed_node", graph="full", budgets={"t0": -1})


def test_typed_batches_are_heterodata(typed_store):
    torch = pytest.importorskip("torch", reason="torch is not installed here (CI's venv has numpy only)")
    pytest.importorskip("torch_geometric", reason="torch_geometric is not installed here")
    b = next(iter(sf.SaintSampler(typed_store, "rw", graph="full", roots=40, depth=2, num_steps=1)))
    data = b.to_hetero()
    assert data.validate()
    h = b.hetero
    for k, name in enumerate(h["node_types"]):
        assert data[name].num_nodes == h["type_starts"][k + 1] - h["type_starts"][k]
        assert torch.equal(data[name].n_id, torch.from_numpy(b.n_id[h["type_starts"][k]:h["type_starts"][k + 1]] - h["type_ids"][k]))
    labelled = [n for n, lab in zip(h["node_types"], h["labelled"]) if lab]
    assert labelled and all(data[n].y.shape[0] == data[n].num_nodes for n in labelled)
    assert set(data.edge_types) == {tuple(et) for et in h["edge_types"]}
    for et in data.edge_types:
        assert data[et].edge_norm.shape[0] == data[et].edge_index.shape[1]
