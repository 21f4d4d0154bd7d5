"""Constant folding: an operation whose operands are all constants is evaluated once, at
compile time, with the backend kernel.

A result whose elements are all equal becomes a ``full`` operation (so the rewrite rules
see it: ``x * 1``, ``x + 0``...); a small non-uniform result becomes a ``constant`` from the
pool; a large non-uniform one is left alone (folding it would store a big array).
"""

from __future__ import annotations

from ...backends import get_backend
from .._program import CONSTANT, IMPURE, Operation

_backend = get_backend()

MAX_FOLDED_ELEMENTS = 4096


def uniform_value(array):
    """The single value all elements of ``array`` share, as a Python scalar, or None."""
    a = _backend.to_numpy(array)
    if a.size == 0:
        return None
    first = a.reshape(-1)[0].item()
    if all(s == 0 for s in a.strides):  # a broadcast of one element
        return first
    if a.size > 1 << 20:
        return None
    flat = a.reshape(-1)
    if first != first:  # nan: uniform only if every element is nan
        return first if bool((flat != flat).all()) else None
    return first if bool((flat == first).all()) else None


def fold_constants(fn, max_elements=MAX_FOLDED_ELEMENTS):
    """Evaluates operations whose operands are all ``full``/``constant`` results and
    replaces them by constants. Returns ``fn``.

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import dce, fold_constants
        >>> fn = parse("def f():\\n    %0: float64[2] = full(shape=(2,), value=2.0, "
        ...            "dtype=float64)\\n    %1: float64[2] = exp(%0)\\n    return %1\\n")
        >>> print(dce(fold_constants(fn)).as_text(), end="")
        def f():
            %0: float64[2] = full(shape=(2,), value=7.38905609893065, dtype=float64)
            return %0
    """
    kernels = _backend.kernels
    known = {}  # Value -> native array
    mapping = {}
    new_ops = []
    for op in fn.ops:
        if mapping:
            op.inputs = [mapping.get(v, v) for v in op.inputs]
        if op.prim == "full" or op.prim == CONSTANT:
            known[op.out] = op
        if (op.prim in IMPURE or op.prim in ("full", CONSTANT) or not op.inputs
                or not all(v in known for v in op.inputs)):
            new_ops.append(op)
            continue
        try:
            args = [_array_of(fn, known[v]) for v in op.inputs]
            result = kernels[op.prim](*args, **op.params)
        except Exception:  # noqa: BLE001 - leave what cannot be evaluated to run time
            new_ops.append(op)
            continue
        value = uniform_value(result)
        if value is not None:
            new = Operation("full", [], {"shape": op.out.aval.shape, "value": value,
                                         "dtype": op.out.aval.dtype}, op.out.aval)
        elif _size(op.out.aval.shape) <= max_elements:
            index = max(fn.consts, default=-1) + 1
            fn.consts[index] = result
            new = Operation(CONSTANT, [], {"index": index}, op.out.aval)
        else:
            new_ops.append(op)
            continue
        new_ops.append(new)
        known[new.out] = new
        mapping[op.out] = new.out
    fn.ops = new_ops
    if mapping:
        fn.outputs = [mapping.get(v, v) for v in fn.outputs]
    used = {op.params["index"] for op in fn.ops if op.prim == CONSTANT}
    fn.consts = {k: v for k, v in fn.consts.items() if k in used}
    return fn


def _array_of(fn, op):
    if op.prim == CONSTANT:
        return fn.consts[op.params["index"]]
    return _backend.kernels["full"](**op.params)


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n
