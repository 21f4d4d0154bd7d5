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
        return run_native(op, args, run_region)

    runner.regions = compiled
    return runner
