"""Recomputing broadcast products: cheap values are computed again where they are used,
instead of being stored once and read back.

A value is *cheap* when it is computed, by a few arithmetic operations, only from values
with fewer elements (broadcasts of vectors and matrices, scalars, constants): inside a
fused kernel it costs a few multiplications per element and reads only small arrays, while
storing it and reading it back moves its whole size through memory twice. Derivative
programs are full of them: a forward-mode tangent ``W1[i, k] * s[b, k]`` broadcast over a
batch, or its product with other per-point factors.

The pass gives each fusible consumer of a cheap value (an elementwise operation or a
reduction, which the fusion pass puts into a kernel) its own copy of the operations that
compute it, placed right before the consumer, so fusion puts the copy into the consumer's
kernel. Other consumers (matrix products, transcendental functions the kernels leave to
NumPy) keep reading the original, which is then computed and stored once. Values no
operation needs any more are dropped.

Only worth it when fused kernels run the copies (the numba compiler uses it); with
op-by-op NumPy code every copy would be another pass over memory.
"""

from __future__ import annotations

import math

from .._program import CONSTANT, Operation
from .._program import uses as count_uses
from .dce import dce
from .fuse import ELEMENTWISE, REDUCTIONS, is_unit_view

MAX_OPS = 12  # the most operations one copy may have (bounds the extra arithmetic)


def recompute_broadcasts(fn, fusible=None, max_ops=MAX_OPS):
    """Gives every fusible consumer of a cheap value its own copy of the value's operations
    (see the module docstring). ``fusible(op)`` says which operations fused kernels compute
    (default: every elementwise operation and reduction); copies contain only such
    operations (and unit reshapes). Edits ``fn`` in place and returns it.

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes.recompute import recompute_broadcasts
        >>> fn = parse("def f(%0: float32[4], %1: float32[3,4], %2: float32[3,4]):\\n"
        ...            "    %3: float32[3,4] = broadcast_in_dim(%0, shape=(3,4), "
        ...            "broadcast_dimensions=(1,))\\n"
        ...            "    %4: float32[3,4] = mul(%3, %3)\\n"
        ...            "    %5: float32[3,4] = add(%4, %1)\\n"
        ...            "    %6: float32[3,4] = sub(%4, %2)\\n"
        ...            "    return %5, %6\\n")
        >>> [op.prim for op in recompute_broadcasts(fn).ops]
        ['broadcast_in_dim', 'mul', 'add', 'mul', 'sub']
    """
    if fusible is None:
        def fusible(op):
            return op.prim in ELEMENTWISE or op.prim in REDUCTIONS
    copies = _cheap_values(fn, fusible, max_ops)
    if not copies:
        return fn
    uses = count_uses(fn)
    ops = []
    changed = False
    for op in fn.ops:
        if op.out in copies or not fusible(op):
            ops.append(op)
            continue
        mapping = {}
        for x in op.inputs:
            if x not in copies or not any(uses.get(o.out, 0) > 1 for o in copies[x]):
                continue  # not cheap, or already computed only for this consumer
            for o in copies[x]:
                if o.out not in mapping:
                    copy = Operation(o.prim, [mapping.get(v, v) for v in o.inputs], o.params,
                                     o.out.aval)
                    mapping[o.out] = copy.out
                    ops.append(copy)
        if mapping:
            op.inputs = [mapping.get(v, v) for v in op.inputs]
            changed = True
        ops.append(op)
    if changed:
        fn.ops = ops
        dce(fn)
    return fn


def _cheap_values(fn, fusible, max_ops):
    """Cheap value -> the operations computing it from small values, in program order."""
    copies = {}
    for op in fn.ops:
        if op.prim == CONSTANT or not (fusible(op) and op.prim in ELEMENTWISE
                                       or is_unit_view(op) and op.inputs[0] in copies):
            continue
        size = math.prod(op.out.aval.shape)
        needed, seen = [], set()
        for v in op.inputs:
            if v in copies:
                for o in copies[v]:
                    if id(o) not in seen:
                        seen.add(id(o))
                        needed.append(o)
            elif not _small(v, size):
                break
        else:
            needed.append(op)
            if len(needed) <= max_ops:
                copies[op.out] = needed
    return copies


def _small(v, size):
    """Whether reading ``v`` inside a kernel over ``size`` elements is cheap: a scalar, a
    constant fill, or a broadcast of fewer elements."""
    if not v.aval.shape or v.op is not None and v.op.prim == "full":
        return True
    return (v.op is not None and v.op.prim == "broadcast_in_dim"
            and math.prod(v.op.inputs[0].aval.shape) < size)
