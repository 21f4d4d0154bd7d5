"""numba kernels for fused arithmetic groups (optional: used only when numba imports).

A fusion group whose operations are arithmetic, comparisons, selects, casts, ``sqrt``,
float32 ``erf`` (as a rational function, see ``_ERF32_NUMERATOR``) and at most one final
reduction (no other transcendental functions: without SVML numba calls scalar libm for
those, slower than NumPy's vectorised ufuncs) becomes one loop nest: every
element is loaded once, the chain runs in registers, the values the rest of the program
needs are stored, and the reduction accumulates as it goes.

Settings follow the measurements in shared/notes/deps-measured.md:
``error_model="numpy"`` (inf/nan instead of ZeroDivisionError, and vectorised division),
the "safe" fastmath flags (reassociation for reductions, NaN/Inf semantics kept),
serial loops, and ``cache=True`` with each kernel written to ``k_<sha>.py`` in a cache
directory and loaded from there, so a new process loads it instead of compiling (only what
primflow wrote and signed: see ``kernel_cache``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import threading
import warnings
from typing import NamedTuple

import numpy as np

from ..core.config import config
from ..ir.passes.fuse import TRANSCENDENTAL, VIEWS
from . import kernel_cache
from .numba_worker import load_kernel, mark_ready, ready_marker
from .spellings import BY_CODE, fused_numba_form, lowering_of, tuple_source

AUTO_MIN_ELEMENTS = 1 << 14  # below this NumPy's per-call cost is already small
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}
# as the kernels' source spells it (the whole-loop kernels' too: reassociation lets LLVM
# vectorise the dot products' sums)
FASTMATH_ARG = "fastmath={" + ", ".join(repr(f) for f in sorted(FASTMATH)) + "}"

# each elementwise primitive's scalar form is its declaration's (Lowering.numba_fused, read
# through spellings.py); select, integer_pow, casts and float32 erf are written here
_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min"})
# ---- float32 erf (GELU) as arithmetic: a rational approximation that vectorises --------
# NumPy has no erf; SciPy's is a scalar loop (11 ns an element, float32 or float64), 26% of
# an FNO2D training step (GELU on [20, 85, 85, 128]). In float32 a kernel computes erf as
# the odd/even rational function XLA and Eigen use for float32 (``generic_fast_erf_float``:
# the input clamped to [-4, 4], erf(4) = 1 in float32), within 5.5 ulp and 3.4e-7 of the
# exact erf on [-6, 6] (SciPy's float32: 0.5 ulp), 70x faster here. float64 erf stays
# SciPy's (no rational form this short reaches float64 accuracy).
_ERF32_NUMERATOR = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                    -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                    -1.60960333262415e-02)  # x^13, x^11, ..., x^1 (times x)
_ERF32_DENOMINATOR = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                      -7.37332916720468e-03, -1.42647390514189e-02)  # x^8, ..., x^0
_FLOAT32_ONLY = frozenset({"erf"})


def _erf32(out, arg):
    """The float32 erf of ``arg`` (see _ERF32_NUMERATOR): kernel lines computing the parts
    in variables named after ``out``, and the expression that combines them."""
    f = (lambda v: _literal(v, "float32"))
    lines = [f"{out}c = min(max({arg}, {f(-4.0)}), {f(4.0)})", f"{out}q = {out}c * {out}c"]
    for name, coeffs in (("p", _ERF32_NUMERATOR), ("d", _ERF32_DENOMINATOR)):
        lines.append(f"{out}{name} = {out}q * {f(coeffs[0])} + {f(coeffs[1])}")
        lines += [f"{out}{name} = {out}q * {out}{name} + {f(c)}" for c in coeffs[2:]]
    return lines, f"{out}c * {out}p / {out}d"

# the generated code computes the view primitives (fuse.VIEWS) as NumPy views; kernels read
# a broadcast's source, and a reshape of a contiguous array is contiguous, so only these two
# (and reshapes of views, see _strided) give a kernel strided inputs
STRIDED_VIEWS = frozenset({"transpose", "slice"})


def _strided(v):
    """Whether the generated code may hand a kernel ``v`` as a strided view: a transpose or
    slice, or a reshape of any view (np.reshape of a broadcast or slice stays a view);
    other inputs are contiguous arrays."""
    op = v.op
    if op is None:
        return False
    if op.prim == "reshape":
        while op is not None and op.prim == "reshape":
            op = op.inputs[0].op
        return op is not None and op.prim in VIEWS
    return op.prim in STRIDED_VIEWS


_state = {"numba": None, "checked": False, "prepared": False}
_lock = threading.Lock()
_kernels = {}  # sha -> compiled dispatcher


def available() -> bool:
    """Whether numba can be imported (checked once; ``pf.config.jit_backend = "numpy"``
    keeps pf.jit from using it)."""
    if not _state["checked"]:
        _state["checked"] = True
        try:
            import numba
        except Exception:  # noqa: BLE001 - any import failure means: no numba
            numba = None
        _state["numba"] = numba
    return _state["numba"] is not None


# the folder a background load reads: the one its job compiled into, even when
# pf.config.cache_dir changed while the job waited (else the kernels were compiled again, in
# this process, holding the GIL)
_loading_from = threading.local()


def cache_dir() -> str:
    """Where kernel sources and numba's cache files go: ``numba/`` in ``pf.config.cache_dir``
    (default ``~/.cache/primflow``)."""
    return getattr(_loading_from, "path", None) or os.path.join(config.cache_dir, "numba")


def computes(op, transcendental=False) -> bool:
    """Whether a kernel can compute ``op`` (a supported primitive on float or bool values).
    With ``transcendental``, also a unary transcendental primitive named like a NumPy ufunc
    (``sin``, ``exp``, ``tanh``...: numba calls scalar libm for it, which pays only where
    the arrays are small; see ``compiler._pipeline``'s small-program plan).

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float64[4]):\\n    %1: float64[4] = mul(%0, %0)\\n"
        ...            "    %2: float64[4] = tanh(%1)\\n    return %2\\n")
        >>> [computes(op) for op in fn.ops]
        [True, False]
    """
    dtypes = {v.aval.dtype.name for v in (*op.inputs, op.out)}
    if op.prim in _FLOAT32_ONLY:
        return dtypes == {"float32"}
    if transcendental and is_scalar_ufunc(op):
        return dtypes <= {"float32", "float64"}
    supported = (op.prim in BY_CODE or op.prim in _REDUCTIONS
                 or fused_numba_form(op.prim) is not None)
    return supported and dtypes <= {"float32", "float64", "bool"}


def numpy_ufunc(prim):
    """The name of the one-input NumPy ufunc computing ``prim`` (its declared ``numpy``
    spelling, or its own name), or None when NumPy has no such ufunc; numba compiles those
    ufuncs on scalars.

    Example:
        >>> numpy_ufunc("sin"), numpy_ufunc("neg"), numpy_ufunc("atan2"), numpy_ufunc("logistic")
        ('sin', 'negative', None, None)
    """
    name = getattr(lowering_of(prim), "numpy", None) or prim
    ufunc = getattr(np, name, None)
    return name if isinstance(ufunc, np.ufunc) and ufunc.nin == 1 else None


def is_scalar_ufunc(op) -> bool:
    """Whether ``op`` is a unary transcendental primitive with a NumPy ufunc of the same name,
    which numba compiles on scalars (``np.sin(x)``)."""
    return (op.prim in TRANSCENDENTAL and len(op.inputs) == 1 and not op.params
            and numpy_ufunc(op.prim) is not None)


def supports(group, min_elements=0, transcendental=False) -> bool:
    """Whether ``group`` can become a numba kernel worth compiling (with ``min_elements``,
    the automatic choice, a bare ``sum(a * b)`` stays with NumPy's einsum, and a single
    operation only becomes a kernel when it reads a broadcast). ``transcendental``: see
    ``computes``."""
    computed = [op for op in group.ops if op.prim not in VIEWS]
    if not all(computes(op, transcendental) for op in computed):
        return False
    if min_elements and [op.prim for op in computed] == ["mul", "reduce_sum"]:
        return False
    if min_elements and len(computed) == 1 and all(kernel_operand(v) is v for v in group.inputs):
        return False  # one operation on plain arrays: a NumPy ufunc is as fast
    if group.size < max(min_elements, 1):
        return False
    space = [n for n in group.shape if n != 1]  # shapes may differ by unit dims only
    for v in group.inputs:
        if v.op is not None and v.op.prim == "full":
            continue
        if v.aval.shape != () and [n for n in v.aval.shape if n != 1] != space:
            return False
    return True


def _literal(value, dtype):
    """``value`` as a numba source literal of ``dtype`` (a DType, or its name: the loop
    kernels of numba_loops.py pass names)."""
    name = getattr(dtype, "name", dtype)
    if name == "bool":
        return repr(bool(value))
    if name.startswith(("int", "uint")):
        return f"np.{name}({int(value)})"
    v = float(value)
    if math.isnan(v):
        text = "np.nan"
    elif math.isinf(v):
        text = "np.inf" if v > 0 else "-np.inf"
    else:
        text = repr(v)
    return f"np.{name}({text})"


def kernel_source(group):
    """The Python source of the kernel for ``group`` (a function ``kernel``)."""
    shape, red = group.shape, group.reduction
    names, lines_pre, params = {}, [], []
    for k, v in enumerate(group.inputs):
        src = kernel_operand(v)
        if v.op is not None and v.op.prim == "full":
            names[v] = f"c{k}"
            lines_pre.append(f"    c{k} = {_literal(v.op.params['value'], v.aval.dtype)}")
            continue
        params.append(f"x{k}")
        if src.aval.shape == () and shape != ():
            lines_pre.append(f"    s{k} = x{k}[()]")
            names[v] = f"s{k}"
        elif src is not v:  # a broadcast: read its source, a loop index per kept dim
            loop = _loop_dims(v.aval.shape, shape)
            dims = v.op.params["broadcast_dimensions"]
            index = ", ".join(f"i{loop[d]}" if n != 1 and loop[d] is not None else "0"
                              for n, d in zip(src.aval.shape, dims))
            names[v] = f"x{k}[{index}]" if index else f"x{k}[()]"
        else:
            names[v] = f"x{k}[{_index_of(v.aval.shape, shape)}]"
    outs = [v for v in group.outputs if red is None or v is not red.out]
    returned = [f"o{k}" for k in range(len(outs))] + (["r"] if red is not None else [])
    body = []
    for i, op in enumerate(group.ops):
        if op is red:
            continue
        if op.prim in VIEWS:  # a unit view: the same element, another shape
            names[op.out] = names[op.inputs[0]]
            continue
        tmp = f"t{i}"
        args = [names[v] for v in op.inputs]
        dtype = op.out.aval.dtype
        form = fused_numba_form(op.prim)
        if form is not None:
            expr = form.format(*args, one=_literal(1.0, dtype))
        elif op.prim == "select":
            expr = f"{args[1]} if {args[0]} else {args[2]}"
        elif op.prim == "integer_pow":
            y = op.params["y"]
            if y == 0:
                expr = _literal(1.0, dtype)
            else:
                expr = " * ".join([args[0]] * abs(y))
                if y < 0:
                    expr = f"{_literal(1.0, dtype)} / ({expr})"
        elif op.prim == "convert_element_type":
            expr = f"np.{dtype.name}({args[0]})" if not dtype.is_bool else f"{args[0]} != 0"
        elif op.prim == "erf":  # float32 only (computes)
            lines_erf, expr = _erf32(tmp, args[0])
            body += lines_erf
        elif is_scalar_ufunc(op):  # only in groups supports(transcendental=True) accepts
            expr = f"np.{numpy_ufunc(op.prim)}({args[0]})"
        else:  # pragma: no cover - filtered by supports()
            raise NotImplementedError(op.prim)
        if dtype.is_floating and form is not None and len(args) == 2:  # binary arithmetic
            expr = f"np.{dtype.name}({expr})"  # (Python's scalar rules would widen float32)
        body.append(f"{tmp} = {expr}")
        names[op.out] = tmp
    for k, v in enumerate(outs):
        body.append(f"o{k}[{_index_of(v.aval.shape, shape)}] = {names[v]}")
    lines = [f"def kernel({', '.join(params + returned)}):"] + lines_pre
    if red is None and _interleaves(group):
        lines += _interleaved_loops(shape, body)
    elif red is None:
        lines += _loops(shape, range(len(shape)), body)
    else:
        lines += _reduction_loops(shape, red, names, body)
    lines.append(f"    return {tuple_source(returned)}")
    header = ("import numpy as np\nimport numba\n\n\n"
              f"@numba.njit(cache=True, nogil=True, error_model='numpy', {FASTMATH_ARG})\n")
    return header + "\n".join(lines) + "\n"


def _loop_dims(value_shape, shape):
    """For each dim of ``value_shape`` (equal to the loop nest's ``shape`` up to unit
    dims), the loop dim that indexes it, or None for a unit dim (index 0)."""
    loops = iter(d for d, n in enumerate(shape) if n != 1)
    return [None if n == 1 else next(loops) for n in value_shape]


def _index_of(value_shape, shape):
    """The subscript reading or writing a value of ``value_shape`` inside the loop nest."""
    if not value_shape:
        return "()"
    return ", ".join("0" if d is None else f"i{d}" for d in _loop_dims(value_shape, shape))


def _loops(shape, dims, body, ind="    "):
    """A loop nest over the ``dims`` of ``shape`` (starting at indent ``ind``) around ``body``."""
    lines = []
    for d in dims:
        lines.append(f"{ind}for i{d} in range({shape[d]}):")
        ind += "    "
    return lines + [ind + b for b in body]


def _interleaves(group):
    """Whether ``group``'s kernel computes two elements per step of its innermost loop,
    statement by statement: a chain of libm calls (sin, exp, tanh, ...), which LLVM cannot
    vectorise without SVML, runs at the calls' latency, one element after the other; two
    independent chains side by side let the CPU overlap them (W5's gradient, 17 dependent
    sin/cos pairs an element: 227 -> 150 us for 1,000 elements)."""
    return any(n >= 2 for n in group.shape) and any(op.prim in TRANSCENDENTAL for op in group.ops)


_TEMPORARY = re.compile(r"\b(t\d+[a-z]?)\b")


def _interleaved_loops(shape, body):
    """The loop nest of ``_loops`` whose innermost loop (over the last dim longer than one)
    runs ``body`` for elements ``i`` and ``i + 1`` interleaved, then the odd last one. (The
    body indexes unit dims with 0: they need no loop.)"""
    d = max(k for k, n in enumerate(shape) if n >= 2)
    index = re.compile(rf"\bi{d}\b")
    second = [index.sub(f"(i{d} + 1)", _TEMPORARY.sub(r"\1_1", b)) for b in body]
    outer = [k for k in range(d) if shape[k] != 1]
    ind = "    " * (1 + len(outer))
    lines = _loops(shape, outer, [f"for i{d} in range(0, {shape[d] - 1}, 2):"])
    lines += [f"{ind}    {line}" for pair in zip(body, second) for line in pair]
    if shape[d] % 2:
        lines.append(f"{ind}i{d} = {shape[d] - 1}")
        lines += [f"{ind}{b}" for b in body]
    return lines


def _reduction_loops(shape, red, names, body):
    axes = tuple(red.params["axes"])
    kept = [d for d in range(len(shape)) if d not in axes]
    dtype = red.out.aval.dtype
    combine = {"reduce_sum": "acc + {v}", "reduce_max": "max(acc, {v})",
               "reduce_min": "min(acc, {v})"}[red.prim]
    init = {"reduce_sum": _literal(0.0, dtype), "reduce_max": _literal(float("-inf"), dtype),
            "reduce_min": _literal(float("inf"), dtype)}[red.prim]
    value = names[red.inputs[0]]
    out_index = ", ".join(f"i{d}" for d in kept) if kept else "()"
    trailing = axes == tuple(range(len(kept), len(shape)))
    if trailing:  # kept dims outside, a register accumulator over the reduced ones inside
        inner = _loops(shape, axes, body + [f"acc = {combine.format(v=value)}"], "")
        return _loops(shape, kept, [f"acc = {init}", *inner, f"r[{out_index}] = acc"])
    # any other axes: accumulate into the output in natural loop order
    acc_body = body + [f"acc = r[{out_index}]", f"r[{out_index}] = {combine.format(v=value)}"]
    return [f"    r[...] = {init}"] + _loops(shape, range(len(shape)), acc_body)


def kernel_signature(group):
    """The one numba signature a group's kernel is compiled for, as plain data: per
    argument ``(dtype name, ndim, layout, readonly)``. Inputs are read-only; those that
    come from a view (a broadcast or transpose in the generated code) have any layout
    ("A"), the others are C-contiguous (planned buffers, kernel results; the launcher makes
    a contiguous copy in the rare case one is not), which lets LLVM vectorise their loads.
    Outputs are the C-contiguous buffers the program allocates. One signature per kernel
    means the compiled code is called directly (no per-call type dispatch), and a background
    process can compile exactly what this process will load."""
    red = group.reduction
    sig = []
    for v in group.inputs:
        if v.op is not None and v.op.prim == "full":
            continue
        v = kernel_operand(v)
        sig.append((v.aval.dtype.name, len(v.aval.shape), "A" if _strided(v) else "C", True))
    outs = [v for v in group.outputs if red is None or v is not red.out]
    for v in outs + ([red.out] if red is not None else []):
        sig.append((v.aval.dtype.name, len(v.aval.shape), "C", False))
    return sig


def kernel_operand(v):
    """The value a kernel reads for its input ``v``: the source of a broadcast (indexed
    with the broadcast's dims inside the kernel: no stride-0 array, which LLVM cannot
    vectorise, and less memory to read), else ``v`` itself."""
    if v.op is not None and v.op.prim == "broadcast_in_dim":
        return v.op.inputs[0]
    return v


class KernelSpec(NamedTuple):
    """What identifies a group's kernel: its source, its signature, their hash and the
    file the source lives in (computed without touching the disk)."""

    source: str
    signature: list
    sha: str
    path: str


def kernel_spec(group) -> KernelSpec:
    """The ``KernelSpec`` of ``group``'s kernel."""
    return _spec(kernel_source(group), kernel_signature(group), "k")


