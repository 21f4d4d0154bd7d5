"""Memory planning: which preallocated buffer each computed value lives in.

The generated code computes most operations into buffers (``np.add(a, b, out=buf)``). A
buffer is reused once every value living in it is dead, and an elementwise operation may
write over an operand whose last use it is (``np.tanh(buf, out=buf)``). Views (broadcast,
reshape, transpose, slice) alias their operand's buffer and keep it alive. Values that
leave the program (outputs and views of them) never get a buffer: the next call would
overwrite them.
"""

from __future__ import annotations

from .fuse import ELEMENTWISE, VIEWS


class MemoryPlan:
    """``buffer_of``: Value -> buffer index; ``buffers``: index -> (shape, dtype);
    ``in_place``: how many operations write over an operand."""

    def __init__(self):
        self.buffer_of = {}
        self.buffers = []
        self.in_place = 0

    @property
    def nbytes(self):
        total = 0
        for shape, dtype in self.buffers:
            n = dtype.itemsize
            for d in shape:
                n *= d
            total += n
        return total

    def __repr__(self):
        return (f"MemoryPlan({len(self.buffer_of)} values in {len(self.buffers)} buffers, "
                f"{self.in_place} in place, {self.nbytes} bytes)")


def plan_memory(fn, can_write=None, views=VIEWS) -> MemoryPlan:
    """Assigns buffers to the results of the operations ``can_write(op)`` accepts (default:
    floating elementwise operations and reductions).

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import plan_memory
        >>> fn = parse("def f(%0: float32[8]):\\n    %1: float32[8] = exp(%0)\\n"
        ...            "    %2: float32[8] = tanh(%1)\\n    %3: float32[8] = neg(%2)\\n"
        ...            "    return %3\\n")
        >>> plan_memory(fn)
        MemoryPlan(2 values in 1 buffers, 1 in place, 32 bytes)
    """
    if can_write is None:
        can_write = _default_can_write
    root = {}  # view value -> the value whose memory it shows
    for op in fn.ops:
        if op.prim in views and op.inputs:
            src = op.inputs[0]
            root[op.out] = root.get(src, src)
    escaping = {root.get(v, v) for v in fn.outputs}
    last_use = {}
    for i, op in enumerate(fn.ops):
        for v in op.inputs:
            last_use[root.get(v, v)] = i
    plan = MemoryPlan()
    free = {}
    for i, op in enumerate(fn.ops):
        out = op.out
        reused = None
        if can_write(op) and out not in escaping:
            key = (out.aval.shape, out.aval.dtype)
            if op.prim in ELEMENTWISE:
                reused = _in_place_operand(op, i, key, plan, root, last_use)
            if reused is not None:
                index = plan.buffer_of[reused]
                plan.in_place += 1
            elif free.get(key):
                index = free[key].pop()
            else:
                index = len(plan.buffers)
                plan.buffers.append(key)
            plan.buffer_of[out] = index
        for r in {root.get(v, v) for v in op.inputs}:
            if r is not reused and last_use.get(r) == i and r in plan.buffer_of:
                free.setdefault(plan.buffers[plan.buffer_of[r]], []).append(plan.buffer_of[r])
        if out in plan.buffer_of and out not in last_use:  # computed but never read
            free.setdefault(plan.buffers[plan.buffer_of[out]], []).append(plan.buffer_of[out])
    return plan


def _in_place_operand(op, i, key, plan, root, last_use):
    """An operand whose buffer ``op`` can overwrite: read directly (not through a view), of
    the same type, dead after ``op``, and not also read through a view by ``op``."""
    for v in op.inputs:
        if v in root or v not in plan.buffer_of or last_use.get(v) != i:
            continue
        if (v.aval.shape, v.aval.dtype) != key:
            continue
        if any(u is not v and root.get(u, u) is v for u in op.inputs):
            continue
        return v
    return None


def _default_can_write(op):
    return ((op.prim in ELEMENTWISE or op.prim in ("reduce_sum", "reduce_max", "reduce_min"))
            and op.out.aval.dtype.is_floating)
