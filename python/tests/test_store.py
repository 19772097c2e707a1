import os
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import saintflow as sf


def expected_csr(ei, n):
    """The store's graph by scipy: symmetrised, self loops and duplicates dropped, sorted."""
    a = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(np.int8).tolil()
    a.setdiag(0)
    a = a.tocsr()
    a.eliminate_zeros()
    a.sort_indices()
    return a


def test_round_trip_from_edge_index(tmp_path, graph_arrays):
    ei, x, y, roles = graph_arrays
    n = len(y)
    masks = {k: roles == r for k, r in (("train_mask", 1), ("val_mask", 2), ("test_mask", 3))}
    sf.Store.create(tmp_path / "g.sf", ei, x=x, y=y, symmetrize=True, **masks)
    s = sf.Store.open(tmp_path / "g.sf")
    assert (s.n_nodes, s.n_features, s.n_classes) == (n, x.shape[1], y.max() + 1)
    indptr, indices = s.csr()
    a = expected_csr(ei, n)
    np.testing.assert_array_equal(indptr, a.indptr)
    np.testing.assert_array_equal(indices, a.indices)
    assert s.n_edges == a.nnz
    np.testing.assert_array_equal(s.features(np.arange(n)), x)
    np.testing.assert_array_equal(s.features_view(), x)
    np.testing.assert_array_equal(s.labels(np.arange(n)), y)
    for name, r in (("train", 1), ("val", 2), ("test", 3)):
        np.testing.assert_array_equal(s.split(name), np.flatnonzero(roles == r))
    np.testing.assert_array_equal(s.roles(), roles)
    # The training graph is the full graph (transductive, the default: issue 55)...
    tp, ti = s.csr("train")
    np.testing.assert_array_equal(tp, a.indptr)
    np.testing.assert_array_equal(ti, a.indices)
    s.check()
    # ...or, asked for, induced on the training nodes.
    s = sf.Store.create(tmp_path / "i.sf", ei, x=x, y=y, symmetrize=True, train_graph="induce", **masks)
    tp, ti = s.csr("train")
    t = sp.csr_matrix((np.ones(len(ti)), ti.astype(np.int64), tp.astype(np.int64)), shape=(n, n))
    tr = roles == 1
    want = a[tr][:, tr]
    got = t[tr][:, tr]
    assert (want != got).nnz == 0 and t.nnz == want.nnz
    s.check()
    info = s.info()
    assert info["nodes"] == n if "nodes" in info else info["n_nodes"] == n


def test_round_trip_from_scipy_and_csr(tmp_path, graph_arrays):
    ei, x, y, roles = graph_arrays
    n = len(y)
    a = expected_csr(ei, n)
    s1 = sf.Store.create(tmp_path / "a.sf", a, x=x, y=y, roles=roles)
    s2 = sf.Store.create(tmp_path / "b.sf", indptr=a.indptr, indices=a.indices, x=x, y=y, roles=roles)
    for s in (s1, s2):
        p, i = s.csr()
        np.testing.assert_array_equal(p, a.indptr)
        np.testing.assert_array_equal(i, a.indices)


def test_multilabel_round_trip(tmp_path, graph_arrays):
    ei, x, _, roles = graph_arrays
    n = x.shape[0]
    rng = np.random.default_rng(1)
    y = (rng.random((n, 11)) < 0.3).astype(np.float32)
    y[:, 0] = 1  # every node labelled
    s = sf.Store.create(tmp_path / "m.sf", ei, x=x, y=y, roles=roles, symmetrize=True)
    assert s.multilabel and s.n_classes == 11
    np.testing.assert_array_equal(s.labels(np.arange(n)), y)


def test_views_are_zero_copy_and_read_only(store):
    indptr, indices = store.csr()
    for a in (indptr, indices, store.features_view(), store.roles()):
        assert not a.flags.owndata and not a.flags.writeable
        # The array's memory is a map of the store's file (copy-on-write: issue 55 item 11).
        assert type(a.base).__name__ == "SectionMap"
        with pytest.raises(ValueError):
            a[0] = 1
    # Each view maps the section's file again: the same bytes, no copy made.
    np.testing.assert_array_equal(indptr, store.csr()[0])
    assert indptr.dtype == np.uint64 and indices.dtype == np.uint32


def test_views_outlive_the_store_object(tmp_path, graph_arrays):
    ei, x, y, roles = graph_arrays
    sf.Store.create(tmp_path / "g.sf", ei, x=x, y=y, roles=roles, symmetrize=True)
    view = sf.Store.open(tmp_path / "g.sf").features_view()
    import gc

    gc.collect()
    np.testing.assert_array_equal(view, x)  # the map is kept alive by the view


