"""``mindspore.nn`` over primflow: ``Cell`` (a ``pf.nn.Layer`` whose forward is
``construct``), ``Dense`` (weight ``[out, in]``, MindSpore's layout), losses, ``WithLossCell``
and optimizers called with gradients (``optimizer(grads)``), MindSpore's argument order.

Example:
    >>> import primflow as pf
    >>> from primflow.compat.mindspore import nn
    >>> net = nn.Dense(3, 2)
    >>> net.weight.shape, net(pf.ones([4, 3])).shape
    ([2, 3], [4, 2])
"""

from __future__ import annotations

import math

from ... import ops as _pf
from ...nn import Layer
from ...nn import initializer as _init
from ...ops import losses as _losses
from ... import optimizer as _optim
from ...core import dtypes
from ...core.state import no_grad
from ._tensor import Parameter, initializer


class Cell(Layer):
    """MindSpore's ``nn.Cell``: define ``construct``; ``trainable_params()`` lists the
    parameters an optimizer updates.

    Example:
        >>> import primflow as pf
        >>> from primflow.compat.mindspore import nn
        >>> class Double(nn.Cell):
        ...     def construct(self, x):
        ...         return 2 * x
        >>> Double()(pf.ones([2])).numpy()
        array([2., 2.], dtype=float32)
    """

    def forward(self, *args, **kwargs):
        construct = getattr(self, "construct", None)
        if construct is None:
            raise TypeError(f"{type(self).__name__} is a Cell without a construct method; "
                            f"define construct(self, ...) with the forward computation")
        return construct(*args, **kwargs)

    def trainable_params(self, recurse=True):
        """The parameters with ``requires_grad`` (MindSpore's name for ``parameters()``)."""
        return [p for p in self.parameters(include_sublayers=recurse) if p.trainable]

    def set_train(self, mode=True):
        """Training (True) or inference mode; returns the cell."""
        self.train() if mode else self.eval()
        return self


_ACTIVATIONS = {"relu": _pf.relu, "tanh": _pf.tanh, "sigmoid": _pf.sigmoid}


class Dense(Cell):
    """``nn.Dense(in_channels, out_channels, weight_init=None, bias_init=None,
    has_bias=True, activation=None)``: ``x W^T + b`` with ``W`` of shape ``[out, in]``.
    Default initialisation is MindSpore's: both uniform in ``+-1/sqrt(in_channels)``."""

    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None,
                 has_bias=True, activation=None, dtype=None):
        super().__init__()
        bound = 1.0 / math.sqrt(in_channels)
        default = _init.Uniform(-bound, bound)
        dtype = dtype or dtypes.default_float()
        self.in_channels, self.out_channels, self.has_bias = in_channels, out_channels, has_bias
        self.weight = Parameter(initializer(weight_init or default, [out_channels, in_channels],
                                            dtype), "weight")
        self.bias = (Parameter(initializer(bias_init or default, [out_channels], dtype), "bias")
                     if has_bias else None)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise ValueError(f"Dense: activation {activation!r} is not one of 'relu', "
                                 f"'tanh', 'sigmoid' (pass a Cell or function for others)")
            activation = _ACTIVATIONS[activation]
        self.activation = activation

    def construct(self, x):
        out = _pf.matmul(x, self.weight, transpose_y=True)
        if self.bias is not None:
            out = out + self.bias
        return out if self.activation is None else self.activation(out)


class _LossCell(Cell):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or "
                             f"'none', got {reduction!r}")
        self.reduction = reduction


class MSELoss(_LossCell):
    """``nn.MSELoss(reduction='mean')``."""

    def construct(self, logits, labels):
        return _losses.mse_loss(logits, labels, self.reduction)


class L1Loss(_LossCell):
    """``nn.L1Loss(reduction='mean')``."""

    def construct(self, logits, labels):
        return _losses.l1_loss(logits, labels, self.reduction)


class BCEWithLogitsLoss(_LossCell):
    """``nn.BCEWithLogitsLoss(reduction='mean')`` (``weight``/``pos_weight`` not
    supported)."""

    def __init__(self, reduction="mean", weight=None, pos_weight=None):
        super().__init__(reduction)
        if weight is not None or pos_weight is not None:
            raise ValueError("BCEWithLogitsLoss: weight and pos_weight are not supported")

    def construct(self, logits, labels):
        return _losses.binary_cross_entropy_with_logits(logits, labels, self.reduction)


