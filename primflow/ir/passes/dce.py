"""Dead-code elimination: drops operations whose results no output depends on, and
constant-pool entries no operation reads."""

from __future__ import annotations

from .._program import CONSTANT


def dce(fn):
    """Removes every operation that does not contribute to an output (random draws too: an
    unused draw has no effect but its cost). Returns ``fn``.

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import dce
        >>> fn = parse("def f(%0: float32[2]):\\n    %1: float32[2] = exp(%0)\\n"
        ...            "    return %0\\n")
        >>> len(dce(fn).ops)
        0
    """
    live = set(fn.outputs)
    kept = []
    for op in reversed(fn.ops):
        if op.out in live:
            kept.append(op)
            live.update(op.inputs)
    kept.reverse()
    fn.ops = kept
    used = {op.params["index"] for op in kept if op.prim == CONSTANT}
    fn.consts = {k: v for k, v in fn.consts.items() if k in used}
    return fn
