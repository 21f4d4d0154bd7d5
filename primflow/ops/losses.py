"""Losses (the ops behind ``pf.nn.functional``'s losses), each written only in primitives.

Operands follow Paddle 3.x:

* **dtypes promote** between floating types (float32 logits and a float64 label give a
  float64 loss, float16 and float32 give float32, as ``paddle.nn.functional.mse_loss``
  does); integer and bool labels take the input's floating dtype. A float32-only program
  stays float32.
* **shapes broadcast** in the elementwise regression losses (``mse_loss``, ``l1_loss``,
  ``smooth_l1_loss``): an input of shape ``[1]`` against a label of shape ``[1, 1]`` gives
  a ``[1, 1]`` loss before reduction, as in Paddle. Since a shape difference is usually a
  mistake, each distinct pair of shapes warns once (PyTorch warns too).
* **class labels are checked**: ``cross_entropy`` and ``nll_loss`` raise ``IndexError``
  for a label outside ``[0, C)`` that is not ``ignore_index`` (Paddle and PyTorch raise;
  a one-hot selection would otherwise give a silent loss of 0 for it). The check reads
  the label's values, so it runs on concrete tensors; inside a transform (``pf.jit``,
  ``vmap``) the labels are not known and are not checked.
"""

from __future__ import annotations

import warnings

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from ..core.trace import Tracer
from . import _fused
from .activation import _log_softmax, log_softmax, softplus
from .helpers import as_tensor, broadcast_shapes, broadcast_to, cast, float_operand, full, \
    normalize_axis
from .reduction import mean, sum as _sum

_REDUCTIONS = ("mean", "sum", "none")


def _const(x, value):
    return full(x._shape, value, x.dtype)


def _reduce_loss(loss, reduction):
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return _sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _promoted(x: Tensor, other: Tensor) -> Tensor:
    """``other`` as an operand of the floating tensor ``x``'s loss: both in Paddle's
    promoted floating dtype (integer or bool ``other`` takes ``x``'s dtype). Returns the
    pair."""
    if other.dtype.is_floating or other.dtype.is_complex:
        d = dtypes.promote_types(x.dtype, other.dtype)
        return cast(x, d), cast(other, d)
    return x, cast(other, x.dtype)


_warned_shapes = set()  # (loss, input shape, label shape) pairs already warned about


def _broadcast_pair(name, input, label):  # noqa: A002
    """``input`` and ``label`` broadcast to one shape (Paddle's rule), warning once for each
    distinct pair of shapes that differ."""
    if input._shape == label._shape:
        return input, label
    shape = broadcast_shapes(input._shape, label._shape)  # a clear error when they clash
    key = (name, tuple(input._shape), tuple(label._shape))
    if key not in _warned_shapes:
        _warned_shapes.add(key)
        warnings.warn(
            f"{name}: input shape {input.shape} and label shape {label.shape} differ; they "
            f"are broadcast to {list(shape)} (as Paddle does), which is rarely what a loss "
            f"wants. Reshape one of them to the other's shape to silence this warning",
            UserWarning, stacklevel=4)
    return broadcast_to(input, shape), broadcast_to(label, shape)


def _regression_operands(name, input, label):  # noqa: A002
    """The operands of an elementwise regression loss: floating, promoted, broadcast."""
    input, label = _promoted(float_operand(input), as_tensor(label))
    return _broadcast_pair(name, input, label)


def mse_loss(input, label, reduction="mean") -> Tensor:  # noqa: A002 - Paddle's names
    """Mean squared error ``(input - label)^2`` reduced by ``reduction``.

    Example:
        >>> import primflow as pf
        >>> float(pf.nn.functional.mse_loss(pf.to_tensor([1.0, 3.0]), pf.to_tensor([0.0, 0.0])))
        5.0
    """
    input, label = _regression_operands("mse_loss", input, label)
    if reduction not in _REDUCTIONS:
        return _mse_loss(input, label, reduction=reduction)  # raises the clear error
    return _fused.call("mse_loss", _mse_loss, (input, label), reduction=reduction)


def _mse_loss(input, label, *, reduction):  # noqa: A002
    return _reduce_loss(prims.integer_pow(prims.sub(input, label), y=2), reduction)


def l1_loss(input, label, reduction="mean") -> Tensor:  # noqa: A002
    """Mean absolute error.

    Example:
        >>> import primflow as pf
        >>> float(pf.nn.functional.l1_loss(pf.to_tensor([1.0, 3.0]), pf.to_tensor([2.0, 1.0])))
        1.5
    """
    input, label = _regression_operands("l1_loss", input, label)
    return _reduce_loss(prims.abs(prims.sub(input, label)), reduction)


