"""Core: dtypes, Tensor, primitives and their dispatch, transform traces, global state."""

from . import dtypes
from .dtypes import DType, get_default_dtype, set_default_dtype
from .tensor import Tensor
from .state import state, no_grad, enable_grad, set_grad_enabled, is_grad_enabled
from .trace import Trace, Tracer, new_trace
from .primitive import (Aval, Node, NonDifferentiableError, Primitive, PrimitiveError,
                        get_primitive, primitives)
from .random import seed
