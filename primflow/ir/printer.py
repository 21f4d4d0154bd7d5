"""Text form of a program: one Python-like line per operation, typed values.

::

    def main(%0: float32[4,8], %1: float32[8,2]):
        %2: float32[4,2] = dot_general(%0, %1, contracting=((1,),(0,)), batch=((),()))
        %3: float32[4,2] = tanh(%2)
        return %3

Values are numbered in definition order (inputs first), so two programs that differ only in
the identities of their values print the same; ``parse`` reads the text back exactly.
Constant-pool entries follow the body as ``const #i: type = [values]``.
"""

from __future__ import annotations

import math

from ..backends import get_backend
from ..core.dtypes import DType

_backend = get_backend()

_MAX_CONST_PRINT = 64  # larger constants print as a size only (the parser then needs them)


def format_type(aval) -> str:
    avals = getattr(aval, "avals", None)
    if avals is not None:  # a control-flow operation's tuple of results (ir/regions.py)
        return "(" + ",".join(format_type(a) for a in avals) + ("," if len(avals) == 1
                                                                else "") + ")"
    return f"{aval.dtype.name}[{','.join(str(d) for d in aval.shape)}]"


def format_param(v) -> str:
    if isinstance(v, tuple):
        inner = ",".join(format_param(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, DType):
        return v.name
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (int, str)):
        return repr(v)
    if hasattr(v, "ops") and hasattr(v, "outputs"):  # a region: printed below its operation
        return f"@{v.name}"
    raise TypeError(f"cannot print parameter value {v!r} of type {type(v).__name__}")


def names_of(fn) -> dict:
    """Value -> its printed name, ``%0, %1, ...`` in definition order."""
    names = {}
    for v in fn.inputs:
        names[v] = f"%{len(names)}"
    for op in fn.ops:
        names[op.out] = f"%{len(names)}"
    return names


def format_op(op, names) -> str:
    args = [names.get(v, "%?") for v in op.inputs]
    args += [f"{k}={format_param(v)}" for k, v in op.params.items()]
    return f"{names.get(op.out, '%?')}: {format_type(op.out.aval)} = {op.prim}({', '.join(args)})"


def print_function(fn, annotate=None) -> str:
    """The program as text. ``annotate(op) -> str or None`` adds a trailing comment to a
    line (the compiler uses it to show fusion groups and buffers)."""
    names = names_of(fn)
    params = ", ".join(f"{names[v]}: {format_type(v.aval)}" for v in fn.inputs)
    lines = [f"def {fn.name}({params}):"]
    for op in fn.ops:
        line = "    " + format_op(op, names)
        note = annotate(op) if annotate is not None else None
        if note:
            line += f"  # {note}"
        lines.append(line)
        lines.extend(_region_lines(op))
    outs = [names.get(v, "%?") for v in fn.outputs]
    if not outs:
        lines.append("    return ()")
    else:
        lines.append("    return " + ", ".join(outs))
    for index in sorted(fn.consts):
        array = _backend.to_numpy(fn.consts[index])
        body = (_format_array(array) if array.size <= _MAX_CONST_PRINT
                else f"<{array.size} values>")
        dtype = _backend.dtype_of(array).name
        lines.append(f"const #{index}: {dtype}[{','.join(str(d) for d in array.shape)}] = {body}")
    return "\n".join(lines) + "\n"


def _format_array(array) -> str:
    # str() of a backend scalar is the shortest text that reads back to the same value in
    # the array's own precision (float32 1e-08 prints as 1e-08, not 9.99999993922529e-09)
    return "[" + ", ".join(str(x) for x in _backend.to_numpy(array).reshape(-1)) + "]"


def _region_lines(op) -> list:
    """The regions of a control-flow operation, indented below it (``{ ... }``)."""
    from .regions import regions_of

    regions = regions_of(op)
    if not regions:
        return []
    lines = []
    for _, region in regions:
        text = print_function(region).rstrip("\n").split("\n")
        lines.append("      {")
        lines.extend("        " + t for t in text)
        lines.append("      }")
    return lines
