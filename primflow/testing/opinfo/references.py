"""NumPy references shared by several families."""

from __future__ import annotations

import math

import numpy as np

# ---- reference helpers ----------------------------------------------------------------------

def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axes)) if ndim else ()


def _np_norm(x, p=2, axis=None, keepdim=False):
    axes = _axes(axis, x.ndim)
    a = np.abs(x)
    if p in ("fro", 2):
        out = np.sqrt(np.sum(a ** 2, axis=axes, keepdims=keepdim))
    elif p == 1:
        out = np.sum(a, axis=axes, keepdims=keepdim)
    elif p == np.inf:
        out = np.max(a, axis=axes, keepdims=keepdim)
    elif p == -np.inf:
        out = np.min(a, axis=axes, keepdims=keepdim)
    else:
        out = np.sum(a ** p, axis=axes, keepdims=keepdim) ** (1.0 / p)
    return out


# The references use NumPy and the standard library only, so the table runs on a bare install
# (NumPy is primflow's one hard dependency); tests/test_opinfo.py checks them against SciPy
# where it is installed.
_np_erf = np.vectorize(math.erf, otypes=[np.float64])



def _np_expit(x):
    e = np.exp(-np.abs(x))  # never overflows
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
