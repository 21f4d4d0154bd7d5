"""How many threads primflow uses, and the pool its compiled programs run row blocks on.

One knob, ``set_num_threads(n)`` (``pf.set_num_threads``), sets:

* primflow's own pool: a compiled program that runs in row blocks
  (``compiler/_pipeline.py``) runs its blocks on up to ``n`` threads (NumPy's ufuncs, BLAS
  and primflow's numba kernels release the GIL), with every BLAS call inside on one thread;
* the BLAS pools (OpenBLAS, MKL; ``backends/blas.py``), which run a product on several
  threads only when it is large enough to gain;
* numba's pool, when a parallel numba function has started it.

The default is the number of cores the process may run on (``os.sched_getaffinity``), or
``OMP_NUM_THREADS`` when that is set. Under MPI (``primflow launch``, ``mpiexec``) the
cores of a host are divided among the ranks on it (``OMPI_COMM_WORLD_LOCAL_SIZE``,
``MPI_LOCALNRANKS``, ``PMI_LOCAL_SIZE`` or ``MV2_COMM_WORLD_LOCAL_SIZE``), unless the
launcher bound the rank to fewer cores than the host has already.

Example:
    >>> from primflow.backends.threads import get_num_threads, parallel_map
    >>> get_num_threads() >= 1
    True
    >>> parallel_map(lambda i: i * i, 4)
    [0, 1, 4, 9]
"""

from __future__ import annotations

import itertools
import numbers
import os
import sys
import threading
import warnings

import numpy as np

from . import blas

__all__ = ["available_cores", "default_num_threads", "describe", "get_num_threads",
           "parallel_map", "set_num_threads", "sum_in_order"]

# ranks of this job on this host, as the common MPI launchers publish it
MPI_LOCAL_SIZE_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE",
                       "MV2_COMM_WORLD_LOCAL_SIZE")

_state = {"threads": None, "warned": False, "pool": None, "pool_pid": None, "pool_size": 0}
_local = threading.local()  # .busy: this thread runs blocks of a parallel_map already
_pool_lock = threading.Lock()


def available_cores() -> int:
    """The number of cores this process may run on (its CPU affinity where the system has
    one, else ``os.cpu_count()``).

    Example:
        >>> available_cores() >= 1
        True
    """
    if hasattr(os, "sched_getaffinity"):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except OSError:
            pass
    return os.cpu_count() or 1


def _positive_int(text):
    try:
        value = int(str(text).split(",")[0].strip())
    except ValueError:
        return None
    return value if value >= 1 else None


def _ranks_on_this_host():
    for var in MPI_LOCAL_SIZE_VARS:
        value = _positive_int(os.environ.get(var, ""))
        if value is not None:
            return value
    return 1