def test_create_errors_name_the_argument(tmp_path, graph_arrays):
    ei, x, y, roles = graph_arrays
    bad = ei.copy()
    bad[0, 7] = 10_000
    with pytest.raises(sf.StoreError, match=r"edge_index\[0\]\[7\] = 10000 is out of range"):
        sf.Store.create(tmp_path / "e.sf", bad, n_nodes=len(y), symmetrize=True)
    with pytest.raises(sf.StoreError, match="not symmetric"):
        sf.Store.create(tmp_path / "e.sf", ei)
    with pytest.raises(sf.StoreError, match=r"x: 599 rows|x: \d+ values"):
        sf.Store.create(tmp_path / "e.sf", ei, x=x[:-1], symmetrize=True)
    y2 = y.copy()
    y2[np.flatnonzero(roles == 1)[0]] = -1
    with pytest.raises(sf.StoreError, match="in the split .* but has no label"):
        sf.Store.create(tmp_path / "e.sf", ei, y=y2, roles=roles, symmetrize=True)
    with pytest.raises(sf.StoreError, match="is in val_mask and an earlier mask"):
        m = roles == 1
        sf.Store.create(tmp_path / "e.sf", ei, y=y, train_mask=m, val_mask=m, symmetrize=True)
    xn = x.copy()
    xn[3, 2] = np.nan
    with pytest.raises(sf.StoreError, match=r"x: row 3, column 2 is not finite"):
        sf.Store.create(tmp_path / "e.sf", ei, x=xn, symmetrize=True)
    # Nothing that looks like a store is left by a refused write.
    assert not os.path.exists(tmp_path / "e.sf")
    assert [p for p in os.listdir(tmp_path)] == []


def test_create_refuses_to_replace_without_force(tmp_path, graph_arrays):
    ei, x, y, roles = graph_arrays
    sf.Store.create(tmp_path / "g.sf", ei, x=x, symmetrize=True)
    with pytest.raises(sf.StoreError, match="force"):
        sf.Store.create(tmp_path / "g.sf", ei, symmetrize=True)
    s = sf.Store.create(tmp_path / "g.sf", ei, symmetrize=True, force=True)
    assert s.n_features == 0


def test_create_with_edge_times_and_a_time_split(tmp_path, saintflow_bin):
    # A 5-ring with two chords, each edge once with a year: the latest edge {1, 3} is the
    # test set, the next latest {0, 2} the validation set (README's example).
    ei = np.array([[0, 1, 2, 3, 4, 0, 1, 1], [1, 2, 3, 4, 0, 2, 3, 0]])
    years = np.array([2015, 2016, 2017, 2018, 2019, 2020, 2021, 2010])
    s = sf.Store.create(tmp_path / "t.sf", ei, symmetrize=True, edge_time=years)
    s.check()
    info = s.info()
    # {0, 1} is given twice, in 2015 and as (1, 0) in 2010: it keeps 2010.
    assert info["edge_time"] == {"min": 2010, "max": 2021}
    subprocess.run(
        [saintflow_bin, "split-edges", "t.sf", "-o", "split.sf", "--val", "0.2", "--test", "0.2",
         "--negatives", "1", "--by-time"],
        cwd=tmp_path, check=True, capture_output=True,
    )
    link = sf.Store.open(tmp_path / "split.sf").info()["link"]
    assert link["kind"] == "time"
    assert link["by_time"] == {"kept": 0, "val_time": [2020, 2020], "test_time": [2021, 2021]}
    # The same split from Python: the held-out test edge is the latest, {1, 3}.
    py = s.split_edges(tmp_path / "py.sf", val=0.2, test=0.2, negatives=1, by_time=True)
    assert py.info()["link"]["by_time"] == link["by_time"]
    assert sorted(py.link_split("test").pos_edge_index[:, 0].tolist()) == [1, 3]
    with pytest.raises(sf.StoreError, match="edge time"):
        sf.Store.create(tmp_path / "n.sf", ei, symmetrize=True).split_edges(
            tmp_path / "n2.sf", val=0.2, test=0.2, negatives=1, by_time=True)
    assert not os.path.exists(tmp_path / "n2.sf")
    with pytest.raises(sf.StoreError, match="edge_time: 2 values for 8 entries"):
        sf.Store.create(tmp_path / "e.sf", ei, symmetrize=True, edge_time=years[:2])
    with pytest.raises(sf.StoreError, match="edge_time: expected integer times"):
        sf.Store.create(tmp_path / "e.sf", ei, symmetrize=True, edge_time=years * 0.5)
    assert not os.path.exists(tmp_path / "e.sf")


def test_open_errors(tmp_path):
    with pytest.raises(sf.StoreError, match="nope.sf"):
        sf.Store.open(tmp_path / "nope.sf")
    with pytest.raises(sf.StoreError) as e:
        sf.Store.open(tmp_path / "nope.sf")
    assert isinstance(e.value, sf.SaintflowError)


def test_ids_out_of_range(store):
    with pytest.raises(sf.StoreError, match=r"ids\[1\] = 600 is out of range for 600 nodes"):
        store.features([0, 600])
    with pytest.raises(sf.StoreError, match='no split named "training"'):
        store.split("training")


def test_missing_optional_packages_are_named(tmp_path, store):
    import importlib.util

    if importlib.util.find_spec("torch_geometric") is None:
        with pytest.raises(sf.SaintflowError, match="torch_geometric"):
            sf.Store.from_pyg(object(), tmp_path / "p.sf")
    if importlib.util.find_spec("dgl") is None:
        with pytest.raises(sf.SaintflowError, match="'dgl'"):
            sf.Store.from_dgl(object(), tmp_path / "d.sf")
