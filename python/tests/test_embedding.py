import json
import subprocess

import numpy as np
import pytest

import saintflow as sf
from conftest import ROOT

DEEPWALK = ROOT / "plans" / "deepwalk.toml"
GCN = ROOT / "plans" / "gcn.toml"
SMALL = {"embedding.dim": 16, "embedding.walk_length": 10, "embedding.window": 3}


def test_deepwalk_from_python_is_the_clis_embedding(tmp_path, store, saintflow_bin):
    r = sf.train(sf.Plan.load(DEEPWALK, SMALL), store, epochs=20, seed=4, threads=1, progress=False)
    assert r.embedding.shape == (store.n_nodes, 16) and r.embedding.dtype == np.float32
    assert r.samples > 0 and r.workers == 1
    out = tmp_path / "cli.npy"
    subprocess.run(
        [saintflow_bin, "embed", str(DEEPWALK), "--graph", str(store.path), "-o", str(out), "--seed", "4",
         "--epochs", "20", "--threads", "1", "--quiet", "--memory", "256"]
        + [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")],
        check=True, capture_output=True,
    )
    np.testing.assert_array_equal(r.embedding, np.load(out))
    # Kept as a .npy when asked, mapped rather than loaded.
    kept = sf.train(sf.Plan.load(DEEPWALK, SMALL), store, epochs=20, seed=4, threads=1, progress=False,
                    output=tmp_path / "kept.npy")
    assert isinstance(kept.embedding, np.memmap)
    np.testing.assert_array_equal(kept.embedding, r.embedding)


def test_eval_embedding_is_the_clis(tmp_path, store, saintflow_bin):
    r = sf.train(sf.Plan.load(DEEPWALK, SMALL), store, epochs=200, seed=1, progress=False,
                 output=tmp_path / "e.npy")
    rows = sf.eval_embedding(r.embedding, store, ratios=[0.5], repeats=2)
    cli = subprocess.run(
        [saintflow_bin, "eval-embedding", str(tmp_path / "e.npy"), "--graph", str(store.path), "--ratios", "0.5",
         "--repeats", "2", "--json"], check=True, capture_output=True, text=True).stdout
    assert rows == json.loads(cli)["classification"]
    assert rows[0]["micro_f1"] > 0.8  # 4 planted classes: chance is 0.25


def test_eval_on_the_stores_split_is_the_clis(tmp_path, store, saintflow_bin):
    r = sf.train(sf.Plan.load(DEEPWALK, SMALL), store, epochs=200, seed=1, progress=False,
                 output=tmp_path / "e.npy")
    got = sf.eval_embedding(r.embedding, store, split="store")
    cli = subprocess.run(
        [saintflow_bin, "eval-embedding", str(tmp_path / "e.npy"), "--graph", str(store.path), "--split", "store",
         "--json"], check=True, capture_output=True, text=True).stdout
    assert got == json.loads(cli)["split"]
    assert got["train_nodes"] == len(store.split("train")) and got["accuracy"] > 0.8


def test_link_prediction_on_held_out_edges(store):
    r = sf.train(sf.Plan.load(DEEPWALK, SMALL), store, epochs=200, seed=1, progress=False, holdout=0.2)
    auc = sf.eval_embedding(r.embedding, store, holdout=0.2, seed=1)
    assert auc["held_out_edges"] > 0 and auc["auc"] > 0.65


def test_gnn_embed_is_the_clis(tmp_path, store, saintflow_bin):
    sf.train(GCN, store, epochs=5, checkpoint=tmp_path / "run/", progress=False)
    emb = sf.embed(GCN, store, tmp_path / "run")
    assert emb.shape == (store.n_nodes, 16)
    logits = sf.embed(GCN, store, tmp_path / "run", logits=True, output=tmp_path / "l.npy")
    assert logits.shape == (store.n_nodes, store.n_classes)
    out = tmp_path / "cli.npy"
    subprocess.run([saintflow_bin, "embed", str(GCN), "--graph", str(store.path), "--checkpoint",
                    str(tmp_path / "run"), "-o", str(out)], check=True, capture_output=True)
    np.testing.assert_array_equal(emb, np.load(out))


def test_embedding_errors(tmp_path, store):
    with pytest.raises(sf.TrainError, match="every value is 0"):
        sf.eval_embedding(np.zeros((store.n_nodes, 4), np.float32), store)
    with pytest.raises(sf.TrainError, match="3 rows, but .* has 600 nodes"):
        sf.eval_embedding(np.ones((3, 4), np.float32), store)
    with pytest.raises(sf.TrainError, match="ratios: 1.5 is not a fraction"):
        sf.eval_embedding(np.ones((store.n_nodes, 4), np.float32), store, ratios=[1.5])
    with pytest.raises(sf.TrainError, match="does not take checkpoint"):
        sf.train(DEEPWALK, store, checkpoint=tmp_path / "x")
    with pytest.raises(sf.TrainError, match="apply to \\[embedding\\] plans"):
        sf.train(GCN, store, output=tmp_path / "x.npy")
    with pytest.raises(sf.TrainError, match="missing.bin: cannot read"):
        sf.embed(GCN, store, tmp_path / "missing.bin")
    with pytest.raises(sf.TrainError, match="is trained, not evaluated"):
        sf.embed(DEEPWALK, store, tmp_path / "x")


CORA = ROOT.parent / "shared" / "data" / "cora"


@pytest.mark.skipif(not CORA.is_dir(), reason="../shared/data/cora is not beside the checkout")
def test_example_deepwalk_into_scikit_learn():
    """examples/python/deepwalk_sklearn.py: scikit-learn's F1 on saintflow's DeepWalk
    embedding agrees with saintflow's own evaluation of it."""
    import sys

    # The example needs scikit-learn (the `test` extra installs it; a venv without it skips).
    pytest.importorskip("sklearn")

    out = subprocess.run([sys.executable, str(ROOT / "examples/python/deepwalk_sklearn.py"), "--epochs", "200"],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    sk = float(out[1].split("Micro-F1")[1].split()[0])
    own = float(out[2].split("Micro-F1")[1].split()[0])
    assert sk > 0.55 and abs(sk - own) < 0.05, out
