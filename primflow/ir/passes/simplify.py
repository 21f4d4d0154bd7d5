"""Algebraic simplification: the declarative rules of ``primflow.ir.rewrite`` applied to a
fixed point (x * 1 -> x, neg(neg(x)) -> x, transpose(transpose(x)) -> ..., casts to the
same dtype, broadcasts of constants, ...)."""

from __future__ import annotations

from ..rewrite import apply_rules


def simplify(fn, assume_finite=False, stats=None):
    """Applies the rewrite rules to ``fn`` (rules that are wrong for inf/nan only with
    ``assume_finite``). Returns ``fn``; replaced operations are left for ``dce``.

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import dce, simplify
        >>> fn = parse("def f(%0: float32[2]):\\n    %1: float32[2] = full(shape=(2,), "
        ...            "value=1.0, dtype=float32)\\n    %2: float32[2] = mul(%0, %1)\\n"
        ...            "    return %2\\n")
        >>> print(dce(simplify(fn)).as_text(), end="")
        def f(%0: float32[2]):
            return %0
    """
    apply_rules(fn, assume_finite=assume_finite, stats=stats)
    return fn
