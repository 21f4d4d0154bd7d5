"""Automatic differentiation: the eager tape (backward, grad), forward mode (jvp) and
functional reverse mode (grad, value_and_grad, vjp)."""

from ..ops import set_decomposed_vjp
from . import functional as _functional
from . import tape as _tape
from .fused import decomposed_vjp as _decomposed_vjp
from .forward import jvp
from .functional import value_and_grad, vjp
from .tape import backward

# Fused composites (primflow.ops) differentiate their decomposition on the tape for
# recorded (higher-order) backward passes; ops cannot import autodiff, so install it there.
set_decomposed_vjp(_decomposed_vjp)


def grad(outputs, inputs=None, *args, **kwargs):
    """Gradients, in the form the first argument asks for.

    * ``pf.grad(f, argnums=0, has_aux=False)`` with a callable ``f`` is the functional
      transform (JAX): it returns a function computing the gradient of scalar ``f``.
    * ``pf.grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
      allow_unused=False)`` with tensors runs the tape (Paddle / torch.autograd) and returns
      a list with one gradient per input.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor(3.0, stop_gradient=False)
        >>> float(pf.grad(x * x, x)[0]), float(pf.grad(lambda t: t * t)(3.0))
        (6.0, 6.0)
    """
    if callable(outputs):
        if inputs is not None:
            kwargs.setdefault("argnums", inputs)
        return _functional.grad(outputs, *args, **kwargs)
    if inputs is None:
        raise _tape.GradArgumentTypeError(
            "grad(outputs, inputs): inputs is required for the tape form")
    return _tape.grad(outputs, inputs, *args, **kwargs)


