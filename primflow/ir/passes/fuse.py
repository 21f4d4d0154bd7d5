"""Fusion grouping: which operations the compiler may emit as one kernel.

A group is a set of elementwise operations over one iteration space (unary and binary math,
comparisons, select, casts) plus, optionally, one reduction that consumes them (the
"reduction with its producers" pattern: ``sum(x * y)``, ``max(exp(x))``). Shapes that differ
only by unit dimensions (``[256, 32, 128]`` and ``[256, 32, 1, 128]``) are one iteration
space: a reshape or broadcast that only inserts or drops unit dimensions ("unit view") joins
its operand's group, so the chain continues through it. Other broadcasts, reshapes and
transposes feeding a group are views in the generated code, so they stay outside and cost
nothing.

An operation joins the group of one of its operands; when it reads two groups it merges
them (multi-output fusion: one kernel instead of one storing a value the other reloads).
Groups are convex: an operation joins (or merges) a group only if none of its other
operands depends on that group through an operation outside it (otherwise the group would
have to run both before and after that operation).

This pass is an analysis: the program is unchanged; ``fuse`` returns the groups.
"""

from __future__ import annotations

import math

from ...core.primitive import get_primitive, primitives


class FamilyNames:
    """The names of the registered primitives whose family has the fact ``fact``
    (``"elementwise"``, ``"transcendental"``, ``"reduction"``, ``"view"``): derived from the
    declarations (prims/families.py), so a primitive declared later belongs as well.

    Example:
        >>> "tanh" in TRANSCENDENTAL, "mul" in TRANSCENDENTAL, "reshape" in VIEWS
        (True, False, True)
    """

    __slots__ = ("fact",)

    def __init__(self, fact):
        self.fact = fact

    def __contains__(self, name):
        prim = get_primitive(name, None)
        return prim is not None and getattr(prim.family, self.fact)

    def __iter__(self):
        return iter([name for name in primitives() if name in self])

    def __repr__(self):
        return f"FamilyNames({self.fact}: {', '.join(self)})"


# elementwise operations (math, comparisons, select, casts)
ELEMENTWISE = FamilyNames("elementwise")
# transcendental ones: numba (without SVML) computes them slower than NumPy's ufuncs
TRANSCENDENTAL = FamilyNames("transcendental")
REDUCTIONS = FamilyNames("reduction")  # reductions that fuse with their producers
VIEWS = FamilyNames("view")  # views of their input in generated code


def squeezed(shape) -> tuple:
    """``shape`` without its unit dimensions: the iteration space an elementwise value
    shares with its unit-dimension reshapes.

    Example:
        >>> squeezed((256, 32, 1, 128))
        (256, 32, 128)
    """
    return tuple(n for n in shape if n != 1)


def is_unit_view(op) -> bool:
    """Whether ``op`` is a reshape or broadcast that only inserts or drops unit dimensions
    (the same elements in the same order, only the shape's 1s differ).

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float32[4,8]):\\n"
        ...            "    %1: float32[4,1,8] = reshape(%0, shape=(4,1,8))\\n"
        ...            "    %2: float32[8,4] = reshape(%0, shape=(8,4))\\n    return %1, %2\\n")
        >>> [is_unit_view(op) for op in fn.ops]
        [True, False]
    """
    if op.prim not in ("reshape", "broadcast_in_dim") or not op.inputs:
        return False
    src, out = op.inputs[0].aval.shape, op.out.aval.shape
    if squeezed(src) != squeezed(out):
        return False
    if op.prim == "broadcast_in_dim":  # the kept dims stay in order
        dims = [d for n, d in zip(src, op.params["broadcast_dimensions"]) if n != 1]
        return dims == sorted(dims)
    return True


class FusionGroup:
    """Operations emitted together: ``ops`` in program order, ``inputs`` (values read from
    outside), ``outputs`` (values used outside or returned). ``shape`` is the iteration
    space (every member's shape equals it up to unit dimensions)."""

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

    @property
    def size(self) -> int:
        """The number of elements the group iterates over."""
        return math.prod(self.shape)

    def __repr__(self):
        return (f"FusionGroup({self.gid}: {' '.join(op.prim for op in self.ops)}; "
                f"{len(self.inputs)} in, {len(self.outputs)} out)")


