"""Compiled control flow: a ``cond``/``while``/``scan`` operation (``ir/regions.py``) runs
as a Python loop or branch around its regions, each compiled once into an ``Executable``
(fused and memory-planned like any program), so a loop body is never unrolled."""

from __future__ import annotations

from ..ir.regions import regions_of, run_native


def control_runner(op, backend):
    """``runner(list of arrays) -> list of arrays`` for a control-flow operation: its
    regions are compiled now, once."""
    from ._pipeline import compile_program

    compiled = {id(region): compile_program(region, backend=backend, blocking=False)
                for _, region in regions_of(op)}

    def run_region(region, args):
        return compiled[id(region)](args)

    def runner(args):
        outs = run_native(op, args, run_region)
        # a region may return one of its operands (a branch passing a value through, a
        # carry left unchanged); the memory plan treats results as fresh arrays and may
        # reuse the operand's buffer while the result lives, so such a result is copied
        given = {id(a) for a in args}
        return [_copy(o) if _aliases(o, given) else o for o in outs]

    runner.regions = compiled
    return runner


def _aliases(array, given) -> bool:
    """Whether ``array`` is one of the arrays whose ids are in ``given``, or a view of one."""
    while array is not None:
        if id(array) in given:
            return True
        array = getattr(array, "base", None)
    return False


def _copy(array):
    """A copy of a backend array: its own ``copy`` (NumPy, CuPy), else through its
    array-API namespace."""
    copy = getattr(array, "copy", None)
    if copy is not None:
        return copy()
    return array.__array_namespace__().asarray(array, copy=True)
