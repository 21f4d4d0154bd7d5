"""Row blocking: a program that treats the rows of its batch dimension independently can run
on blocks of rows, one after the other.

Derivative programs over many points (a PDE residual at N collocation points, a batched
Hessian) compute every point on its own: the weights are shared, nothing mixes rows. Run
whole, each intermediate is N rows long and lives in main memory; run in blocks of b rows,
the intermediates are b rows long, the planned buffers shrink N/b times and stay in cache.

``batch_axes`` finds the batch dimension: a size N that occurs in the program's values at
most once per value (so the dimension is unambiguous), in every output, and only where
rows stay independent:

* elementwise operations (operands of equal shape in the IR),
* ``broadcast_in_dim`` that keeps the batch dimension a dimension (or broadcasts a value
  without it along it: equal rows),
* ``reshape`` that keeps it a dimension with the same number of elements before it,
* ``transpose``, reductions over other axes, ``dot_general`` where it is a free or batch
  dimension (never contracted), ``slice`` that takes all of it, ``full``.

Anything else that touches a dimension of size N (gathers, cumulative sums, random draws,
constants with that dimension, ...) means: no blocking. ``block_program`` rewrites the
program for blocks of b rows (shapes and shape parameters), with what does not depend on
the rows hoisted into a prologue that runs once; the compiler runs the rest per block.
"""

from __future__ import annotations

import math

from .._program import CONSTANT, Aval, Function, Operation, Value
from .dce import dce
from .fuse import ELEMENTWISE, REDUCTIONS


def batch_axes(fn):
    """``(n, axis_of)``: the batch size and, for every value of ``fn``, the axis of its batch
    dimension (None where it has none), or None when ``fn`` cannot run in row blocks.

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float32[100,3], %1: float32[3,4]):\\n"
        ...            "    %2: float32[100,4] = dot_general(%0, %1, contracting=((1,),(0,)), "
        ...            "batch=((),()))\\n    return %2\\n")
        >>> n, axis_of = batch_axes(fn)
        >>> n, [axis_of[v] for v in fn.inputs]
        (100, [0, None])
    """
    if not fn.outputs or any(not v.aval.shape for v in fn.outputs):
        return None
    for n in sorted({v.aval.shape[0] for v in fn.outputs}, reverse=True):
        if n > 1:
            axis_of = _propagate(fn, n)
            if axis_of is not None:
                return n, axis_of
    return None


def _axis(value, n):
    dims = [d for d, size in enumerate(value.aval.shape) if size == n]
    if len(dims) > 1:
        raise _NotBlockable
    return dims[0] if dims else None


class _NotBlockable(Exception):
    pass


def _propagate(fn, n):
    try:
        axis_of = {v: _axis(v, n) for v in fn.inputs}
        for op in fn.ops:
            axis_of[op.out] = out = _axis(op.out, n)
            ins = [axis_of[v] for v in op.inputs]
            if out is None and all(a is None for a in ins):
                continue  # does not touch the batch dimension: the same in every block
            if not _rows_independent(op, ins, out):
                return None
        if any(axis_of[v] is None for v in fn.outputs):
            return None
        return axis_of
    except _NotBlockable:
        return None


def _rows_independent(op, ins, out):
    """Whether ``op`` computes each row of its result (along axis ``out``) from the same
    rows of its operands (batch axes ``ins``)."""
    prim, params = op.prim, op.params
    if prim in ELEMENTWISE:
        return all(a is None and not v.aval.shape or a == out for a, v in zip(ins, op.inputs))
    if prim == "broadcast_in_dim":
        (a,) = ins
        return out is not None and (a is None or params["broadcast_dimensions"][a] == out)
    if prim == "reshape":
        (a,) = ins
        if a is None or out is None:
            return False
        before_in = math.prod(op.inputs[0].aval.shape[:a])
        return before_in == math.prod(op.out.aval.shape[:out])
    if prim == "transpose":
        (a,) = ins
        return a is not None and out is not None and tuple(params["perm"]).index(a) == out
    if prim in REDUCTIONS:
        (a,) = ins
        if a is None or a in params["axes"]:
            return False
        return out == a - sum(1 for d in params["axes"] if d < a)
    if prim == "dot_general":
        return _dot_rows(op, ins, out)
    if prim == "slice":
        (a,) = ins
        return (a is not None and a == out and params["start"][a] == 0
                and params["limit"][a] == op.inputs[0].aval.shape[a]
                and (params["strides"] is None or params["strides"][a] == 1))
    if prim == "full":
        return True
    return False  # gather, scatter, cumsum, iota, random draws, constants, ...


