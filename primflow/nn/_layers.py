"""The standard layers: Linear, activations, normalisation, dropout, flatten and losses.

Each is a thin Layer around a ``pf.nn.functional`` composite; the layer owns the
parameters and checks the input shape so that a mistake names the layer, the expected
shape and the one it got.
"""

from __future__ import annotations

from ..ops import activation as F
from ..ops import losses as _losses
from ..ops import math as _math
from .. import amp as _amp
from ..ops.helpers import as_tensor, cast, int_list, real_arg
from ..ops.linalg import linear
from ..ops.manipulation import flatten
from . import initializer as _init
from ._layer import Layer

__all__ = ["BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "ELU", "Flatten", "GELU",
           "Identity", "L1Loss", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax", "MSELoss",
           "Mish", "RMSNorm", "ReLU", "ReLU6", "SiLU", "Sigmoid", "Sin", "Softmax", "Softplus",
           "Softsign", "Swish", "Tanh", "Tanhshrink"]


def _shape_error(layer, expected, x):
    return ValueError(f"{type(layer).__name__}({layer.extra_repr()}) expects input of shape "
                      f"{expected}, got {x.shape}")


class Linear(Layer):
    """``y = x @ weight + bias`` with Paddle's layout: weight ``[in_features, out_features]``
    (XavierUniform by default), bias ``[out_features]`` (zeros).

    Args:
        in_features, out_features: sizes of the last input and output dims.
        weight_attr, bias_attr: ParamAttr / initializer / name; ``bias_attr=False`` gives
            no bias.

    Example:
        >>> import primflow as pf
        >>> lin = pf.nn.Linear(3, 4)
        >>> lin(pf.ones([5, 3])).shape, lin.weight.shape
        ([5, 4], [3, 4])
    """

    def __init__(self, in_features, out_features, weight_attr=None, bias_attr=None,
                 name=None):
        super().__init__(name_scope=name)
        for what, n in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                raise ValueError(f"Linear: {what} must be a positive int, got {n!r}")
        self.in_features, self.out_features = in_features, out_features
        self.weight = self.create_parameter([in_features, out_features], attr=weight_attr)
        self.bias = self.create_parameter([out_features], attr=bias_attr, is_bias=True)

    def forward(self, input):  # noqa: A002 - Paddle's name
        x = as_tensor(input)
        if x.ndim == 0 or x._shape[-1] != self.in_features:
            raise _shape_error(self, f"[..., {self.in_features}]", x)
        low = _amp.amp_dtype("Linear")
        if low is not None and x.dtype.is_floating:  # pf.amp.auto_cast: float32 weights cast
            bias = None if self.bias is None else cast(self.bias, low)
            return linear(cast(x, low), cast(self.weight, low), bias)
        return linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={self._dtype.name}")


# ---- activations ----------------------------------------------------------------------------

class _Activation(Layer):
    _fn = None

    def __init__(self, name=None):
        super().__init__(name_scope=name)

    def forward(self, x):
        return type(self)._fn(x)


class Identity(Layer):
    """Returns its input unchanged.

    Example:
        >>> import primflow as pf
        >>> pf.nn.Identity()(pf.to_tensor([1.0, 2.0])).numpy()
        array([1., 2.], dtype=float32)
    """

    def __init__(self, *args, **kwargs):
        del args, kwargs
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input


class Tanh(_Activation):
    """``tanh(x)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.Tanh()(pf.zeros([2])).numpy()
        array([0., 0.], dtype=float32)
    """
    _fn = staticmethod(_math.tanh)


class Sin(_Activation):
    """``sin(x)`` (SIREN-style PINN activation).

    Example:
        >>> import primflow as pf
        >>> pf.nn.Sin()(pf.zeros([2])).numpy()
        array([0., 0.], dtype=float32)
    """
    _fn = staticmethod(_math.sin)


class ReLU(_Activation):
    """``max(x, 0)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.ReLU()(pf.to_tensor([-1.0, 2.0])).numpy()
        array([0., 2.], dtype=float32)
    """
    _fn = staticmethod(F.relu)


class ReLU6(_Activation):
    """``min(max(x, 0), 6)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.ReLU6()(pf.to_tensor([-1.0, 8.0])).numpy()
        array([0., 6.], dtype=float32)
    """
    _fn = staticmethod(F.relu6)


