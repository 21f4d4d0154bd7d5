"""The OpInfo table on a dtype x mode x backend matrix, generated from the table.

Every entry whose inputs are floating (kinds ``diff``, ``nondiff``, ``nograd``) runs its
first sample in each cell ``(entry, dtype, mode, backend)``:

* dtypes: float64, float32, float16, bfloat16 (an entry that ``computes_complex`` runs its
  float32/float64 cells in complex64/complex128 and is labelled so);
* modes: ``eager``; ``jit`` (the backend's code generator: NumPy source on the NumPy
  backend, array-API source on an array-API one); ``jit_numba`` (numba kernels,
  ``tiered=False``; NumPy backend); ``vmap`` (a batch of two samples); ``jet`` (Taylor mode,
  differentiable entries);
* backends: ``numpy``, ``array_api_strict`` (array-API backend over array-api-strict),
  ``torch`` (array-API backend over PyTorch CPU), ``cupy`` (the GPU).

Each cell asserts: the output dtype equals what the primitives' ``infer`` rules say (read
from the traced program); the values agree with the eager NumPy cell of the same dtype
within ``AGREE`` and with float64 within ``ACCURACY``; the gradients (``diff`` entries) agree
with the float64 eager gradients within ``GRAD`` (jet: its first coefficient against the
same gradient, by the dot-product identity). Comparisons are normwise:
``max|got - ref| <= tol * max(max|ref|, 1)``. An entry overrides a tolerance with
``tol={"value_float16": ...}`` (``agree_``, ``value_``, ``grad_`` + the dtype).

A cell that cannot run skips naming why (``skip_reason``): a limitation declared in the
entry (``OpInfo.limits``), one of the axis (numba kernels exist for NumPy arrays only;
array-api-strict has only the standard's dtypes) or of this machine (no torch, no GPU,
no ml_dtypes, no numba).

Example:
    >>> from primflow.testing.opinfo import matrix
    >>> cell = next(c for c in matrix.cells() if c.id == "exp-float32-jit-numpy")
    >>> matrix.run_cell(cell)  # raises AssertionError naming the disagreement
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import zlib
from dataclasses import dataclass

import numpy as np

import primflow as pf

from ..check_grads import as_list
from ..extras import has_extra
from ..extras import skip_reason as extra_skip_reason
from . import OP_DB
from .base import OpInfo

DTYPES = ("float64", "float32", "float16", "bfloat16")
LOW_PRECISION = ("float16", "bfloat16")
MODES = ("eager", "jit", "jit_numba", "vmap", "jet")
BACKENDS = ("numpy", "array_api_strict", "torch", "cupy")
KINDS = ("diff", "nondiff", "nograd")

# normwise relative tolerances: across cells of one dtype, against float64, gradients
AGREE = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}
ACCURACY = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2, "bfloat16": 5e-2}
GRAD = {"float64": 1e-10, "float32": 1e-4, "float16": 5e-2, "bfloat16": 2e-1}

# the default run: the whole matrix in float64/float32, one mode (eager NumPy) per extra dtype
DEFAULT_LOW_PRECISION_CELL = ("eager", "numpy")


@dataclass(frozen=True)
class Cell:
    info: OpInfo
    dtype: str
    mode: str
    backend: str

    @property
    def dtype_label(self):
        if self.info.computes_complex and self.dtype in ("float32", "float64"):
            return {"float32": "complex64", "float64": "complex128"}[self.dtype]
        return self.dtype

    @property
    def id(self):
        return f"{self.info.name}-{self.dtype_label}-{self.mode}-{self.backend}"


def modes_of(info):
    """The modes an entry's kind makes claims in (jet needs a differentiable op)."""
    return MODES if info.kind == "diff" else tuple(m for m in MODES if m != "jet")


def cells(full=False, entries=None):
    """Every cell of the matrix (``full``) or the default selection: all modes and backends
    in float64/float32, eager NumPy only in float16/bfloat16."""
    for info in OP_DB if entries is None else entries:
        if info.kind not in KINDS:
            continue
        for dtype in DTYPES:
            for mode in modes_of(info):
                for backend in BACKENDS:
                    if (not full and dtype in LOW_PRECISION
                            and (mode, backend) != DEFAULT_LOW_PRECISION_CELL):
                        continue
                    yield Cell(info, dtype, mode, backend)


# ---- why a cell cannot run ------------------------------------------------------------------

