"""How the compiler writes each primitive as NumPy source (the NumPy backend's lowering).

``emit(op, args, out)`` returns the source of an expression computing ``op`` on the operand
expressions ``args``; ``out`` names a preallocated buffer to write into (``out=``), or is
None when the result must be a fresh array. Primitives without a specialised form call
the backend kernel (``K_<name>``) with their params, so every primitive compiles.

``can_write(op)`` says which operations can write into a buffer: floating elementwise
ufuncs, reductions and 2-d matrix products (BLAS ``matmul`` into ``out``).
"""

from __future__ import annotations

import math

import numpy as np

from ..backends import blas, get_backend
from ..core.backend import on_install

# the backend whose kernels generated NumPy code calls: the active one while it is lowered
# by this module (codegen "numpy"), kept while another is active (so that a numba
# upgrade generated in the background after pf.set_backend("array_api", ...) still gets
# NumPy's kernels)
_lowered = get_backend()


def _follow(backend):
    global _lowered
    if backend.codegen == "numpy":
        _lowered = backend


on_install(_follow)


def ufunc_source(prim, nin):
    """How generated code names the NumPy ufunc that is ``prim``'s kernel with ``nin`` inputs
    (``np.exp``, or ``K_<prim>`` for one outside NumPy such as SciPy's erf), or None when
    the kernel is no such ufunc. Derived from the kernel table: a primitive whose kernel is
    a ufunc is written as a ufunc call into a buffer without a table of names.

    Example:
        >>> ufunc_source("tanh", 1), ufunc_source("add", 2), ufunc_source("reshape", 1)
        ('np.tanh', 'np.add', None)
    """
    kernel = _lowered.kernels.get(prim)
    kernel = getattr(kernel, "__wrapped__", kernel)  # a ufunc behind an eager dtype check
    if not isinstance(kernel, np.ufunc) or kernel.nin != nin or kernel.nout != 1:
        return None
    return f"np.{kernel.__name__}" if getattr(np, kernel.__name__, None) is kernel else f"K_{prim}"


def namespace():
    """Globals of generated code: numpy, the kernels (``K_<prim>``) and helpers."""
    ns = {"np": np, "matmul": blas.matmul, "copy_into": copy_into, "empty": np.empty}
    for name, kernel in _lowered.kernels.items():
        ns[f"K_{name}"] = kernel
    return ns


def native_dtype(dtype):
    return _lowered.native_dtype(dtype)


def scalar(value, dtype):
    """``value`` as a NumPy scalar of ``dtype`` (keeps ufuncs in that dtype)."""
    return _lowered.native_dtype(dtype).type(value)


def allocate(shape, dtype):
    return np.empty(shape, dtype=_lowered.native_dtype(dtype))


def holds_bfloat16(op) -> bool:
    """Whether ``op`` reads or makes bfloat16 (an ml_dtypes type): it then runs as its kernel, which
    computes in float32 where NumPy has no bfloat16 loop, or as an ml_dtypes ufunc; never
    into a buffer."""
    return any(v.aval.dtype.name == "bfloat16" for v in (*op.inputs, op.out))


def can_write(op) -> bool:
    """Whether ``emit`` can compute ``op`` into a preallocated buffer."""
    aval = op.out.aval
    prim = op.prim
    if holds_bfloat16(op) or not (aval.dtype.is_floating or aval.dtype.is_bool):
        return False
    if ufunc_source(prim, len(op.inputs)) is not None:
        return True  # (bool results: comparisons and logic)
    if not aval.dtype.is_floating:
        return False
    if prim in ("rsqrt", "integer_pow", "convert_element_type", "reduce_sum", "reduce_max",
                "reduce_min", "mul_reduce_sum"):
        return True
    if prim == "dot_general":
        return _matmul_form(op) is not None or _gemm_form(op) is not None
    return False


def _matmul_form(op):
    """``(transpose_x, transpose_y)`` when the dot_general is a plain (possibly batched)
    matrix product ``matmul`` computes directly, else None."""
    x, y = op.inputs
    (lc, rc), (lb, rb) = op.params["contracting"], op.params["batch"]
    nx, ny = len(x.aval.shape), len(y.aval.shape)
    if len(lc) != 1 or nx != ny or nx not in (2, 3):
        return None
    nb = nx - 2
    if tuple(lb) != tuple(range(nb)) or tuple(rb) != tuple(range(nb)):
        return None
    lc, rc = lc[0], rc[0]
    if lc not in (nb, nb + 1) or rc not in (nb, nb + 1):
        return None
    return (lc == nb, rc == nb + 1)


def _gemm_form(op):
    """How a dot_general without batch dimensions becomes one 2-d GEMM: ``("outer",)`` for
    a product without contraction (a broadcast multiply), else ``("gemm", (m, k, n),
    x_transposed, y_transposed)`` when each operand's contracted dimensions are its
    leading or trailing ones, in order (the operand then reshapes to a matrix without a
    copy). None for anything else (the backend kernel handles it)."""
    x, y = op.inputs
    (lc, rc), (lb, rb) = op.params["contracting"], op.params["batch"]
    if lb or rb:
        return None
    sx, sy = tuple(x.aval.shape), tuple(y.aval.shape)
    nx, ny = len(sx), len(sy)
    lc, rc = tuple(lc), tuple(rc)
    if not lc:
        return ("outer",)
    nc = len(lc)
    leading, x_trailing = tuple(range(nc)), tuple(range(nx - nc, nx))
    if lc not in (x_trailing, leading) or rc not in (leading, tuple(range(ny - nc, ny))):
        return None
    tx, ty = lc != x_trailing, rc != leading  # (contracted on the other side: transposed)
    k = math.prod(sx[d] for d in lc)
    m = math.prod(sx) // k if k else math.prod(s for d, s in enumerate(sx) if d not in lc)
    n = math.prod(sy) // k if k else math.prod(s for d, s in enumerate(sy) if d not in rc)
    return ("gemm", (m, k, n), tx, ty)