def fuse(fn, min_size=2, exclude=frozenset()) -> list:
    """The fusion groups of ``fn`` with at least ``min_size`` operations (unit views not
    counted), in program order. Operations whose primitive is in ``exclude`` stay outside
    every group (the numba compiler excludes ``TRANSCENDENTAL``: NumPy's vectorised ufuncs
    compute those faster, and the arithmetic around them still fuses).

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
    # group does); "u depends on g" is reachability through both. A merged group's id
    # forwards to the group it joined (``merged_into``).
    deps = {v: frozenset() for v in fn.inputs}
    group_deps = []
    merged_into = {}

    def find(gid):
        while gid in merged_into:
            gid = merged_into[gid]
        return gid

    def reaches(start, gid):
        todo = [find(h) for h in start]
        seen = set()
        while todo:
            h = todo.pop()
            if h == gid:
                return True
            if h not in seen:
                seen.add(h)
                todo.extend(find(k) for k in group_deps[h])
        return False

    def open_group(v, shape):
        """The group computing ``v``, if an operation over ``shape`` may still join it."""
        g = group_of.get(v)
        if g is None or g.reduction is not None or squeezed(g.shape) != squeezed(shape):
            return None
        return g

    position = {id(op): i for i, op in enumerate(fn.ops)}
    groups = []
    for op in fn.ops:
        target = None
        candidates = []
        if op.prim in exclude:
            pass
        elif op.prim in ELEMENTWISE:
            candidates = [open_group(v, op.out.aval.shape) for v in op.inputs]
        elif op.prim in REDUCTIONS:
            g = group_of.get(op.inputs[0])
            if g is not None and g.reduction is None and g.shape == op.inputs[0].aval.shape:
                candidates = [g]
        elif is_unit_view(op):
            candidates = [open_group(op.inputs[0], op.out.aval.shape)]
        candidates = [g for i, g in enumerate(candidates) if g is not None
                      and all(g is not h for h in candidates[:i])]
        for g in candidates:
            # convexity: no other operand may reach g through an outside operation
            if all(group_of.get(u) is g or not reaches(deps.get(u, ()), g.gid)
                   for u in op.inputs):
                target = g
                break
        if target is None and op.prim in ELEMENTWISE and op.prim not in exclude:
            target = FusionGroup(len(groups), op.out.aval.shape)
            groups.append(target)
            group_deps.append(set())
        elif target is not None and op.prim in ELEMENTWISE:
            for g in candidates:  # merge the other operands' groups (when still convex)
                if g is not target and not reaches(group_deps[target.gid], g.gid) and all(
                        group_of.get(u) in (g, target) or not reaches(deps.get(u, ()), g.gid)
                        for u in op.inputs):
                    _merge(g, target, group_of, group_deps, merged_into, position)
        in_deps = frozenset().union(*(deps.get(v, frozenset()) for v in op.inputs
                                      if target is None or group_of.get(v) is not target))
        in_deps = frozenset(find(h) for h in in_deps)
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
        if g.gid in merged_into:
            continue
        _drop_trailing_views(g, users)
        if sum(op.prim not in VIEWS for op in g.ops) < min_size:
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


def _merge(g, target, group_of, group_deps, merged_into, position):
    """Moves group ``g``'s operations into ``target`` (kept in program order)."""
    for op in g.ops:
        group_of[op.out] = target
    target.ops = sorted(target.ops + g.ops, key=lambda op: position[id(op)])
    group_deps[target.gid].update(group_deps[g.gid] - {target.gid})
    merged_into[g.gid] = target.gid
    g.ops = []


def _drop_trailing_views(g, users):
    """Unit views whose results only operations outside ``g`` read (or the caller) leave
    the group: the kernel stores their operand, and the view costs nothing outside."""
    members = set(map(id, g.ops))
    for op in reversed(list(g.ops)):
        if op.prim in VIEWS and all(id(u) not in members for u in users.get(op.out, ())):
            g.ops.remove(op)
            members.discard(id(op))
