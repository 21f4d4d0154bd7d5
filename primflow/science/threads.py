"""Limiting the BLAS thread pool while training.

PINN networks multiply tall, thin matrices (thousands of points by tens of units). For
these, a multi-threaded BLAS spends more time waking and synchronising threads than
multiplying, and on a machine whose cores are busy with other work it can be 5-20x slower
than one thread (measured here: a Burgers loss + backward at 2,000 points, 32x4 tanh MLP,
840 ms with OpenBLAS's default threads against 37 ms with one). :func:`blas_threads`
sets the pool size for a block of code and restores it afterwards; the trainer uses it
with one thread unless told otherwise.

It limits the BLAS pools primflow knows (every OpenBLAS library loaded into the process, and
MKL's products when the optional ``mkl`` package is installed, also if MKL is loaded inside
the block; ``backends/blas.py``) and, when ``threadpoolctl`` is installed, any other BLAS it
finds. ``pf.set_num_threads`` sets the number outside such blocks.

Example:
    >>> from primflow.science.threads import blas_threads
    >>> with blas_threads(1):
    ...     pass
"""

from __future__ import annotations

import contextlib

from ..backends import blas

__all__ = ["blas_threads"]


@contextlib.contextmanager
def blas_threads(n):
    """Runs the block with at most ``n`` BLAS threads (``None``: leave BLAS alone).

    Example:
        >>> with blas_threads(2):
        ...     pass
    """
    if n is None:
        yield
        return
    n = int(n)
    if n < 1:
        raise ValueError(f"the number of BLAS threads must be >= 1, got {n}")
    with blas.limit_threads(n):
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            threadpool_limits = None
        if threadpool_limits is not None:
            with threadpool_limits(limits=n, user_api="blas"):
                yield
            return
        yield
