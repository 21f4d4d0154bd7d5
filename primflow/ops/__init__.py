"""The public op surface: NumPy-like functions written only over primitives.

Ops broadcast, promote dtypes and take defaults; then they bind primitives. Composites
(softmax, layer_norm, ...) never carry derivative rules of their own.
"""

from .activation import (dropout, elu, gelu, layer_norm, leaky_relu, log_softmax, mish,
                         normalize, relu, relu6, rms_norm, sigmoid, silu, softmax, softplus,
                         softsign, tanhshrink)
from .losses import (binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss,
                     nll_loss, smooth_l1_loss)
from .creation import (arange, empty, eye, full, full_like, linspace, normal, ones, ones_like,
                       rand, randint, randn, randperm, to_tensor, uniform, zeros,
                       zeros_like)
from .indexing import getitem, setitem
from .linalg import dot, inner, linear, matmul, mm, outer
from .manipulation import (broadcast_tensors, chunk, concat, expand, flatten, flip,
                           gather, index_select, moveaxis, reshape, split, squeeze, stack, t,
                           tile, transpose, tril, triu, unbind, unsqueeze)
from .math import (ComplexWarning, abs, add, astype, atan2, clip, cosh, divide, equal,
                   floor_divide, greater_equal, greater_than, isfinite, isinf, isnan, lerp,
                   less_equal, less_than, log2, log10, logical_and, logical_not, logical_or,
                   maximum, minimum, multiply, neg, not_equal, pow, reciprocal, remainder,
                   scale, sign, sinh, square, subtract, tan, where)
from .math import PUBLIC_OPS as _PUBLIC_OPS

for _name, _op in _PUBLIC_OPS.items():  # exp, sin, ...: from the primitives' declarations
    globals().setdefault(_name, _op)  # (pf.sigmoid stays activation's, with its fast path)
from .reduction import (all, any, argmax, argmin, cumsum, logsumexp, max, mean, min, norm,
                        prod, std, sum, var)
# complex numbers, FFT
from .complex_ops import (angle, as_complex, as_real, complex, conj, imag, is_complex, polar,
                          real)
from . import fft
# Paddle compatibility: copies and casts that always give a new tensor
from .copying import assign, cast, clone
from .aliases import create as _create_aliases

_create_aliases(globals())  # cat, clamp, swish, ...: one table, see aliases.py

# The public op surface: every function imported above (``from primflow.ops import *`` and
# ``primflow/__init__`` export exactly these; submodules and the helpers below stay out).
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and callable(value))

# Internal API for the layers above: the hook through which autodiff gives fused composites
# their recorded backward (the conversions ops use themselves are ``ops.helpers``). Not part
# of ``__all__``.
from ._fused import set_decomposed_vjp  # noqa: E402
