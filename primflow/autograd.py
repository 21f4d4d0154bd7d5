"""``pf.autograd``: the Paddle / torch.autograd-style namespace.

Tape functions (``backward``, ``grad``), Paddle's lazy ``jacobian`` / ``hessian`` of
computed tensors, and the functional forms for convenience.
"""

from .autodiff import backward, grad, jvp, value_and_grad, vjp
from .core.state import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autodiff.custom import PyLayer, PyLayerContext
from .autodiff.taylor import jet
from .transforms.differential import (biharmonic, directional_derivative, laplacian,
                                      linear_operator, partial)
from .transforms.paddle_jacobian import Jacobian, hessian, jacobian

__all__ = ["Jacobian", "PyLayer", "PyLayerContext", "backward", "biharmonic", "directional_derivative", "enable_grad",
           "grad", "hessian", "is_grad_enabled", "jacobian", "jet", "jvp", "laplacian",
           "linear_operator", "no_grad", "partial", "set_grad_enabled", "value_and_grad", "vjp"]
