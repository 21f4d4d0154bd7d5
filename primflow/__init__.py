"""primflow: a differentiable-programming framework for scientific computing.

Write the math once in Python, differentiate it to any order. Every op is composed from a
small set of primitives (``pf.primitives()``) whose derivative rules are themselves written
in primitives.

Example:
    >>> import primflow as pf
    >>> x = pf.to_tensor(2.0, dtype="float64", stop_gradient=False)
    >>> y = pf.log(x) + x * 3.0
    >>> dy, = pf.grad(y, x)
    >>> float(dy)
    3.5
"""

__version__ = "0.1.0"

from .core import dtypes
from . import backends as _backends  # noqa: F401 - installs the NumPy backend into core
from .core.dtypes import (DType, bool_, float32, float64, get_default_dtype, int32, int64,
                          set_default_dtype)
from .core.primitive import NonDifferentiableError, PrimitiveError, primitives
from .core.random import seed
from .core.config import config
from .core.state import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .core.tensor import Tensor
from . import prims
from .ops import *  # noqa: F401,F403 - the NumPy-like public surface
from .ops import abs, all, any, max, min, pow, round, sum  # noqa: A004 - shadow builtins here
from . import autodiff
from . import autograd
from .autodiff import grad, jvp, value_and_grad, vjp
from .autodiff.taylor import jet
from .autodiff.custom import checkpoint, custom_jvp, custom_vjp, recompute
from .core.state import decompose, is_decomposing, set_decompose
from .transforms import hessian, jacfwd, jacrev, vmap
from .transforms import TracerConversionError, jit, to_static
from .core.pytree import tree_flatten, tree_map, tree_unflatten
from . import nn
from .nn import ParamAttr, create_parameter
from . import optimizer
from .optimizer import regularizer
from .serialization import load, save

bool = bool_  # noqa: A001 - pf.bool as in Paddle and PyTorch


def detach(x):
    """``x.detach()``: same values, cut from the graph. Example: ``pf.detach(y)``."""
    return x.detach()


def is_tensor(x):
    """Whether ``x`` is a primflow Tensor. Example: ``pf.is_tensor(pf.ones([1]))`` is True."""
    return isinstance(x, Tensor)


def numel(x):
    """Number of elements of ``x``."""
    return x.size
