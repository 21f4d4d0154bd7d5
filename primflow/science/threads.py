"""Limiting the BLAS thread pool while training.

PINN networks multiply tall, thin matrices (thousands of points by tens of units). For
these, a multi-threaded BLAS spends more time waking and synchronising threads than
multiplying, and on a machine whose cores are busy with other work it can be 5-20x slower
than one thread (measured here: a Burgers loss + backward at 2,000 points, 32x4 tanh MLP,
840 ms with OpenBLAS's default threads against 37 ms with one). :func:`blas_threads`
sets the pool size for a block of code and restores it afterwards; the trainer uses it
with one thread unless told otherwise.

It limits MKL's products (``backends/blas.py``, when the optional ``mkl`` package is
installed, also if MKL is loaded inside the block) and uses ``threadpoolctl`` when
installed, otherwise OpenBLAS's ``*_set_num_threads`` in the libraries already loaded into
the process (Linux); where none applies it does nothing (``OPENBLAS_NUM_THREADS=1`` in the environment before
Python starts has the same effect).

Example:
    >>> from primflow.science.threads import blas_threads
    >>> with blas_threads(1):
    ...     pass
"""

from __future__ import annotations

import contextlib
import ctypes
import os

from ..backends import blas

__all__ = ["blas_threads"]

_SUFFIXES = ("", "64_", "_64")
_PREFIXES = ("openblas", "scipy_openblas")


def _openblas_libraries():
    """(get, set) function pairs of the OpenBLAS libraries loaded in this process."""
    maps = "/proc/self/maps"
    if not os.path.exists(maps):
        return []
    try:
        with open(maps, encoding="utf-8", errors="replace") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line.lower()}
    except OSError:
        return []
    pairs = []
    for path in sorted(paths):
        if ".so" not in os.path.basename(path) or not os.path.isfile(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if getter is not None and setter is not None:
                    getter.restype = ctypes.c_int
                    setter.argtypes = [ctypes.c_int]
                    pairs.append((getter, setter))
                    break
            else:
                continue
            break
    return pairs


@contextlib.contextmanager
def blas_threads(n):
    """Runs the block with at most ``n`` BLAS threads (``None``: leave BLAS alone)."""
    if n is None:
        yield
        return
    n = int(n)
    if n < 1:
        raise ValueError(f"the number of BLAS threads must be >= 1, got {n}")
    with blas.limit_threads(n):  # MKL, loaded lazily by primflow's own products
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            threadpool_limits = None
        if threadpool_limits is not None:
            with threadpool_limits(limits=n, user_api="blas"):
                yield
            return
        with _openblas_threads(n):
            yield


@contextlib.contextmanager
def _openblas_threads(n):
    pairs = _openblas_libraries()
    previous = [getter() for getter, _ in pairs]
    for _, setter in pairs:
        setter(n)
    try:
        yield
    finally:
        for (_, setter), old in zip(pairs, previous):
            setter(old)
