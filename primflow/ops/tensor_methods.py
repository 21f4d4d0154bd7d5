"""The implementations of Tensor's operators and methods (``TENSOR_METHODS``) and of the
tracer's ``set_value`` (``TRACER_METHODS``). core/tensor.py declares the names
(``DEFERRED_METHODS``) and looks each up here on first use; nothing here touches Tensor.

Every method is a thin alias of a public op, so ``x.sum(axis=0)`` and ``pf.sum(x, axis=0)``
are one code path.
"""

from __future__ import annotations

from .. import prims
from ..backends import backend_for_device, devices, get_backend
from ..backends.devices import Place
from ..core.state import state
from ..core.tensor import Tensor, sync_views
from ..core.trace import Tracer
from . import activation, creation, indexing, linalg, manipulation, math, reduction
from . import complex_ops
from .helpers import alias, as_tensor, cast


def _reflected(op):
    def method(self, other):
        return op(other, self)

    return method


def _clone(x):
    """A copy that stays in the graph (gradient flows back to ``x``)."""
    return prims.convert_element_type(x, dtype=x.dtype)


def _inplace(self, new, what):
    """Rebinds ``self`` to ``new`` (copy-on-write), bumping the version counter. ``what``
    names the update (``"add_()"``) for errors."""
    if isinstance(self, Tracer):
        self._check_inplace(what)  # a transform may refuse (jit: its arguments)
    if state.grad_enabled and self._node is None and not self.stop_gradient:
        raise RuntimeError(
            f"a leaf tensor (shape {self.shape}) that requires grad cannot be modified in place "
            f"while gradients are recorded; do it inside `with pf.no_grad():`")
    new = as_tensor(new)
    if new._shape != self._shape:
        raise ValueError(f"in-place result shape {new.shape} differs from {self.shape}")
    new = cast(new, self.dtype)
    if isinstance(self, Tracer) or isinstance(new, Tracer):
        indexing._rebind(self, new, what)  # functional under transforms (or a clear error)
    else:
        self._value = new._value  # the eager hot path
    if new._node is not None:  # else nothing was recorded (no_grad): keep flag and node
        self._node = new._node
        self.stop_gradient = False
    self._version += 1
    sync_views(self)  # views of self and the tensor self is a view of follow
    return self


def _inplace_method(op):
    what = f"{op.__name__}_()"

    def method(self, *args, **kwargs):
        # the op reads an alias: the node it records must not see self's version bump
        return _inplace(self, op(alias(self), *args, **kwargs), what)

    method.__doc__ = f"In-place version of ``{op.__name__}`` (bumps the version counter)."
    return method


def _traced_set_value(self, value):
    """``set_value`` (and ``_set_value``) of a tracer: core's versions copy an array, which
    a transform's value does not have; rebind it functionally instead. Like eager
    ``set_value``, this keeps the node (the tape does not see the new value)."""
    self._check_inplace("set_value()")
    new = as_tensor(value)
    if new._shape != self._shape:
        raise ValueError(f"set_value: expected shape {self.shape}, got {new.shape}")
    indexing._rebind(self, cast(new, self.dtype), "set_value()")
    self._version += 1


def _bool_operator(op, symbol, logical):
    """``&``, ``|`` and ``~`` on bool tensors. NumPy gives bitwise results for integers,
    which primflow has no primitive for; refuse instead of silently answering logically."""

    def method(self, *other):
        for v in (self,) + other:
            is_bool = v.dtype.is_bool if isinstance(v, Tensor) else isinstance(v, bool)
            if not is_bool:
                what = v.dtype.name if isinstance(v, Tensor) else type(v).__name__
                raise TypeError(
                    f"operator {symbol} needs bool operands, got {what}; bitwise operations "
                    f"are not supported. Use pf.{logical} for truth values, or compare "
                    f"first, e.g. (x > 0)")
        return op(self, *other)

    return method


