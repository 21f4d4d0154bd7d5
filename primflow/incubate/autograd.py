"""``pf.incubate.autograd``: Paddle's functional ``vjp``, ``jvp``, ``Jacobian`` and
``Hessian`` (Paddle's signatures: ``vjp(func, xs, v=None)``; the JAX-style forms are
``pf.vjp`` / ``pf.jvp``)."""

from ..transforms.paddle_jacobian import FunctionHessian as Hessian
from ..transforms.paddle_jacobian import FunctionJacobian as Jacobian
from ..transforms.paddle_jacobian import functional_jvp as jvp
from ..transforms.paddle_jacobian import functional_vjp as vjp

__all__ = ["Hessian", "Jacobian", "jvp", "vjp"]
