"""Fixtures of the package's tests: small graphs written through `Store.create`, and the
`saintflow` command-line binary for the cross-checks (CI sets SAINTFLOW_BIN; elsewhere
target/{release,debug}/saintflow of the checkout, else those tests are skipped, visibly)."""

import os
import pathlib
import shutil

import numpy as np
import pytest

import saintflow as sf

ROOT = pathlib.Path(__file__).resolve().parents[2]


def planted(n=600, classes=4, f=16, degree=8, seed=0):
    """A symmetric graph with planted classes: edges mostly within a class, features a
    class centroid plus noise, a 50/25/25 split."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    m = n * degree // 2
    src = rng.integers(0, n, m)
    same = rng.random(m) < 0.8
    by_class = [np.flatnonzero(y == c) for c in range(classes)]
    dst = np.where(
        same,
        np.array([rng.choice(by_class[y[s]]) for s in src]),
        rng.integers(0, n, m),
    )
    centroids = rng.normal(size=(classes, f))
    x = (centroids[y] + 0.8 * rng.normal(size=(n, f))).astype(np.float32)
    perm = rng.permutation(n)
    roles = np.zeros(n, dtype=np.uint8)
    roles[perm[: n // 2]] = 1
    roles[perm[n // 2 : 3 * n // 4]] = 2
    roles[perm[3 * n // 4 :]] = 3
    return np.stack([src, dst]), x, y, roles


@pytest.fixture
def graph_arrays():
    return planted()


@pytest.fixture
def store(tmp_path, graph_arrays):
    ei, x, y, roles = graph_arrays
    return sf.Store.create(tmp_path / "g.sf", ei, x=x, y=y, roles=roles, symmetrize=True)


@pytest.fixture(scope="session")
def saintflow_bin():
    given = os.environ.get("SAINTFLOW_BIN")
    if given:
        assert os.path.isfile(given), f"SAINTFLOW_BIN={given} is not a file"
        return given
    for p in (ROOT / "target/release/saintflow", ROOT / "target/debug/saintflow"):
        if p.is_file():
            return str(p)
    found = shutil.which("saintflow")
    if found:
        return found
    pytest.skip("no saintflow binary: build it (cargo build) or set SAINTFLOW_BIN")
