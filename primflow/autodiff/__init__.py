"""Automatic differentiation: the eager tape (backward, grad), Paddle-style lazy
jacobian/hessian, and forward mode (jvp)."""

from .forward import jvp
from .jacobian import Jacobian, hessian, jacobian
from .tape import backward, grad