def default_num_threads() -> int:
    """The thread count primflow starts with: ``OMP_NUM_THREADS`` when set (to a positive
    integer), else the cores this process may run on, divided among the MPI ranks on this
    host (when the launcher did not bind the rank to fewer cores already).

    Example:
        >>> default_num_threads() >= 1
        True
    """
    omp = _positive_int(os.environ.get("OMP_NUM_THREADS", ""))
    if omp is not None:
        return omp
    cores = available_cores()
    ranks = _ranks_on_this_host()
    if ranks > 1 and cores >= (os.cpu_count() or cores):  # not bound: share the host
        return max(1, cores // ranks)
    return cores


def get_num_threads() -> int:
    """The number of threads primflow uses (see ``set_num_threads``).

    Example:
        >>> import primflow as pf
        >>> pf.get_num_threads() >= 1
        True
    """
    n = _state["threads"]
    if n is None:
        n = _state["threads"] = default_num_threads()
    return n


def set_num_threads(n: int) -> None:
    """Uses ``n`` threads: for compiled programs' row blocks, the BLAS pools (products large
    enough to gain) and numba's pool. More threads than cores is allowed (with a warning,
    once): the threads then share cores, which is usually slower.

    Raises:
        TypeError: ``n`` is not an integer.
        ValueError: ``n`` is smaller than 1.

    Example:
        >>> import primflow as pf
        >>> before = pf.get_num_threads()
        >>> pf.set_num_threads(1)
        >>> pf.get_num_threads()
        1
        >>> pf.set_num_threads(before)
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"set_num_threads: the number of threads must be an integer >= 1, "
                        f"got {n!r} ({type(n).__name__})")
    n = int(n)
    if n < 1:
        raise ValueError(f"set_num_threads: the number of threads must be >= 1, got {n} "
                         f"(use 1 to run on one thread)")
    cores = available_cores()
    if n > cores and not _state["warned"]:
        _state["warned"] = True
        warnings.warn(f"set_num_threads({n}): more threads than the {cores} cores this process "
                      f"may run on; the threads will share cores, which is usually slower",
                      RuntimeWarning, stacklevel=2)
    _state["threads"] = n
    blas.set_max_threads(n)
    _set_numba_threads(n)


def _set_numba_threads(n):
    numba = sys.modules.get("numba")
    if numba is None:
        return
    try:
        numba.threading_layer()  # ValueError while no parallel function has started its pool
    except ValueError:
        return
    try:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    except (ValueError, RuntimeError):  # pragma: no cover - numba refusing: keep its count
        pass


def describe() -> str:
    """The thread setting, for ``primflow info``.

    Example:
        >>> describe().split()[0].isdigit()
        True
    """
    n = get_num_threads()
    origin = ("OMP_NUM_THREADS" if _positive_int(os.environ.get("OMP_NUM_THREADS", ""))
              is not None else f"{available_cores()} cores available")
    ranks = _ranks_on_this_host()
    if ranks > 1:
        origin += f", {ranks} MPI ranks on this host"
    return f"{n} (default {default_num_threads()}: {origin}; pf.set_num_threads to change)"


# ---- the pool ----------------------------------------------------------------------------------

def _executor(workers):
    """A pool of ``workers`` threads (created again after a fork: the child has no threads)."""
    from concurrent.futures import ThreadPoolExecutor

    with _pool_lock:
        pool = _state["pool"]
        if pool is None or _state["pool_pid"] != os.getpid() or _state["pool_size"] < workers:
            if pool is not None and _state["pool_pid"] == os.getpid():
                pool.shutdown(wait=False)
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="primflow")
            _state.update(pool=pool, pool_pid=os.getpid(), pool_size=workers)
        return pool


def parallel_map(fn, count: int, threads: int | None = None) -> list:
    """``[fn(0), ..., fn(count - 1)]``, computed on up to ``threads`` threads (default
    ``get_num_threads()``; the calling thread is one of them), with every BLAS product on
    one thread meanwhile. The results are in index order whatever thread computed them;
    the exception of the lowest failing index is raised. Inside ``fn`` (a nested call) it
    runs serially.

    Example:
        >>> parallel_map(str, 3, threads=2)
        ['0', '1', '2']
    """
    threads = get_num_threads() if threads is None else threads
    threads = min(threads, count)
    if threads <= 1 or getattr(_local, "busy", False):
        return [fn(i) for i in range(count)]
    results = [None] * count
    errors = {}
    indices = itertools.count()  # next() is atomic: each index is taken once

    def work():
        _local.busy = True
        try:
            while True:
                i = next(indices)
                if i >= count or errors:
                    return
                try:
                    results[i] = fn(i)
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                    errors[i] = e
        finally:
            _local.busy = False

    with blas.serial_region():
        pool = _executor(threads - 1)
        helpers = [pool.submit(work) for _ in range(threads - 1)]
        work()
        for h in helpers:
            h.result()
    if errors:
        raise errors[min(errors)]
    return results


def sum_in_order(parts):
    """``parts[0] + parts[1] + ...`` added left to right into a new array (a fixed order:
    the partial sums of row blocks give the same bits whichever thread computed which).

    Example:
        >>> import numpy as np
        >>> sum_in_order([np.ones(2), np.ones(2), np.arange(2.0)]).tolist()
        [2.0, 3.0]
    """
    total = np.array(parts[0], copy=True)
    for p in parts[1:]:
        np.add(total, p, out=total)
    return total
