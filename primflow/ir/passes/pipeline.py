"""The default optimization sequence: simplify, fold, CSE and DCE until nothing changes."""

from __future__ import annotations

from ..verifier import verify as _verify
from .cse import cse
from .dce import dce
from .fold import fold_constants
from .simplify import simplify


def _fingerprint(fn):
    return (len(fn.ops), tuple(op.prim for op in fn.ops),
            tuple(v.uid for v in fn.outputs))


def run_pipeline(fn, verify=False, assume_finite=False, max_rounds=8, stats=None):
    """Optimizes ``fn`` in place and returns it. With ``verify`` the verifier runs after
    every pass (a broken invariant names the pass that broke it)."""
    passes = [("simplify", lambda f: simplify(f, assume_finite=assume_finite, stats=stats)),
              ("fold_constants", fold_constants), ("cse", cse), ("dce", dce)]
    if verify:
        _verify(fn)
    for _ in range(max_rounds):
        before = _fingerprint(fn)
        for name, p in passes:
            p(fn)
            if verify:
                try:
                    _verify(fn)
                except Exception as e:
                    raise type(e)(f"after pass {name}: {e}") from e
        if _fingerprint(fn) == before:
            break
    return fn
