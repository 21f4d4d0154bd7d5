"""A declaration's ``reference=`` kernel, resolved: a NumPy function as it is, or a
``"module:function"`` string naming one in an optional library (``"scipy.special:erfc"``).

A primitive file never imports an optional library: naming the kernel as a string keeps
``import primflow`` working without it. The string is resolved here, when a backend first
needs the kernel: the library's function if it is installed; else, for a function the
standard ``math`` module has too (``erf``, ``erfc``, ``gamma``, ``lgamma``...), that function
applied per element (exact, slower); else a kernel that raises an ``ImportError`` naming the
extra to install.

Example:
    >>> import numpy as np
    >>> kernel = resolve("erfc", "scipy.special:erfc")
    >>> float(kernel(np.array([0.0]))[0])
    1.0
"""

from __future__ import annotations

import importlib
import math

import numpy as np

# the extra (pyproject.toml) that installs each optional library a reference may name
EXTRA_OF = {"scipy": "fast"}


def resolve(name, reference):
    """The kernel of primitive ``name`` that its ``reference`` (a function or a
    ``"module:function"`` string) names (see the module docstring)."""
    if not isinstance(reference, str):
        return reference
    module_name, _, attr = reference.partition(":")
    if not attr:
        raise ValueError(f"primitive {name!r}: reference={reference!r} should be a NumPy "
                         f"function or a 'module:function' string, e.g. 'scipy.special:erfc'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except ImportError:
        pass
    if callable(getattr(math, attr, None)):
        return per_element(getattr(math, attr))
    return missing_library(name, reference)


def per_element(fn):
    """The kernel applying the scalar function ``fn`` to each element, in the input's dtype.

    Example:
        >>> per_element(math.erf)(np.array([0.0, 10.0], np.float32))
        array([0., 1.], dtype=float32)
    """
    ufunc = np.frompyfunc(fn, 1, 1)

    def kernel(x):
        # (asarray: frompyfunc returns a Python float, not an array, for a 0-d input)
        return np.asarray(ufunc(x)).astype(x.dtype)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def missing_library(name, reference):
    """A kernel that says which extra to install: the reference's library is missing and
    there is no pure-NumPy fallback."""
    library = reference.partition(".")[0].partition(":")[0]
    extra = EXTRA_OF.get(library)
    how = f"pip install 'primflow[{extra}]'" if extra else f"pip install {library}"

    def kernel(*arrays, **params):
        raise ImportError(f"primitive {name!r} runs {reference}, and {library} is not "
                          f"installed: {how}")

    return kernel
