"""Paddle's ``paddle.jit.to_static``: ``pf.jit`` for a function, or for a Layer's
``forward`` on that instance."""

from __future__ import annotations

import functools
import inspect

from .jitted import Jitted


def to_static(function=None, input_spec=None, build_strategy=None, backend=None, **kwargs):
    """Paddle's ``paddle.jit.to_static``: compiles a function, or a Layer's ``forward``.

    For a Layer, ``forward`` is replaced (on that instance) by a jitted version that reads the
    layer's parameters at every call, so optimizer updates are seen, and that retraces when
    ``train()``/``eval()`` changes. The layer itself is returned.

    Example:
        >>> import primflow as pf
        >>> net = pf.to_static(pf.nn.Linear(2, 3))
        >>> net(pf.ones([4, 2])).shape
        [4, 3]
    """
    del input_spec, build_strategy
    full_graph = bool(kwargs.pop("full_graph", False))
    if function is None:
        return functools.partial(to_static, backend=backend, full_graph=full_graph)
    forward = getattr(function, "forward", None)
    if forward is not None and hasattr(function, "sublayers"):
        layer = function
        cls_forward = type(layer).forward

        # the layer is an argument (a pytree of its parameters), so the parameters in its
        # slots at call time are the inputs: updates and functional_call swaps are seen
        def run_forward(layer_, *args, **kw):
            return cls_forward(layer_, *args, **kw)

        try:  # errors name forward's parameters (self, x, ...)
            run_forward.__signature__ = inspect.signature(cls_forward)
        except (TypeError, ValueError):
            pass
        run_forward.__pf_source__ = cls_forward  # what control-flow conversion rewrites
        jitted = Jitted(run_forward, backend=backend, name=type(layer).__name__,
                        full_graph=full_graph)
        jitted._display = f"{type(layer).__name__}.forward"

        def static_forward(*args, **kw):
            return jitted(layer, *args, **kw)

        static_forward.jitted = jitted
        static_forward.lower = lambda *args, **kw: jitted.lower(layer, *args, **kw)
        object.__setattr__(layer, "forward", static_forward)
        return layer
    return Jitted(function, backend=backend, full_graph=full_graph)
