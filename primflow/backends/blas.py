"""Matrix products: Intel MKL's GEMM when the optional ``mkl`` package is installed, else
NumPy's ``matmul`` (the OpenBLAS NumPy ships with).

On the AVX-512 machines we measure on, OpenBLAS's double-precision GEMM runs at 35-40
GFLOP/s on one thread for the tall-skinny products of derivative programs
([8192, 128] x [128, 128]); MKL runs the same product at about 75 GFLOP/s, as fast as
XLA's. ``pip install "primflow[mkl]"`` (or ``pip install mkl``) turns it on; primflow
calls ``cblas_?gemm`` of ``libmkl_rt`` through ctypes for 2-d float32 and float64 products,
and ``cblas_?gemm_batch_strided`` for stacks of them (3-d, same batch size), whose matrices
are C- or Fortran-contiguous (a transposed matrix is read in place) and which have at least
``MKL_MIN_WORK`` multiply-adds; everything else, and every product without MKL, goes to
``np.matmul``. ``pf.config.blas = "numpy"`` keeps NumPy's BLAS even when MKL is installed
(read at every product; when it is set before the first product, MKL is never loaded). MKL
follows its own thread settings (``MKL_NUM_THREADS``) and ``limit_threads``.

Threads: the BLAS pools in the process (every OpenBLAS library loaded, MKL when primflow
uses it) are set to ``pf.get_num_threads()`` (``backends/threads.py``), but a product runs
on several threads only when it has at least ``PARALLEL_MIN_WORK`` multiply-adds: smaller
ones are set to one thread for the call (on two cores OpenBLAS's threads gain nothing on
the tall, thin products of derivative programs, and lose 10-50x on a busy machine, where a
thread that is descheduled stalls the other). Large products run as slabs of rows on
primflow's own threads, each slab a one-thread BLAS call (``_split_matmul``). Inside
``serial_region()`` (the row blocks of a compiled program running on primflow's threads)
every product runs on one thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import numpy as np

from ..core.config import config

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# below about a million multiply-adds MKL's call overhead (~10 us) outweighs its speed
MKL_MIN_WORK = 1 << 20
_MKL_THREADING_SEQUENTIAL = 1
# below about 8 million multiply-adds (0.3 ms on one core) a second BLAS thread gains less
# than it risks: measured on two cores, [2048, 64] x [64, 64] runs 1.9x faster on two
# threads when the machine is idle, [1024, 64] x [64, 64] up to 50x slower when it is not
PARALLEL_MIN_WORK = 1 << 23
# the most slabs per thread a large product is split into (from 2^25 multiply-adds a thread)
SLABS_PER_THREAD = 4
# OpenBLAS runs products below 2^18 multiply-adds on one thread by itself (interface/gemm.c)
_OPENBLAS_SERIAL_WORK = 1 << 18
_OUTER_MIN_WORK = 1 << 16  # outer products at least this large are broadcast multiplies
_state = {"gemm": None, "batched": {}, "checked": False, "name": "numpy", "lib": None,
          "default_threads": None, "thread_limit": None,
          "max_threads": None,  # pf.set_num_threads (None: not read yet)
          "pools": None,  # [(get, set)] of the BLAS thread pools in the process
          "pool_threads": None,  # what the pools are set to now
          "serial": 0}  # how many serial regions are open
_lock = threading.Lock()
_serial_lock = threading.Lock()


def _find_mkl():
    """The path of ``libmkl_rt`` from the installed ``mkl`` distribution, or None."""
    try:
        from importlib import metadata

        dist = metadata.distribution("mkl")
    except Exception:  # noqa: BLE001 - not installed (or unreadable metadata): no MKL
        return None
    for f in dist.files or ():
        if os.path.basename(str(f)).startswith("libmkl_rt.so"):
            path = os.path.realpath(dist.locate_file(f))
            if os.path.exists(path):
                return path
    return None


def _one_thread():
    for var in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var)
        if value is not None:
            return value.strip() == "1"
    return False


def _load():
    with _lock:
        if _state["checked"]:
            return _state["gemm"]
        _state["checked"] = True
        if config.blas == "numpy":
            return None
        path = _find_mkl()
        if path is None:
            return None
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            return None
        if _one_thread() and not os.environ.get("MKL_THREADING_LAYER"):
            # one thread asked for: MKL's sequential layer, without loading an OpenMP
            # runtime (5 MB less resident memory); must precede any other MKL call
            lib.MKL_Set_Threading_Layer(ctypes.c_int(_MKL_THREADING_SEQUENTIAL))
        gemm, batched = {}, {}
        for dtype, name, real in ((np.float32, "sgemm", ctypes.c_float),
                                  (np.float64, "dgemm", ctypes.c_double)):
            f = getattr(lib, "cblas_" + name)
            f.restype = None
            f.argtypes = ([ctypes.c_int] * 6 + [real, ctypes.c_void_p, ctypes.c_int,
                                                ctypes.c_void_p, ctypes.c_int, real,
                                                ctypes.c_void_p, ctypes.c_int])
            gemm[np.dtype(dtype)] = f
            f = getattr(lib, f"cblas_{name}_batch_strided", None)  # MKL 2020 and later
            if f is not None:
                f.restype = None
                stride = ctypes.c_longlong
                f.argtypes = ([ctypes.c_int] * 6 + [real, ctypes.c_void_p, ctypes.c_int, stride,
                                                    ctypes.c_void_p, ctypes.c_int, stride, real,
                                                    ctypes.c_void_p, ctypes.c_int, stride,
                                                    ctypes.c_int])
                batched[np.dtype(dtype)] = f
        lib.MKL_Get_Max_Threads.restype = ctypes.c_int
        lib.MKL_Set_Num_Threads.argtypes = [ctypes.c_int]
        _state.update(gemm=gemm, batched=batched, name="mkl", lib=lib,
                      default_threads=lib.MKL_Get_Max_Threads(), pools=None, pool_threads=None)
        lib.MKL_Set_Num_Threads(_rest_threads())  # (the pools are found again at next use)
        return gemm


def _apply_thread_limit():
    """Sets the pools to the thread count products may use now (at rest)."""
    _set_pools(_rest_threads())


def _rest_threads():
    return 1 if _state["serial"] else max_threads()


def max_threads() -> int:
    """The most threads a product may use (``pf.get_num_threads()``, or ``limit_threads``'s
    limit when smaller).

    Example:
        >>> max_threads() >= 1
        True
    """
    n = _state["max_threads"]
    if n is None:
        from . import threads  # the default thread count (reads the environment once)

        n = _state["max_threads"] = threads.get_num_threads()
    limit = _state["thread_limit"]
    return n if limit is None else min(n, limit)


def set_max_threads(n: int):
    """Sets the BLAS pools to ``n`` threads (``pf.set_num_threads`` calls this).

    Example:
        >>> previous = max_threads()
        >>> set_max_threads(1); max_threads()
        1
        >>> set_max_threads(previous)
    """
    _state["max_threads"] = int(n)
    _apply_thread_limit()


def openblas_libraries():
    """``(get, set)`` thread-count functions of every OpenBLAS library loaded in this process
    (NumPy's, SciPy's, ...; found in ``/proc/self/maps``, Linux), or an empty list.

    Example:
        >>> all(get() >= 1 for get, _ in openblas_libraries())
        True
    """
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
        for prefix in ("openblas", "scipy_openblas"):
            found = None
            for suffix in ("", "64_", "_64"):
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if getter is not None and setter is not None:
                    getter.restype = ctypes.c_int
                    setter.argtypes = [ctypes.c_int]
                    found = (getter, setter)
                    break
            if found is not None:
                pairs.append(found)
                break
    return pairs


def _pools():
    pools = _state["pools"]
    if pools is None:
        _load()
        pools = openblas_libraries()
        lib = _state["lib"]
        if lib is not None:  # MKL
            pools.append((lib.MKL_Get_Max_Threads, lib.MKL_Set_Num_Threads))
        _state["pools"] = pools
    return pools


def _set_pools(n):
    """Sets every BLAS pool to ``n`` threads (nothing when they are already)."""
    if n == _state["pool_threads"]:
        return
    for _, setter in _pools():
        setter(n)
    _state["pool_threads"] = n


@contextlib.contextmanager
def limit_threads(n):
    """Runs the block with the BLAS pools (OpenBLAS, and MKL's products) on at most ``n``
    threads (``None``: no limit beyond ``pf.get_num_threads()``), also when MKL is first
    loaded inside the block; restores the previous limit after.

    Example:
        >>> with limit_threads(1):
        ...     max_threads()
        1
    """
    previous = _state["thread_limit"]
    _state["thread_limit"] = n
    _state["pools"] = None  # find the libraries again: a product may have loaded one
    _set_pools_now()
    try:
        yield
    finally:
        _state["thread_limit"] = previous
        _set_pools_now()


def _set_pools_now():
    _state["pool_threads"] = None  # unknown: set them whatever they were
    _set_pools(_rest_threads())


@contextlib.contextmanager
def serial_region():
    """Every product inside runs on one BLAS thread (row blocks running on primflow's own
    threads: the BLAS pools must not compete with them). Products from any thread count.

    Example:
        >>> with serial_region():
        ...     pass
    """
    with _serial_lock:
        _state["serial"] += 1
        if _state["serial"] == 1:
            _set_pools(1)
    try:
        yield
    finally:
        with _serial_lock:
            _state["serial"] -= 1
            if _state["serial"] == 0:
                _set_pools(_rest_threads())


def _threads_for(work):
    """The BLAS threads a call of ``work`` multiply-adds gets: one below
    ``PARALLEL_MIN_WORK`` or inside a serial region, else ``max_threads()``."""
    return 1 if work < PARALLEL_MIN_WORK or _state["serial"] else max_threads()


@contextlib.contextmanager
def threads_for_work(work):
    """Runs the block (a LAPACK call of about ``work`` multiply-adds: an eigh, svd, solve,
    ...) on the BLAS threads a product of that much work gets (``_threads_for``).
    NumPy's LAPACK follows the OpenBLAS pool, and on a busy machine two threads made an
    eigh of a 256 x 256 matrix 60-130x slower than one (1.3 s against 10 ms).

    Example:
        >>> with threads_for_work(1000):
        ...     pass
    """
    threads = _threads_for(work)
    if threads == _state["pool_threads"]:
        yield
        return
    _set_pools(threads)
    try:
        yield
    finally:
        _set_pools(_rest_threads())


def describe() -> str:
    """How matrix products are computed, for reports (``primflow info``, the benchmarks).

    Example:
        >>> describe().startswith(("MKL", "NumPy"))
        True
    """
    if backend_name() == "mkl":
        from importlib import metadata

        return (f"MKL {metadata.version('mkl')} (the optional mkl package; "
                f"pf.config.blas = 'numpy' for NumPy's)")
    return "NumPy's BLAS (pip install mkl for MKL's GEMM)"


def backend_name() -> str:
    """``"mkl"`` when products go to MKL, else ``"numpy"``.

    Example:
        >>> backend_name() in ("mkl", "numpy")
        True
    """
    if config.blas == "numpy":
        return "numpy"
    _load()
    return _state["name"]


def _operand(a):
    """(transpose flag, leading dimension) for reading ``a`` in place, or None."""
    if a.flags.c_contiguous and a.strides[1] == a.itemsize:
        return _NO_TRANS, max(a.shape[1], 1)
    if a.flags.f_contiguous and a.strides[0] == a.itemsize:
        return _TRANS, max(a.shape[0], 1)
    return None


def _batched_operand(a):
    """(transpose flag, leading dimension, batch stride) for reading the stack of matrices
    ``a`` (3-d) in place, or None."""
    item = a.itemsize
    s0, s1, s2 = a.strides
    if s0 % item or s1 % item or s2 % item or s0 < a.shape[1] * a.shape[2] * item:
        return None
    if s2 == item and s1 >= a.shape[2] * item:
        return _NO_TRANS, max(s1 // item, 1), s0 // item
    if s1 == item and s2 >= a.shape[1] * item:
        return _TRANS, max(s2 // item, 1), s0 // item
    return None


def _gemm(a, b, out):
    """MKL's GEMM for matrices ``a`` [m, k] and ``b`` [k, n] into ``out``: True when it
    computed it, False when the operands do not suit it."""
    f = _state["gemm"].get(a.dtype)
    (m, k), n = a.shape, b.shape[1]
    if f is None:
        return False
    ta, tb = _operand(a), _operand(b)
    if ta is None or tb is None:
        return False
    f(_ROW_MAJOR, ta[0], tb[0], m, n, k, 1.0, a.ctypes.data, ta[1], b.ctypes.data, tb[1],
      0.0, out.ctypes.data, max(n, 1))
    return True


def _batched_matmul(a, b, out):
    """MKL's strided batch GEMM for stacks ``a`` [B, m, k] and ``b`` [B, k, n] into
    ``out``: True when it computed it, False when the operands do not suit it."""
    f = _state["batched"].get(a.dtype)
    batch, m, k = a.shape
    n = b.shape[2]
    if f is None:
        return False
    ta, tb = _batched_operand(a), _batched_operand(b)
    if ta is None or tb is None:
        return False
    f(_ROW_MAJOR, ta[0], tb[0], m, n, k, 1.0, a.ctypes.data, ta[1], ta[2], b.ctypes.data,
      tb[1], tb[2], 0.0, out.ctypes.data, max(n, 1), m * n, batch)
    return True


def matmul(a, b, out=None):
    """``np.matmul(a, b, out=out)``, computed by MKL for 2-d float32/float64 operands, and
    for stacks of them (3-d, same batch size) through its strided batch GEMM, when it is
    installed (see the module docstring). Products below ``PARALLEL_MIN_WORK`` multiply-adds
    run on one BLAS thread, larger ones on up to ``pf.get_num_threads()``.

    Example:
        >>> import numpy as np
        >>> matmul(np.eye(2), np.arange(4.0).reshape(2, 2).T).tolist()
        [[0.0, 2.0], [1.0, 3.0]]
    """
    if (a.ndim == b.ndim == 2 and a.shape[1] == 1 and b.shape[0] == 1 and a.size * b.size
            >= _OUTER_MIN_WORK and np.result_type(a, b).kind == "f"
            and (out is None or not (np.may_share_memory(out, a)
                                     or np.may_share_memory(out, b)))):
        # an outer product (k = 1, e.g. the gradient of a layer with one output): each
        # entry is one product, so a broadcast multiply gives the same bits as the GEMM,
        # 3x faster (OpenBLAS: 22 ms against 7.5 ms for [144500, 1] x [1, 128] float32)
        return np.multiply(a, b, out=out)
    if a.dtype.char == "e" and b.dtype.char == "e":
        return _float16_matmul(a, b, out)
    gemm = _state["gemm"] if _state["checked"] else _load()
    if gemm is not None and config.blas == "numpy":  # (MKL loaded before the option was set)
        gemm = None
    work = a.size * b.shape[-1] if b.ndim > 1 else a.size
    if work < _OPENBLAS_SERIAL_WORK and gemm is None:
        return np.matmul(a, b, out=out)  # one thread whatever the pools say: the common case
    threads = _threads_for(work)
    if threads > 1 and 2 <= a.ndim == b.ndim <= 3 and a.shape[0] >= 4 * threads:
        return _split_matmul(a, b, out, gemm, work, threads)
    if threads == _state["pool_threads"]:  # (inline, not threads_for_work: a hot path)
        return _matmul(a, b, out, gemm, work)
    _set_pools(threads)
    try:
        return _matmul(a, b, out, gemm, work)
    finally:
        _set_pools(_rest_threads())


def _float16_matmul(a, b, out):
    """A float16 product computed in float32 and rounded once (as GPUs' tensor cores do):
    NumPy's own float16 loop has no BLAS (5.3 ms against 55 us for [600, 32] x [32, 32])
    and is no more accurate (it accumulates in float32 too, in another order)."""
    wide = matmul(a.astype(np.float32), b.astype(np.float32))
    if out is None:
        return wide.astype(np.float16)
    np.copyto(out, wide, casting="same_kind")
    return out


def _split_matmul(a, b, out, gemm, work, threads):
    """The product on primflow's threads: slabs of the rows of ``a`` (of the stack, for 3-d
    operands; one per thread, up to ``SLABS_PER_THREAD`` for the largest products), each
    a one-thread BLAS call. Unlike the BLAS pools' threads,
    which spin while they wait, primflow's threads sleep: on a busy machine a slab that
    is descheduled costs its own time, not that of every thread (measured on two busy
    cores: OpenBLAS's two threads 2-3x slower than one, the slabs 1.1-1.4x)."""
    from .threads import parallel_map

    if out is None:
        if a.ndim == 3 and a.shape[0] != b.shape[0]:
            return np.matmul(a, b)  # broadcast stacks: leave them to NumPy
        out = np.empty(a.shape[:-1] + b.shape[-1:], dtype=np.result_type(a, b))
    m = a.shape[0]
    # a large product in more slabs than threads: the threads take the next slab as they
    # free up, so a thread the system deschedules holds up one slab, not half the product
    slabs = min(m, threads * max(1, min(SLABS_PER_THREAD, work // (2 * PARALLEL_MIN_WORK))))
    bounds = [m * i // slabs for i in range(slabs + 1)]

    def slab(i):
        rows = slice(bounds[i], bounds[i + 1])
        _matmul(a[rows], b[rows] if b.ndim == 3 else b, out[rows], gemm, work // slabs)

    parallel_map(slab, slabs, threads)
    return out


def _matmul(a, b, out, gemm, work):
    # cheapest tests first: most products in eager code are small, and NumPy is quicker there
    if (gemm is not None and 2 <= a.ndim == b.ndim <= 3 and work >= MKL_MIN_WORK
            and a.dtype == b.dtype and a.shape[:-2] == b.shape[:-2]
            and a.shape[-1] == b.shape[-2]):
        shape = a.shape[:-1] + b.shape[-1:]
        if out is None:
            out = np.empty(shape, dtype=a.dtype)  # np.matmul below writes it if MKL does not
        if (out.dtype == a.dtype and out.shape == shape and out.flags.c_contiguous
                and not np.may_share_memory(out, a) and not np.may_share_memory(out, b)
                and (_gemm if a.ndim == 2 else _batched_matmul)(a, b, out)):
            return out
    return np.matmul(a, b, out=out)
