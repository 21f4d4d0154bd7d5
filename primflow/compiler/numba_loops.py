"""Whole-loop numba kernels for ``scan`` and ``while`` operations.

A compiled region called once per step from Python costs a few microseconds of interpreter
work per operation (NumPy call, buffer lookup, argument checks) on top of the arithmetic:
for an RK4 step of a small MLP (8 matrix-vector products, ~40 elementwise operations)
that is ~30-70 us a step, several times the arithmetic. When every operation of a loop's
regions has a numba form, the whole loop becomes ONE numba function: the Python ``for``
(or ``while``) over the steps, the stacked ``ys`` of a ``scan`` written into arrays the
launcher allocates once. One call runs all steps, and a step allocates nothing: the
results of elementwise operations and matrix-vector products are written by explicit
loops into buffers allocated before the first step (consecutive elementwise results of one
size share one loop, chains of them one expression), and a carry trades arrays with the
buffer it was computed into. Other operations (reductions, views that are not contiguous,
matrix-matrix products through ``np.dot``) stay numba array expressions.

What has a numba form (``supports``): arithmetic, comparisons, ``select``, the common
transcendental functions, casts, ``full``/``iota`` (hoisted out of the loop), reshapes,
transposes, broadcasts, slices, edge padding (a slice's transpose), concatenation, 2-d
``dot_general`` without batch dimensions, and sum/max/min reductions (partial ones:
sums), on float32/float64/int32/int64/bool values. Anything else (random draws, nested
control flow, linear algebra, gathers, batched matrix products, complex numbers) keeps the
loop in Python around the compiled regions (``compiler/_control.py``).

The kernels share ``numba_codegen``'s machinery: the source goes to a file in the cache
directory, numba compiles it for one signature (all array inputs C-contiguous, the
launcher copies those that are not), under ``pf.jit``'s default ``auto`` backend in a
background process while the NumPy code runs, and later processes load it from numba's
disk cache.

This module holds the entry points, the kernel specs (cached per operation) and the
launcher that runs a compiled kernel; ``numba_loop_kernel`` writes a kernel's source and
``numba_loop_emit`` its operations.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings

import numpy as np

from . import kernel_cache, numba_codegen
from .numba_loop_emit import Unsupported, dtype_name, shape_of
from .numba_loop_kernel import loop_source
from .numba_worker import failed_marker

__all__ = ["LOOPS", "LoopLauncher", "Unsupported", "compile_loop", "is_loaded", "loop_spec",
           "loop_specs", "supports", "try_compile_loop", "write_source"]

LOOPS = frozenset({"scan", "while"})
_spec_cache = {}  # id(op) -> (op, spec or None): compile_program asks more than once
_failed = set()  # hashes of loop kernels numba could not compile (not tried again)


def supports(op) -> bool:
    """Whether the control-flow operation ``op`` (a ``scan`` or ``while``) can run as one
    numba kernel.

    Example:
        >>> import primflow as pf
        >>> f = pf.jit(lambda x: pf.scan(lambda c, v: (c * v, c), x[0], x)[0])
        >>> op = [o for o in f.lower(pf.ones([3])).program.ops if o.prim == "scan"][0]
        >>> supports(op)
        True
    """
    return loop_spec(op) is not None


def loop_spec(op):
    """The ``KernelSpec`` (source, signature, hash, cache path) of ``op``'s loop kernel, or
    None when some operation of its regions has no numba form. Cached on the operation."""
    if op.prim not in LOOPS:
        return None
    hit = _spec_cache.get(id(op))
    if hit is not None and hit[0] is op:
        return hit[1]
    try:
        source, signature = loop_source(op)
    except Unsupported:
        spec = None
    else:
        spec = numba_codegen._spec(source, signature, "L")
    if len(_spec_cache) > 256:
        _spec_cache.clear()
    _spec_cache[id(op)] = (op, spec)  # (the operation is kept: its id stays its own)
    return spec


def loop_specs(fn) -> list:
    """The kernel specs of the loops of ``fn`` (its own operations) that numba can run."""
    return [spec for spec in map(loop_spec, fn.ops) if spec is not None and not _rejected(spec)]


def _rejected(spec) -> bool:
    """Whether numba failed to compile this kernel before (here or in a compile worker)."""
    return spec.sha in _failed or os.path.exists(failed_marker(spec.path))


# ---- running ---------------------------------------------------------------------------------

class LoopLauncher:
    """Runs a loop kernel: ``launcher(list of arrays) -> list of arrays`` (the last carry,
    then a scan's stacked ys), like ``compiler/_control.py``'s runner. Operands that are not
    C-contiguous arrays of their declared dtype are converted first."""

    def __init__(self, entry, op, spec):
        self.entry = entry
        self.source = spec.source
        self.dtypes = [np.dtype(d) for d, _, _, _ in spec.signature[:len(op.inputs)]]
        self.carry_dtypes = self.dtypes[:op.params["n_carry"]]
        if op.prim == "scan":
            k, n = op.params["n_carry"], op.params["length"]
            self.ys = [((n,) + shape_of(v), np.dtype(dtype_name(v)))
                       for v in op.params["body"].outputs[k:]]
            self.steps = [np.array(n, dtype=np.int64)]
        else:
            self.ys, self.steps = [], []
        self._spare = None  # the last call's ys, reused once nothing else holds them
        self._lock = threading.Lock()

    def _outputs(self):
        """Arrays for the ys: the last call's when the program has let go of them all (a
        reverse-mode program reads the saved steps once, then drops them), else new ones.
        Fresh multi-megabyte arrays cost a page fault per 4 KB at their first write,
        which measured ~15% of an RK4 gradient's time."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and all(sys.getrefcount(spare[i]) <= 2 for i in range(len(spare))):
            return spare
        return [np.empty(shape, dtype) for shape, dtype in self.ys]

    def __call__(self, args):
        ins = []
        for a, dtype in zip(args, self.dtypes):
            if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous):
                a = np.ascontiguousarray(a, dtype=dtype)
            ins.append(a)
        ys = self._outputs() if self.ys else []
        result = self.entry(*ins, *self.steps, *ys)
        if ys:
            self._spare = list(ys)
        carry = result if self.carry_dtypes else ()
        out = [c if isinstance(c, np.ndarray) else np.asarray(c, dtype=d)
               for c, d in zip(carry, self.carry_dtypes)]
        return out + ys


def write_source(spec):
    """Writes a loop kernel's source to the cache directory, signed (see ``kernel_cache``)."""
    kernel_cache.write_source(spec.path, spec.source)


def is_loaded(spec) -> bool:
    return spec.sha in numba_codegen._kernels


def try_compile_loop(op):
    """``compile_loop(op)``, or None (with a warning naming the reason) when ``op`` has no
    numba form or numba fails to compile it: the loop then runs in Python around its
    compiled regions, as without numba."""
    spec = loop_spec(op)
    if spec is None or _rejected(spec):
        return None
    try:
        return compile_loop(op)
    except Exception as e:  # noqa: BLE001 - any numba failure: keep the Python loop
        _failed.add(spec.sha)
        warnings.warn(f"pf.jit: the {op.prim} loop could not be compiled as one numba kernel "
                      f"({type(e).__name__}: {str(e)[:300]}); it runs as a Python loop over "
                      f"its compiled body ({spec.path})", RuntimeWarning, stacklevel=2)
        return None


def compile_loop(op) -> LoopLauncher:
    """The launcher of ``op``'s loop kernel, compiled now or loaded from the disk cache."""
    spec = loop_spec(op)
    return LoopLauncher(numba_codegen._entry(spec), op, spec)
