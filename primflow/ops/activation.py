"""Neural-network composites: activations and normalisations (the ops behind
``pf.nn.functional``; its losses are in ``losses.py``), each written only in primitives so
every derivative order comes from the primitives' rules.

The common ones (softmax, log_softmax, layer_norm, rms_norm, gelu, silu, softplus, and in
losses.py mse_loss and cross_entropy with integer labels) also have fused eager kernels in
the backend: the public function checks its arguments and hands the decomposition
(``_softmax`` etc.) to ``_fused.call``, which runs either (see ``ops/_fused.py``;
``pf.decompose()`` forces the decomposition).
"""

from __future__ import annotations

import math as _math

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from . import _fused
from .helpers import (as_tensor, broadcast_to, cast, float_operand, full, normalize_axis,
                      real_arg)
from .creation import rand
from .reduction import _broadcast_back, mean, norm, sum as _sum


def _const(x, value):
    return full(x._shape, value, x.dtype)


# ---- activations ---------------------------------------------------------------------------

def relu(x) -> Tensor:
    """``max(x, 0)``; gradient 0 at 0 (as PyTorch and Paddle).

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.relu(pf.to_tensor([-1.0, 2.0])).numpy()
        array([0., 2.], dtype=float32)
    """
    x = as_tensor(x)
    zero = _const(x, 0)
    return prims.select(prims.gt(x, zero), x, zero)


def relu6(x) -> Tensor:
    """``min(max(x, 0), 6)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.relu6(pf.to_tensor([-1.0, 3.0, 8.0])).numpy()
        array([0., 3., 6.], dtype=float32)
    """
    x = relu(x)
    six = _const(x, 6)
    return prims.select(prims.lt(x, six), x, six)


def leaky_relu(x, negative_slope=0.01) -> Tensor:
    """``x`` where positive, ``negative_slope * x`` elsewhere.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.leaky_relu(pf.to_tensor([-1.0, 2.0]), 0.1).numpy()
        array([-0.1,  2. ], dtype=float32)
    """
    negative_slope = real_arg(negative_slope, "leaky_relu: negative_slope")
    x = float_operand(x)
    return prims.select(prims.gt(x, _const(x, 0)), x, prims.mul(x, _const(x, negative_slope)))


def elu(x, alpha=1.0) -> Tensor:
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.elu(pf.to_tensor([-1.0, 2.0])).numpy()
        array([-0.63212055,  2.        ], dtype=float32)
    """
    alpha = real_arg(alpha, "elu: alpha")
    x = float_operand(x)
    zero = _const(x, 0)
    negative_part = prims.mul(_const(x, alpha), prims.expm1(prims.minimum(x, zero)))
    return prims.select(prims.gt(x, zero), x, negative_part)


def sigmoid(x) -> Tensor:
    """``1 / (1 + exp(-x))`` (the logistic primitive).

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.sigmoid(pf.to_tensor([0.0, 2.0])).numpy()
        array([0.5     , 0.880797], dtype=float32)
    """
    return prims.logistic(float_operand(x))


def softplus(x, beta=1.0, threshold=20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, computed as ``max(z, 0) + log1p(exp(-|z|))`` with
    ``z = beta x``, which never overflows. ``threshold`` is accepted for Paddle
    compatibility; the stable form already equals x to within exp(-threshold) there.

    Example:
        >>> import primflow as pf
        >>> round(float(pf.nn.functional.softplus(pf.to_tensor(0.0))), 6)
        0.693147
    """
    del threshold
    if real_arg(beta, "softplus: beta") == 0:
        raise ValueError("softplus: beta must be nonzero (the result divides by it)")
    return _fused.call("softplus", _softplus, (float_operand(x),), beta=float(beta))


def _softplus(x, *, beta):
    z = prims.mul(x, _const(x, beta)) if beta != 1.0 else x
    zero = _const(z, 0)
    out = prims.add(prims.maximum(z, zero), prims.log1p(prims.exp(prims.neg(prims.abs(z)))))
    return prims.div(out, _const(out, beta)) if beta != 1.0 else out


def silu(x) -> Tensor:
    """``x * sigmoid(x)`` (swish).

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.silu(pf.to_tensor([0.0, 1.0])).numpy()
        array([0.       , 0.7310586], dtype=float32)
    """
    return _fused.call("silu", _silu, (float_operand(x),))