def _spec(source, signature, prefix):
    sha = hashlib.sha1((source + repr(signature)).encode()).hexdigest()[:16]
    return KernelSpec(source, signature, sha, os.path.join(cache_dir(), f"{prefix}_{sha}.py"))


def write_source(group, spec=None):
    """Writes the kernel's source to the cache directory, signed (unless the file there
    already holds exactly it; see ``kernel_cache.write_source``); returns ``(sha, path)``.
    Raises ``kernel_cache.UnsafeCacheError`` (an OSError) for a cache folder others could
    write."""
    spec = spec or kernel_spec(group)
    kernel_cache.write_source(spec.path, spec.source)
    return spec.sha, spec.path


def is_loaded(group) -> bool:
    """Whether the kernel for ``group`` is already compiled or loaded in this process."""
    return kernel_spec(group).sha in _kernels


def compile_group(group):
    """A launcher for ``group``'s kernel: ``launcher(*inputs, *outputs) -> outputs``, where
    ``full`` inputs are inlined constants and are not passed. Compiles the kernel, or loads
    it from numba's disk cache."""
    spec = kernel_spec(group)
    return _Launcher(_entry(spec), group, spec.source, spec.signature)


def _entry(spec):
    """The compiled entry point of ``spec``'s kernel (a group's or a whole loop's): this
    process's, else compiled now or loaded from numba's disk cache."""
    entry = _kernels.get(spec.sha)
    if entry is None:
        with _lock:
            entry = _kernels.get(spec.sha)
            if entry is None:
                kernel_cache.write_source(spec.path, spec.source)
                entry = _kernels[spec.sha] = load_kernel(spec.path, spec.signature)
                mark_ready(spec.path)
    return entry