def _zero_(self):
    return _inplace(self, creation.zeros_like(self), "zero_()")


def _fill_(self, value):
    return _inplace(self, creation.full_like(self, value), "fill_()")


def _to(self, *args, **kwargs):
    """``x.to(device)``, ``x.to(dtype)``, ``x.to(device, dtype)`` (also as keywords
    ``device=``, ``dtype=``): a tensor on that device and/or of that dtype.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0])
        >>> x.to("cpu").place, x.to("float64").dtype
        (Place(cpu), primflow.float64)
    """
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("blocking", None)
    for a in args:
        if isinstance(a, devices.Place) or (isinstance(a, str) and _is_device(a)):
            device = a
        elif a is not None and not isinstance(a, bool):
            dtype = a
    if kwargs:
        raise TypeError(f"Tensor.to: unexpected arguments {sorted(kwargs)}")
    out = self if device is None else to_device(self, device)
    return out if dtype is None else math.astype(out, dtype)


# ---- devices -------------------------------------------------------------------

def _is_device(text):
    try:
        devices.parse(text)
    except ValueError:
        return False
    return True


def to_device(x, device):
    """``x`` with its values on ``device`` (``"cpu"``, ``"gpu"``, ``"gpu:N"`` or a Place): x
    itself if it is there, else a copy (not recorded on the tape, as Paddle's ``.cuda()``),
    keeping ``stop_gradient``.

    Example:
        >>> import primflow as pf
        >>> to_device(pf.ones([2]), "cpu").place
        Place(cpu)
    """
    target = backend_for_device(device)
    if target.is_native(x._value):
        return x
    moved = Tensor._wrap(target.asarray(devices.to_host(x._value)))
    moved.stop_gradient = x.stop_gradient
    return moved


def _place(self):
    """Where the tensor's values live: ``Place(cpu)`` or ``Place(gpu:N)`` (Paddle)."""
    return devices.place_of(self._value)


def _cpu(self):
    """The tensor on the CPU (itself if it is there). Example: ``x.cpu().place``."""
    return to_device(self, "cpu")


def _cuda(self, device_id=None, blocking=True):
    """The tensor on GPU ``device_id`` (the current GPU, else 0); needs CuPy
    (``pip install 'primflow[gpu]'``). Example: ``x.cuda()``."""
    del blocking
    if device_id is None:
        place = Place(get_backend().place)
        device_id = place.index if place.is_gpu_place() else 0
    return to_device(self, f"gpu:{device_id}")


_OPERATORS = {
    "__add__": math.add, "__radd__": _reflected(math.add),
    "__sub__": math.subtract, "__rsub__": _reflected(math.subtract),
    "__mul__": math.multiply, "__rmul__": _reflected(math.multiply),
    "__truediv__": math.divide, "__rtruediv__": _reflected(math.divide),
    "__floordiv__": math.floor_divide, "__rfloordiv__": _reflected(math.floor_divide),
    "__mod__": math.remainder, "__rmod__": _reflected(math.remainder),
    "__pow__": math.pow, "__rpow__": _reflected(math.pow),
    "__matmul__": linalg.matmul, "__rmatmul__": _reflected(linalg.matmul),
    "__neg__": math.neg, "__pos__": lambda self: self, "__abs__": math.abs,
    "__eq__": math.equal, "__ne__": math.not_equal, "__lt__": math.less_than,
    "__le__": math.less_equal, "__gt__": math.greater_than, "__ge__": math.greater_equal,
    "__and__": _bool_operator(math.logical_and, "&", "logical_and"),
    "__rand__": _bool_operator(_reflected(math.logical_and), "&", "logical_and"),
    "__or__": _bool_operator(math.logical_or, "|", "logical_or"),
    "__ror__": _bool_operator(_reflected(math.logical_or), "|", "logical_or"),
    "__invert__": _bool_operator(math.logical_not, "~", "logical_not"),
    "__getitem__": indexing.getitem, "__setitem__": indexing.setitem,
}