def _silu(x):
    return prims.mul(x, prims.logistic(x))



def gelu(x, approximate=False) -> Tensor:
    """Gaussian error linear unit: ``0.5 x (1 + erf(x / sqrt 2))``; with
    ``approximate=True`` the tanh form ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.
    PyTorch's spellings ``approximate="none"`` / ``"tanh"`` are accepted too.

    Example:
        >>> import primflow as pf
        >>> float(pf.nn.functional.gelu(pf.to_tensor(0.0)))
        0.0
    """
    # the erf form has no fast path: a fused one won < 1.3x (backends/numpy_fused.py)
    if not gelu_approximation(approximate, "gelu"):
        return _gelu(float_operand(x), approximate=False)
    return _fused.call("gelu_tanh", _gelu, (float_operand(x),), approximate=True)


def gelu_approximation(approximate, who) -> bool:
    """gelu's ``approximate`` as a bool: Paddle's True/False or PyTorch's "tanh"/"none"
    (any other value raises: a truthy typo silently chose the tanh form)."""
    if approximate in ("none", "tanh"):
        return approximate == "tanh"
    if not isinstance(approximate, bool):
        raise ValueError(f"{who}: approximate must be True/False (or 'tanh'/'none'), got "
                         f"{approximate!r}")
    return approximate


def _gelu(x, *, approximate):
    half = _const(x, 0.5)
    one = _const(x, 1.0)
    if approximate:
        inner = prims.mul(_const(x, _math.sqrt(2.0 / _math.pi)), prims.add(
            x, prims.mul(_const(x, 0.044715), prims.integer_pow(x, y=3))))
        return prims.mul(prims.mul(half, x), prims.add(one, prims.tanh(inner)))
    scaled = prims.mul(x, _const(x, 1.0 / _math.sqrt(2.0)))
    return prims.mul(prims.mul(half, x), prims.add(one, prims.erf(scaled)))


def tanhshrink(x) -> Tensor:
    """``x - tanh(x)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.tanhshrink(pf.to_tensor([0.0, 1.0])).numpy()
        array([0.        , 0.23840582], dtype=float32)
    """
    x = float_operand(x)
    return prims.sub(x, prims.tanh(x))


def softsign(x) -> Tensor:
    """``x / (1 + |x|)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.softsign(pf.to_tensor([-1.0, 3.0])).numpy()
        array([-0.5 ,  0.75], dtype=float32)
    """
    x = float_operand(x)
    return prims.div(x, prims.add(_const(x, 1.0), prims.abs(x)))


def mish(x) -> Tensor:
    """``x * tanh(softplus(x))``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.mish(pf.to_tensor([0.0, 1.0])).numpy()
        array([0.       , 0.8650984], dtype=float32)
    """
    x = float_operand(x)
    return prims.mul(x, prims.tanh(softplus(x)))


# ---- softmax family ------------------------------------------------------------------------

def _shifted(x, axes):
    """``x - max(x)`` over ``axes``: the max's own derivative cancels in softmax and
    log-softmax, so leaving it attached keeps every derivative exact."""
    m = prims.reduce_max(x, axes=axes)
    return prims.sub(x, _broadcast_back(m, x._shape, axes))


