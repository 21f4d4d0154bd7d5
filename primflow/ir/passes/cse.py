"""Common-subexpression elimination: one operation per distinct (primitive, operands,
params); random draws are never merged (each is a different sample)."""

from __future__ import annotations

from .._program import IMPURE


def cse(fn):
    """Replaces every operation equal to an earlier one by that one's result. Returns ``fn``.

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import cse, dce
        >>> fn = parse("def f(%0: float32[2]):\\n    %1: float32[2] = exp(%0)\\n"
        ...            "    %2: float32[2] = exp(%0)\\n    %3: float32[2] = add(%1, %2)\\n"
        ...            "    return %3\\n")
        >>> len(dce(cse(fn)).ops)
        2
    """
    seen = {}
    mapping = {}
    kept = []
    for op in fn.ops:
        if mapping:
            op.inputs = [mapping.get(v, v) for v in op.inputs]
        if op.prim in IMPURE:
            kept.append(op)
            continue
        key = op.key()
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable param: leave the operation alone
            kept.append(op)
            continue
        if first is not None and first.out.aval == op.out.aval:
            mapping[op.out] = first.out
            continue
        seen[key] = op
        kept.append(op)
    fn.ops = kept
    if mapping:
        fn.outputs = [mapping.get(v, v) for v in fn.outputs]
    return fn
