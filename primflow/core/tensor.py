"""The Tensor: a backend array plus what the tape needs (stop_gradient, node, grad, version).

Internal API for the other layers (documented here, used across the package): ``_value``
(the native array), ``_shape`` (its shape as a tuple), ``_node`` (the tape node that made
it, or None), ``_version`` (bumped by in-place updates), ``Tensor._wrap(value, node)``
(the no-check constructor) and ``_set_value``.

Every method is declared here. Arithmetic operators and most methods are *implemented* in
``primflow.ops`` (they are ops) and ``backward`` in ``primflow.autodiff``; core cannot
import those layers, and they must not patch Tensor. So ``DEFERRED_METHODS`` below names
each such method and the module whose ``TENSOR_METHODS`` table implements it; the class
holds a ``_Deferred`` descriptor per name that looks the implementation up on first use and
then stores the plain function on the class in its place, so later calls cost exactly what
a method defined in the class body costs.
Importing core still imports nothing else; the test in tests/test_layering.py checks that
the names here and the tables above agree.
"""

from __future__ import annotations

import importlib
import math
import sys
import weakref

from . import dtypes
from .backend import on_install
from .state import departures, note_constant_reads, state

_backend = None  # the installed backend (set through core/backend.py's on_install)


def _use_backend(backend):
    global _backend
    _backend = backend


on_install(_use_backend)

# module -> the Tensor methods that its dict TENSOR_METHODS implements (see the docstring)
DEFERRED_METHODS = {
    "primflow.ops.tensor_methods": [
        # operators
        "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
        "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
        "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__pos__", "__abs__", "__eq__",
        "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__", "__or__",
        "__ror__", "__invert__", "__getitem__", "__setitem__",
        # math
        "add", "subtract", "multiply", "divide", "pow", "maximum", "minimum", "tan", "sinh",
        "cosh", "abs", "sign", "square", "reciprocal", "neg", "clip", "clamp", "astype",
        "cast", "isnan", "isinf", "isfinite", "equal", "scale", "logical_not", "log2",
        "log10",
        # (and one per primitive declared with public=: exp, sin, sigmoid, ... added by
        # defer_method when the primitive is declared)
        # reductions
        "sum", "mean", "max", "min", "amax", "amin", "prod", "var", "std", "norm", "argmax",
        "argmin", "all", "any", "cumsum", "logsumexp",
        # shape
        "reshape", "view", "flatten", "transpose", "t", "squeeze", "unsqueeze", "expand",
        "broadcast_to", "tile", "flip", "split", "chunk", "unbind", "index_select", "gather",
        "moveaxis", "tril", "triu", "T", "mT",
        # linear algebra, nn
        "matmul", "mm", "dot", "softmax", "log_softmax", "relu",
        # copies and in-place updates
        "clone", "to", "zero_", "fill_", "add_", "subtract_", "multiply_", "scale_", "clip_",
        # complex numbers
        "real", "imag", "conj", "angle", "is_complex",
        # devices
        "place", "cpu", "cuda",
    ],
    "primflow.autodiff.tape": ("backward", "register_hook", "retain_grads", "gradient"),
    "primflow.distributed": ("is_dist",),
}


class _Deferred:
    """A method of ``owner`` implemented in ``module``'s ``table`` under the same name:
    looked up on first use, then stored on ``owner`` in place of this descriptor."""

    __slots__ = ("owner", "name", "module", "table")

    def __init__(self, owner, name, module, table="TENSOR_METHODS"):
        self.owner, self.name, self.module, self.table = owner, name, module, table

    def __get__(self, obj, objtype=None):
        module = sys.modules.get(self.module) or importlib.import_module(self.module)
        impl = getattr(module, self.table)[self.name]
        setattr(self.owner, self.name, impl)
        return impl.__get__(obj, objtype)  # a function or property, bound as usual

    def __repr__(self):
        return f"<method {self.name!r} of {self.owner.__name__}, in {self.module}>"