def smooth_l1_loss(input, label, reduction="mean", delta=1.0, name=None) -> Tensor:  # noqa: A002
    """Paddle's smooth L1 (Huber) loss of ``d = input - label``: ``0.5 d^2`` where
    ``|d| < delta``, else ``delta (|d| - 0.5 delta)``.

    Example:
        >>> import primflow as pf
        >>> F = pf.nn.functional
        >>> F.smooth_l1_loss(pf.to_tensor([0.5, -2.0]), pf.zeros([2]), reduction="none").numpy()
        array([0.125, 1.5  ], dtype=float32)
    """
    delta = float(delta)
    if not delta > 0:
        raise ValueError(f"smooth_l1_loss: delta must be positive, got {delta}")
    input, label = _regression_operands("smooth_l1_loss", input, label)
    d = prims.sub(input, label)
    ad = prims.abs(d)
    quadratic = prims.mul(prims.integer_pow(d, y=2), _const(d, 0.5))
    linear = prims.mul(prims.sub(ad, _const(d, 0.5 * delta)), _const(d, delta))
    return _reduce_loss(prims.select(prims.lt(ad, _const(d, delta)), quadratic, linear),
                        reduction)


def binary_cross_entropy_with_logits(logit, label, reduction="mean") -> Tensor:
    """``-[y log s(x) + (1-y) log(1-s(x))]`` computed stably as
    ``softplus(x) - y x``. ``logit`` and ``label`` must have the same shape (as in Paddle
    and PyTorch).

    Example:
        >>> import primflow as pf
        >>> F = pf.nn.functional
        >>> loss = F.binary_cross_entropy_with_logits(pf.to_tensor([0.0]), pf.to_tensor([1.0]))
        >>> round(float(loss), 4)  # log 2
        0.6931
    """
    x, y = _promoted(float_operand(logit), as_tensor(label))
    if x._shape != y._shape:
        raise ValueError(f"binary_cross_entropy_with_logits: logit shape {x.shape} and label "
                         f"shape {y.shape} must be equal")
    return _reduce_loss(prims.sub(softplus(x), prims.mul(y, x)), reduction)


# ---- class-label losses ----------------------------------------------------------------------

def _class_labels(name, label, logits_shape, axis):
    """Integer ``label`` of a class-label loss, without its class axis (``[N]`` or
    ``[N, 1]`` for ``[N, C]`` logits), as int64."""
    label = as_tensor(label)
    if not label.dtype.is_integer:
        raise TypeError(f"{name}: labels must be integers (class indices), got "
                        f"{label.dtype.name}" + ("; pass soft_label=True for probabilities"
                                                 if name == "cross_entropy" else ""))
    expected = tuple(d for i, d in enumerate(logits_shape) if i != axis)
    if tuple(label._shape) == expected + (1,) or (
            label.ndim == len(logits_shape) and label._shape[axis] == 1):
        label = prims.reshape(label, shape=expected)
    if tuple(label._shape) != expected:
        raise ValueError(f"{name}: label shape {label.shape} does not match input shape "
                         f"{list(logits_shape)} (expected {list(expected)} or with a trailing "
                         f"1)")
    return cast(label, dtypes.int64)


def _check_label_range(name, label, num_classes, ignore_index):
    """Raises IndexError for a label outside ``[0, num_classes)`` other than
    ``ignore_index`` (only for concrete labels: a transform's tracer has no values). Reads
    the host copy of the labels, so nothing is recorded or traced."""
    if isinstance(label, Tracer) or not label.size:
        return
    values = label.numpy()
    if values.min() >= 0 and values.max() < num_classes:
        return
    bad = values[((values < 0) | (values >= num_classes)) & (values != ignore_index)]
    if bad.size:
        raise IndexError(
            f"{name}: label value(s) {sorted(set(bad.tolist()))[:5]} outside "
            f"[0, {num_classes}) for {num_classes} classes (and not ignore_index="
            f"{ignore_index}); labels are class indices 0..{num_classes - 1}, or ignore_index "
            f"to leave a sample out")


def _labelled_loss(logp, label, weight, *, axis, ignore_index, reduction, label_smoothing=0.0):
    """``-w[label] * logp[label]`` along ``axis`` for int64 ``label`` (without the class
    axis), reduced; the mean divides by the summed weights of the samples kept."""
    num_classes = logp._shape[axis]
    # one-hot selection (a select over an iota) keeps the gather out of the graph
    classes = prims.iota(shape=tuple(logp._shape), dtype=dtypes.int64, dimension=axis)
    kept = tuple(i for i in range(logp.ndim) if i != axis)
    onehot = prims.eq(classes, prims.broadcast_in_dim(label, shape=tuple(logp._shape),
                                                      broadcast_dimensions=kept))
    picked = prims.reduce_sum(prims.select(onehot, logp, _const(logp, 0.0)), axes=(axis,))
    if label_smoothing:
        smooth = prims.div(prims.reduce_sum(logp, axes=(axis,)),
                           full(picked._shape, float(num_classes), logp.dtype))
        picked = prims.add(prims.mul(picked, _const(picked, 1.0 - label_smoothing)),
                           prims.mul(smooth, _const(smooth, label_smoothing)))
    loss = prims.neg(picked)
    valid = prims.ne(label, full(label._shape, ignore_index, dtypes.int64))
    w = cast(valid, logp.dtype)
    if weight is not None:
        class_w = prims.reduce_sum(prims.select(
            onehot, prims.broadcast_in_dim(weight, shape=tuple(logp._shape),
                                           broadcast_dimensions=(axis,)),
            _const(logp, 0.0)), axes=(axis,))
        w = prims.mul(w, class_w)
    loss = prims.mul(loss, w)
    if reduction == "mean":
        everything = tuple(range(loss.ndim))
        return prims.div(prims.reduce_sum(loss, axes=everything),
                         prims.reduce_sum(w, axes=everything))
    return _reduce_loss(loss, reduction)


