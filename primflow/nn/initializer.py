"""``pf.nn.initializer``: how parameters get their first values (Paddle's names and arguments).

An initializer is called on a parameter and overwrites its values in place
(``init(param)``), or asked for fresh values with ``init.generate(shape, dtype)``. Random
initializers draw from primflow's global generator, so ``pf.seed(n)`` makes them
reproducible.

Fan-in and fan-out follow Paddle's layout: a 2-d weight ``[in_features, out_features]`` has
``fan_in = shape[0]``, ``fan_out = shape[1]``; a conv kernel ``[out_ch, in_ch, *k]`` has
``fan_in = in_ch * prod(k)``, ``fan_out = out_ch * prod(k)``; 1-d shapes use their length
for both and 0-d shapes use 1.

Example:
    >>> import primflow as pf
    >>> w = pf.create_parameter([64, 32], "float64",
    ...                         default_initializer=pf.nn.initializer.XavierUniform())
    >>> bool(abs(w.numpy()).max() <= (6 / (64 + 32)) ** 0.5)
    True
"""

from __future__ import annotations

import math

from ..core import dtypes
from ..core.state import no_grad
from ..core.tensor import Tensor
from ..ops import creation
from ..ops import math as _ops_math
from ..ops.helpers import as_tensor, cast, shape_arg

__all__ = ["Assign", "Constant", "Initializer", "KaimingNormal", "KaimingUniform", "Normal",
           "TruncatedNormal", "Uniform", "XavierNormal", "XavierUniform", "calculate_gain"]


def _shape_tuple(shape):
    return shape_arg(shape, "initializer: shape")


