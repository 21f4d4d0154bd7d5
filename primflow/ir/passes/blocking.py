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
constants with that dimension, ...) means: no blocking.

With ``reductions=True`` a program may also **sum over the rows** (a training step: a loss
that is a mean over points, and its gradients, ``dot_general`` contracting the batch
dimension of both operands): ``reduce_sum`` over the batch axis and such products give, run
on a block, the block's partial sum; the partial sums are added in block order, and what
depends on the sums (a mean's scale, an optimizer update) runs once after the blocks (the
epilogue). A value computed after a sum may not flow back into the rows (that would need a
second pass over the points). ``block_program`` rewrites the
program for blocks of b rows (shapes and shape parameters), with what does not depend on
the rows hoisted into a prologue that runs once; the compiler runs the rest per block.
"""

from __future__ import annotations

import math

from .._program import CONSTANT, Aval, Function, Operation, Value
from .dce import dce
from .fuse import ELEMENTWISE, REDUCTIONS


def batch_axes(fn, reductions=False):
    """``(n, axis_of)``: the batch size and, for every value of ``fn``, the axis of its batch
    dimension (None where it has none), or None when ``fn`` cannot run in row blocks. With
    ``reductions``, sums over the rows are allowed (see the module docstring; the candidate
    sizes are then also the inputs' dimensions, largest first).

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float32[100,3], %1: float32[3,4]):\\n"
        ...            "    %2: float32[100,4] = dot_general(%0, %1, contracting=((1,),(0,)), "
        ...            "batch=((),()))\\n    return %2\\n")
        >>> n, axis_of = batch_axes(fn)
        >>> n, [axis_of[v] for v in fn.inputs]
        (100, [0, None])
    """
    if not fn.outputs:
        return None
    candidates = {v.aval.shape[0] for v in fn.outputs if v.aval.shape}
    if reductions:
        candidates.update(d for v in fn.inputs for d in v.aval.shape)
    elif any(not v.aval.shape for v in fn.outputs):
        return None
    for n in sorted(candidates, reverse=True):
        if n > 1:
            axis_of = _propagate(fn, n, reductions)
            if axis_of is not None:
                return n, axis_of
    return None


def summed_rows(fn, axis_of):
    """The operations of ``fn`` that sum over the batch dimension (their results have none),
    by id, and the ids of the operations that depend on such a sum (the epilogue).

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float32[100,3]):\\n"
        ...            "    %1: float32[3] = reduce_sum(%0, axes=(0,))\\n"
        ...            "    %2: float32[3] = exp(%1)\\n    return %2\\n")
        >>> n, axis_of = batch_axes(fn, reductions=True)
        >>> sums, after = summed_rows(fn, axis_of)
        >>> len(sums), len(after)
        (1, 1)
    """
    sums, after, tainted = set(), set(), set()
    for op in fn.ops:
        ins = [axis_of.get(v) for v in op.inputs]
        if axis_of.get(op.out) is None and _sums_rows(op, ins):
            sums.add(id(op))
            tainted.add(op.out)
        elif any(v in tainted for v in op.inputs):
            after.add(id(op))
            tainted.add(op.out)
    return sums, after


def _axis(value, n):
    dims = [d for d, size in enumerate(value.aval.shape) if size == n]
    if len(dims) > 1:
        raise _NotBlockable
    return dims[0] if dims else None


class _NotBlockable(Exception):
    pass


def _propagate(fn, n, reductions=False):
    try:
        axis_of = {v: _axis(v, n) for v in fn.inputs}
        after_sum = set()  # values computed from a sum over the rows
        for op in fn.ops:
            ins = [axis_of[v] for v in op.inputs]
            # a value computed only from values without rows has none, whatever its size
            # (a flattened 64 x 64 weight gradient is not a batch of 4,096 rows); only a
            # broadcast or a fill creates rows
            rows_in = (not op.inputs or op.prim == "broadcast_in_dim"
                       or any(a is not None for a in ins))
            axis_of[op.out] = out = _axis(op.out, n) if rows_in else None
            if any(v in after_sum for v in op.inputs):
                if out is not None or any(a is not None for a in ins):
                    return None  # a sum over the rows flows back into the rows
                after_sum.add(op.out)
                continue
            if out is None and all(a is None for a in ins):
                continue  # does not touch the batch dimension: the same in every block
            if reductions and out is None and _sums_rows(op, ins):
                after_sum.add(op.out)
                continue
            if not _rows_independent(op, ins, out):
                return None
        if reductions:
            if not (after_sum or any(axis_of[v] is not None for v in fn.outputs)):
                return None  # nothing depends on the rows
        elif any(axis_of[v] is None for v in fn.outputs):
            return None
        return axis_of
    except _NotBlockable:
        return None


def _sums_rows(op, ins):
    """Whether ``op`` (whose result has no batch axis) sums its operands over the batch axis:
    a ``reduce_sum`` over it, or a ``dot_general`` contracting it in both operands."""
    if op.prim == "reduce_sum":
        return ins[0] is not None and ins[0] in op.params["axes"]
    if op.prim == "dot_general":
        (lc, rc), _ = op.params["contracting"], op.params["batch"]
        ax, ay = ins
        return (ax is not None and ay is not None and ax in lc and ay in rc
                and list(lc).index(ax) == list(rc).index(ay))
    return False


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
    blocked = block_sums_program(fn, axis_of, n, rows, early_row_bytes)
    if blocked.epilogue is not None:
        raise ValueError("block_program: the program sums over its rows; use "
                         "block_sums_program")
    return blocked.prologue, blocked.body


class BlockedProgram:
    """What ``block_sums_program`` returns: ``prologue`` (None or a Function of ``fn``'s
    inputs), ``body`` (a Function of a block of the inputs and the prologue's first results:
    the block of each row output, in order, then the partial sums ``sums``), ``side`` (None,
    or a Function of ``fn``'s inputs and the prologue's results computing what only the
    epilogue reads: it can run beside the blocks), ``epilogue`` (None when nothing sums
    over the rows, else a Function of ``fn``'s inputs, the prologue's and the side's
    results and the sums, returning ``fn``'s outputs without a batch axis, in order),
    ``row_outputs`` (the indices of ``fn``'s outputs with a batch axis) and ``carried``
    (the values of ``fn`` the prologue, then the side, compute, in the order they return
    them)."""

    def __init__(self, prologue, body, epilogue, row_outputs, sums, carried, side=None):
        self.prologue, self.body, self.epilogue = prologue, body, epilogue
        self.row_outputs, self.sums, self.carried = row_outputs, sums, carried
        self.side = side


def block_sums_program(fn, axis_of, n, rows, early_row_bytes=0,
                       side=False) -> BlockedProgram:
    """``block_program`` for a program that may also sum over its rows (``axis_of`` from
    ``batch_axes(fn, reductions=True)``): each block computes the partial sums, and the
    operations that depend on the sums form an epilogue run once after they are added.
    With ``side``, what does not depend on the rows and only the epilogue reads (a training
    step's loss on other points: the boundary of a PINN) leaves the prologue for a ``side``
    program, which may run on one thread while the others run blocks.

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float32[100,3]):\\n"
        ...            "    %1: float32[100,3] = tanh(%0)\\n"
        ...            "    %2: float32[3] = reduce_sum(%1, axes=(0,))\\n"
        ...            "    %3: float32[3] = exp(%2)\\n    return %3\\n")
        >>> n, axis_of = batch_axes(fn, reductions=True)
        >>> b = block_sums_program(fn, axis_of, n, 25)
        >>> [op.prim for op in b.body.ops], [op.prim for op in b.epilogue.ops]
        (['tanh', 'reduce_sum'], ['exp'])
    """
    sums, after = summed_rows(fn, axis_of)
    in_prologue = set()
    for op in fn.ops:
        if op.prim in _LEFT_IN_BODY or id(op) in sums or id(op) in after:
            continue
        if axis_of.get(op.out) is None:  # then its operands do not depend on rows either
            in_prologue.add(id(op))
        elif (early_row_bytes and _row_bytes(op.out, n) <= early_row_bytes
              and all(v.op is None or id(v.op) in in_prologue or v.op.prim in _LEFT_IN_BODY
                      for v in op.inputs)):
            in_prologue.add(id(op))

    def hoisted(op):
        return id(op) in in_prologue

    body_ops = [op for op in fn.ops if not hoisted(op) and id(op) not in after]
    after_ops = [op for op in fn.ops if id(op) in after]
    row_outputs = [i for i, v in enumerate(fn.outputs) if axis_of.get(v) is not None]
    carried = []  # values the prologue computes and the body (or the epilogue) reads
    for v in ([v for op in body_ops + after_ops for v in op.inputs] + list(fn.outputs)):
        if v.op is not None and hoisted(v.op) and v not in carried:
            carried.append(v)  # (an output computed early: the body passes its block on)
    side_program = None
    if side and sums and carried:
        carried, side_program = _split_side(fn, carried, body_ops, row_outputs, hoisted)
    prologue = None
    if carried:
        pro = Function(fn.name + "_prologue", fn.inputs, [op for op in fn.ops if hoisted(op)
                                                         or op.prim in _LEFT_IN_BODY],
                       carried, dict(fn.consts))
        prologue = dce(pro.copy())
    side_carried = list(side_program.outputs) if side_program is not None else []
    if side_program is not None:
        side_program = dce(side_program.copy())
    summed = []  # the sums the epilogue reads or returns, in program order
    epilogue = None
    if sums:
        wanted = {v for op in after_ops for v in op.inputs} | set(fn.outputs)
        summed = [op.out for op in fn.ops if id(op) in sums and op.out in wanted]
        left = [op for op in fn.ops if op.prim in _LEFT_IN_BODY]
        epi = Function(fn.name + "_epilogue", list(fn.inputs) + carried + side_carried + summed,
                       left + after_ops,
                       [v for i, v in enumerate(fn.outputs) if i not in row_outputs],
                       dict(fn.consts))
        epilogue = dce(epi.copy())

    def aval(v):
        a = axis_of.get(v)
        if a is None:
            return v.aval
        shape = list(v.aval.shape)
        shape[a] = rows
        return Aval(tuple(shape), v.aval.dtype)

    mapping = {}
    inputs = []
    body_reads = {v for op in body_ops for v in op.inputs}
    body_reads.update(fn.outputs[i] for i in row_outputs)
    for v in list(fn.inputs) + [v for v in carried if v in body_reads or side_program is None]:
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
    if sums:
        outputs = [mapping[fn.outputs[i]] for i in row_outputs] + [mapping[v] for v in summed]
    else:
        outputs = [mapping[v] for v in fn.outputs]
    body = Function(fn.name, inputs, ops, outputs, dict(fn.consts))
    return BlockedProgram(prologue, dce(body), epilogue, row_outputs, summed,
                          carried + side_carried, side_program)


def _split_side(fn, carried, body_ops, row_outputs, hoisted):
    """``(prologue_results, side)``: of the hoisted values ``carried``, the prologue keeps
    computing those the body reads (first, in order), and those values and the side's
    operands that its operations compute; the others move to ``side`` (a Function of
    ``fn``'s inputs and the prologue's results), or ``(carried, None)`` when none move."""
    body_reads = {v for op in body_ops for v in op.inputs}
    body_reads.update(fn.outputs[i] for i in row_outputs)
    first = [v for v in carried if v in body_reads]
    hoisted_ops = [op for op in fn.ops if hoisted(op)]
    in_prologue = _needed(hoisted_ops, first)
    later = [v for v in carried if v not in body_reads and id(v.op) not in in_prologue]
    if not later:
        return carried, None
    side_ops = [op for op in hoisted_ops
                if id(op) in _needed(hoisted_ops, later) and id(op) not in in_prologue]
    results = list(first)  # then what the side reads or the epilogue reads from them
    for v in [u for op in side_ops for u in op.inputs] + carried:
        if v.op is not None and id(v.op) in in_prologue and v not in results:
            results.append(v)
    left = [op for op in fn.ops if op.prim in _LEFT_IN_BODY]
    side = Function(fn.name + "_side", list(fn.inputs) + results, left + side_ops, later,
                    dict(fn.consts))
    return results, side


def _needed(ops, values):
    """The ids of the operations of ``ops`` (in program order) that ``values`` depend on."""
    wanted, ids = set(values), set()
    for op in reversed(ops):
        if op.out in wanted:
            ids.add(id(op))
            wanted.update(op.inputs)
    return ids


_LEFT_IN_BODY = frozenset({CONSTANT, "full", "iota"})  # free to compute, inlined by kernels


def _row_bytes(v, n):
    size = v.aval.dtype.itemsize
    for d in v.aval.shape:
        size *= d
    return size // n
