"""``pf.autograd``: the Paddle / torch.autograd-style namespace.

Tape functions (``backward``, ``grad``), Paddle's lazy ``jacobian`` / ``hessian`` of
computed tensors, and the functional forms for convenience.
"""

from .autodiff import backward, grad, jvp, value_and_grad, vjp
from .core.state import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .transforms.paddle_jacobian import Jacobian, hessian, jacobian

__all__ = ["Jacobian", "backward", "enable_grad", "grad", "hessian", "is_grad_enabled",
           "jacobian", "jvp", "no_grad", "set_grad_enabled", "value_and_grad", "vjp"]
