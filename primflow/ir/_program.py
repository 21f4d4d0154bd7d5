"""The SSA program: typed values, operations (a primitive name plus static params) and
functions with inputs and outputs.

Every value is defined exactly once, by a function input or by one operation, before it is
used. An operation is one primitive application (all primitives have one output), or the
pseudo-operation ``constant`` that reads an array from the function's constant pool (what
constant folding produces when the folded value is not a single repeated scalar).

Values carry an ``Aval`` (shape and dtype), the same abstract value that tracing computes
with ``Primitive.abstract_eval``, so the verifier can re-derive every type.
"""

from __future__ import annotations

import itertools

from ..core.primitive import Aval

CONSTANT = "constant"

# random primitives are pure functions of their key, but a program draws a fresh key per
# call (as eager code does), so passes must not merge, fold or duplicate them
IMPURE = frozenset({"random_uniform", "random_normal"})

COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum", "eq", "ne", "logical_and",
                         "logical_or"})

_ids = itertools.count()


class Value:
    """One SSA value: its abstract type and the operation that defines it (None for a
    function input)."""

    __slots__ = ("__weakref__", "aval", "op", "uid")

    def __init__(self, aval: Aval, op=None):
        self.aval = aval
        self.op = op
        self.uid = next(_ids)

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    def __repr__(self):
        return f"Value({self.aval}, uid={self.uid})"


class Operation:
    """``out = prim(*inputs, **params)``. ``params`` are hashable (tuples, scalars, dtypes)."""

    __slots__ = ("inputs", "out", "params", "prim")

    def __init__(self, prim: str, inputs, params, aval: Aval):
        self.prim = prim
        self.inputs = list(inputs)
        self.params = dict(params)
        self.out = Value(aval, self)

    def key(self):
        """What makes two operations compute the same thing (for CSE)."""
        uids = tuple(v.uid for v in self.inputs)
        if self.prim in COMMUTATIVE:
            uids = tuple(sorted(uids))
        return (self.prim, uids, _freeze(self.params))

    def __repr__(self):
        return f"Operation({self.prim}, {len(self.inputs)} inputs -> {self.out.aval})"


class Function:
    """A program: ``inputs`` (Values), ``ops`` in execution order, ``outputs`` (Values, each an
    input or an op's output; repeats allowed) and the constant pool ``consts``."""

    def __init__(self, name="main", inputs=(), ops=(), outputs=(), consts=None):
        self.name = name
        self.inputs = list(inputs)
        self.ops = list(ops)
        self.outputs = list(outputs)
        self.consts = dict(consts or {})

    def copy(self):
        """A deep copy with fresh values (passes may then edit it freely)."""
        mapping = {}
        inputs = []
        for v in self.inputs:
            nv = Value(v.aval)
            mapping[v] = nv
            inputs.append(nv)
        ops = []
        for op in self.ops:
            new = Operation(op.prim, [mapping[v] for v in op.inputs], op.params, op.out.aval)
            mapping[op.out] = new.out
            ops.append(new)
        return Function(self.name, inputs, ops, [mapping[v] for v in self.outputs],
                        dict(self.consts))

    def as_text(self) -> str:
        from .printer import print_function

        return print_function(self)

    __str__ = as_text

    def __repr__(self):
        return (f"Function({self.name!r}, {len(self.inputs)} inputs, {len(self.ops)} ops, "
                f"{len(self.outputs)} outputs)")


class Builder:
    """Appends operations to a function under construction (used by tracing and passes)."""

    def __init__(self, name="main"):
        self.fn = Function(name)

    def add_input(self, aval: Aval) -> Value:
        v = Value(aval)
        self.fn.inputs.append(v)
        return v

    def add_op(self, prim: str, inputs, params, aval: Aval) -> Value:
        op = Operation(prim, inputs, params, aval)
        self.fn.ops.append(op)
        return op.out

    def add_constant(self, array, aval: Aval) -> Value:
        index = len(self.fn.consts)
        while index in self.fn.consts:
            index += 1
        self.fn.consts[index] = array
        return self.add_op(CONSTANT, [], {"index": index}, aval)


def _freeze(obj):
    if isinstance(obj, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return tuple(_freeze(v) for v in obj)
    if isinstance(obj, float) and obj != obj:
        return ("nan",)  # nan != nan would defeat equality of identical params
    return obj


def normalize_params(params: dict) -> dict:
    """Params with lists turned into tuples and NumPy scalars into Python scalars, so they
    hash, compare and print the same way whatever the caller passed."""
    return {k: _normalize(v) for k, v in params.items()}


def _normalize(v):
    if isinstance(v, (list, tuple)):
        return tuple(_normalize(x) for x in v)
    item = getattr(v, "item", None)
    if item is not None and getattr(v, "shape", None) == ():  # NumPy scalar
        return item()
    return v


def uses(fn: Function) -> dict:
    """Value -> number of uses (by operations and as outputs)."""
    count = {}
    for op in fn.ops:
        for v in op.inputs:
            count[v] = count.get(v, 0) + 1
    for v in fn.outputs:
        count[v] = count.get(v, 0) + 1
    return count


def replace_uses(fn: Function, mapping: dict) -> None:
    """Rewrites every use of a key of ``mapping`` to its value (chains are followed)."""
    if not mapping:
        return

    def resolve(v):
        seen = 0
        while v in mapping:
            v = mapping[v]
            seen += 1
            if seen > len(mapping):
                raise RuntimeError("cyclic value replacement")
        return v

    for op in fn.ops:
        op.inputs = [resolve(v) for v in op.inputs]
    fn.outputs = [resolve(v) for v in fn.outputs]