def softmax(x, axis=-1, dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, shifted by the maximum for stability.

    ``-inf`` entries (masks) get probability exactly 0 and gradient 0; a row that is all
    ``-inf`` gives nan, as in PyTorch and JAX (there is no distribution to normalise). An
    empty input gives an empty result.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.softmax(pf.to_tensor([0.0, 0.0])).numpy()
        array([0.5, 0.5], dtype=float32)
    """
    x = float_operand(x) if dtype is None else cast(as_tensor(x), dtype)
    axes = normalize_axis(axis, x.ndim)
    if not x.size:  # nothing to normalise (PyTorch returns the empty tensor)
        return prims.reshape(x, shape=tuple(x._shape))
    return _fused.call("softmax", _softmax, (x,), axes=axes)


def _softmax(x, *, axes):
    e = prims.exp(_shifted(x, axes))
    return prims.div(e, _broadcast_back(prims.reduce_sum(e, axes=axes), x._shape, axes))


def log_softmax(x, axis=-1, dtype=None) -> Tensor:
    """``x - logsumexp(x)`` along ``axis``, computed stably.

    ``-inf`` entries (masks) stay ``-inf`` with gradient 0; a row that is all ``-inf``
    gives nan, as in PyTorch and JAX. An empty input gives an empty result.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.log_softmax(pf.to_tensor([0.0, 0.0])).numpy().round(4)
        array([-0.6931, -0.6931], dtype=float32)
    """
    x = float_operand(x) if dtype is None else cast(as_tensor(x), dtype)
    axes = normalize_axis(axis, x.ndim)
    if not x.size:
        return prims.reshape(x, shape=tuple(x._shape))
    return _fused.call("log_softmax", _log_softmax, (x,), axes=axes)


def _log_softmax(x, *, axes):
    s = _shifted(x, axes)
    lse = prims.log(prims.reduce_sum(prims.exp(s), axes=axes))
    return prims.sub(s, _broadcast_back(lse, x._shape, axes))


# ---- normalisation -------------------------------------------------------------------------

def _norm_axes(x, normalized_shape):
    if x.ndim == 0:
        raise ValueError("layer_norm/rms_norm: a 0-d input has no dims to normalise; give it "
                         "at least one dim")
    if normalized_shape is None:
        normalized_shape = [x._shape[-1]]
    elif isinstance(normalized_shape, int):
        normalized_shape = [normalized_shape]
    k = len(normalized_shape)
    if list(x._shape[x.ndim - k:]) != list(normalized_shape):
        raise ValueError(f"normalized_shape {list(normalized_shape)} does not match the last "
                         f"dims of the input shape {x.shape}")
    return tuple(range(x.ndim - k, x.ndim))


def _affine_operand(w, x, axes):
    """A layer_norm / rms_norm weight or bias as a tensor of ``x``'s dtype (None stays)."""
    if w is None:
        return None
    w = cast(as_tensor(w), x.dtype)
    want = tuple(x._shape[a] for a in axes)
    if tuple(w._shape) == want:
        return w
    if w.ndim != len(want) or any(d not in (1, n) for d, n in zip(w._shape, want)):
        raise ValueError(f"weight/bias shape {w.shape} must equal the normalized shape "
                         f"{list(want)} (the last dims of the input shape {x.shape})")
    return broadcast_to(w, want)  # size-1 dims broadcast, as broadcast_in_dim allows


def _affine(y, weight, bias, axes):
    kept = axes  # weight and bias cover the normalised (trailing) dims
    if weight is not None:
        w = prims.broadcast_in_dim(as_tensor(weight), shape=tuple(y._shape),
                                   broadcast_dimensions=kept)
        y = prims.mul(y, cast(w, y.dtype))
    if bias is not None:
        b = prims.broadcast_in_dim(as_tensor(bias), shape=tuple(y._shape),
                                   broadcast_dimensions=kept)
        y = prims.add(y, cast(b, y.dtype))
    return y


def layer_norm(x, normalized_shape=None, weight=None, bias=None, epsilon=1e-05) -> Tensor:
    """Normalises the trailing ``normalized_shape`` dims to zero mean and unit variance
    (biased variance, as Paddle and PyTorch), then applies ``weight`` and ``bias``.

    Example:
        >>> import primflow as pf
        >>> y = pf.nn.functional.layer_norm(pf.to_tensor([[1.0, 3.0]]), 2)
        >>> y.numpy().round(3)
        array([[-1.,  1.]], dtype=float32)
    """
    x = float_operand(x)
    axes = _norm_axes(x, normalized_shape)
    weight, bias = _affine_operand(weight, x, axes), _affine_operand(bias, x, axes)
    return _fused.call("layer_norm", _layer_norm, (x, weight, bias), axes=axes,
                       epsilon=epsilon_arg(epsilon, "layer_norm"))


def epsilon_arg(epsilon, name):
    """A normalisation's ``epsilon`` (of the op or layer ``name``): a real number >= 0 (a
    negative one gives nan)."""
    if real_arg(epsilon, f"{name}: epsilon") < 0:
        raise ValueError(f"{name}: epsilon must be >= 0, got {epsilon}")
    return float(epsilon)


def _layer_norm(x, weight, bias, *, axes, epsilon):
    n = float(_math.prod(x._shape[a] for a in axes))
    mu = prims.div(prims.reduce_sum(x, axes=axes), full(
        [d for i, d in enumerate(x._shape) if i not in axes], n, x.dtype))
    centered = prims.sub(x, _broadcast_back(mu, x._shape, axes))
    var = prims.reduce_sum(prims.integer_pow(centered, y=2), axes=axes)
    var = prims.div(var, _const(var, n))
    inv = prims.rsqrt(prims.add(var, _const(var, epsilon)))
    y = prims.mul(centered, _broadcast_back(inv, x._shape, axes))
    return _affine(y, weight, bias, axes)


def rms_norm(x, normalized_shape=None, weight=None, epsilon=1e-06) -> Tensor:
    """``x / sqrt(mean(x^2) + epsilon) * weight`` over the trailing dims (last dim by default).

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.rms_norm(pf.to_tensor([[3.0, 4.0]]), epsilon=0.0).numpy().round(3)
        array([[0.849, 1.131]], dtype=float32)
    """
    x = float_operand(x)
    axes = _norm_axes(x, normalized_shape)
    return _fused.call("rms_norm", _rms_norm, (x, _affine_operand(weight, x, axes)), axes=axes,
                       epsilon=epsilon_arg(epsilon, "rms_norm"))


def _rms_norm(x, weight, *, axes, epsilon):
    n = float(_math.prod(x._shape[a] for a in axes))
    ms = prims.reduce_sum(prims.integer_pow(x, y=2), axes=axes)
    ms = prims.div(ms, _const(ms, n))
    inv = prims.rsqrt(prims.add(ms, _const(ms, epsilon)))
    y = prims.mul(x, _broadcast_back(inv, x._shape, axes))
    return _affine(y, weight, None, axes)


def normalize(x, p=2, axis=1, epsilon=1e-12) -> Tensor:
    """``x / max(norm_p(x, axis), epsilon)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.normalize(pf.to_tensor([[3.0, 4.0]]), axis=1).numpy()
        array([[0.6, 0.8]], dtype=float32)
    """
    x = float_operand(x)
    axes = normalize_axis(axis, x.ndim)
    n = norm(x, p=p, axis=axes, keepdim=True)
    n = prims.maximum(n, _const(n, epsilon_arg(epsilon, "normalize")))
    return prims.div(x, broadcast_to(n, x._shape))


def dropout(x, p=0.5, training=True, axis=None) -> Tensor:
    """Zeroes each element with probability ``p`` and scales the rest by 1/(1-p) when
    ``training``; identity otherwise. ``axis`` (an int or a list, Paddle's argument) draws
    one decision per index along those axes, shared by the others: ``axis=1`` of a
    ``[N, C]`` input keeps or drops whole columns.

    Example:
        >>> import primflow as pf
        >>> x = pf.ones([4])
        >>> pf.nn.functional.dropout(x, p=0.5, training=False).numpy()  # evaluation: unchanged
        array([1., 1., 1., 1.], dtype=float32)
        >>> pf.seed(0); y = pf.nn.functional.dropout(x, p=0.5)
        >>> sorted(set(y.numpy().tolist())) in ([0.0, 2.0], [2.0], [0.0])  # kept ones scaled by 2
        True
        >>> cols = pf.nn.functional.dropout(pf.ones([3, 4]), p=0.5, axis=1).numpy()
        >>> bool((cols == cols[0]).all())  # one decision per column
        True
    """
    if not 0.0 <= real_arg(p, "dropout: p") < 1.0:
        if p == 1.0:
            return prims.mul(x, _const(x, 0.0)) if training else x
        raise ValueError(f"dropout: p (the drop probability) must be in [0, 1], got {p}")
    x = float_operand(x)
    if not training or p == 0.0:
        return x
    if axis is None:
        keep = prims.ge(rand(x.shape, x.dtype), _const(x, p))
    else:
        axes = normalize_axis(axis, len(x.shape))
        mask_shape = [n if d in axes else 1 for d, n in enumerate(x.shape)]
        keep = prims.ge(rand(mask_shape, x.dtype), full(mask_shape, p, x.dtype))
        keep = prims.broadcast_in_dim(keep, shape=tuple(x.shape),
                                      broadcast_dimensions=tuple(range(len(x.shape))))
    return prims.select(keep, prims.mul(x, _const(x, 1.0 / (1.0 - p))), _const(x, 0.0))
