"""Helpers the package's modules share."""

import importlib

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
