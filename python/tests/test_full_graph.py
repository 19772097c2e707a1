"""The full graph for evaluation (issue 54 item 8): `Store.edge_index`, `Store.to_torch` and
`Store.to_pyg` against the store's own views (`csr`, `features_view`, `labels`, `split`).
The numpy part runs everywhere; the torch and PyG parts are skipped, with the reason, where
those packages are not installed (CI's venv has numpy only)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import saintflow as sf

NO_TORCH = "torch is not installed here (CI's venv has numpy only)"
NO_PYG = "torch_geometric is not installed here"


def csr_edge_index(store, graph):
    """`edge_index` by numpy from `csr()`: row of entry k repeated by degree, column k."""
    indptr, indices = store.csr(graph)
    rows = np.repeat(np.arange(store.n_nodes, dtype=np.int64), np.diff(indptr.astype(np.int64)))
    return np.stack([rows, indices.astype(np.int64)])


def test_edge_index_is_the_csr_entries_in_order(store):
    for graph in ("full", "train"):
        ei = store.edge_index(graph)
        assert ei.dtype == np.int64 and ei.shape == (2, len(store.csr(graph)[1]))
        assert ei.flags.c_contiguous and ei.flags.writeable  # a new array, the caller's
        np.testing.assert_array_equal(ei, csr_edge_index(store, graph))
    assert store.edge_index().shape[1] == store.n_edges


def test_edge_index_of_isolated_nodes_and_hubs(tmp_path):
    # Nodes without edges first and last, and a hub (node 1) whose row spans chunks of
    # the parallel fill (2^16 entries): each chunk finds its first row by a search.
    n = 70_000
    hub_edges = np.stack([np.ones(n - 3, dtype=np.int64), np.arange(2, n - 1, dtype=np.int64)])
    s = sf.Store.create(tmp_path / "h.sf", hub_edges, n_nodes=n, symmetrize=True)
    ei = s.edge_index()
    np.testing.assert_array_equal(ei, csr_edge_index(s, "full"))
    assert (ei[0, : n - 3] == 1).all()
    assert not (ei == 0).any() and not (ei == n - 1).any()  # isolated


def test_edge_index_and_to_torch_refuse_other_graph_names_and_a_closed_store(store):
    with pytest.raises(sf.StoreError, match='no graph named "tran": expected "full" or "train"'):
        store.edge_index("tran")
    store.close()
    with pytest.raises(sf.StoreError, match="closed"):
        store.edge_index()


def test_to_torch_is_the_store(store):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    n = store.n_nodes
    t = store.to_torch()
    assert set(t) == {"x", "y", "edge_index", "train_mask", "val_mask", "test_mask", "num_nodes"}
    assert t["num_nodes"] == n
    assert t["x"].dtype == torch.float32 and t["x"].shape == (n, store.n_features)
    np.testing.assert_array_equal(t["x"].numpy(), store.features(np.arange(n)))
    assert t["y"].dtype == torch.int64
    np.testing.assert_array_equal(t["y"].numpy(), store.labels(np.arange(n)))
    assert t["edge_index"].dtype == torch.int64
    np.testing.assert_array_equal(t["edge_index"].numpy(), csr_edge_index(store, "full"))
    for name in ("train", "val", "test"):
        m = t[f"{name}_mask"]
        assert m.dtype == torch.bool and m.shape == (n,)
        np.testing.assert_array_equal(np.flatnonzero(m.numpy()), store.split(name))


def test_to_torch_x_is_the_map_and_a_write_stays_private(store):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's read-only warning is not passed on
        x = store.to_torch()["x"]
    # The tensor's memory is a map of the store's features file: no copy was made.
    addr = x.data_ptr()
    with open("/proc/self/maps") as f:
        maps = [line.split() for line in f]
    (path,) = [m[5] for m in maps if len(m) > 5 and int(m[0].split("-")[0], 16) <= addr < int(m[0].split("-")[1], 16)]
    assert os.path.realpath(path).startswith(os.path.realpath(store.path))
    before = store.features([0, 1])
    x[0] += 1000.0  # copy-on-write: this process's page, not the store
    np.testing.assert_array_equal(store.features([0, 1]), before)
    np.testing.assert_array_equal(sf.Store.open(store.path).features([0, 1]), before)
    # The tensor keeps its map after the store is closed.
    store.close()
    assert float(x[1].sum()) == pytest.approx(float(before[1].sum()))
    assert torch.isfinite(x).all()


def test_to_torch_of_the_training_graph(tmp_path, graph_arrays):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    ei, x, y, roles = graph_arrays
    s = sf.Store.create(tmp_path / "i.sf", ei, x=x, y=y, roles=roles, symmetrize=True, train_graph="induce")
    t = s.to_torch("train")
    full = s.to_torch()
    assert t["edge_index"].shape[1] < full["edge_index"].shape[1]
    np.testing.assert_array_equal(t["edge_index"].numpy(), csr_edge_index(s, "train"))
    # Only the edges differ: every node, its features, labels and role are there.
    for k in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(t[k], full[k]), k
    assert t["num_nodes"] == s.n_nodes


def test_to_torch_of_a_multilabel_store(tmp_path, graph_arrays):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    ei, x, _, roles = graph_arrays
    n = x.shape[0]
    y = (np.random.default_rng(2).random((n, 5)) < 0.4).astype(np.float32)
    y[:, 0] = 1  # every node of the split labelled
    s = sf.Store.create(tmp_path / "m.sf", ei, x=x, y=y, roles=roles, symmetrize=True)
    t = s.to_torch()
    assert t["y"].dtype == torch.float32 and t["y"].shape == (n, 5)
    np.testing.assert_array_equal(t["y"].numpy(), y)
    np.testing.assert_array_equal(t["y"].numpy(), s.labels(np.arange(n)))


def test_to_pyg_is_a_data_of_the_whole_graph(store):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    pytest.importorskip("torch_geometric", reason=NO_PYG)
    from torch_geometric.data import Data

    d = store.to_pyg()
    assert isinstance(d, Data)
    d.validate(raise_on_error=True)
    assert d.num_nodes == store.n_nodes and d.num_edges == store.n_edges
    t = store.to_torch()
    for k in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(d[k], t[k]), k
    assert d.is_undirected()
    # A model trained on batches evaluates on it as on PyG's own Data.
    from torch_geometric.nn import GraphConv

    conv = GraphConv(store.n_features, store.n_classes, aggr="mean")
    with torch.no_grad():
        out = conv(d.x, d.edge_index)
    assert out.shape == (store.n_nodes, store.n_classes) and torch.isfinite(out).all()


def test_to_pyg_of_a_multilabel_store(tmp_path, graph_arrays):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    pytest.importorskip("torch_geometric", reason=NO_PYG)
    ei, x, _, roles = graph_arrays
    y = (np.random.default_rng(3).random((x.shape[0], 7)) < 0.3).astype(np.float32)
    y[:, 0] = 1
    d = sf.Store.create(tmp_path / "m.sf", ei, x=x, y=y, roles=roles, symmetrize=True).to_pyg()
    assert d.y.dtype == torch.float32 and tuple(d.y.shape) == y.shape
    assert torch.equal(d.y, torch.from_numpy(y))


def test_a_graph_beyond_the_memory_is_refused_naming_the_bytes(tmp_path):
    # A ring of 400 000 nodes: edge_index is 800 000 entries, 12.2 MiB; under an
    # address-space limit 4 MiB above what is mapped, both calls refuse before allocating.
    n = 400_000
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    s = sf.Store.create(tmp_path / "ring.sf", ring, symmetrize=True)
    code = textwrap.dedent(f"""
        import resource
        import saintflow as sf
        try:
            import torch
        except ImportError:
            torch = None
        s = sf.Store.open({str(s.path)!r})
        vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (4 << 20), resource.RLIM_INFINITY))
        calls = [("edge_index", s.edge_index)] + ([("to_torch", s.to_torch)] if torch else [])
        for name, call in calls:
            try:
                call()
                print(name, "no error")
            except MemoryError as e:
                print(name, "MemoryError", e)
        print("alive")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"status {r.returncode}: {r.stderr[-2000:]}"
    lines = r.stdout.splitlines()
    assert lines[-1] == "alive", r.stdout
    assert lines[0].startswith("edge_index MemoryError Store.edge_index: [2, 800000] int64: needs 12.2 MiB"), lines[0]
    assert "more than the memory this process may use" in lines[0]
    if len(lines) == 3:
        assert lines[1].startswith("to_torch MemoryError Store.to_torch: edge_index [2, 800000] int64 (12.2 MiB)"), lines[1]
        assert "the features are a map, not counted): needs" in lines[1]
