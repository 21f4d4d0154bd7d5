"""Reference executors of a program.

``evaluate`` runs each operation's backend kernel on native arrays: the semantics every
pass and the compiler are tested against. ``evaluate_bound`` binds each primitive on
tensors instead, so the tape and any active transform see the operations (jit uses it to
differentiate or transform a program it has already traced).

Random operations draw a fresh key on every run (``keys=None``), as the eager code they
were traced from does on every call; ``keys="traced"`` replays the keys seen when tracing.
"""

from __future__ import annotations

from ..backends import get_backend
from ..core import random as _random
from ..core.primitive import get_primitive
from ..core.tensor import Tensor
from ._program import CONSTANT, IMPURE
from .regions import CONTROL, GET, regions_of, run_native

_backend = get_backend()

def _key_source(keys):
    """Keys for the random operations, in program order: fresh draws (``None``), the keys
    recorded when tracing (``"traced"``) or the given list."""
    if keys == "traced":
        return None
    if keys is None:
        return iter(lambda: _random.next_key(), None)
    return iter(keys)


def _params_for_run(op, key_source):
    if key_source is not None and op.prim in IMPURE:
        params = dict(op.params)
        params["key"] = next(key_source)
        return params
    return op.params


def evaluate(fn, args, keys=None) -> list:
    """Runs ``fn`` on native arrays ``args`` with the backend kernels; returns the outputs.

    Example:
        >>> import numpy as np
        >>> from primflow.ir import parse, evaluate
        >>> fn = parse("def f(%0: float64[2]):\\n    %1: float64[2] = neg(%0)\\n"
        ...            "    return %1\\n")
        >>> evaluate(fn, [np.array([1.0, 2.0])])
        [array([-1., -2.])]
    """
    if len(args) != len(fn.inputs):
        raise ValueError(f"program {fn.name!r} takes {len(fn.inputs)} inputs, got {len(args)}")
    env = dict(zip(fn.inputs, args))
    key_source = _key_source(keys)
    kernels = _backend.kernels
    for op in fn.ops:
        if op.prim == CONSTANT:
            env[op.out] = fn.consts[op.params["index"]]
            continue
        if op.prim in CONTROL or op.prim == GET:  # operations with regions (ir/regions.py)
            env[op.out] = _run_control(op, [env[v] for v in op.inputs], keys)
            continue
        params = _params_for_run(op, key_source)
        env[op.out] = kernels[op.prim](*[env[v] for v in op.inputs], **params)
    return [env[v] for v in fn.outputs]


def evaluate_bound(fn, args, keys=None) -> list:
    """Runs ``fn`` on tensors (or tracers) ``args`` by binding each primitive."""
    env = dict(zip(fn.inputs, args))
    key_source = _key_source(keys)
    for op in fn.ops:
        if op.prim == CONSTANT:
            env[op.out] = Tensor._wrap(fn.consts[op.params["index"]])
            continue
        if op.prim == GET:
            env[op.out] = env[op.inputs[0]][op.params["index"]]
            continue
        params = _params_for_run(op, key_source)
        # (a control-flow primitive returns its list of results, which ``get`` reads)
        env[op.out] = get_primitive(op.prim).bind(*[env[v] for v in op.inputs], **params)
    return [env[v] for v in fn.outputs]


def _run_control(op, args, keys):
    if op.prim == GET:
        return args[0][op.params["index"]]
    if any(op2.prim in IMPURE for _, region in regions_of(op) for op2 in region.ops):
        keys = None  # a draw inside a loop draws a fresh key at every step
    return run_native(op, args, lambda region, a: evaluate(region, a, keys=keys))
