"""The optional extras (``pip install -e ".[name]"``) and the modules each one brings, for the
tests: a test that needs an extra skips, naming it, where the extra is not installed, so the
suite runs (and passes) on a bare install with NumPy only.

``EXTRAS`` mirrors ``[project.optional-dependencies]`` of ``pyproject.toml`` (a test checks
that the two list the same extras), as importable module names: ``mkl`` installs only shared
libraries (found through its distribution's files) and ``mpich`` only ``mpiexec``, so they
are not listed as modules.

Example:
    >>> from primflow.testing.extras import has_extra, skip_reason
    >>> has_extra("fast") in (True, False)
    True
    >>> skip_reason("jit")
    "needs the 'jit' extra (pip install -e '.[jit]')"
"""

from __future__ import annotations

import importlib.util

EXTRAS = {
    "fast": ("scipy",),
    "sobol": ("scipy",),
    "plot": ("matplotlib",),
    "progress": ("tqdm",),
    "jit": ("numba",),
    "mkl": (),
    "mpi": ("mpi4py",),
    "bfloat16": ("ml_dtypes",),
    "array-api": ("array_api_compat",),
    "gpu": ("cupy", "array_api_compat"),
    "test": ("pytest", "scipy", "numba", "mpi4py", "array_api_compat", "array_api_strict",
             "ml_dtypes"),
}


def _check_extra(extra, modules):
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; pyproject.toml defines {sorted(EXTRAS)}")
    listed = EXTRAS[extra]
    unknown = [m for m in modules if m not in listed]
    if unknown:
        raise ValueError(f"extra {extra!r} installs {list(listed)}, not {unknown}")
    return modules or listed


def has_extra(extra: str, *modules: str) -> bool:
    """Whether the modules of ``extra`` (or just the given ones among them) are importable.

    Example:
        >>> has_extra("test", "pytest")
        True
    """
    return all(importlib.util.find_spec(m) is not None for m in _check_extra(extra, modules))


def skip_reason(extra: str) -> str:
    """The reason a test that needs ``extra`` gives when it skips.

    Example:
        >>> skip_reason("plot")
        "needs the 'plot' extra (pip install -e '.[plot]')"
    """
    return f"needs the {extra!r} extra (pip install -e '.[{extra}]')"


def requires_extra(extra: str, *modules: str):
    """A pytest mark: skip the test unless ``extra`` (or its listed ``modules``) is installed.

    Example:
        >>> mark = requires_extra("jit")
        >>> mark.name
        'skipif'
    """
    import pytest

    return pytest.mark.skipif(not has_extra(extra, *modules), reason=skip_reason(extra))


def import_extra(extra: str, module: str):
    """``module`` (one of ``extra``'s), or skip the calling test naming the extra.

    Example:
        >>> import_extra("test", "pytest").__name__
        'pytest'
    """
    import pytest

    _check_extra(extra, (module.split(".")[0],))
    return pytest.importorskip(module, reason=skip_reason(extra))