class _Launcher:
    """Calls a compiled kernel with the group's non-constant inputs and the outputs. The
    compiled code trusts the layout of its signature, so an input declared C-contiguous
    that is not (a program input given as a strided view) is copied first."""

    def __init__(self, entry, group, source, signature):
        self.entry = entry
        self.source = source
        self.skip = [v.op is not None and v.op.prim == "full" for v in group.inputs]
        self.contiguous = [layout == "C" for _, _, layout, _ in signature[:self.skip.count(False)]]

    def __call__(self, *arrays):
        n_in = len(self.skip)
        ins = [a if isinstance(a, np.ndarray) else np.asarray(a)  # 0-d results may be scalars
               for a, s in zip(arrays[:n_in], self.skip) if not s]
        for i, c in enumerate(self.contiguous):
            if c and not ins[i].flags.c_contiguous:
                ins[i] = np.ascontiguousarray(ins[i])
        return self.entry(*ins, *arrays[n_in:])


# ---- compiling in a background process -----------------------------------------------------

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numba_worker.py")
WORKER_TIMEOUT_S = 1800  # one job (a program's kernels); then the NumPy code stays
# The worker runs at a low CPU priority, so a program hardly waits for its own kernels'
# compile: with a core free it compiles as fast as at normal priority; where the program
# (or other work) keeps every core busy, the compile gets a small share (about a tenth of a
# core at nice 10 against nice-0 work) and the NumPy tier keeps most of the machine. Not the
# lowest priority (19, ~1.5% of a core): on a machine kept busy by other processes, the
# compile of a few seconds then took minutes and the program never reached its kernels.
# Measurements: bench/README.md, "tiers".
WORKER_NICENESS = 10
_background = {"queue": None, "process": None}


