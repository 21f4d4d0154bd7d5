"""Fusion grouping: which operations the compiler may emit as one kernel.

A group is a chain of elementwise operations on one shape (unary and binary math,
comparisons, select, casts) plus, optionally, one reduction that consumes the chain (the
"reduction with its producers" pattern: ``sum(x * y)``, ``max(exp(x))``). Broadcasts,
reshapes and transposes feeding a group are views in the generated code, so they stay
outside and cost nothing.

Groups are convex: an operation joins a producer's group only if none of its other operands
depends on that group through an operation outside it (otherwise the group would have to
run both before and after that operation).

This pass is an analysis: the program is unchanged; ``fuse`` returns the groups.
"""

from __future__ import annotations

ELEMENTWISE = frozenset({
    "neg", "exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "sqrt", "rsqrt", "abs",
    "sign", "erf", "logistic", "floor", "ceil", "round", "integer_pow", "add", "sub", "mul",
    "div", "pow", "maximum", "minimum", "atan2", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_not", "select", "convert_element_type"})
# transcendental ops: numba (without SVML) computes them slower than NumPy's ufuncs
TRANSCENDENTAL = frozenset({"exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf",
                            "logistic", "pow", "atan2"})
REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min"})
VIEWS = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice"})


class FusionGroup:
    """Operations emitted together: ``ops`` in program order, ``inputs`` (values read from
    outside), ``outputs`` (values used outside or returned)."""

    __slots__ = ("gid", "inputs", "ops", "outputs", "shape")

    def __init__(self, gid, shape):
        self.gid = gid
        self.ops = []
        self.inputs = []
        self.outputs = []
        self.shape = shape

    @property
    def reduction(self):
        last = self.ops[-1]
        return last if last.prim in REDUCTIONS else None

    @property
    def transcendental(self):
        return any(op.prim in TRANSCENDENTAL for op in self.ops)

    def __repr__(self):
        return (f"FusionGroup({self.gid}: {' '.join(op.prim for op in self.ops)}; "
                f"{len(self.inputs)} in, {len(self.outputs)} out)")


def fuse(fn, min_size=2, exclude=frozenset()) -> list:
    """The fusion groups of ``fn`` with at least ``min_size`` operations, in program order.
    Operations whose primitive is in ``exclude`` stay outside every group (the numba
    compiler excludes ``TRANSCENDENTAL``: NumPy's vectorised ufuncs compute those faster,
    and the arithmetic around them still fuses).

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import fuse
        >>> fn = parse("def f(%0: float32[8]):\\n    %1: float32[8] = exp(%0)\\n"
        ...            "    %2: float32[8] = mul(%1, %0)\\n    %3: float32[] = "
        ...            "reduce_sum(%2, axes=(0,))\\n    return %3\\n")
        >>> fuse(fn)
        [FusionGroup(0: exp mul reduce_sum; 1 in, 1 out)]
    """
    group_of = {}  # Value -> FusionGroup (values computed inside a group)
    # Dependencies are tracked per group, not per value: a group runs as one unit, so a value
    # computed early in a group depends on everything the group reads, even what a later
    # member brings in. ``deps[v]`` holds the groups v reads directly or through operations
    # outside any group; ``group_deps[gid]`` the same for a group's members (it grows as the
    # group does); "u depends on g" is reachability through both.
    deps = {v: frozenset() for v in fn.inputs}
    group_deps = []

    def depends_on(u, gid):
        todo = list(deps.get(u, ()))
        seen = set()
        while todo:
            h = todo.pop()
            if h == gid:
                return True
            if h not in seen:
                seen.add(h)
                todo.extend(group_deps[h])
        return False

    groups = []
    for op in fn.ops:
        target = None
        if (op.prim in ELEMENTWISE or op.prim in REDUCTIONS) and op.prim not in exclude:
            for v in op.inputs:
                g = group_of.get(v)
                if g is None or g.reduction is not None:
                    continue  # a group ends at its reduction
                if op.prim in ELEMENTWISE and g.shape != op.out.aval.shape:
                    continue
                if op.prim in REDUCTIONS and g.shape != op.inputs[0].aval.shape:
                    continue
                # convexity: no other operand may reach g through an outside operation
                if all(group_of.get(u) is g or not depends_on(u, g.gid) for u in op.inputs):
                    target = g
                    break
            if target is None and op.prim in ELEMENTWISE:
                target = FusionGroup(len(groups), op.out.aval.shape)
                groups.append(target)
                group_deps.append(set())
        in_deps = frozenset().union(*(deps.get(v, frozenset()) for v in op.inputs
                                      if group_of.get(v) is not target or target is None))
        if target is not None:
            target.ops.append(op)
            group_of[op.out] = target
            group_deps[target.gid].update(in_deps - {target.gid})
            deps[op.out] = frozenset((target.gid,))
        else:
            deps[op.out] = in_deps
    users = {}
    for op in fn.ops:
        for v in op.inputs:
            users.setdefault(v, []).append(op)
    returned = set(fn.outputs)
    result = []
    for g in groups:
        if len(g.ops) < min_size:
            continue
        inside = {op.out for op in g.ops}
        members = set(map(id, g.ops))
        for op in g.ops:
            for v in op.inputs:
                if v not in inside and v not in g.inputs:
                    g.inputs.append(v)
            if op.out in returned or any(id(u) not in members for u in users.get(op.out, ())):
                g.outputs.append(op.out)
        g.gid = len(result)
        result.append(g)
    return result
