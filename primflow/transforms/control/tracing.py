"""Tracing functions into regions (sub-programs of one control-flow operation), and the
pytree and type checks the control-flow functions share."""

from __future__ import annotations

from ...core.primitive import Aval
from ...core.pytree import tree_flatten
from ...core.trace import new_trace
from ...ir import Builder, Function, Value
from ...ops.helpers import as_tensor
from ..jit import JitTrace, JitTracer


def leaves(tree):
    """``(tensor leaves, treedef)`` of a pytree (numbers become tensors)."""
    flat, treedef = tree_flatten(tree)
    return [as_tensor(x) for x in flat], treedef


def check_same(what, tree_a, leaves_a, name_a, tree_b, leaves_b, name_b, hint=""):
    """Raises ``TypeError`` naming both sides when two pytrees of tensors differ in
    structure, shape or dtype."""
    if tree_a != tree_b:
        raise TypeError(f"{what}: {name_a} has structure {tree_a!r} but {name_b} has "
                        f"structure {tree_b!r}; they must match{hint}")
    for i, (a, b) in enumerate(zip(leaves_a, leaves_b)):
        if tuple(a._shape) != tuple(b._shape) or a.dtype is not b.dtype:
            raise TypeError(f"{what}: leaf {i} of {name_a} is {a.dtype.name}{list(a._shape)} "
                            f"but leaf {i} of {name_b} is {b.dtype.name}{list(b._shape)}; "
                            f"shapes and dtypes must match (cast with .astype(...), e.g. start "
                            f"from pf.to_tensor(0.0) rather than 0){hint}")


class AvalView:
    """Stands for a region output in type checks (shape and dtype only)."""

    def __init__(self, aval):
        self._shape = tuple(aval.shape)
        self.dtype = aval.dtype


def avals_of(tensors):
    return [Aval(x._shape, x.dtype) for x in tensors]


class RegionTrace(JitTrace):
    """Stages a region's operations into its own program. Values from outside (tracers of
    enclosing traces, tensors that require grad) become extra region inputs: the
    region's captures, which the control-flow operation takes as operands."""

    def __init__(self, level, builder):
        super().__init__(level, builder)
        self.capture_of = {}  # id(outside value) -> (value, region input)
        self.captures = []

    def lift(self, a):
        if isinstance(a, JitTracer) and a._trace is self:
            return a.value
        entry = self.capture_of.get(id(a))
        if entry is None:
            v = self.builder.add_input(Aval(a._shape, a.dtype))
            entry = self.capture_of[id(a)] = (a, v)
            self.captures.append(a)
        return entry[1]

    def capture(self, a):
        """``a`` (from outside) as a value of this region."""
        return JitTracer(self, self.lift(a))

    def owns(self, a):
        """Whether ``a`` is a value of this region."""
        return isinstance(a, JitTracer) and a._trace is self


def trace_region(fn, in_avals, name):
    """Traces ``fn(list of region inputs) -> pytree`` into a ``Function``. Returns the
    function (inputs: ``in_avals`` then the captures), the captured outside values, and the
    output leaves' tree."""
    builder = Builder(name)
    # grad mode stays as it is: operations on outside values alone are recorded by the
    # enclosing trace (hoisted out of the region), and the tape must see them there
    with new_trace(RegionTrace, builder) as trace:
        try:
            ins = [JitTracer(trace, builder.add_input(a)) for a in in_avals]
            out_leaves, out_tree = leaves(fn(ins))
            builder.fn.outputs = [trace.lift(x) for x in out_leaves]
        finally:
            trace.finished = True
    return builder.fn, trace.captures, out_tree


def unify(traced, n_fixed):
    """Regions traced separately take the same operands: the first ``n_fixed`` inputs, then
    the union of all captures. ``traced``: ``[(function, captures), ...]``. Returns
    ``(regions, captures)``."""
    captures, index = [], {}
    for _, caps in traced:
        for c in caps:
            if id(c) not in index:
                index[id(c)] = len(captures)
                captures.append(c)
    out = []
    for fn, caps in traced:
        mine = {id(c): v for c, v in zip(caps, fn.inputs[n_fixed:])}
        inputs = list(fn.inputs[:n_fixed]) + [
            mine.get(id(c)) or Value(Aval(c._shape, c.dtype)) for c in captures]
        out.append(Function(fn.name, inputs, fn.ops, fn.outputs, fn.consts))
    return out, captures


def as_region_values(values):
    """``values`` as values of the region being traced, when one is (an outside value
    becomes a capture), so a rule differentiates with respect to the region's own values."""
    from ...core.trace import staging_trace

    trace = staging_trace()
    if not isinstance(trace, RegionTrace):
        return list(values)
    return [v if trace.owns(v) else trace.capture(v) for v in values]
