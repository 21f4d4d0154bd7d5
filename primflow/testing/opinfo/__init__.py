"""The OpInfo table: one entry per primitive and per public op, driving the generic tests.

Each ``OpInfo`` says how to call an op, what NumPy computes for it (float64), which
sample inputs to use (shapes with scalars, broadcasting pairs, several reduction axes,
params), where inputs must stay (``domain``; ``singularities`` are points samples are
pushed away from: kinks, ties, jumps, poles), how far to differentiate (``max_order``),
the tolerances, and the expected failures, kept in the entry with their reasons.

``kind`` says what the generic tests check:

* ``"diff"``: forward vs the reference, jvp vs finite differences, the dot-product test
  (vjp vs jvp), derivatives of orders 1..max_order (reverse over reverse, forward over
  reverse, forward over forward, reverse over forward) against one central difference, and
  vmap against a loop.
* ``"nondiff"``: step-like ops (floor, sign...): forward only, and the negative claim that
  asking for a derivative raises ``pf.NonDifferentiableError`` (tape and forward mode).
* ``"nograd"``: integer/bool results (comparisons, argmax, logic): forward only, and the
  result never requires grad even when the inputs do; its forward-mode tangent is zero.
* ``"creation"``: tensors made from params (full, iota, arange...): forward only, no graph.
* ``"random"``: random draws: determinism given the key/seed, a new key gives new draws,
  and basic moments/support (``stats``).

Sample inputs are float64 NumPy arrays. Float arrays are differentiated unless
``SampleInput.diff`` lists the differentiated positions; integer and bool arrays become
constant tensors; anything else (keys for indexing, axis lists...) goes through unchanged.

The table is split by family, one module each: ``elementwise``, ``reductions``, ``shape``
(shapes and indexing), ``linalg``, ``creation``, ``random``, ``nn`` (activations,
normalisation, losses), ``control_flow``, ``complex_fft`` and ``distributed``; the entry types
and sample generators are in ``base``. ``OP_DB`` is their concatenation.
"""


from __future__ import annotations

import primflow as pf

from . import (
    complex_fft,
    control_flow,
    creation,
    distributed,
    elementwise,
    linalg,
    nn,
    random,
    reductions,
    shape,
)
from .base import (
    BINARY_SHAPES,
    OpInfo,
    SampleInput,
    XFail,
    binary,
    distinct,
    fixed,
    unary,
    untied,
    with_params,
)

__all__ = ["BINARY_SHAPES", "OP_DB", "OPS_BY_NAME", "OpInfo", "SampleInput", "XFail", "binary",
           "distinct", "fixed", "public_ops", "unary", "untied", "with_params"]

F = pf.nn.functional

OP_DB: list = [*elementwise.ENTRIES, *reductions.ENTRIES, *shape.ENTRIES, *linalg.ENTRIES,
               *creation.ENTRIES, *random.ENTRIES, *nn.ENTRIES, *control_flow.ENTRIES,
               *complex_fft.ENTRIES, *distributed.ENTRIES]

OPS_BY_NAME = {info.name: info for info in OP_DB}
if len(OPS_BY_NAME) != len(OP_DB):
    raise ValueError("OpInfo names must be unique")


def public_ops() -> dict:
    """The public op surface the table must cover: name -> function (primflow.ops and
    pf.nn.functional; aliases share one function object)."""
    from primflow import ops

    out = {}
    for name in ops.__all__:  # (ops' internal helpers are not in __all__)
        fn = getattr(ops, name)
        if not callable(fn) or isinstance(fn, type):
            continue
        if getattr(fn, "__module__", "").startswith("primflow.ops"):
            out[name] = fn
    for name in F.__all__:
        out.setdefault(name, getattr(F, name))
    return out