def compute_fans(shape):
    """``(fan_in, fan_out)`` of a parameter of ``shape`` (Paddle's convention, see above).

    Example:
        >>> from primflow.nn.initializer import compute_fans
        >>> compute_fans([3, 4]), compute_fans([8, 2, 3, 3])
        ((3, 4), (18, 72))
    """
    shape = _shape_tuple(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (Paddle's ``calculate_gain``).

    Args:
        nonlinearity: 'linear', 'conv1d'..'conv3d', 'conv_transpose*', 'sigmoid', 'tanh',
            'relu', 'leaky_relu' or 'selu'.
        param: the negative slope for 'leaky_relu' (default 0.01).

    Example:
        >>> from primflow.nn.initializer import calculate_gain
        >>> round(calculate_gain("tanh"), 4), round(calculate_gain("relu"), 4)
        (1.6667, 1.4142)
    """
    name = str(nonlinearity).lower()
    if name in ("linear", "sigmoid", "identity") or name.startswith("conv"):
        return 1.0
    if name == "tanh":
        return 5.0 / 3.0
    if name == "relu":
        return math.sqrt(2.0)
    if name == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1.0 + slope ** 2))
    if name == "selu":
        return 3.0 / 4.0
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; use one of "
                     f"linear, conv1d, conv2d, conv3d, sigmoid, tanh, relu, leaky_relu, selu")


class Initializer:
    """Base class. Subclasses implement ``generate(shape, dtype) -> Tensor``.

    Calling an initializer on a parameter overwrites the parameter's values in place (a
    copy-on-write update that bumps its version counter) and returns the parameter.

    Example:
        >>> import primflow as pf
        >>> class Twos(pf.nn.initializer.Initializer):
        ...     def generate(self, shape, dtype):
        ...         return pf.full(shape, 2.0, dtype)
        >>> pf.nn.Linear(2, 1, weight_attr=pf.ParamAttr(initializer=Twos())).weight.numpy()
        array([[2.],
               [2.]], dtype=float32)
    """

    def generate(self, shape, dtype=None) -> Tensor:
        """New values of ``shape`` and ``dtype`` (default float dtype when None)."""
        raise NotImplementedError

    def __call__(self, param, block=None):
        del block  # Paddle's static-graph argument
        if not isinstance(param, Tensor):
            raise TypeError(f"{type(self).__name__} initialises a Tensor or Parameter, got "
                            f"{type(param).__name__}")
        with no_grad():
            value = self.generate(param.shape, param.dtype)
            param._set_value(value._value)
        return param

    def _float_dtype(self, dtype):
        d = dtypes.default_float() if dtype is None else dtypes.as_dtype(dtype)
        if not d.is_floating:
            raise TypeError(f"{type(self).__name__} draws random numbers and needs a floating "
                            f"dtype, got {d.name}; use Constant or Assign for {d.name} values")
        return d

    def __repr__(self):
        args = ", ".join(f"{k.lstrip('_')}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Constant(Initializer):
    """Fills with ``value`` (default 0.0).

    Example:
        >>> import primflow as pf
        >>> pf.nn.initializer.Constant(2.0).generate([2]).numpy()
        array([2., 2.], dtype=float32)
    """

    def __init__(self, value=0.0, name=None):
        del name
        self.value = value

    def generate(self, shape, dtype=None):
        d = dtypes.default_float() if dtype is None else dtypes.as_dtype(dtype)
        return creation.full(_shape_tuple(shape), self.value, d)


class Assign(Initializer):
    """Sets given values (a list, NumPy array or tensor) of the parameter's shape.

    Example:
        >>> import primflow as pf
        >>> pf.nn.initializer.Assign([1.0, 2.0]).generate([2]).numpy()
        array([1., 2.], dtype=float32)
    """

    def __init__(self, value, name=None):
        del name
        self.value = value

    def generate(self, shape, dtype=None):
        value = as_tensor(self.value)
        shape = _shape_tuple(shape)
        if tuple(value._shape) != shape:
            raise ValueError(f"Assign initializer: the value has shape {value.shape} but the "
                             f"parameter has shape {list(shape)}")
        d = dtypes.default_float() if dtype is None else dtypes.as_dtype(dtype)
        return cast(value, d).detach()


class Uniform(Initializer):
    """Uniform draws in ``[low, high)``.

    Example:
        >>> import primflow as pf
        >>> bool((pf.nn.initializer.Uniform(0.0, 0.5).generate([100]).numpy() < 0.5).all())
        True
    """

    def __init__(self, low=-1.0, high=1.0, name=None):
        del name
        if not high >= low:
            raise ValueError(f"Uniform initializer: high ({high}) must be >= low ({low})")
        self.low, self.high = float(low), float(high)

    def generate(self, shape, dtype=None):
        return creation.uniform(_shape_tuple(shape), self._float_dtype(dtype), min=self.low,
                                max=self.high)


class Normal(Initializer):
    """Normal draws with ``mean`` and ``std``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.initializer.Normal(0.0, 0.02).generate([3, 4]).shape
        [3, 4]
    """

    def __init__(self, mean=0.0, std=1.0, name=None):
        del name
        if std < 0:
            raise ValueError(f"Normal initializer: std must be >= 0, got {std}")
        self.mean, self.std = float(mean), float(std)

    def generate(self, shape, dtype=None):
        return creation.normal(self.mean, self.std, _shape_tuple(shape),
                               self._float_dtype(dtype))


class TruncatedNormal(Initializer):
    """Normal draws with ``mean`` and ``std``, redrawn until they lie in ``[a, b]``
    (absolute bounds, Paddle 2.6 / PyTorch ``trunc_normal_``; default ``[-2, 2]``).

    Example:
        >>> import primflow as pf
        >>> v = pf.nn.initializer.TruncatedNormal(0.0, 1.0).generate([1000]).numpy()
        >>> bool((abs(v) <= 2.0).all())
        True
    """

    def __init__(self, mean=0.0, std=1.0, a=-2.0, b=2.0, name=None):
        del name
        if not b > a:
            raise ValueError(f"TruncatedNormal: need a < b, got a={a}, b={b}")
        if std <= 0:
            raise ValueError(f"TruncatedNormal: std must be > 0, got {std}")
        self.mean, self.std, self.a, self.b = float(mean), float(std), float(a), float(b)

    def generate(self, shape, dtype=None):
        shape, d = _shape_tuple(shape), self._float_dtype(dtype)
        z = creation.normal(self.mean, self.std, shape, d)
        # Rejection: redraw the entries outside [a, b]. Each pass keeps a fixed fraction, so
        # a few dozen passes suffice unless [a, b] sits far in a tail; clip what remains.
        for _ in range(64):
            outside = _ops_math.logical_or(z < self.a, z > self.b)
            if not bool(outside.any()):
                break
            z = _ops_math.where(outside, creation.normal(self.mean, self.std, shape, d), z)
        return _ops_math.clip(z, self.a, self.b)


class XavierUniform(Initializer):
    """Glorot uniform: draws in ``[-limit, limit]`` with
    ``limit = gain * sqrt(6 / (fan_in + fan_out))`` (Paddle's default for weights).

    Args:
        fan_in, fan_out: override the fans computed from the shape.
        gain: scale factor (see ``calculate_gain``).

    Example:
        >>> import primflow as pf
        >>> w = pf.nn.initializer.XavierUniform().generate([3, 5]).numpy()
        >>> bool(abs(w).max() <= (6 / 8) ** 0.5)
        True
    """

    def __init__(self, fan_in=None, fan_out=None, gain=1.0, name=None):
        del name
        self.fan_in, self.fan_out, self.gain = fan_in, fan_out, float(gain)

    def limit(self, shape):
        fi, fo = compute_fans(shape)
        fi = fi if self.fan_in is None else self.fan_in
        fo = fo if self.fan_out is None else self.fan_out
        return self.gain * math.sqrt(6.0 / max(fi + fo, 1))

    def generate(self, shape, dtype=None):
        lim = self.limit(shape)
        return creation.uniform(_shape_tuple(shape), self._float_dtype(dtype), min=-lim,
                                max=lim)


class XavierNormal(Initializer):
    """Glorot normal: ``std = gain * sqrt(2 / (fan_in + fan_out))``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.initializer.XavierNormal().generate([3, 5]).shape
        [3, 5]
    """

    def __init__(self, fan_in=None, fan_out=None, gain=1.0, name=None):
        del name
        self.fan_in, self.fan_out, self.gain = fan_in, fan_out, float(gain)

    def std(self, shape):
        fi, fo = compute_fans(shape)
        fi = fi if self.fan_in is None else self.fan_in
        fo = fo if self.fan_out is None else self.fan_out
        return self.gain * math.sqrt(2.0 / max(fi + fo, 1))

    def generate(self, shape, dtype=None):
        return creation.normal(0.0, self.std(shape), _shape_tuple(shape),
                               self._float_dtype(dtype))


class KaimingUniform(Initializer):
    """He uniform: draws in ``[-limit, limit]`` with ``limit = gain * sqrt(3 / fan_in)`` and
    ``gain = calculate_gain(nonlinearity, negative_slope)`` (default 'relu': sqrt 2).

    Example:
        >>> import primflow as pf
        >>> w = pf.nn.initializer.KaimingUniform().generate([8, 4]).numpy()
        >>> bool(abs(w).max() <= (6 / 8) ** 0.5)
        True
    """

    def __init__(self, fan_in=None, negative_slope=0.0, nonlinearity="relu", name=None):
        del name
        self.fan_in, self.negative_slope, self.nonlinearity = fan_in, negative_slope, nonlinearity

    def limit(self, shape):
        fi = compute_fans(shape)[0] if self.fan_in is None else self.fan_in
        gain = calculate_gain(self.nonlinearity, self.negative_slope)
        return gain * math.sqrt(3.0 / max(fi, 1))

    def generate(self, shape, dtype=None):
        lim = self.limit(shape)
        return creation.uniform(_shape_tuple(shape), self._float_dtype(dtype), min=-lim,
                                max=lim)


class KaimingNormal(Initializer):
    """He normal: ``std = gain / sqrt(fan_in)`` with ``gain = calculate_gain(nonlinearity,
    negative_slope)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.initializer.KaimingNormal().generate([8, 4]).shape
        [8, 4]
    """

    def __init__(self, fan_in=None, negative_slope=0.0, nonlinearity="relu", name=None):
        del name
        self.fan_in, self.negative_slope, self.nonlinearity = fan_in, negative_slope, nonlinearity

    def std(self, shape):
        fi = compute_fans(shape)[0] if self.fan_in is None else self.fan_in
        return calculate_gain(self.nonlinearity, self.negative_slope) / math.sqrt(max(fi, 1))

    def generate(self, shape, dtype=None):
        return creation.normal(0.0, self.std(shape), _shape_tuple(shape),
                               self._float_dtype(dtype))


# Paddle's older spellings
ConstantInitializer = Constant
NormalInitializer = Normal
UniformInitializer = Uniform