def _class_weight(name, weight, x, axis):
    """The per-class ``weight`` and ``x``, promoted together; the weight must have one entry
    per class."""
    weight = as_tensor(weight)
    if tuple(weight._shape) != (x._shape[axis],):
        raise ValueError(f"{name}: weight shape {weight.shape} must be [{x._shape[axis]}], "
                         f"one entry per class")
    return _promoted(x, weight)


def cross_entropy(input, label, weight=None, ignore_index=-100, reduction="mean",  # noqa: A002
                  soft_label=False, axis=-1, label_smoothing=0.0) -> Tensor:
    """Softmax cross-entropy of logits ``input`` against integer class labels (shape
    ``[N]`` or ``[N, 1]``) or, with ``soft_label=True``, class probabilities.

    Example:
        >>> import primflow as pf
        >>> logits = pf.to_tensor([[0.0, 0.0]])
        >>> round(float(pf.nn.functional.cross_entropy(logits, pf.to_tensor([1]))), 4)
        0.6931
    """
    logits = float_operand(input)
    (axis,) = normalize_axis(axis, logits.ndim)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if soft_label:
        logits, target = _promoted(logits, as_tensor(label))
        if target._shape != logits._shape:
            raise ValueError(f"cross_entropy with soft labels: label shape {target.shape} must "
                             f"equal input shape {logits.shape}")
        logp = log_softmax(logits, axis=axis)
        loss = prims.neg(prims.reduce_sum(prims.mul(target, logp), axes=(axis,)))
        return _reduce_loss(loss, reduction)
    label = _class_labels("cross_entropy", label, logits._shape, axis)
    _check_label_range("cross_entropy", label, logits._shape[axis], ignore_index)
    if weight is not None:
        logits, weight = _class_weight("cross_entropy", weight, logits, axis)
    params = dict(axis=axis, ignore_index=ignore_index, reduction=reduction,
                  label_smoothing=float(label_smoothing))
    if weight is None and not label_smoothing and axis == logits.ndim - 1:
        # the common case has a fused kernel (integer labels over the last axis)
        return _fused.call("cross_entropy", _cross_entropy_labels, (logits, label), **params)
    return _labelled_loss(log_softmax(logits, axis=axis), label, weight, **params)


def _cross_entropy_labels(logits, label, *, axis, ignore_index, reduction, label_smoothing):
    """The decomposition of the fused cross_entropy (integer ``label``, int64, without the
    class axis)."""
    return _labelled_loss(_log_softmax(logits, axes=(axis,)), label, None, axis=axis,
                          ignore_index=ignore_index, reduction=reduction,
                          label_smoothing=label_smoothing)


def nll_loss(input, label, weight=None, ignore_index=-100, reduction="mean",  # noqa: A002
             name=None) -> Tensor:
    """Negative log-likelihood of log-probabilities ``input`` (``[N, C]`` or
    ``[N, C, d1, ...]``, classes along axis 1) at integer ``label`` (``[N]`` or
    ``[N, d1, ...]``): ``-weight[label] * input[label]``; the mean divides by the summed
    weights of the samples kept (those whose label is not ``ignore_index``).

    Example:
        >>> import primflow as pf
        >>> logp = pf.to_tensor([[-0.5, -1.0], [-2.0, -0.1]])
        >>> round(float(pf.nn.functional.nll_loss(logp, pf.to_tensor([0, 1]))), 4)
        0.3
    """
    logp = float_operand(input)
    if logp.ndim < 2:
        raise ValueError(f"nll_loss: input must be [N, C] or [N, C, d1, ...] "
                         f"log-probabilities, got shape {logp.shape}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    label = _class_labels("nll_loss", label, logp._shape, 1)
    _check_label_range("nll_loss", label, logp._shape[1], ignore_index)
    if weight is not None:
        logp, weight = _class_weight("nll_loss", weight, logp, 1)
    return _labelled_loss(logp, label, weight, axis=1, ignore_index=ignore_index,
                          reduction=reduction)