def _module(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@functools.lru_cache(maxsize=None)
def _gpu_count():
    from primflow.backends import devices  # noqa: PLC0415

    try:
        return devices.gpu_count()
    except Exception:  # a broken driver counts as no GPU
        return 0


def skip_reason(cell):
    """Why ``cell`` cannot run here, or None."""
    for extra in cell.info.extras:  # (LU without SciPy, on a bare install)
        if not has_extra(extra):
            return extra_skip_reason(extra)
    for limit in cell.info.limits:
        if limit.matches(cell.dtype, cell.mode, cell.backend):
            return f"{cell.info.name}: {limit.reason}"
    if cell.mode == "jit_numba" and cell.backend != "numpy":
        return "numba kernels run on NumPy arrays: the jit_numba mode is NumPy-backend only"
    if cell.mode == "jit_numba" and not has_extra("jit"):
        return extra_skip_reason("jit")
    if cell.dtype == "bfloat16" and cell.backend == "numpy" and not has_extra("bfloat16"):
        return extra_skip_reason("bfloat16")
    if cell.mode == "vmap" and not cell.info.samples()[0].args:
        return "the sample has no array input to map over"
    if cell.backend == "array_api_strict":
        xp = _module("array_api_strict")
        if xp is None or _module("array_api_compat") is None:
            return "array_api_strict or array_api_compat is not installed (the test extra)"
        if not hasattr(xp, cell.dtype):
            return (f"array_api_strict has only the standard's dtypes: no {cell.dtype}")
    if cell.backend == "torch":
        torch = _module("torch")
        if torch is None:
            return "torch is not importable here (the array-API backend over PyTorch CPU)"
        if cell.dtype == "bfloat16" and not has_extra("bfloat16"):
            return extra_skip_reason("bfloat16")
    if cell.backend == "cupy":
        cupy = _module("cupy")
        if cupy is None:
            return "CuPy is not installed (the gpu extra)"
        if not _gpu_count():
            return "no GPU on this machine (CuPy cells need one)"
        if not hasattr(cupy, cell.dtype):
            return f"CuPy has no {cell.dtype} dtype"
    return None


@contextlib.contextmanager
def _on(backend):
    if backend == "numpy":
        with pf.backend("numpy") as b:
            yield b
    elif backend == "array_api_strict":
        with pf.backend("array_api", namespace=importlib.import_module("array_api_strict")) as b:
            yield b
    elif backend == "torch":
        with pf.backend("array_api", namespace=importlib.import_module("torch")) as b:
            yield b
    elif backend == "cupy":
        previous = pf.get_device()
        pf.set_device("gpu")
        try:
            yield pf.get_backend()
        finally:
            pf.set_device(previous)
    else:
        raise ValueError(f"unknown backend {backend!r}; one of {BACKENDS}")


# ---- inputs and references ------------------------------------------------------------------

def _native(dtype):
    if dtype == "bfloat16":
        import ml_dtypes  # noqa: PLC0415 - the bfloat16 extra

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def _is_float(a):
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _rounded(args, dtype):
    """The sample's floating arrays rounded to ``dtype`` and back to float64: every cell and
    the float64 reference see the same numbers."""
    return tuple(np.asarray(a.astype(_native(dtype)), dtype=np.float64) if _is_float(a) else a
                 for a in args)


@dataclass
class _Case:
    args: tuple  # float64 arrays holding values exact in the cell's dtype
    kwargs: dict
    diff: tuple  # positions of the differentiated args


def _cases(info, dtype):
    """Two samples of the same shapes (the vmap batch): the entry's first and another draw
    of its mapped args (the differentiated ones; every array of an entry without
    gradients), the other args shared."""
    first = info.samples()[0]
    other = info.samples(np.random.default_rng(zlib.crc32(f"{info.name}/2".encode())))[0]
    mapped = first.diff_indices() if info.kind == "diff" else tuple(
        i for i, a in enumerate(first.args) if isinstance(a, np.ndarray))
    other_args = tuple(b if i in mapped else a
                       for i, (a, b) in enumerate(zip(first.args, other.args)))
    return [_Case(_rounded(args, dtype), first.kwargs, mapped)
            for args in (first.args, other_args)]


def _tensor(a, dtype, requires_grad=False):
    if _is_float(a):
        return pf.to_tensor(a.astype(_native(dtype)), dtype=dtype,
                            stop_gradient=not requires_grad)
    if isinstance(a, np.ndarray):
        return pf.to_tensor(a, dtype=str(a.dtype) if a.dtype.kind != "b" else "bool")
    return a


def _bind(info, case, dtype):
    """``(fn, leaves)``: ``fn(*leaves)`` calls the op with the differentiated args replaced;
    the other floating args are constants of ``dtype``, made on the active backend."""
    consts = {i: _tensor(a, dtype) for i, a in enumerate(case.args) if i not in case.diff}

    def fn(*xs):
        it = iter(xs)
        return info.op(*[next(it) if i in case.diff else consts[i]
                         for i in range(len(case.args))], **case.kwargs)

    leaves = [_tensor(case.args[i], dtype, requires_grad=info.kind == "diff")
              for i in case.diff]
    return fn, leaves


def _to_numpy(outs):
    return [None if o is None else np.asarray(o.numpy()) for o in outs]


def _weights(info, outs):
    rng = np.random.default_rng(zlib.crc32(f"{info.name}/matrix/w".encode()))
    return [rng.standard_normal(np.shape(o)) if o is not None and o.dtype.kind in "fc" else None
            for o in outs]


def _loss(outs, weights):
    total = None
    for o, w in zip(outs, weights):
        if w is None or o is None:
            continue
        term = (o * pf.to_tensor(w.astype(_native(o.dtype.name)), dtype=o.dtype.name)).sum()
        total = term if total is None else total + term
    return total


def _gradients(loss, leaves):
    if loss is None or loss.stop_gradient:
        return [np.zeros(x.shape) for x in leaves]
    grads = pf.grad(loss, leaves, allow_unused=True)
    return [np.zeros(x.shape) if g is None else np.asarray(g.numpy())
            for g, x in zip(grads, leaves)]


@dataclass
class _Result:
    values: list
    grads: list | None
    dtypes: list  # the output tensors' dtypes as primflow names


def _eager(info, case, dtype, weights=None):
    fn, leaves = _bind(info, case, dtype)
    outs = as_list(fn(*leaves))
    values = _to_numpy(outs)
    grads = None
    if info.kind == "diff":
        grads = _gradients(_loss(outs, weights or _weights(info, values)), leaves)
    return _Result(values, grads, [None if o is None else o.dtype.name for o in outs])


@functools.lru_cache(maxsize=None)
def _reference(name, dtype):
    """The float64 eager NumPy results (values, gradients) of both cases, the eager NumPy
    results in ``dtype``, and the output dtypes ``infer`` gives for ``dtype``."""
    info = next(i for i in OP_DB if i.name == name)
    cases = _cases(info, dtype)
    with _on("numpy"):
        ref64 = [_eager(info, c, "float64") for c in cases]
        weights = [_weights(info, r.values) for r in ref64]
        ref64 = [_eager(info, c, "float64", w) for c, w in zip(cases, weights)]
        here = _eager(info, cases[0], dtype, weights[0])
        inferred = _inferred_dtypes(info, cases[0], dtype)
    return cases, weights, ref64, here, inferred


def _inferred_dtypes(info, case, dtype):
    """The output dtypes the primitives' ``infer`` rules give: the avals of a trace."""
    seen = []

    def probe(*xs):
        outs = as_list(fn(*xs))
        seen.append([None if o is None else o.dtype.name for o in outs])
        return outs

    fn, leaves = _bind(info, case, dtype)
    with pf.no_grad():
        pf.jit(probe, backend="interpret").lower(*[x.detach() for x in leaves])
    return seen[0]


# ---- running a cell -------------------------------------------------------------------------

def _tol(info, what, dtype, table):
    return info.tol.get(f"{what}_{dtype}", table[dtype])


def _close(got, ref, tol, what):
    if ref is None:
        assert got is None, f"{what}: None expected"
        return
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    if ref.dtype.kind not in "fc" and ref.dtype.name != "bfloat16":
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return
    g = np.asarray(got, dtype=np.complex128 if got.dtype.kind == "c" else np.float64)
    r = np.asarray(ref, dtype=np.complex128 if ref.dtype.kind == "c" else np.float64)
    same = (np.isnan(g) & np.isnan(r)) | (g == r)  # infinities and nans in the same places
    if g.size == 0 or same.all():
        return
    finite = np.isfinite(r)
    assert np.all(same | finite), f"{what}: non-finite values differ\n{g}\nvs\n{r}"
    err = float(np.max(np.abs(np.where(same, 0, g - r))))
    scale = max(float(np.max(np.abs(r[finite]), initial=0.0)), 1.0)
    assert err <= tol * scale, (f"{what}: max error {err:.3g} > {tol:g} x {scale:.3g}\n"
                                f"got {g.ravel()[:6]}\nexpected {r.ravel()[:6]}")


def _run_mode(info, case, cell, weights):
    """The cell's values, gradients and output dtypes on the active backend."""
    fn, leaves = _bind(info, case, cell.dtype)
    if cell.mode == "eager":
        return _eager(info, case, cell.dtype, weights)
    if cell.mode in ("jit", "jit_numba"):
        options = {"backend": "numba", "tiered": False} if cell.mode == "jit_numba" else {}
        jitted = pf.jit(fn, **options)
        outs = as_list(jitted(*leaves))
        grads = _gradients(_loss(outs, weights), leaves) if info.kind == "diff" else None
        return _Result(_to_numpy(outs), grads, [None if o is None else o.dtype.name
                                                 for o in outs])
    raise ValueError(f"mode {cell.mode!r} is run by run_cell")


def run_cell(cell):
    """Runs one cell: raises ``AssertionError`` naming what disagrees."""
    info, dtype = cell.info, cell.dtype
    cases, weights, ref64, here, inferred = _reference(info.name, dtype)
    what = cell.id
    assert here.dtypes == inferred, (
        f"{what}: eager NumPy gives {here.dtypes}, infer says {inferred}")
    for got, ref in zip(here.values, ref64[0].values):
        _close(got, ref, _tol(info, "value", dtype, ACCURACY), f"{what} eager vs float64")
    with _on(cell.backend):
        if cell.mode in ("eager", "jit", "jit_numba"):
            results = [(_run_mode(info, cases[0], cell, weights[0]), 0)]
        elif cell.mode == "vmap":
            results = _run_vmap(info, cases, cell, weights)
        else:
            results = [(_run_jet(info, cases[0], cell, ref64[0]), 0)]
    for result, k in results:
        assert result.dtypes == inferred, (
            f"{what}: output dtypes {result.dtypes}, infer says {inferred}")
        arrays = [None if v is None else v.dtype.name for v in result.values]
        assert arrays == inferred, f"{what}: the arrays hold {arrays}, infer says {inferred}"
        for got, ref, ref_f64 in zip(result.values, here.values if k == 0 else
                                     [None] * len(result.values), ref64[k].values):
            if k == 0:
                _close(got, ref, _tol(info, "agree", dtype, AGREE), f"{what} vs eager {dtype}")
            _close(got, ref_f64, _tol(info, "value", dtype, ACCURACY), f"{what} vs float64")
        if result.grads is not None and ref64[k].grads is not None:
            for i, (got, ref) in enumerate(zip(result.grads, ref64[k].grads)):
                _close(got, ref, _tol(info, "grad", dtype, GRAD),
                       f"{what} gradient {i} vs float64 eager")


def _run_vmap(info, cases, cell, weights):
    """vmap over a batch of the two cases: each row against its own references."""
    dtype = cell.dtype
    fn, _ = _bind(info, cases[0], dtype)
    stacked = [_tensor(np.stack([c.args[i] for c in cases]), dtype,
                       requires_grad=info.kind == "diff") for i in cases[0].diff]
    outs = as_list(pf.vmap(fn)(*stacked))
    batch_weights = [None if w0 is None else np.stack([w0, w1])
                     for w0, w1 in zip(weights[0], weights[1])]
    grads = _gradients(_loss(outs, batch_weights), stacked) if info.kind == "diff" else None
    values = _to_numpy(outs)
    dtypes = [None if o is None else o.dtype.name for o in outs]
    return [(_Result([None if v is None else v[k] for v in values],
                     None if grads is None else [g[k] for g in grads], dtypes), k)
            for k in range(2)]


def _run_jet(info, case, cell, ref):
    """Taylor mode to order 2 along a random direction v: the primal output against the
    other cells, the first coefficient y1 by <w, y1> = <grad(<w, f>), v>."""
    dtype = cell.dtype
    fn, leaves = _bind(info, case, dtype)
    rng = np.random.default_rng(zlib.crc32(f"{info.name}/matrix/v".encode()))
    directions = [rng.standard_normal(x.shape) for x in leaves]
    series = tuple([pf.to_tensor(v.astype(_native(dtype)), dtype=dtype), pf.zeros_like(x)]
                   for v, x in zip(directions, leaves))
    primals = tuple(x.detach() for x in leaves)
    with pf.no_grad():
        y0, ys = pf.jet(lambda *xs: tuple(as_list(fn(*xs))), primals, series)
    outs = list(y0)
    weights = _weights(info, ref.values)
    got = sum(float(np.real(np.sum(np.asarray(c[0].numpy(), dtype=np.complex128) * w)))
              for c, w in zip(ys, weights) if w is not None)
    expected = sum(float(np.sum(g * v)) for g, v in zip(ref.grads, directions))
    tol = _tol(info, "grad", dtype, GRAD)
    scale = max(abs(expected), sum(float(np.sum(np.abs(g * v)))
                                   for g, v in zip(ref.grads, directions)), 1.0)
    assert abs(got - expected) <= tol * scale, (
        f"{cell.id}: <w, jet y1> = {got:.8g}, <grad, v> = {expected:.8g} (float64 eager)")
    return _Result(_to_numpy(outs), None, [o.dtype.name for o in outs])
