"""Dispatch of composites to the backend's fused kernels ("N+1 decomposition").

A composite (softmax, layer_norm, cross_entropy, ...) is *defined* by its decomposition into
primitives: that is what transforms trace, what higher derivatives differentiate and what
``pf.decompose()`` forces. In eager mode the backend may also offer a fused pair of kernels
for it (``Backend.fast_paths["composite"][name] = (forward, backward)``, see
``backends/numpy_fused.py``): one kernel for the forward pass and one for the first-order
backward pass, saving only what that backward needs. ``call`` picks between them:

* the decomposition runs where the one fast-path predicate (``backends/fast_paths.py``)
  says no (``pf.decompose()`` on, an input a transform's tracer, ``pf.jit`` tracing),
  when the backend has no kernel for the composite, and for 0-d or empty inputs;
* otherwise the forward kernel runs, and if the tape records (an input requires grad) one
  ``CustomRule`` node is recorded over the inputs. Its backward runs the fused backward
  kernel when the backward pass is not itself recorded. When it is (``create_graph=True``,
  or a functional transform that will differentiate again), or when the cotangent is a
  transform's tracer, the node recomputes the decomposition on handles of its inputs and
  differentiates that on the tape, so every derivative of order >= 2 (and any derivative
  under a transform) is exactly the decomposed path's.

The last step needs the tape's reverse mode, which lives in ``primflow.autodiff`` above this
layer. ``primflow.autodiff`` therefore installs it here at import (the hook
``decomposed_vjp``, through ``set_decomposed_vjp``); until it is installed, recording calls
simply decompose.
"""

from __future__ import annotations

from ..backends import fast_paths
from ..core.primitive import record_custom
from ..core.state import state
from ..core.tensor import Tensor
from ..core.trace import Tracer

# The hook: ``decomposed_vjp(fn, inputs, needs, g) -> list`` returns, for the function
# ``fn(*inputs)`` (a composite's decomposition, with ``None`` for absent inputs), the
# cotangents of the inputs with ``needs[i]`` True given the output cotangent ``g`` (None
# elsewhere); recorded when ``state.grad_enabled`` is on. Installed by primflow.autodiff
# (autodiff/fused.py); None means "not installed": recording calls then decompose.
decomposed_vjp = None


def set_decomposed_vjp(fn):
    """Installs the hook above (``primflow.autodiff`` calls this when it is imported)."""
    global decomposed_vjp
    decomposed_vjp = fn


def call(name, decomposed, inputs, **params):
    """``decomposed(*inputs, **params)``, or the same computed by the backend's fused
    kernels for ``name`` when that is allowed (see the module docstring). ``inputs`` are
    tensors or ``None`` (an absent optional input); ``params`` are static."""
    kernel = fast_paths.lookup("composite", name, inputs, records_itself=True)
    if kernel is None:
        return decomposed(*inputs, **params)
    tensors = [a for a in inputs if a is not None]
    if not inputs[0]._value.ndim or not all(a._value.size for a in tensors):
        return decomposed(*inputs, **params)
    needs = tuple(a is not None and not a.stop_gradient and a.dtype.is_floating
                  for a in inputs)
    recording = state.grad_enabled and any(needs)
    if recording and decomposed_vjp is None:
        return decomposed(*inputs, **params)
    forward, backward = kernel
    out_value, residuals = forward(*[None if a is None else a._value for a in inputs],
                                   **params)
    out = Tensor._wrap(out_value)
    if not recording:
        return out
    return record_custom(out, tensors, name,
                         _make_vjp(name, decomposed, backward, inputs, needs, residuals,
                                   params))


def _make_vjp(name, decomposed, backward, inputs, needs, residuals, params):
    """The recorded node's backward. It holds the residuals and, for the checks, the
    inputs' versions; the inputs themselves come from the node (freed after backward)."""
    present = [i for i, a in enumerate(inputs) if a is not None]
    versions = [inputs[i]._version for i in present]
    n = len(inputs)

    def vjp(g, _out, *ins):
        for a, v in zip(ins, versions):
            if a._version != v:
                raise RuntimeError(
                    f"a tensor of shape {a.shape} saved for the backward of '{name}' was "
                    f"modified in place after it was used (version {v} -> {a._version}); "
                    f"compute on a copy (x.clone()) instead of changing it in place")
        full = [None] * n
        for i, a in zip(present, ins):
            full[i] = a
        if state.grad_enabled or isinstance(g, Tracer):
            # a recorded backward (higher orders) or a transformed cotangent: differentiate
            # the decomposition, so the result is the decomposed path's to every order
            cts = decomposed_vjp(lambda *xs: decomposed(*xs, **params), full, needs, g)
        else:
            values = [None if a is None else a._value for a in full]
            cts = [None if c is None else Tensor._wrap(c)
                   for c in backward(g._value, residuals, *values, needs=needs, **params)]
        return tuple(cts[i] if needs[i] else None for i in present)

    vjp.residuals = residuals  # what the node keeps besides its inputs (for inspection)
    return vjp