class Sigmoid(_Activation):
    """``1 / (1 + exp(-x))``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.Sigmoid()(pf.zeros([1])).numpy()
        array([0.5], dtype=float32)
    """
    _fn = staticmethod(F.sigmoid)


class SiLU(_Activation):
    """``x * sigmoid(x)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.SiLU()(pf.to_tensor([0.0, 1.0])).numpy()
        array([0.       , 0.7310586], dtype=float32)
    """
    _fn = staticmethod(F.silu)


class Swish(_Activation):
    """``x * sigmoid(x)`` (same as SiLU).

    Example:
        >>> import primflow as pf
        >>> pf.nn.Swish()(pf.to_tensor([0.0, 1.0])).numpy()
        array([0.       , 0.7310586], dtype=float32)
    """
    _fn = staticmethod(F.silu)


class Mish(_Activation):
    """``x * tanh(softplus(x))``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.Mish()(pf.to_tensor([0.0, 1.0])).numpy()
        array([0.       , 0.8650984], dtype=float32)
    """
    _fn = staticmethod(F.mish)


class Tanhshrink(_Activation):
    """``x - tanh(x)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.Tanhshrink()(pf.to_tensor([0.0, 1.0])).numpy()
        array([0.        , 0.23840582], dtype=float32)
    """
    _fn = staticmethod(F.tanhshrink)


class Softsign(_Activation):
    """``x / (1 + |x|)``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.Softsign()(pf.to_tensor([-1.0, 3.0])).numpy()
        array([-0.5 ,  0.75], dtype=float32)
    """
    _fn = staticmethod(F.softsign)


class GELU(Layer):
    """Gaussian error linear unit; ``approximate=True`` uses the tanh form.

    Example:
        >>> import primflow as pf
        >>> float(pf.nn.GELU()(pf.to_tensor(0.0)))
        0.0
    """

    def __init__(self, approximate=False, name=None):
        super().__init__(name_scope=name)
        self.approximate = F.gelu_approximation(approximate, "GELU")

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate}"


