"""Issue 54, item 8 from Python: the shipped plans are in the package (built into the
extension) and found by name from any directory, `sf.plans()` lists them, and the README's
example type-checks (`sf.train` typed by the plan's family for a shipped name)."""

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import saintflow as sf

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_plans_lists_every_shipped_plan_with_its_family_and_cora_figure():
    listed = {p["name"]: p for p in sf.plans()}
    on_disk = sorted(p.stem for p in (ROOT / "plans").glob("*.toml"))
    assert sorted(listed) == on_disk
    assert listed["gcn"]["task"] == "node"
    assert listed["deepwalk"]["task"] == "embedding"
    assert listed["gae"]["task"] == "link"
    assert listed["gcn"]["cora"] == "81.7"
    assert listed["gin"]["cora"] is None
    assert listed["gcn"]["description"].startswith("GCN (Kipf & Welling")


def test_a_shipped_plan_trains_by_name_from_a_directory_without_plans(tmp_path, monkeypatch, store):
    monkeypatch.chdir(tmp_path)
    assert not (tmp_path / "plans").exists()
    plan = sf.Plan.load("gcn")
    assert not plan.is_embedding
    result = sf.train("gcn", store, epochs=3, seed=1, threads=1, progress=False)
    assert isinstance(result, sf.TrainResult)
    assert result.test is not None and 0.0 <= result.test["accuracy"] <= 1.0
    # The same as the file, bit for bit.
    by_file = sf.train(ROOT / "plans/gcn.toml", store, epochs=3, seed=1, threads=1, progress=False)
    assert by_file.test == result.test
    # A file of the same name wins.
    text = (ROOT / "plans/gcn.toml").read_text().replace('name = "gcn"', 'name = "mine"')
    (tmp_path / "gcn.toml").write_text(text)
    mine = sf.train("gcn.toml", store, epochs=3, seed=1, threads=1, progress=False)
    assert mine.records[0]["plan"] == "mine", mine.records[0]
    assert result.records[0]["plan"] == "gcn"


def test_an_unknown_plan_name_is_a_plan_error_with_the_nearest_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(sf.PlanError) as e:
        sf.Plan.load("gnc")
    assert "no shipped plan has this name, did you mean `gcn`?" in str(e.value)


def test_the_readme_python_example_type_checks(tmp_path):
    """mypy on the README's Python block, the names it takes from elsewhere declared."""
    if shutil.which("mypy") is None and not _has_module("mypy"):
        pytest.skip("mypy is not installed (pip install mypy)")
    md = (ROOT / "README.md").read_text()
    block = re.search(r"## From Python.*?```python\n(.*?)```", md, re.S).group(1)
    header = "from typing import Any\nedge_index: Any\nx_all: Any\ny_all: Any\ntm: Any\nvm: Any\nsm: Any\n"
    src = tmp_path / "readme_example.py"
    src.write_text(header + block)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-error-summary", str(src)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _has_module(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False