def _dot_rows(op, ins, out):
    (lc, rc), (lb, rb) = op.params["contracting"], op.params["batch"]
    ax, ay = ins
    if ax in lc or ay in rc:
        return False
    x_rank, y_rank = len(op.inputs[0].aval.shape), len(op.inputs[1].aval.shape)
    x_free = [d for d in range(x_rank) if d not in lc and d not in lb]
    y_free = [d for d in range(y_rank) if d not in rc and d not in rb]
    if ax is not None and ax in lb:  # a batch dim of the product: both operands carry it
        k = list(lb).index(ax)
        return ay == rb[k] and out == k
    if ay is not None and ay in rb:
        return False  # batched y, x without it along the paired dim
    if ax is not None and ay is not None:
        return False  # free in both: the product would pair rows with rows
    if ax is not None:
        return out == len(lb) + x_free.index(ax)
    return out == len(lb) + len(x_free) + y_free.index(ay)


def block_program(fn, axis_of, n, rows, early_row_bytes=0):
    """``(prologue, body)``: ``body`` is a copy of ``fn`` computing ``rows`` rows of the
    batch dimension instead of ``n`` (the shapes of values, and the shape parameters of
    operations, rewritten); ``prologue`` computes, once for all blocks, the values that do
    not depend on the rows (a product of two weight matrices, an identity matrix), and
    ``body`` reads them as extra inputs after ``fn``'s: ``body(*args_block, *prologue(*args))``.
    ``prologue`` is None when there is nothing to hoist. Constant fills stay in ``body``
    (kernels inline them). With ``early_row_bytes``, values of at most that many bytes per
    row that the prologue can compute (from inputs and prologue values) are computed there
    too, for all ``n`` rows at once (a small layer's matrix product on all points instead
    of one call per block), and ``body`` reads their block of rows.

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float32[100,3], %1: float32[3,3]):\\n"
        ...            "    %2: float32[3,3] = exp(%1)\\n"
        ...            "    %3: float32[100,3] = dot_general(%0, %2, contracting=((1,),(0,)), "
        ...            "batch=((),()))\\n    return %3\\n")
        >>> n, axis_of = batch_axes(fn)
        >>> prologue, body = block_program(fn, axis_of, n, 25)
        >>> [op.prim for op in prologue.ops], [op.prim for op in body.ops]
        (['exp'], ['dot_general'])
        >>> [v.aval.shape for v in body.inputs]
        [(25, 3), (3, 3), (3, 3)]
    """
    in_prologue = set()
    for op in fn.ops:
        if op.prim in _LEFT_IN_BODY:
            continue
        if axis_of.get(op.out) is None:  # then its operands do not depend on rows either
            in_prologue.add(id(op))
        elif (early_row_bytes and _row_bytes(op.out, n) <= early_row_bytes
              and all(v.op is None or id(v.op) in in_prologue or v.op.prim in _LEFT_IN_BODY
                      for v in op.inputs)):
            in_prologue.add(id(op))

    def hoisted(op):
        return id(op) in in_prologue

    body_ops = [op for op in fn.ops if not hoisted(op)]
    carried = []  # values the prologue computes and the body reads
    for v in [v for op in body_ops for v in op.inputs] + list(fn.outputs):
        if v.op is not None and hoisted(v.op) and v not in carried:
            carried.append(v)  # (an output computed early: the body passes its block on)
    prologue = None
    if carried:
        pro = Function(fn.name + "_prologue", fn.inputs, [op for op in fn.ops if hoisted(op)
                                                         or op.prim in _LEFT_IN_BODY],
                       carried, dict(fn.consts))
        prologue = dce(pro.copy())

    def aval(v):
        a = axis_of.get(v)
        if a is None:
            return v.aval
        shape = list(v.aval.shape)
        shape[a] = rows
        return Aval(tuple(shape), v.aval.dtype)

    mapping = {}
    inputs = []
    for v in list(fn.inputs) + carried:
        nv = Value(aval(v))
        mapping[v] = nv
        inputs.append(nv)
    ops = []
    for op in body_ops:
        params = dict(op.params)
        a = axis_of.get(op.out)
        if a is not None and op.prim != CONSTANT:
            if "shape" in params:
                shape = list(params["shape"])
                shape[a] = rows
                params["shape"] = tuple(shape)
            if op.prim == "slice":
                limit = list(params["limit"])
                limit[a] = rows
                params["limit"] = tuple(limit)
        new = Operation(op.prim, [mapping[v] for v in op.inputs], params, aval(op.out))
        mapping[op.out] = new.out
        ops.append(new)
    body = Function(fn.name, inputs, ops, [mapping[v] for v in fn.outputs], dict(fn.consts))
    return prologue, dce(body)


_LEFT_IN_BODY = frozenset({CONSTANT, "full", "iota"})  # free to compute, inlined by kernels


def _row_bytes(v, n):
    size = v.aval.dtype.itemsize
    for d in v.aval.shape:
        size *= d
    return size // n