def uncompiled(groups, specs=()):
    """The compile jobs (``{"path", "sig"}``) of the kernels of ``groups`` and of the
    ``KernelSpec``s ``specs`` that are not in the disk cache yet; writes the groups'
    sources. An empty list: every kernel can be loaded now."""
    all_specs = list(specs)
    for g in groups:
        spec = kernel_spec(g)
        write_source(g, spec)
        all_specs.append(spec)
    return [{"path": spec.path, "sig": spec.signature} for spec in all_specs
            if not os.path.exists(ready_marker(spec.path))]


def prepare_process():
    """Runs numba's once-per-process set-up now, in the calling thread: loading the first
    kernel from the disk cache sets up numba's compiler registries (imports, the runtime's
    own functions), 0.15-0.25 s holding the GIL. Done by a background thread, that stalled
    the program's next calls (one measured at 196 ms against 9); done here, the first call
    pays it once. A no-op after the first time, or without numba.

    Example:
        >>> prepare_process()  # the next kernel load costs milliseconds
    """
    if _state["prepared"] or not available():
        return
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target

    with global_compiler_lock:
        cpu_target.target_context.refresh()
    _state["prepared"] = True


def compile_in_background(jobs, done):
    """Compiles ``jobs`` (the kernels ``uncompiled`` lists, sources written) into the disk
    cache in a separate process (numba's compiler is Python code holding the GIL: a thread
    would stall this process), one job list at a time; then calls ``done(error)`` from a
    background thread (``error`` is None or a message), which loads them from the disk
    cache. Job lists wait in a last-in-first-out queue; each keeps the worker settings
    (``WORKER_NICENESS``, ``WORKER_TIMEOUT_S``) and the cache folder in force when it was
    queued."""
    with _lock:
        if _background["queue"] is None:
            import atexit
            import queue

            # newest first: the program submitted last is the one running now (and the one
            # a wait_compiled() waits for); older ones keep running their NumPy code
            _background["queue"] = queue.LifoQueue()
            threading.Thread(target=_serve, name="primflow-numba-compile", daemon=True).start()
            atexit.register(_stop_worker)
        # the settings travel with the job: a job served later (after others) still runs
        # under the settings it was queued with, not whatever the module holds by then
        settings = (_WORKER, WORKER_NICENESS, WORKER_TIMEOUT_S, cache_dir())
        _background["queue"].put((jobs, done, settings))