_METHODS = {
    # math
    "add": math.add, "subtract": math.subtract, "multiply": math.multiply,
    "divide": math.divide, "pow": math.pow, "maximum": math.maximum, "minimum": math.minimum,
    "tan": math.tan, "sinh": math.sinh, "cosh": math.cosh, "abs": math.abs,
    "sign": math.sign, "square": math.square,
    "reciprocal": math.reciprocal, "neg": math.neg, "clip": math.clip, "clamp": math.clip,
    "astype": math.astype, "cast": math.astype, "isnan": math.isnan, "isinf": math.isinf,
    "isfinite": math.isfinite, "equal": math.equal, "scale": math.scale,
    "logical_not": math.logical_not, "log2": math.log2, "log10": math.log10,
    # reductions
    "sum": reduction.sum, "mean": reduction.mean, "max": reduction.max,
    "min": reduction.min, "amax": reduction.max, "amin": reduction.min,
    "prod": reduction.prod, "var": reduction.var, "std": reduction.std,
    "norm": reduction.norm, "argmax": reduction.argmax, "argmin": reduction.argmin,
    "all": reduction.all, "any": reduction.any, "cumsum": reduction.cumsum,
    "logsumexp": reduction.logsumexp,
    # shape
    "reshape": manipulation.reshape, "view": manipulation.reshape,
    "flatten": manipulation.flatten, "transpose": manipulation.transpose,
    "t": manipulation.t, "squeeze": manipulation.squeeze,
    "unsqueeze": manipulation.unsqueeze, "expand": manipulation.expand,
    "broadcast_to": manipulation.expand, "tile": manipulation.tile,
    "flip": manipulation.flip, "split": manipulation.split, "chunk": manipulation.chunk,
    "unbind": manipulation.unbind, "index_select": manipulation.index_select,
    "gather": manipulation.gather, "moveaxis": manipulation.moveaxis,
    "tril": manipulation.tril, "triu": manipulation.triu,
    # linear algebra, nn
    "matmul": linalg.matmul, "mm": linalg.mm, "dot": linalg.dot,
    "softmax": activation.softmax, "log_softmax": activation.log_softmax,
    "relu": activation.relu,
    # copies and in-place updates
    "clone": _clone, "to": _to, "zero_": _zero_, "fill_": _fill_,
    "add_": _inplace_method(math.add), "subtract_": _inplace_method(math.subtract),
    "multiply_": _inplace_method(math.multiply), "scale_": _inplace_method(math.scale),
    "clip_": _inplace_method(math.clip),
    # complex numbers
    "real": complex_ops.real, "imag": complex_ops.imag, "conj": complex_ops.conj,
    "angle": complex_ops.angle, "is_complex": complex_ops.is_complex,
}


def _T(self):  # noqa: N802 - NumPy's name
    """All dims reversed (NumPy's ``.T``)."""
    return manipulation.transpose(self, list(range(self.ndim))[::-1])


def _mT(self):  # noqa: N802 - PyTorch's name
    """The last two dims swapped (PyTorch's ``.mT``)."""
    return linalg._swap_last(self)




class _Methods(dict):
    """The table, which also answers for the public ops of primitives declared later (their
    declarations add the Tensor method, ``core.tensor.defer_method``)."""

    def __missing__(self, name):
        op = math.public_op(name)
        if op is None:
            raise KeyError(name)
        return op


# x.exp(), x.sigmoid(), ...: every primitive declared with public= (ops/math.py PUBLIC_OPS)
TENSOR_METHODS = _Methods({**_OPERATORS, **_METHODS, **math.PUBLIC_OPS,
                  "T": property(_T), "mT": property(_mT),
                  # devices
                  "place": property(_place), "cpu": _cpu, "cuda": _cuda})
TRACER_METHODS = {"set_value": _traced_set_value, "_set_value": _traced_set_value}
