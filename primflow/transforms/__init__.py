"""Transforms built on traces and on autodiff: vmap, and the vectorised Jacobians
(jit comes with the compiler issue)."""

from .jacobians import hessian, jacfwd, jacrev
from .jit import TraceTooLongError, TracerConversionError, jit, to_static
from .vmap import BatchTrace, BatchTracer, vmap