def _serve():
    import subprocess

    while True:
        jobs, done, (worker, niceness, timeout, folder) = _background["queue"].get()
        error = None
        if jobs:
            try:
                proc = subprocess.Popen([sys.executable, worker, str(niceness)], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
                _background["process"] = proc
                out, err = proc.communicate(json.dumps(jobs), timeout=timeout)
                _warn_notices(out)
                if proc.returncode != 0:
                    error = (f"the numba compile worker exited with code {proc.returncode}: "
                             f"{(err or '').strip()[-2000:]}")
            except Exception as e:  # noqa: BLE001 - reported to the caller, never raised here
                error = f"the numba compile worker failed: {e!r}"
            finally:
                proc = _background["process"]
                if proc is not None and proc.poll() is None:  # timed out: never leave it
                    proc.kill()
                    proc.wait()
                _background["process"] = None
        _loading_from.path = folder
        try:
            done(error)
        except Exception:  # noqa: BLE001,S110 - the callback reports its own errors
            pass
        finally:
            _loading_from.path = None


def _warn_notices(out):
    """Warns the worker's notices (cache files it deleted; a JSON list on its stdout)."""
    try:
        notices = json.loads(out or "[]")
    except ValueError:
        return
    for notice in notices if isinstance(notices, list) else ():
        warnings.warn(str(notice), RuntimeWarning, stacklevel=2)


def _stop_worker():
    proc = _background["process"]
    if proc is not None and proc.poll() is None:
        proc.kill()


__all__ = [
    "AUTO_MIN_ELEMENTS",
    "available",
    "compile_group",
    "compile_in_background",
    "is_loaded",
    "kernel_signature",
    "kernel_source",
    "load_kernel",
    "np",
    "prepare_process",
    "supports",
    "uncompiled",
]