class CrossEntropyLoss(_LossCell):
    """``nn.CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean',
    label_smoothing=0.0)``: class indices, or class probabilities of the logits' shape."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.class_weight, self.ignore_index = weight, ignore_index
        self.label_smoothing = label_smoothing

    def construct(self, logits, labels):
        soft = labels.dtype.is_floating
        return _losses.cross_entropy(logits, labels, weight=self.class_weight,
                                     ignore_index=self.ignore_index, reduction=self.reduction,
                                     soft_label=soft, axis=1 if logits.ndim > 1 else -1,
                                     label_smoothing=0.0 if soft else self.label_smoothing)


class WithLossCell(Cell):
    """``nn.WithLossCell(backbone, loss_fn)``: ``loss_fn(backbone(data), label)``."""

    def __init__(self, backbone, loss_fn):
        super().__init__()
        self._backbone, self._loss_fn = backbone, loss_fn

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        return self._backbone


class Optimizer:
    """A MindSpore optimizer: built over ``params`` (MindSpore's first argument), it keeps
    them as ``.parameters`` and applies gradients passed to it: ``optimizer(grads)``, one
    per parameter in that order. The update is primflow's (``pf.optimizer``) optimizer of
    the same name; the parameters' own ``.grad`` is left as it was."""

    def __init__(self, params, learning_rate, loss_scale, make):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: params is empty; pass "
                             f"net.trainable_params()")
        self.parameters = tuple(params)
        self.learning_rate = learning_rate
        self.loss_scale = float(loss_scale)
        self._optimizer = make(params)

    def __call__(self, gradients):
        gradients = tuple(gradients)
        if len(gradients) != len(self.parameters):
            raise ValueError(f"{type(self).__name__}: got {len(gradients)} gradients for "
                             f"{len(self.parameters)} parameters (one per parameter, in the "
                             f"order of optimizer.parameters)")
        saved = [p.grad for p in self.parameters]
        try:
            with no_grad():
                for p, g in zip(self.parameters, gradients):
                    if list(g.shape) != p.shape:
                        raise ValueError(f"{type(self).__name__}: the gradient for "
                                         f"{p.name} has shape {g.shape}, the parameter "
                                         f"{p.shape}")
                    g = g.detach()
                    p.grad = g if self.loss_scale == 1.0 else g / self.loss_scale
                self._optimizer.step()
        finally:
            for p, g in zip(self.parameters, saved):
                p.grad = g
        return True


class SGD(Optimizer):
    """``nn.SGD(params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
    nesterov=False, loss_scale=1.0)``."""

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0,
                 weight_decay=0.0, nesterov=False, loss_scale=1.0):
        if dampening:
            raise ValueError("SGD: dampening is not supported (primflow's momentum is "
                             "v = momentum v + g)")
        wd = weight_decay or None

        def make(ps):
            if momentum:
                return _optim.Momentum(learning_rate, momentum, ps, use_nesterov=nesterov,
                                       weight_decay=wd)
            return _optim.SGD(learning_rate, ps, weight_decay=wd)
        super().__init__(params, learning_rate, loss_scale, make)


class Momentum(Optimizer):
    """``nn.Momentum(params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0,
    use_nesterov=False)``."""

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0,
                 use_nesterov=False):
        super().__init__(params, learning_rate, loss_scale, lambda ps: _optim.Momentum(
            learning_rate, momentum, ps, use_nesterov=use_nesterov,
            weight_decay=weight_decay or None))


class Adam(Optimizer):
    """``nn.Adam(params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
    use_locking=False, use_nesterov=False, weight_decay=0.0, loss_scale=1.0)`` (the
    update is Paddle's Adam, ``pf.optimizer.Adam``)."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 use_locking=False, use_nesterov=False, weight_decay=0.0, loss_scale=1.0):
        if use_nesterov:
            raise ValueError("Adam: use_nesterov=True is not supported")
        super().__init__(params, learning_rate, loss_scale, lambda ps: _optim.Adam(
            learning_rate, beta1, beta2, eps, ps, weight_decay=weight_decay or None))


__all__ = ["Adam", "BCEWithLogitsLoss", "Cell", "CrossEntropyLoss", "Dense", "L1Loss",
           "MSELoss", "Momentum", "Optimizer", "SGD", "WithLossCell"]