class Tensor:
    """An n-dimensional array that can record how it was computed.

    Paddle conventions: ``shape`` is a list, ``stop_gradient`` defaults to True for tensors
    you create (``requires_grad`` is its opposite), ``.grad`` accumulates on leaves.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> y = (x * x).sum()
        >>> y.backward()
        >>> x.grad.numpy()
        array([2., 4.], dtype=float32)
    """

    __slots__ = ("_value", "stop_gradient", "_node", "grad", "_version", "name", "__weakref__")

    def __init__(self, data, dtype=None, stop_gradient=True):
        self._value = to_native(data, dtype)
        self.stop_gradient = bool(stop_gradient)
        self._node = None
        self.grad = None
        self._version = 0
        self.name = None

    @classmethod
    def _wrap(cls, value, node=None):
        """Wraps a native array without copying or checks (the hot path)."""
        t = object.__new__(cls)
        t._value = value
        t._node = node
        t.stop_gradient = node is None
        t.grad = None
        t._version = 0
        t.name = None
        return t

    # ---- metadata -------------------------------------------------------------------------
    @property
    def _shape(self) -> tuple:
        return self._value.shape

    @property
    def shape(self) -> list:
        """The shape as a list of ints (Paddle convention)."""
        return list(self._shape)

    @property
    def dtype(self) -> dtypes.DType:
        return _backend.dtype_of(self._value)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    def numel(self) -> int:
        """Number of elements."""
        return self.size

    def dim(self) -> int:
        return self.ndim

    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this tensor (``not stop_gradient``)."""
        return not self.stop_gradient

    @requires_grad.setter
    def requires_grad(self, value: bool):
        self.stop_gradient = not value

    def requires_grad_(self, requires_grad: bool = True):
        """Sets ``requires_grad`` in place and returns self (PyTorch style)."""
        self.stop_gradient = not requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded operation."""
        return self._node is None

    # ---- conversion -----------------------------------------------------------------------
    def numpy(self):
        """A NumPy array with the tensor's values (shares memory where possible; read-only
        results of views are copied)."""
        return _host(self).copy()

    def item(self):
        """The value of a one-element tensor as a Python scalar."""
        if self.size != 1:
            raise ValueError(
                f"item() needs a tensor with exactly one element, got shape {self.shape}; "
                f"index or reduce it first, e.g. x.sum().item()")
        return _host(self).reshape(()).item()

    def tolist(self):
        return _host(self).tolist()

    def __array__(self, dtype=None, copy=None):
        arr = _host(self)
        return arr if dtype is None else arr.astype(dtype)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if not self.dtype.is_integer:
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self.item())

    def __bool__(self):
        if self.size != 1:
            raise ValueError(
                f"the truth value of a tensor with {self.size} elements is ambiguous; "
                f"use .any() or .all()")
        return bool(self.item())

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        # without it Python iterates through __getitem__ until IndexError, which a 0-d
        # tensor raises at once: list(scalar) would be [] instead of an error
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor; use x.item() for its value")
        return (self[i] for i in range(self._shape[0]))

    __hash__ = object.__hash__  # elementwise __eq__ comes from ops; hash by identity

    # NumPy operands on the left (`np_array * x`, `np.float64(2) * x`) must defer to our
    # reflected operators instead of converting x through __array__ and dropping its graph
    __array_ufunc__ = None

    # ---- graph ----------------------------------------------------------------------------
    def detach(self) -> "Tensor":
        """A tensor sharing this tensor's values but cut from the graph (stop_gradient=True).

        Example:
            >>> import primflow as pf
            >>> x = pf.to_tensor([1.0], stop_gradient=False)
            >>> (x * 2).detach().stop_gradient
            True
        """
        return Tensor._wrap(self._value)

    def clear_grad(self):
        """Drops the accumulated gradient (Paddle's ``clear_grad``)."""
        self.grad = None

    clear_gradient = clear_grad

    def _set_value(self, value):
        """Replaces the values in place (copy-on-write) and bumps the version counter, so a
        backward that saved the old values notices and raises instead of using new ones.
        Views of this tensor, and the tensor it is a view of, follow (``sync_views``)."""
        self._value = value
        self._version += 1
        if _VIEW_OF or _VIEWS:
            sync_views(self)

    def set_value(self, value):
        """Overwrites the values with ``value`` (same shape), like Paddle's ``set_value``.

        (Tracers get a functional version from ``primflow.ops``.)"""
        try:
            new = to_native(value, self.dtype)
        except AttributeError:  # a transform's value has no array: name self and the fix
            from .trace import Tracer, outside_update_error  # (trace imports this module)

            if isinstance(value, Tracer):
                raise outside_update_error(value._trace, self, "set_value()") from None
            raise
        if tuple(new.shape) != tuple(self._shape):
            raise ValueError(f"set_value: expected shape {self.shape}, got {list(new.shape)}")
        self._set_value(new)

    # ---- printing -------------------------------------------------------------------------
    def __repr__(self):
        body = repr(_backend.to_numpy(self._value))
        # numpy repr "array([...], dtype=...)": keep only the bracketed values
        start, end = body.find("("), body.rfind(")")
        values = body[start + 1:end]
        if ", dtype=" in values:
            values = values[:values.rfind(", dtype=")]
        indent = " " * 7
        values = values.replace("\n      ", "\n" + indent)
        grad = "" if self.stop_gradient else ", stop_gradient=False"
        return (f"Tensor(shape={self.shape}, dtype={self.dtype.name}{grad},\n"
                f"{indent}{values.strip()})")

    __str__ = __repr__


for _module, _names in DEFERRED_METHODS.items():
    for _name in _names:
        setattr(Tensor, _name, _Deferred(Tensor, _name, _module))
del _module, _names, _name


def _host(t):
    """``t``'s values as a NumPy array (no copy), telling the active traces they were read:
    a value read while tracing is baked into what is traced."""
    if departures.count and state.trace_stack:
        note_constant_reads((t,))
    return _backend.to_numpy(t._value)


