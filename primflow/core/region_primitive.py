"""Primitives with regions: structured control flow (``cond``, ``while``, ``scan``) as
primitives, dispatched by ``bind`` like every other one.

A region primitive holds sub-programs (its regions: ``primflow.ir`` functions) in its
params and has several results, so its rules have the shapes JAX gives them (lists in,
lists out) rather than the one-output shapes of ``Primitive``:

* ``unroll(operands, **params) -> results``: runs the operation as Python control flow on
  the values, binding its regions' primitives one by one, so the tape and any transform of
  concrete values (eager ``pf.jvp``, ``pf.vmap``, ``pf.jet``, distributed tensors) see every
  step. This is what ``bind`` does when nothing is being staged (no ``pf.jit`` trace).
* ``jvp(primals, tangents, **params) -> (results, result tangents)`` (None: zero);
* ``batch(values, batch_dims, **params) -> (results, result batch dims)``;
* ``taylor(primals, series, out=None, **params) -> (results, result series)`` (each series
  with its primal first, None where zero);
* ``vjp(run, operands, staged, **params) -> results``: the reverse-mode rule. It runs the
  operation (``run(params, operands)``, possibly with params of its own: a ``scan`` that
  also returns its residuals) and records tape nodes on the results whose backward is
  written in control-flow primitives again, so every order works; ``staged`` says whether
  the operation is being staged as it is (rather than through another transform's rule).

Under a staging trace (``pf.jit``, a region being traced) ``bind`` hands the call to the
innermost trace among the operands, as ``Primitive.bind`` does; each trace applies the
rule it owns (``JitTrace`` stages the operation and its ``get`` results, ``JVPTrace``
calls ``jvp``, ``BatchTrace`` ``batch``, ``TaylorTrace`` ``taylor``), and the tape's rule
``vjp`` wraps that when an operand requires grad. The declarations and rules live in
``primflow/transforms/control/``.
"""

from __future__ import annotations

from .primitive import Primitive, _innermost_trace
from .state import state
from .trace import escaped_tracer_error, is_active, staging_trace


class RegionPrimitive(Primitive):
    """A primitive whose params hold regions and which returns a list of results. See the
    module docstring for its rules.

    Example:
        >>> from primflow.core.primitive import get_primitive
        >>> get_primitive("scan").multiple_results
        True
    """

    multiple_results = True

    def __init__(self, name, *, unroll, regions, **kwargs):
        super().__init__(name, regions=regions, **kwargs)
        self.unroll = unroll

    def bind(self, *args, **params):
        """Applies the operation to ``args`` (tensors or tracers); returns the results."""
        staging = staging_trace()
        if staging is None:  # concrete values: Python control flow, every step recorded
            return self.unroll(list(args), **params)
        trace = _innermost_trace(args) or staging
        if not is_active(trace):  # a tracer kept from a transform that ended
            raise escaped_tracer_error(next(a for a in args if getattr(a, "_trace", None) is trace))

        def run(run_params, operands):
            return trace.process_primitive(self, operands, run_params)

        if self.vjp is not None and needs_grad(args):
            # the tape records at the level the user works at (as Primitive._bind_traced)
            return self.vjp(run, list(args), trace.stages_creation, **params)
        return run(params, list(args))

    __call__ = bind


def needs_grad(operands) -> bool:
    """Whether recording is on and a floating operand requires grad."""
    return state.grad_enabled and any(not a.stop_gradient and a.dtype.is_floating for a in operands)