class Softplus(Layer):
    """``log(1 + exp(beta x)) / beta``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.Softplus(beta=2.0)(pf.zeros([1])).numpy()
        array([0.3465736], dtype=float32)
    """

    def __init__(self, beta=1.0, threshold=20.0, name=None):
        super().__init__(name_scope=name)
        self.beta = real_arg(beta, "Softplus: beta")
        self.threshold = real_arg(threshold, "Softplus: threshold")

    def forward(self, x):
        return F.softplus(x, beta=self.beta, threshold=self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class LeakyReLU(Layer):
    """``x`` where positive, ``negative_slope * x`` elsewhere.

    Example:
        >>> import primflow as pf
        >>> pf.nn.LeakyReLU(0.1)(pf.to_tensor([-1.0, 2.0])).numpy()
        array([-0.1,  2. ], dtype=float32)
    """

    def __init__(self, negative_slope=0.01, name=None):
        super().__init__(name_scope=name)
        self.negative_slope = real_arg(negative_slope, "LeakyReLU: negative_slope")

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Layer):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere.

    Example:
        >>> import primflow as pf
        >>> pf.nn.ELU()(pf.to_tensor([-1.0, 2.0])).numpy()
        array([-0.63212055,  2.        ], dtype=float32)
    """

    def __init__(self, alpha=1.0, name=None):
        super().__init__(name_scope=name)
        self.alpha = real_arg(alpha, "ELU: alpha")

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class Softmax(Layer):
    """Softmax along ``axis`` (default -1).

    Example:
        >>> import primflow as pf
        >>> pf.nn.Softmax()(pf.to_tensor([[0.0, 0.0]])).numpy()
        array([[0.5, 0.5]], dtype=float32)
    """

    def __init__(self, axis=-1, name=None):
        super().__init__(name_scope=name)
        self.axis = axis

    def forward(self, x):
        return F.softmax(x, axis=self.axis)

    def extra_repr(self):
        return f"axis={self.axis}"


class LogSoftmax(Softmax):
    """Log-softmax along ``axis`` (default -1).

    Example:
        >>> import primflow as pf
        >>> pf.nn.LogSoftmax()(pf.to_tensor([[0.0, 0.0]])).numpy()
        array([[-0.6931472, -0.6931472]], dtype=float32)
    """

    def forward(self, x):
        return F.log_softmax(x, axis=self.axis)


# ---- normalisation, dropout, reshaping ------------------------------------------------------

def _normalized_shape(shape, who):
    shape = int_list(shape, f"{who}: normalized_shape")
    if not shape or any(d <= 0 for d in shape):
        raise ValueError(f"{who}: normalized_shape must be a positive int or a list of them, "
                         f"got {shape}")
    return shape


class LayerNorm(Layer):
    """Normalises the trailing ``normalized_shape`` dims (epsilon 1e-5), then scales by
    ``weight`` (ones) and shifts by ``bias`` (zeros); attrs ``False`` drop them.

    Example:
        >>> import primflow as pf
        >>> ln = pf.nn.LayerNorm(4)
        >>> ln(pf.randn([2, 4])).shape
        [2, 4]
    """

    def __init__(self, normalized_shape, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 name=None):
        super().__init__(name_scope=name)
        self.normalized_shape = _normalized_shape(normalized_shape, "LayerNorm")
        self.epsilon = F.epsilon_arg(epsilon, "LayerNorm")
        self.weight = self.create_parameter(self.normalized_shape, attr=weight_attr,
                                            default_initializer=_init.Constant(1.0))
        self.bias = self.create_parameter(self.normalized_shape, attr=bias_attr, is_bias=True)

    def forward(self, input):  # noqa: A002
        x = as_tensor(input)
        k = len(self.normalized_shape)
        if x.ndim < k or list(x._shape[x.ndim - k:]) != self.normalized_shape:
            raise _shape_error(self, f"[..., {', '.join(map(str, self.normalized_shape))}]", x)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.epsilon)

    def extra_repr(self):
        return f"normalized_shape={self.normalized_shape}, epsilon={self.epsilon}"


class RMSNorm(Layer):
    """``x / sqrt(mean(x^2) + epsilon) * weight`` over the trailing ``normalized_shape``
    dims (weight ones; ``weight_attr=False`` drops it).

    Example:
        >>> import primflow as pf
        >>> pf.nn.RMSNorm(4)(pf.randn([2, 4])).shape
        [2, 4]
    """

    def __init__(self, normalized_shape, epsilon=1e-06, weight_attr=None, name=None):
        super().__init__(name_scope=name)
        self.normalized_shape = _normalized_shape(normalized_shape, "RMSNorm")
        self.epsilon = F.epsilon_arg(epsilon, "RMSNorm")
        self.weight = self.create_parameter(self.normalized_shape, attr=weight_attr,
                                            default_initializer=_init.Constant(1.0))

    def forward(self, input):  # noqa: A002
        x = as_tensor(input)
        k = len(self.normalized_shape)
        if x.ndim < k or list(x._shape[x.ndim - k:]) != self.normalized_shape:
            raise _shape_error(self, f"[..., {', '.join(map(str, self.normalized_shape))}]", x)
        return F.rms_norm(x, self.normalized_shape, self.weight, self.epsilon)

    def extra_repr(self):
        return f"normalized_shape={self.normalized_shape}, epsilon={self.epsilon}"


class Dropout(Layer):
    """Zeroes elements with probability ``p`` in training mode; identity in eval mode.

    ``mode="upscale_in_train"`` (default) scales kept values by 1/(1-p) while training;
    ``"downscale_in_infer"`` keeps them and multiplies by (1-p) in eval mode (Paddle).
    ``axis`` shares one decision along the other axes (see ``pf.nn.functional.dropout``).

    Example:
        >>> import primflow as pf
        >>> drop = pf.nn.Dropout(0.5).eval()
        >>> drop(pf.ones([3])).numpy()
        array([1., 1., 1.], dtype=float32)
    """

    def __init__(self, p=0.5, axis=None, mode="upscale_in_train", name=None):
        super().__init__(name_scope=name)
        if not 0.0 <= real_arg(p, "Dropout: p") <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        if mode not in ("upscale_in_train", "downscale_in_infer"):
            raise ValueError(f"Dropout: mode must be 'upscale_in_train' or "
                             f"'downscale_in_infer', got {mode!r}")
        self.p, self.mode, self.axis = float(p), mode, axis

    def forward(self, input):  # noqa: A002
        if self.mode == "upscale_in_train":
            return F.dropout(input, self.p, training=self.training, axis=self.axis)
        if self.training:
            return _math.multiply(F.dropout(input, self.p, training=True, axis=self.axis),
                                  1.0 - self.p)
        return _math.multiply(input, 1.0 - self.p)

    def extra_repr(self):
        return f"p={self.p}, mode={self.mode}"


class Flatten(Layer):
    """Merges dims ``start_axis..stop_axis`` (default: all but the first).

    Example:
        >>> import primflow as pf
        >>> pf.nn.Flatten()(pf.ones([2, 3, 4])).shape
        [2, 12]
    """

    def __init__(self, start_axis=1, stop_axis=-1):
        super().__init__()
        self.start_axis, self.stop_axis = start_axis, stop_axis

    def forward(self, input):  # noqa: A002
        return flatten(input, self.start_axis, self.stop_axis)

    def extra_repr(self):
        return f"start_axis={self.start_axis}, stop_axis={self.stop_axis}"


# ---- losses ---------------------------------------------------------------------------------

class _Loss(Layer):
    def __init__(self, reduction="mean", name=None):
        super().__init__(name_scope=name)
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or "
                             f"'none', got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """Mean squared error.

    Example:
        >>> import primflow as pf
        >>> float(pf.nn.MSELoss()(pf.to_tensor([1.0, 3.0]), pf.to_tensor([0.0, 1.0])))
        2.5
    """

    def forward(self, input, label):  # noqa: A002
        return _losses.mse_loss(input, label, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error.

    Example:
        >>> import primflow as pf
        >>> float(pf.nn.L1Loss()(pf.to_tensor([1.0, 3.0]), pf.to_tensor([0.0, 1.0])))
        1.5
    """

    def forward(self, input, label):  # noqa: A002
        return _losses.l1_loss(input, label, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Paddle's smooth L1 (Huber) loss: ``0.5 d^2`` where ``|d| < delta``, else
    ``delta (|d| - 0.5 delta)``, for ``d = input - label``.

    Example:
        >>> import primflow as pf
        >>> float(pf.nn.SmoothL1Loss()(pf.to_tensor([0.5, 3.0]), pf.zeros([2])))
        1.3125
    """

    def __init__(self, reduction="mean", delta=1.0, name=None):
        super().__init__(reduction, name)
        self.delta = delta

    def forward(self, input, label):  # noqa: A002
        return _losses.smooth_l1_loss(input, label, reduction=self.reduction,
                                      delta=self.delta)


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities at integer class labels.

    Example:
        >>> import primflow as pf
        >>> logp = pf.to_tensor([[-0.5, -1.0], [-2.0, -0.1]])
        >>> round(float(pf.nn.NLLLoss()(logp, pf.to_tensor([0, 1]))), 4)
        0.3
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.weight_ = weight
        self.ignore_index = ignore_index

    def forward(self, input, label):  # noqa: A002
        return _losses.nll_loss(input, label, weight=self.weight_,
                                ignore_index=self.ignore_index, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits.

    Example:
        >>> import primflow as pf
        >>> round(float(pf.nn.BCEWithLogitsLoss()(pf.zeros([2]), pf.ones([2]))), 4)
        0.6931
    """

    def forward(self, logit, label):
        return _losses.binary_cross_entropy_with_logits(logit, label,
                                                        reduction=self.reduction)


class CrossEntropyLoss(_Loss):
    """Softmax cross-entropy of logits against integer labels (Paddle's defaults).

    Example:
        >>> import primflow as pf
        >>> loss = pf.nn.CrossEntropyLoss()(pf.zeros([2, 3]), pf.to_tensor([0, 2]))
        >>> round(float(loss), 4)
        1.0986
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", name=None, **kwargs):
        super().__init__(reduction, name)
        self.weight_ = weight
        self.ignore_index = ignore_index
        self.kwargs = kwargs

    def forward(self, input, label):  # noqa: A002
        return _losses.cross_entropy(input, label, weight=self.weight_,
                                     ignore_index=self.ignore_index, reduction=self.reduction,
                                     **self.kwargs)
