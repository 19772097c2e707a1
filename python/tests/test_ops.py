import numpy as np
import pytest

import saintflow as sf
from conftest import ROOT

GCN = (ROOT / "plans" / "gcn.toml").read_text()


def softsign(x):
    return x / (1 + np.abs(x))


def softsign_grad(x, g):
    return g / (1 + np.abs(x)) ** 2


def test_a_python_op_passes_the_gradient_check():
    sf.register_op("py.softsign", softsign, softsign_grad)
    sf.check_op_gradients("py.softsign")
    assert "py.softsign" in sf.registered_ops()


def test_a_wrong_backward_fails_the_gradient_check():
    sf.register_op("py.badgrad", softsign, lambda x, g: g / (1 + np.abs(x)))
    with pytest.raises(sf.TrainError, match="py.badgrad: gradient check failed"):
        sf.check_op_gradients("py.badgrad")


def test_attributes_and_two_inputs():
    sf.register_op("py.scale", lambda x, c=1.0: c * x, lambda x, g, c=1.0: c * g, attrs=("c",))
    sf.check_op_gradients("py.scale", c=2.5)

    def gate(a, b):
        return a / (1 + np.exp(-b))

    def gate_grad(a, b, g):
        s = 1 / (1 + np.exp(-b))
        return g * s, g * a * s * (1 - s)

    sf.register_op("py.gate", gate, gate_grad, arity=2)
    sf.check_op_gradients("py.gate", cols=4)


def test_a_plan_trains_with_a_python_op_as_with_the_builtin(tmp_path, store):
    """py.tanh in the plan gives the built-in tanh's run, up to numpy's rounding."""
    sf.register_op("py.tanh", np.tanh, lambda x, g: g * (1 - np.tanh(x) ** 2))
    builtin = tmp_path / "tanh.toml"
    builtin.write_text(GCN.replace('out = "relu(A_sym @ x @ W0)"', 'out = "tanh(A_sym @ x @ W0)"'))
    python = tmp_path / "pytanh.toml"
    python.write_text(GCN.replace('out = "relu(A_sym @ x @ W0)"', 'out = "py.tanh(A_sym @ x @ W0)"'))
    a = sf.train(builtin, store, epochs=15, seed=2, progress=False)
    b = sf.train(python, store, epochs=15, seed=2, progress=False)
    np.testing.assert_allclose(b.losses, a.losses, rtol=1e-4)
    assert b.test["accuracy"] > 0.6


def test_python_errors_reach_the_caller(tmp_path, store):
    def bad(x):
        raise ValueError("no thanks")

    sf.register_op("py.raises", bad, softsign_grad)
    sf.register_op("py.shape", lambda x: x[:, :1], softsign_grad)
    sf.register_op("py.nograd", softsign)
    for name, want in (("py.raises", "py.raises: the Python forward raised ValueError: no thanks"),
                       ("py.shape", r"py.shape: the Python forward raised .*returned shape \(\d+, 1\), expected")):
        plan = tmp_path / f"{name}.toml"
        plan.write_text(GCN.replace('out = "relu(A_sym @ x @ W0)"', f'out = "{name}(A_sym @ x @ W0)"'))
        with pytest.raises(sf.TrainError, match=want):
            sf.train(plan, store, epochs=1, progress=False)
    plan = tmp_path / "nograd.toml"
    plan.write_text(GCN.replace('out = "relu(A_sym @ x @ W0)"', 'out = "py.nograd(A_sym @ x @ W0)"'))
    with pytest.raises(sf.PlanError, match="backward not supported for py.nograd"):
        sf.train(plan, store, epochs=1, progress=False)
    with pytest.raises(sf.SaintflowError, match="relu is a built-in op"):
        sf.register_op("relu", np.tanh)
    with pytest.raises(sf.SaintflowError, match="unknown op `py.nothing`; the ops are .*py.softsign"):
        sf.check_op_gradients("py.nothing")
    with pytest.raises(sf.SaintflowError, match="relu: no Python op of that name"):
        sf.check_op_gradients("relu")
