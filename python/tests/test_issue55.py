"""Issue 55 (reliability, fourth round), the Python package's items: processes (fork,
multiprocessing, a PyTorch DataLoader), views no writer can crash through, Ctrl-C, sizes
checked before allocating, bounded counts, ids as numpy takes them, Store.close, and
embed's output rule. A hang is a failure (every child and subprocess has a deadline); a
crash is a failure (what could crash runs in a subprocess whose exit status is checked)."""

import multiprocessing
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import saintflow as sf
from conftest import ROOT

GCN = ROOT / "plans" / "gcn.toml"
DEEPWALK = ROOT / "plans" / "deepwalk.toml"
HANG_S = 60


# ------------------------------------------------------------------ processes (item 11)

def _in_fork(tmp_path, fn):
    """Runs ``fn()`` in an ``os.fork()`` child and returns its result; a child that has not
    finished within HANG_S seconds is killed and the test fails."""
    out = tmp_path / f"child-{time.monotonic_ns()}.pickle"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            result = ("ok", fn())
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            result = ("raised", f"{type(e).__name__}: {e}")
        try:
            out.write_bytes(pickle.dumps(result))
        finally:
            os._exit(code)
    deadline = time.monotonic() + HANG_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung (killed after {HANG_S} s)")
        time.sleep(0.02)
    assert os.WIFEXITED(status), f"the forked child died: status {status}"
    kind, value = pickle.loads(out.read_bytes())
    assert kind == "ok", f"the forked child raised {value}"
    return value


def _ids(batches):
    return [b.n_id.tolist() for b in batches]


@pytest.mark.parametrize("kind,keys", [("rw", {"roots": 30}), ("edge", {"edges": 100}), ("frontier", {})])
def test_issue55_a_forked_child_samples_with_a_new_and_an_inherited_sampler(tmp_path, store, kind, keys):
    # The parent has used every pool first (the default thread count, a gather, a check):
    # the child inherited them without their threads and hung on its first sample.
    parent = sf.SaintSampler(store, kind, num_steps=4, seed=3, **keys)
    want = _ids(parent)
    store.features(np.arange(10))
    store.check()

    def child():
        fresh = sf.SaintSampler(sf.Store.open(store.path), kind, num_steps=4, seed=3, **keys)
        return {
            "fresh": _ids(fresh),
            "inherited": _ids(parent.batches(0, 4)),
            "indexed": [parent[i].n_id.tolist() for i in range(4)],
            "features": store.features(np.arange(10)).tolist(),
        }

    got = _in_fork(tmp_path, child)
    assert got["fresh"] == want and got["inherited"] == want and got["indexed"] == want
    assert got["features"] == store.features(np.arange(10)).tolist()


def test_issue55_an_epoch_started_before_a_fork_is_an_error_in_the_child_not_a_hang(tmp_path, store):
    s = sf.SaintSampler(store, "rw", roots=30, num_steps=6, threads=2)
    it = iter(s)
    next(it)

    def child():
        try:
            next(it)
        except sf.SampleError as e:
            return str(e)
        return "no error"

    msg = _in_fork(tmp_path, child)
    assert "before a fork" in msg and "iter(sampler)" in msg
    assert len(list(it)) == 5  # the parent's epoch goes on


_POOL_SAMPLER = None


def _draw(i):
    return _POOL_SAMPLER[i].n_id.tolist()


def _epoch(_):
    return _ids(_POOL_SAMPLER.batches(0, 5))


def test_issue55_a_fork_pool_of_two_workers_iterates_the_sampler(store):
    # What a DataLoader with num_workers=2 does, without torch: forked workers drawing
    # batches from a sampler the parent built (and used).
    global _POOL_SAMPLER
    _POOL_SAMPLER = sf.SaintSampler(store, "rw", roots=30, num_steps=5, seed=2)
    want = _ids(_POOL_SAMPLER)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            by_index = pool.map_async(_draw, range(5)).get(timeout=HANG_S)
            epochs = pool.map_async(_epoch, range(4)).get(timeout=HANG_S)
    finally:
        _POOL_SAMPLER = None
    assert by_index == want
    assert epochs == [want] * 4


def _draw_with(sampler, i):
    return sampler[i].n_id.tolist()