def defer_method(name, module="primflow.ops.tensor_methods"):
    """Declares the Tensor method ``name``, implemented in ``module``'s ``TENSOR_METHODS``
    (a primitive declared with ``public=`` calls this, so ``x.exp()`` needs no list entry).
    A name the class already has is left alone.

    Example:
        >>> defer_method("exp"); Tensor.exp is not None
        True
    """
    if name in DEFERRED_METHODS.setdefault(module, []) or name in vars(Tensor):
        return
    DEFERRED_METHODS[module].append(name)
    setattr(Tensor, name, _Deferred(Tensor, name, module))


def to_native(data, dtype=None):
    """Native backend array from Python data, NumPy arrays or Tensors, with primflow's dtype
    inference: Python floats -> default float, ints -> int64, bools -> bool; arrays keep
    their dtype unless ``dtype`` is given."""
    if isinstance(data, Tensor):
        value = data._value
        if dtype is not None and _backend.dtype_of(value) != dtypes.as_dtype(dtype):
            value = _backend.asarray(value, dtypes.as_dtype(dtype))
        return value
    if dtype is not None:
        return _backend.asarray(data, dtypes.as_dtype(dtype))
    if _backend.is_native(data) or hasattr(data, "__array__"):
        value = _backend.asarray(data)
        _backend.dtype_of(value)  # raises a clear error for unsupported dtypes
        return value
    value = _backend.asarray(data)
    try:  # the kind of what the backend inferred (not NumPy's dtype.kind: any backend)
        kind = _backend.dtype_of(value).kind
    except TypeError:
        kind = getattr(value.dtype, "kind", None)
    if kind == "f":
        return _backend.asarray(value, dtypes.default_float())
    if kind in ("i", "u"):
        return _backend.asarray(value, dtypes.int64)
    if kind == "b":
        return value
    if kind == "c":
        return _backend.asarray(value, dtypes.complex_of(dtypes.default_float()))
    raise TypeError(
        f"cannot make a tensor from {type(data).__name__} data of unsupported dtype "
        f"{getattr(value, 'dtype', kind)}; primflow supports "
        f"{', '.join(d.name for d in dtypes.ALL_DTYPES)}. Pass real numbers, nested lists of "
        f"them, NumPy arrays or tensors")


# ---- views (Paddle's rule: view-like ops share data with their input) ------------------------
# A view (the result of reshape, flatten, squeeze, unsqueeze, transpose, ... on a tensor) and
# the tensor owning the data (its root: views of views are registered on the root) stay in
# step: after an in-place update of either, the others are recomputed from it. Values are
# copy-on-write, so this is done explicitly: ``register_view`` records how to get the view's
# values from the root's (``forward``) and back (``inverse``), both functions of native
# arrays; every in-place update calls ``sync_views``, which updates the root and its other
# views and bumps each changed tensor's version (a backward that saved one of them refuses
# to run, as for any in-place update). Only values follow, as in Paddle: the autograd graph
# of the other tensors is unchanged. Views under transforms are not tracked.
_VIEW_OF = {}  # id(view) -> (weakref to the view, root, inverse, steps)
_VIEWS = {}  # id(root) -> [weakref to the root, [(weakref to a view, forward), ...]]


def register_view(root, view, forward, inverse, steps=None):
    """Records that ``view`` shares data with ``root`` (see above). ``steps`` (hashable,
    or None) says how the view is made: the caller reads it back with ``view_of`` (to
    compose a view of this view), and views made by equal steps share one computed value."""
    key = id(view)
    _VIEW_OF[key] = (weakref.ref(view, lambda _, k=key: _VIEW_OF.pop(k, None)), root, inverse,
                     steps)
    entry = _VIEWS.get(id(root))
    if entry is None:
        root_key = id(root)
        entry = _VIEWS[root_key] = [
            weakref.ref(root, lambda _, k=root_key: _VIEWS.pop(k, None)), []]
    views = entry[1]
    views.append((weakref.ref(view), forward, steps))
    if len(views) >= 16 and not len(views) & (len(views) - 1):  # at powers of two: drop the
        views[:] = [v for v in views if v[0]() is not None]  # dead (amortised O(1))


def view_of(tensor):
    """``(root, steps)`` when ``tensor`` is a registered view, else None."""
    entry = _VIEW_OF.get(id(tensor))
    if entry is None or entry[0]() is not tensor:
        return None
    return entry[1], entry[3]


def sync_views(tensor):
    """After an in-place update of ``tensor``: gives the tensor owning its data and every
    view of that tensor the matching values (and new versions)."""
    up = _VIEW_OF.get(id(tensor))
    if up is not None and up[0]() is tensor:
        root = up[1]
        root._value = up[2](tensor._value)
        root._version += 1
    elif id(tensor) in _VIEWS:
        root = tensor
    else:
        return
    down = _VIEWS.get(id(root))
    if down is None or down[0]() is not root:
        return
    alive = []
    computed = {}  # views made by the same steps share one computed value (arrays are
    for item in down[1]:  # never written in place, so sharing them is safe)
        view = item[0]()
        if view is None:
            continue
        alive.append(item)
        if view is not tensor:
            key = item[2]
            value = computed.get(key) if key is not None else None
            if value is None:
                value = item[1](root._value)
                if key is not None:
                    computed[key] = value
            view._value = value
            view._version += 1
    down[1] = alive
