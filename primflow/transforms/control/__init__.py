"""Structured control flow: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``
(JAX semantics, pytrees throughout) and the primitives they bind under ``pf.jit``.

One concern per module:

* ``api.py``: the public functions (argument checks; concrete, batched or staged);
* ``unrolled.py``: Python control flow on the values (concrete or vmap-batched
  predicates), also what the primitives do when nothing is staged;
* ``tracing.py``: tracing functions into regions (sub-programs) and the shared checks;
* ``primitives.py``: the ``cond``, ``while`` and ``scan`` primitive declarations;
* ``transform_rules.py``: their jvp, batching and Taylor rules;
* ``reverse.py``: their reverse-mode (tape) rules.
"""

from . import primitives  # noqa: F401 - declares the cond/while/scan primitives
from .api import cond, fori_loop, scan, switch, while_loop
from .unrolled import BATCHED, concrete_value

__all__ = ["BATCHED", "concrete_value", "cond", "fori_loop", "scan", "switch", "while_loop"]