def test_issue55_a_sampler_pickles_for_spawn_workers(store):
    # `spawn` (and Python 3.14's default, `forkserver`) pickle the dataset to the worker.
    s = sf.SaintSampler(store, "rw", roots=30, num_steps=3, seed=9, threads=1)
    want = _ids(s)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.starmap_async(_draw_with, [(s, i) for i in range(3)]).get(timeout=HANG_S)
    assert got == want
    again = pickle.loads(pickle.dumps(s))
    assert _ids(again) == want and again.pre_sampled == s.pre_sampled
    np.testing.assert_array_equal(again.node_counts(), s.node_counts())


def test_issue55_torch_dataloader_with_two_workers_runs_to_completion(store):
    torch = pytest.importorskip("torch")
    s = sf.SaintSampler(store, "rw", roots=30, num_steps=6, seed=5)
    want = _ids(s)
    loader = torch.utils.data.DataLoader(s, batch_size=None, num_workers=2, collate_fn=lambda b: b,
                                         timeout=HANG_S, multiprocessing_context="fork")
    for _ in range(2):  # two epochs: workers started afresh each time
        got = [b.n_id.tolist() for b in loader]
        assert got == want
    t = next(iter(loader)).to_torch()
    assert t["x"].shape[0] == len(want[0])


def _run_python(code, timeout=HANG_S):
    """``code`` in a fresh interpreter (the package as this one imports it): its exit
    status and output; a crash is a status, not the test run's end."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_issue55_writing_through_any_view_neither_crashes_nor_changes_the_store(store):
    # torch.from_numpy ignores numpy's read-only flag; ctypes writes the same way without
    # torch. Through the store's read-only map this was a segmentation fault.
    before = {k: np.array(v) for k, v in (("x", store.features_view()), ("roles", store.roles()),
                                         ("indptr", store.csr()[0]), ("indices", store.csr("train")[1]))}
    r = _run_python(f"""
        import ctypes, numpy as np, saintflow as sf
        s = sf.Store.open({str(store.path)!r})
        views = {{"x": s.features_view(), "roles": s.roles(), "indptr": s.csr()[0],
                  "indices": s.csr("train")[1]}}
        for name, v in views.items():
            ctypes.memset(v.ctypes.data, 0x7f, 4)
            print(name, v.reshape(-1)[:1].view(np.uint8).tolist()[:1])
        print("alive")
    """)
    assert r.returncode == 0, f"status {r.returncode}: {r.stderr[-2000:]}"
    assert "alive" in r.stdout and r.stdout.count("[127]") == 4  # the writer sees its write
    again = sf.Store.open(store.path)
    again.check()  # every checksum: the files are as they were
    for k, v in (("x", again.features_view()), ("roles", again.roles()), ("indptr", again.csr()[0]),
                 ("indices", again.csr("train")[1])):
        np.testing.assert_array_equal(v, before[k])


def test_issue55_torch_writes_through_a_view_stay_private(store):
    torch = pytest.importorskip("torch")
    r = _run_python(f"""
        import warnings, torch, saintflow as sf
        warnings.simplefilter("ignore")
        s = sf.Store.open({str(store.path)!r})
        t = torch.from_numpy(s.features_view())
        t[0, 0] = 12345.0
        print(float(t[0, 0]), float(s.features(__import__("numpy").arange(1))[0, 0]) != 12345.0)
    """)
    assert r.returncode == 0, f"status {r.returncode}: {r.stderr[-2000:]}"
    assert r.stdout.split() == ["12345.0", "True"]


def _interrupt_after(code, seconds=1.0):
    """Runs ``code`` in a subprocess that sends itself SIGINT after ``seconds``; returns
    its output (it prints how it ended)."""
    r = _run_python(f"""
        import os, signal, threading, time
        import numpy as np, saintflow as sf
        # Python's own Ctrl-C handler, whatever the disposition inherited: a shell's
        # background job starts its children with SIGINT ignored, and Python then installs
        # none (these tests failed so when the suite ran as `cmd &`).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        {textwrap.indent(textwrap.dedent(code), ' ' * 8).strip()}
        threading.Timer({seconds}, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        try:
            run()
            print("finished", time.monotonic() - start)
        except KeyboardInterrupt:
            print("interrupted", time.monotonic() - start)
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.split()


def test_issue55_ctrl_c_stops_the_samplers_pre_sampling(tmp_path):
    out = _interrupt_after(f"""
        rng = np.random.default_rng(0)
        n = 20000
        ei = rng.integers(0, n, (2, 10 * n))
        store = sf.Store.create({str(tmp_path / "big.sf")!r}, ei, x=np.zeros((n, 1), np.float32),
                                y=np.zeros(n, np.int64), roles=np.ones(n, np.uint8), symmetrize=True)
        def run():
            sf.SaintSampler(store, "rw", roots=10, walk_length=2, sample_coverage=10000)
    """)
    assert out[0] == "interrupted" and float(out[1]) < 30, out  # (a loaded machine: seconds; unstopped: the whole run)


def test_issue55_ctrl_c_stops_eval_embedding(store):
    out = _interrupt_after(f"""
        store = sf.Store.open({str(store.path)!r})
        emb = np.random.default_rng(0).normal(size=(store.n_nodes, 64)).astype(np.float32)
        def run():
            sf.eval_embedding(emb, store, ratios=[0.1, 0.5, 0.9] * 20, repeats=1000)
    """)
    assert out[0] == "interrupted" and float(out[1]) < 30, out  # (a loaded machine: seconds; unstopped: the whole run)


# ------------------------------------------------------------------ sizes (item 3)

def test_issue55_sizes_beyond_the_memory_raise_memory_error_and_the_interpreter_lives(tmp_path, store):
    # Under an address-space limit, as the campaign ran: each of these aborted the process.
    r = _run_python(f"""
        import resource
        import numpy as np, saintflow as sf
        s = sf.Store.open({str(store.path)!r})
        unused = {str(tmp_path / "unused.sf")!r}
        ids = np.zeros(5 * 10**7, dtype=np.int64)
        vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), resource.RLIM_INFINITY))
        for name, call in [
            ("features", lambda: s.features(ids)),
            ("walk_length", lambda: sf.SaintSampler(s, "rw", batch_size=10, walk_length=10**12)),
            ("roots", lambda: sf.SaintSampler(s, "rw", roots=10**15)),
            ("create", lambda: sf.Store.create(unused, np.array([[0, 1], [1, 0]]), n_nodes=4 * 10**9)),
            ("edge_to_4e9", lambda: sf.Store.create(unused, np.array([[0, 4 * 10**9], [4 * 10**9, 0]]))),
        ]:
            try:
                call()
                print(name, "no error")
            except MemoryError as e:
                print(name, "MemoryError", str(e).replace(" ", "_")[:200])
        print("alive")
    """)
    assert r.returncode == 0, f"status {r.returncode}: {r.stderr[-2000:]}"
    lines = r.stdout.splitlines()
    assert lines[-1] == "alive"
    for name in ("features", "walk_length", "roots", "create", "edge_to_4e9"):
        line = next(l for l in lines if l.startswith(name + " "))
        assert line.split()[1] == "MemoryError", line
    assert "memory_this_process_may_use" in r.stdout
    assert not (tmp_path / "unused.sf").exists()


def test_issue55_sizes_that_cannot_be_are_value_errors(tmp_path, store):
    with pytest.raises(ValueError, match=r"n_nodes = 4294967296: expected at most 4294967295"):
        sf.Store.create(tmp_path / "a.sf", np.array([[0, 1], [1, 0]]), n_nodes=2**32)
    with pytest.raises(ValueError, match="n_nodes = -1"):
        sf.Store.create(tmp_path / "a.sf", np.array([[0, 1], [1, 0]]), n_nodes=-1)
    with pytest.raises(TypeError, match="n_nodes = 4000000000.0: expected an integer"):
        sf.Store.create(tmp_path / "a.sf", np.array([[0, 1], [1, 0]]), n_nodes=4e9)
    assert not (tmp_path / "a.sf").exists()
    with pytest.raises(ValueError, match="memory_mib"):
        sf.train(sf.Plan.load(DEEPWALK), store, memory_mib=2**50, progress=False)


def _square(x):
    return x * x


def _square_grad(x, g):
    return 2 * x * g


@pytest.mark.parametrize("cols,err", [(0, ValueError), (257, ValueError), (10**12, ValueError), (-1, ValueError),
                                      (2.5, TypeError)])
def test_issue55_check_op_gradients_cols_is_bounded(cols, err):
    sf.register_op("py.sq55", _square, _square_grad)
    with pytest.raises(err, match="cols"):
        sf.check_op_gradients("py.sq55", cols=cols)
    sf.check_op_gradients("py.sq55", cols=2)  # and a real width still checks


# ------------------------------------------------------------------ counts (item 5, 9)

@pytest.mark.parametrize("args,match", [
    ({"threads": 0}, r"threads = 0: expected 1 \.\.="),
    ({"threads": 10**6}, r"threads = 1000000: expected at most"),
    ({"num_steps": 0}, "num_steps = 0: expected at least 1"),
    ({"sample_coverage": 1e12}, r"sample_coverage = 1000000000000: expected 0 \.\.= 10000"),
    ({"sample_coverage": float("nan")}, "sample_coverage = NaN"),
    ({"threads": -2}, "threads = -2"),
])
def test_issue55_sampler_counts_are_bounded(store, args, match):
    start = time.monotonic()
    with pytest.raises(ValueError, match=match):
        sf.SaintSampler(store, "rw", roots=30, **args)
    assert time.monotonic() - start < 5


def test_issue55_threads_zero_is_refused_everywhere_as_by_the_cli(store):
    emb = np.zeros((store.n_nodes, 4), np.float32) + 1
    with pytest.raises(ValueError, match="threads = 0"):
        sf.eval_embedding(emb, store, threads=0)
    with pytest.raises(ValueError, match="threads = 0"):
        sf.train(GCN, store, epochs=1, threads=0, progress=False)
    with pytest.raises(ValueError, match="threads = 0"):
        sf.train(sf.Plan.load(DEEPWALK), store, threads=0, progress=False)
    with pytest.raises(sf.TrainError, match="repeats = 5000: expected 1 ..= 1000"):
        sf.eval_embedding(emb, store, repeats=5000)
    with pytest.raises(sf.TrainError, match="ratios: 101 fractions, expected 1 ..= 100"):
        sf.eval_embedding(emb, store, ratios=[0.5] * 101)


def test_issue55_subgraph_indices_past_the_end_are_errors_not_wraps(store):
    s = sf.SaintSampler(store, "rw", roots=30, num_steps=3)
    with pytest.raises(ValueError, match="past the last subgraph index"):
        list(s.batches(2**64 - 2, 5))
    with pytest.raises(IndexError):
        s[-1]
    with pytest.raises(TypeError):
        s[1.5]


# ------------------------------------------------------------------ ids (item 9)

@pytest.mark.parametrize("ids,match", [
    ([1.5, 2.5], "dtype float64, expected integers"),
    (np.array([1.0, 2.0]), "dtype float64, expected integers"),
    (np.array([[1, 2], [3, 4]]), r"shape \(2, 2\), expected a 1-D array"),
    (7, r"shape \(\), expected a 1-D array"),
    ([0, -1], r"ids\[1\] = -1 is out of range for 600 nodes"),
    ([599, 600], r"ids\[1\] = 600 is out of range for 600 nodes"),
    (np.array([2**63], dtype=np.uint64), r"ids\[0\] = 9223372036854775808 is out of range"),
    (np.ones(5, dtype=bool), "a boolean mask of 5 entries, expected one per node"),
    (np.array(["1"]), "dtype <U1, expected integers"),
])
def test_issue55_ids_are_node_ids_as_numpy_indexes_rows(store, ids, match):
    for call in (store.features, store.labels):
        with pytest.raises(sf.NodeIdError, match=match) as e:
            call(ids)
        assert isinstance(e.value, IndexError) and isinstance(e.value, sf.StoreError)


def test_issue55_integer_ids_of_any_dtype_and_boolean_masks_select_rows(store):
    x = np.array(store.features_view())
    for dtype in (np.int8, np.uint16, np.int32, np.uint64, np.int64):
        np.testing.assert_array_equal(store.features(np.array([3, 1], dtype=dtype)), x[[3, 1]])
    mask = np.zeros(store.n_nodes, dtype=bool)
    mask[[5, 9]] = True
    np.testing.assert_array_equal(store.features(mask), x[mask])
    np.testing.assert_array_equal(store.labels(mask), store.labels([5, 9]))
    assert store.features([]).shape == (0, store.n_features)


# ------------------------------------------------------------------ close (item 9)

def test_issue55_a_closed_store_raises_and_what_it_handed_out_stays_valid(store):
    view = store.features_view()
    indptr, _ = store.csr()
    s = sf.SaintSampler(store, "rw", roots=30, num_steps=2)
    want = np.array(view)
    store.close()
    assert store.closed
    for call in (lambda: store.n_nodes, lambda: store.features([0]), lambda: store.split("train"),
                 lambda: store.features_view(), lambda: store.check(), lambda: store.info(),
                 lambda: sf.SaintSampler(store, "rw", roots=30)):
        with pytest.raises(sf.StoreError, match="the store is closed"):
            call()
    store.close()  # twice: nothing
    assert repr(store) == "Store(closed)"
    np.testing.assert_array_equal(view, want)
    assert indptr[-1] > 0
    assert len(list(s)) == 2


def test_issue55_a_store_is_a_context_manager(store):
    with sf.Store.open(store.path) as s:
        assert s.n_nodes == 600 and not s.closed
    assert s.closed
    with pytest.raises(sf.StoreError, match="closed"):
        s.features([0])


# ------------------------------------------------------------------ embed's output (item 2)

@pytest.fixture
def checkpoint(tmp_path, store):
    ck = tmp_path / "ck.bin"
    sf.train(GCN, store, epochs=1, seed=1, checkpoint=ck, progress=False)
    return ck


def test_issue55_embed_output_follows_the_clis_rule(tmp_path, store, checkpoint):
    plan = tmp_path / "gcn.toml"
    shutil.copy(GCN, plan)
    out = tmp_path / "emb.npy"
    out.write_bytes(b"a file of the user's")
    with pytest.raises(sf.SaintflowError, match="exists; pass force=True to replace it"):
        sf.embed(plan, store, checkpoint, output=out)
    # force=True replaces what saintflow wrote there, never a file of the user's (the CLI's
    # --force, one guard for both).
    with pytest.raises(sf.SaintflowError, match="exists and is not a .npy file"):
        sf.embed(plan, store, checkpoint, output=out, force=True)
    assert out.read_bytes() == b"a file of the user's"
    out.unlink()
    first = sf.embed(plan, store, checkpoint, output=out)
    e = sf.embed(plan, store, checkpoint, output=out, force=True)
    assert e.shape[0] == store.n_nodes and np.load(out).shape == e.shape
    np.testing.assert_array_equal(first, e)
    plan_bytes, ck_bytes = plan.read_bytes(), checkpoint.read_bytes()
    for target, match in ((plan, "is the file plan"), (checkpoint, "is the file checkpoint"),
                          (store.path / "header.sf", "inside the graph store")):
        with pytest.raises(sf.SaintflowError, match=match):
            sf.embed(plan, store, checkpoint, output=target, force=True)
    assert plan.read_bytes() == plan_bytes and checkpoint.read_bytes() == ck_bytes
    store.check()
    link = tmp_path / "link.npy"
    link.symlink_to(tmp_path / "elsewhere.npy")
    (tmp_path / "dir.npy").mkdir()
    for target, kind in ((link, "a symbolic link"), (tmp_path / "dir.npy", "a directory"),
                         (os.devnull, "a character device")):
        with pytest.raises(sf.SaintflowError, match=f"exists and is {kind}"):
            sf.embed(plan, store, checkpoint, output=target, force=True)
    assert not (tmp_path / "elsewhere.npy").exists() and os.path.exists(os.devnull)


def test_issue55_an_embedding_plans_output_follows_the_same_rule(tmp_path, store):
    out = tmp_path / "e.npy"
    out.write_bytes(b"keep me")
    small = {"embedding.dim": 8, "embedding.walk_length": 5, "embedding.window": 2}
    with pytest.raises(sf.SaintflowError, match="exists; pass force=True"):
        sf.train(sf.Plan.load(DEEPWALK, small), store, epochs=1, output=out, progress=False)
    with pytest.raises(sf.SaintflowError, match="exists and is not a .npy file"):
        sf.train(sf.Plan.load(DEEPWALK, small), store, epochs=1, output=out, force=True, progress=False)
    assert out.read_bytes() == b"keep me"
    out.unlink()
    sf.train(sf.Plan.load(DEEPWALK, small), store, epochs=1, output=out, progress=False)
    r = sf.train(sf.Plan.load(DEEPWALK, small), store, epochs=1, output=out, force=True, progress=False)
    assert r.embedding.shape == (store.n_nodes, 8) and np.load(out).shape == (store.n_nodes, 8)


# ------------------------------------------------------------------ the training graph (item 11)

def test_issue55_store_create_trains_on_the_full_graph_unless_induction_is_asked(tmp_path, graph_arrays):
    ei, x, y, _ = graph_arrays
    n = len(y)
    roles = np.zeros(n, np.uint8)  # a Planetoid-like split: 15 training nodes of 600
    roles[:15], roles[15:100], roles[100:200] = 1, 2, 3
    s = sf.Store.create(tmp_path / "t.sf", ei, x=x, y=y, roles=roles, symmetrize=True)
    for a, b in zip(s.csr("full"), s.csr("train")):
        np.testing.assert_array_equal(a, b)
    batches = list(sf.SaintSampler(s, "rw", roots=10, walk_length=2, num_steps=5))
    assert len({tuple(b.n_id) for b in batches}) == 5 and max(b.num_nodes for b in batches) > 15
    s.check()

    i = sf.Store.create(tmp_path / "i.sf", ei, x=x, y=y, roles=roles, symmetrize=True, train_graph="induce")
    indptr, indices = i.csr("train")
    rows = np.repeat(np.arange(n), np.diff(indptr).astype(np.int64))
    assert len(indices) < len(s.csr("train")[1]) / 10
    assert np.all(roles[rows] == 1) and np.all(roles[indices] == 1)
    i.check()
    with pytest.raises(ValueError, match='train_graph = \'given\': expected "full" or "induce"'):
        sf.Store.create(tmp_path / "g.sf", ei, train_graph="given")
    assert not (tmp_path / "g.sf").exists()


def test_issue55_store_create_never_writes_a_store_inside_a_store(tmp_path, graph_arrays):
    ei, x, y, _ = graph_arrays
    outer = sf.Store.create(tmp_path / "o.sf", ei, x=x, y=y, symmetrize=True)
    with pytest.raises(sf.SaintflowError, match="is inside the graph store"):
        sf.Store.create(tmp_path / "o.sf" / "inner.sf", ei, x=x, y=y, symmetrize=True)
    assert not (tmp_path / "o.sf" / "inner.sf").exists()
    outer.check()


def test_issue55_ctrl_c_stops_store_create_and_leaves_nothing(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    out = _interrupt_after(f"""
        rng = np.random.default_rng(0)
        n = 1_000_000
        ei = rng.integers(0, n, (2, 40_000_000))
        def run():
            sf.Store.create({str(work / "big.sf")!r}, ei, symmetrize=True)
    """, seconds=0.5)
    assert out[0] == "interrupted" and float(out[1]) < 30, out  # (a loaded machine: seconds; unstopped: the whole run)
    assert list(work.iterdir()) == []  # no store, no temporary store


def test_issue55_an_edge_to_a_huge_id_is_checked_like_n_nodes(tmp_path):
    with pytest.raises(ValueError, match=r"4294967296 nodes \(one past the largest id in the edges\): expected at most"):
        sf.Store.create(tmp_path / "a.sf", np.array([[0, 2**32 - 1], [2**32 - 1, 0]]))
    assert not (tmp_path / "a.sf").exists()


def test_issue55_train_log_follows_the_clis_rule(tmp_path, store):
    plan = tmp_path / "gcn.toml"
    shutil.copy(GCN, plan)
    log = tmp_path / "run.jsonl"
    log.write_text("an earlier run's log\n")
    with pytest.raises(sf.SaintflowError, match="exists; pass force=True to replace it"):
        sf.train(plan, store, epochs=1, log=log, progress=False)
    assert log.read_text() == "an earlier run's log\n"
    plan_text = plan.read_text()
    for target, match in ((plan, "is the file plan"), (tmp_path / "ck.bin", "is the file checkpoint"),
                          (store.path / "roles.u8", "inside the graph store")):
        with pytest.raises(sf.SaintflowError, match=match):
            sf.train(plan, store, epochs=1, log=target, checkpoint=tmp_path / "ck.bin", force=True, progress=False)
    assert plan.read_text() == plan_text
    store.check()
    with pytest.raises(sf.SaintflowError, match="exists and is not a training log"):
        sf.train(plan, store, epochs=1, log=log, force=True, progress=False)
    assert log.read_text() == "an earlier run's log\n"
    log.unlink()
    sf.train(plan, store, epochs=1, log=log, progress=False)
    sf.train(plan, store, epochs=1, log=log, force=True, progress=False)
    assert log.read_text().count('"kind":"run"') == 1
