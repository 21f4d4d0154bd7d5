"""Memory planning: which preallocated buffer each computed value lives in.

The generated code computes most operations into buffers (``np.add(a, b, out=buf)``). A
buffer is reused once every value living in it is dead, and an elementwise operation may
write over an operand whose last use it is (``np.tanh(buf, out=buf)``). Views (broadcast,
reshape, transpose, slice) alias their operand's buffer and keep it alive. Values that
leave the program (outputs and views of them) never get a buffer: the next call would
overwrite them.
"""

from __future__ import annotations

from .fuse import ELEMENTWISE, REDUCTIONS, VIEWS, squeezed


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


def plan_memory(fn, can_write=None, views=VIEWS, units=()) -> MemoryPlan:
    """Assigns buffers to the results of the operations ``can_write(op)`` accepts (default:
    floating elementwise operations and reductions).

    ``units`` lists groups of operations that run as one loop nest (the numba kernels of
    fusion groups; each group's operations must be contiguous in ``fn.ops``). A unit
    interleaves its operations element by element, so a value it reads stays alive until the
    whole unit has run: its buffer is not reused for a later result of the same unit (the
    kernel would overwrite elements it still has to read, and a reduction initialises its
    output before the loop). The one exception is writing in place over an operand read
    only directly (never through a view) at the unit's own shape: each element is read
    before the same element is stored.

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
    units = [list(unit) for unit in units if unit]
    # a view inside a unit (a unit reshape in a kernel) renames a register, or is stored
    # like any other result: it aliases nothing
    in_unit = {id(op) for unit in units for op in unit}
    root = {}  # view value -> the value whose memory it shows
    for op in fn.ops:
        if op.prim in views and op.inputs and id(op) not in in_unit:
            src = op.inputs[0]
            root[op.out] = root.get(src, src)
    escaping = {root.get(v, v) for v in fn.outputs}
    position = {id(op): i for i, op in enumerate(fn.ops)}
    unit_of = {}  # id(op) -> (index of the unit's last operation, roots read through views)
    for unit in units:
        end = max(position[id(op)] for op in unit)
        if end - min(position[id(op)] for op in unit) != len(unit) - 1:
            raise ValueError("plan_memory: the operations of a unit must be contiguous")
        shape = unit[-1].inputs[0].aval.shape if unit[-1].prim in REDUCTIONS else \
            unit[-1].out.aval.shape
        inside = {op.out for op in unit}
        unsafe = set()  # roots some operation of the unit reads other than elementwise-directly
        for op in unit:
            for v in op.inputs:
                if v in inside:
                    continue
                if v in root or (squeezed(v.aval.shape) != squeezed(shape)
                                 and v.aval.shape != ()):
                    unsafe.add(root.get(v, v))
        info = (end, unsafe)
        for op in unit:
            unit_of[id(op)] = info
    last_use = {}
    for i, op in enumerate(fn.ops):
        at = unit_of[id(op)][0] if id(op) in unit_of else i
        for v in op.inputs:
            last_use[root.get(v, v)] = at
    plan = MemoryPlan()
    free = {}
    pending = []  # roots read by the current unit, freed when it ends
    taken = set()  # operands some operation wrote over in place (their buffer is not free)
    for i, op in enumerate(fn.ops):
        out = op.out
        unit = unit_of.get(id(op))
        at = unit[0] if unit is not None else i
        reused = None
        if can_write(op) and out not in escaping:
            key = (out.aval.shape, out.aval.dtype)
            if op.prim in ELEMENTWISE:
                reused = _in_place_operand(op, at, key, plan, root, last_use,
                                           unit[1] if unit is not None else (), taken)
            if reused is not None:
                index = plan.buffer_of[reused]
                plan.in_place += 1
                taken.add(reused)
            elif free.get(key):
                index = free[key].pop()
            else:
                index = len(plan.buffers)
                plan.buffers.append(key)
            plan.buffer_of[out] = index
        pending.extend(root.get(v, v) for v in op.inputs)
        if at == i:  # the end of the operation (or of the unit it belongs to)
            done = set()
            for r in pending:
                if (r not in done and r not in taken and last_use.get(r) == i
                        and r in plan.buffer_of):
                    done.add(r)
                    free.setdefault(plan.buffers[plan.buffer_of[r]], []).append(
                        plan.buffer_of[r])
            pending = []
        if out in plan.buffer_of and out not in last_use:  # computed but never read
            free.setdefault(plan.buffers[plan.buffer_of[out]], []).append(plan.buffer_of[out])
    return plan


def _in_place_operand(op, i, key, plan, root, last_use, unsafe=(), taken=()):
    """An operand whose buffer ``op`` can overwrite: read directly (not through a view), of
    the same type, dead after ``op`` (or after its unit, ``i``), not also read through a
    view by ``op`` (or, ``unsafe``, by its unit), and not already written over."""
    for v in op.inputs:
        if v in root or v not in plan.buffer_of or last_use.get(v) != i:
            continue
        if v in taken or v in unsafe:
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