def _as_matrix(arg, shape, rows, cols, transposed):
    """Source viewing ``arg`` (of ``shape``) as a (rows, cols) matrix, read transposed."""
    if transposed:
        expr = arg if tuple(shape) == (cols, rows) else f"{arg}.reshape({cols}, {rows})"
        return f"{expr}.T"
    return arg if tuple(shape) == (rows, cols) else f"{arg}.reshape({rows}, {cols})"


def _emit_gemm(op, args, out):
    form = _gemm_form(op)
    x, y = op.inputs
    shape = tuple(op.out.aval.shape)
    if form[0] == "outer":  # x[i..] * y[j..]: a broadcast multiply, no BLAS call
        sx = tuple(x.aval.shape) + (1,) * len(y.aval.shape)
        return f"np.multiply({args[0]}.reshape({sx!r}), {args[1]}{_out(out)})"
    _, (m, k, n), tx, ty = form
    a = _as_matrix(args[0], x.aval.shape, m, k, tx)
    b = _as_matrix(args[1], y.aval.shape, k, n, ty)
    if shape == (m, n):
        return f"matmul({a}, {b}{_out(out)})"
    if out is None:
        return f"matmul({a}, {b}).reshape({shape!r})"
    # the planned buffer is contiguous: its (m, n) reshape is a view of it
    return f"matmul({a}, {b}, out={out}.reshape({m}, {n})).reshape({shape!r})"


def _out(out):
    return "" if out is None else f", out={out}"


def emit(op, args, out, params_name):
    """The source of one expression computing ``op``. ``params_name`` names a dict of the
    operation's params in the namespace (for kernel calls)."""
    prim = op.prim
    aval = op.out.aval
    floating = aval.dtype.is_floating
    ufunc = ufunc_source(prim, len(args)) if floating or aval.dtype.is_bool else None
    if ufunc is not None and holds_bfloat16(op) and getattr(
            _lowered.kernels.get(prim), "computes_bfloat16_in_float32", False):
        ufunc = None  # the kernel, which computes bfloat16 in float32 as its declaration says
    if ufunc is not None:
        return f"{ufunc}({', '.join(args)}{_out(out)})"
    if holds_bfloat16(op) and prim not in ("reshape", "transpose"):
        return f"K_{prim}({', '.join(args)}{', ' if args else ''}**{params_name})"
    if prim == "rsqrt" and out is not None:
        return f"np.reciprocal(np.sqrt({args[0]}, out={out}), out={out})"
    if prim == "integer_pow" and floating:
        y = op.params["y"]
        if y == 2:
            return f"np.multiply({args[0]}, {args[0]}{_out(out)})"
        if y == 3 and out is not None:
            return (f"np.multiply(np.multiply({args[0]}, {args[0]}, out={out}), {args[0]}, "
                    f"out={out})")
        return f"np.power({args[0]}, {y}{_out(out)})"
    if prim == "convert_element_type" and out is not None:
        return f"copy_into({out}, {args[0]})"
    if prim in ("reduce_sum", "reduce_max", "reduce_min") and out is not None:
        fn = {"reduce_sum": "np.add.reduce", "reduce_max": "np.maximum.reduce",
              "reduce_min": "np.minimum.reduce"}[prim]
        return f"{fn}({args[0]}, axis={tuple(op.params['axes'])!r}, out={out})"
    if prim == "mul_reduce_sum":  # the compiler's fusion of reduce_sum(mul(a, b))
        ndim = len(op.inputs[0].aval.shape)
        letters = "abcdefghijklmnopqrstuvwxyz"[:ndim]
        axes = op.params["axes"]
        kept = "".join(c for d, c in enumerate(letters) if d not in axes)
        return f"np.einsum('{letters},{letters}->{kept}', {args[0]}, {args[1]}{_out(out)})"
    if prim == "dot_general" and _matmul_form(op) is not None:
        tx, ty = _matmul_form(op)
        a = f"{args[0]}{_swap(len(op.inputs[0].aval.shape)) if tx else ''}"
        b = f"{args[1]}{_swap(len(op.inputs[1].aval.shape)) if ty else ''}"
        return f"matmul({a}, {b}{_out(out)})"
    if prim == "dot_general" and _gemm_form(op) is not None:
        return _emit_gemm(op, args, out)
    # views spelled out as array methods: no keyword-dict call, and ~0.08 us instead of
    # np.reshape's ~0.5 us (its dispatch wrapper), which adds up in a loop body run per step
    if prim == "reshape":
        return f"{args[0]}.reshape({tuple(op.params['shape'])!r})"
    if prim == "transpose":
        return f"{args[0]}.transpose({tuple(op.params['perm'])!r})"
    return f"K_{prim}({', '.join(args)}{', ' if args else ''}**{params_name})"


def _swap(ndim):
    return ".T" if ndim == 2 else ".swapaxes(-1, -2)"


def copy_into(out, x):
    np.copyto(out, x, casting="unsafe")
    return out
