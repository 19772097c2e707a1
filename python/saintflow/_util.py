"""Helpers the package's modules share."""

import importlib
import operator

from ._native import SaintflowError


def require(package, what):
    """Imports ``package`` or raises a SaintflowError naming it and what needs it."""
    try:
        return importlib.import_module(package)
    except ImportError as e:
        raise SaintflowError(
            f"{what} needs the Python package {package!r}, which is not importable "
            f"here ({e}); install it (pip install {package.replace('_', '-')})"
        ) from None


def to_numpy(a):
    """A numpy view of ``a`` when it is a torch tensor (moved to the CPU), else ``a``."""
    if a is None:
        return None
    detach = getattr(a, "detach", None)
    if detach is not None and hasattr(a, "cpu"):
        return a.detach().cpu().numpy()
    return a


def count(v, name):
    """A count argument as an ``int`` (``None`` stays ``None``): an integer (Python, numpy),
    as numpy takes sizes (``operator.index``); a float, even ``4e9``, is a ``TypeError``,
    a negative value a ``ValueError`` (it was wrapped into a huge unsigned count)."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise TypeError(f"{name} = {v!r}: expected an integer, got a bool")
    try:
        n = operator.index(v)
    except TypeError:
        raise TypeError(f"{name} = {v!r}: expected an integer, got {type(v).__name__}") from None
    if n < 0:
        raise ValueError(f"{name} = {n}: expected a count ≥ 0")
    return n
