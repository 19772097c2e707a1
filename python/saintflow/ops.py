"""Ops written in Python: try an activation or a per-row function in a plan file without
writing Rust."""

from . import _native
from ._util import count


def register_op(name, forward, backward=None, *, arity=1, attrs=(), doc=""):
    """Registers ``name`` for plan files (``out = "py.softsign(A_sym @ x @ W)"``).

    The op is row-wise: ``forward(*xs, **attrs)`` gets a block of rows of each of its
    ``arity`` inputs as ``[rows, cols]`` float32 arrays and returns that block of the
    output, same shape; blocks are any rows, in any order, from any thread (the GIL is
    taken for each call). ``backward(*xs, grad, **attrs)`` gets the same blocks and the
    output's gradient and returns the gradient of each input (one array for ``arity=1``,
    a tuple otherwise); without it the op is not differentiable. ``attrs``: the names of
    the attributes a plan may write (``py.scale(h, c=2)``), passed as keyword arguments.
    :func:`check_op_gradients` runs the finite-difference check Rust ops pass. Registering
    a name again replaces it; ops registered before :func:`train` or :func:`embed` are
    the ones they see.
    """
    if not callable(forward) or (backward is not None and not callable(backward)):
        raise _native.SaintflowError(f"{name}: forward and backward must be callables")
    _native._register_op(str(name), forward, backward, int(arity), [str(a) for a in attrs], str(doc))


def check_op_gradients(name, cols=3, **attrs):
    """The finite-difference gradient check of ``saintflow::testing::check_op_gradients``
    on the registered op ``name``: each input a per-node ``[n, cols]`` matrix on three
    small graphs, a classifier and a loss after it, the gradient against central
    differences. Raises :class:`TrainError` naming the parameter that fails. ``cols``:
    1 ..= 256 (``ValueError`` otherwise: 0 would check nothing)."""
    _native._check_op_gradients(str(name), count(cols, "cols"), attrs)


def registered_ops():
    """The Python ops registered in this process."""
    return _native.registered_ops()
