import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import saintflow as sf
from conftest import ROOT

GCN = ROOT / "plans" / "gcn.toml"


def test_train_equals_the_cli_bit_for_bit(tmp_path, store, saintflow_bin):
    log_cli = tmp_path / "cli.jsonl"
    subprocess.run(
        [saintflow_bin, "train", str(GCN), "--graph", store.path, "--epochs", "6", "--seed", "3",
         "--log", str(log_cli), "--quiet"],
        check=True, capture_output=True, text=True,
    )
    cli = [json.loads(l) for l in log_cli.read_text().splitlines()]
    r = sf.train(str(GCN), store, epochs=6, seed=3, progress=False)
    steps = lambda recs: [x["loss"] for x in recs if x["kind"] == "step"]  # noqa: E731
    assert steps(r.records) == steps(cli) and len(r.losses) == 6
    test_cli = [x for x in cli if x["kind"] == "test"][0]
    assert r.test["accuracy"] == test_cli["test"]["accuracy"]
    assert r.best_epoch == test_cli["epoch"]
    assert [h["epoch"] for h in r.history] == list(range(1, 7))


def test_train_learns_and_overrides_apply(store):
    r = sf.train(GCN, store, epochs=30, seed=1, progress=False, overrides={"dims.hidden": 32})
    assert r.test["accuracy"] > 0.6  # planted classes: chance is 0.25
    assert r.losses[-1] < r.losses[0]


def test_model_keys_are_an_alias_of_dims_as_the_readme_says(store):
    # Issue 54 item 2: the alias lives in the plan layer, so Python has it as the CLI does.
    a = sf.train(sf.Plan.load(GCN, {"model.hidden": 8}), store, epochs=2, seed=3, progress=False)
    b = sf.train(sf.Plan.load(GCN, {"dims.hidden": 8}), store, epochs=2, seed=3, progress=False)
    c = sf.train(sf.Plan.load(GCN), store, epochs=2, seed=3, progress=False)
    assert a.losses == b.losses and a.losses != c.losses


def test_plan_errors_carry_their_position(tmp_path, store):
    bad = tmp_path / "bad.toml"
    bad.write_text(GCN.read_text().replace('kind = "adam"', 'kind = "adma"'))
    with pytest.raises(sf.PlanError) as e:
        sf.Plan.load(bad)
    err = e.value
    assert err.file == str(bad)
    lines = bad.read_text().splitlines()
    assert 'kind = "adma"' in lines[err.line - 1] and err.col >= 1
    assert "adam" in str(err)  # did you mean
    assert isinstance(err, sf.SaintflowError)
    with pytest.raises(sf.PlanError, match="override"):
        sf.Plan.load(GCN, {"dims.hiden": 8})


def test_a_rust_panic_is_an_exception_and_the_interpreter_survives():
    from saintflow import _native

    with pytest.raises(sf.SaintflowError, match="internal error .*deliberate panic"):
        _native._panic_for_tests()
    assert sf.Store is not None  # still here


def test_checkpoint_is_not_replaced_without_resume_or_force(tmp_path, store):
    ck = tmp_path / "run"
    os.mkdir(ck)
    sf.train(GCN, store, epochs=2, checkpoint=ck, progress=False)
    with pytest.raises(sf.TrainError, match="resume=True"):
        sf.train(GCN, store, epochs=2, checkpoint=ck, progress=False)
    r = sf.train(GCN, store, epochs=4, checkpoint=ck, resume=True, progress=False)
    assert r.epochs == 4


# The shipped GCN stops as its paper does (patience 10 on the validation loss); a run meant
# to be interrupted must not end first.
NO_EARLY_STOP = {"eval.patience": 1000000}


def test_ctrl_c_ends_train_with_keyboard_interrupt_and_a_loadable_checkpoint(tmp_path, store):
    ck = tmp_path / "run"
    script = tmp_path / "long.py"
    script.write_text(textwrap.dedent(f"""
        import signal, sys, saintflow as sf
        # Python's Ctrl-C handler even when started with SIGINT ignored (a background job).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("started", flush=True)
        try:
            sf.train({str(GCN)!r}, {str(store.path)!r}, epochs=100000, checkpoint={str(ck) + '/'!r},
                     progress=False, threads=1, overrides={NO_EARLY_STOP!r})
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
            sys.exit(42)
    """))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    deadline = time.time() + 60
    while not (ck / "checkpoint.bin").exists() and time.time() < deadline:
        time.sleep(0.05)
    if not (ck / "checkpoint.bin").exists():
        p.kill()
        pytest.fail(f"no checkpoint within 60 s; stderr: {p.communicate()[1]}")
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 42 and "KeyboardInterrupt" in out, err
    # The checkpoint loads: a resumed run continues from it (with the interrupted run's
    # epochs: on a quiet machine it may be past the plan's 200, and a resume past the end of
    # its run is refused, issue 55 item 8).
    r = sf.train(GCN, store, epochs=100000, checkpoint=ck, resume=True, progress=False, max_steps=1,
                 overrides=NO_EARLY_STOP)
    assert r.steps >= 1 and r.epochs >= 1


CORA = ROOT.parent / "shared" / "data" / "cora"


@pytest.mark.skipif(not CORA.is_dir(), reason="../shared/data/cora is not beside the checkout")
def test_example_train_cora_equals_the_cli(tmp_path, saintflow_bin):
    """examples/python/train_cora.py reports the CLI's test accuracy for the same seed."""
    ex = subprocess.run(
        [sys.executable, str(ROOT / "examples/python/train_cora.py"), "--seed", "2", "--epochs", "30"],
        check=True, capture_output=True, text=True,
    ).stdout.splitlines()[-1]
    store = tmp_path / "cora.sf"
    subprocess.run([saintflow_bin, "import", "graphsaint", str(CORA), "-o", str(store)], check=True,
                   capture_output=True)
    cli = subprocess.run(
        [saintflow_bin, "train", str(GCN), "--graph", str(store), "--seed", "2", "--epochs", "30", "--quiet"],
        check=True, capture_output=True, text=True,
    ).stdout
    want = cli[cli.index("test accuracy"):].split()
    assert ex.split()[:3] == want[:3], (ex, cli)  # "test accuracy 0.xxxx"
    assert float(ex.split()[2]) > 0.5


def test_a_link_plan_trains_and_reports_its_ranking_figures(tmp_path, store, saintflow_bin):
    # Issue 52: a link plan on a store with a link split; the figures are the log's.
    link = tmp_path / "link.sf"
    subprocess.run(
        [saintflow_bin, "split-edges", store.path, "-o", str(link), "--val", "0.1",
         "--test", "0.1", "--negatives", "20", "--seed", "1"],
        check=True, capture_output=True, text=True,
    )
    gae = ROOT / "plans" / "gae.toml"
    r = sf.train(sf.Plan.load(gae, {"dims.hidden": 8}), sf.Store.open(str(link)), epochs=3,
                 seed=1, progress=False)
    for key in ("auc", "ap", "mrr", "hits@10", "pool_hits@50"):
        assert 0.0 <= r.test[key] <= 1.0, (key, r.test)
    assert r.test["negatives"] == 20 and r.test["positives"] > 0
    with pytest.raises(sf.SaintflowError, match="split-edges"):
        sf.train(gae, store, epochs=1, progress=False)
