"""What every public op does before it binds primitives: turn Python data into tensors,
promote dtypes (NumPy rules, Python scalars weak), broadcast shapes and normalise axes.
"""

from __future__ import annotations

import copy

from .. import prims
from ..backends import register_cache
from ..core import dtypes
from ..core.state import state
from ..core.tensor import Tensor
from ..core.trace import Tracer


def as_tensor(x, dtype=None) -> Tensor:
    """``x`` as a Tensor (tensors pass through; cast when ``dtype`` differs). A list or
    tuple holding tensors is stacked by recorded ops (``stack_nested``): the result keeps
    their graph, so e.g. ``pf.norm(pf.grad(y, [a, b]))`` is differentiable."""
    if isinstance(x, Tensor):
        if dtype is not None:
            d = dtypes.as_dtype(dtype)
            if x.dtype is not d:
                return prims.convert_element_type(x, dtype=d)
        return x
    if isinstance(x, (list, tuple)) and holds_tensors(x):
        return stack_nested(x, dtype)
    return Tensor(x, dtype=dtype)


def holds_tensors(seq) -> bool:
    """Whether the (nested) list or tuple ``seq`` holds a tensor anywhere."""
    for e in seq:
        if isinstance(e, Tensor) or (isinstance(e, (list, tuple)) and holds_tensors(e)):
            return True
    return False


def stack_nested(seq, dtype=None) -> Tensor:
    """A tensor from a (nested) list or tuple holding tensors, stacked along new leading
    axes by recorded ops, so gradients reach the tensors in it (NumPy's conversion would
    copy their values and silently cut the graph; Paddle's ``to_tensor`` stacks them too).
    Dtypes promote as in arithmetic: tensors and arrays by NumPy's rules, Python numbers
    weakly. Elements of different shapes raise a ``ValueError`` naming them.

    Example:
        >>> import primflow as pf
        >>> a = pf.to_tensor(3.0, stop_gradient=False)
        >>> t = stack_nested([a, 2.0 * a, 1.0])
        >>> t.numpy(), t.stop_gradient
        (array([3., 6., 1.], dtype=float32), False)
    """
    items = [stack_nested(e, dtype) if isinstance(e, (list, tuple)) and holds_tensors(e)
             else e for e in seq]
    if not items:
        raise ValueError("cannot build a tensor from an empty list of tensors")
    if dtype is not None:
        target = dtypes.as_dtype(dtype)
    else:
        strong = [e if isinstance(e, Tensor) else Tensor(e) for e in items
                  if not isinstance(e, _SCALARS)]
        target = strong[0].dtype
        for e in strong[1:]:
            target = dtypes.promote_types(target, e.dtype)
        for e in items:
            if isinstance(e, _SCALARS):
                target = dtypes.result_type_with_scalar(target, e)
    tensors = [as_tensor(e, target) for e in items]
    shape = tuple(tensors[0]._shape)
    for i, t in enumerate(tensors):
        if tuple(t._shape) != shape:
            raise ValueError(f"cannot build a tensor from a list holding tensors of different "
                             f"shapes: element 0 has shape {list(shape)}, element {i} has "
                             f"shape {t.shape}; every element must have the same shape")
    rows = [prims.reshape(t, shape=(1, *shape)) for t in tensors]
    return rows[0] if len(rows) == 1 else prims.concatenate(*rows, axis=0)


def alias(x: Tensor) -> Tensor:
    """A second handle on ``x``'s current value and place in the graph.

    In-place updates compute the new value from an alias and then rebind ``x``: the ops
    recorded for the update keep reading the old value (at its old version), while nodes
    that saved ``x`` itself see the version bump and refuse to backward.
    """
    if isinstance(x, Tracer):  # a transform's value: a shallow copy shares its payload
        return copy.copy(x)
    out = Tensor._wrap(x._value, x._node)
    out.stop_gradient = x.stop_gradient
    return out


def cast(x: Tensor, dtype) -> Tensor:
    """``x`` converted to ``dtype`` (no-op when it already has it)."""
    d = dtypes.as_dtype(dtype)
    return x if x.dtype is d else prims.convert_element_type(x, dtype=d)


def full(shape, value, dtype) -> Tensor:
    return prims.full(shape=tuple(shape), value=value, dtype=dtype)


def broadcast_shapes(*shapes) -> tuple:
    """NumPy broadcasting of several shapes; a clear error names them when they clash.

    Example:
        >>> from primflow.ops.helpers import broadcast_shapes
        >>> broadcast_shapes((3, 1), (4,))
        (3, 4)
    """
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if size not in (1, d):
                    raise ValueError(
                        f"shapes {' and '.join(str(list(s)) for s in shapes)} cannot be "
                        f"broadcast together (dim {i} from the left of the broadcast result: "
                        f"{size} vs {d}); make the sizes equal or 1")
                size = d
        out.append(size)
    return tuple(out)


def broadcast_to(x: Tensor, shape) -> Tensor:
    """``x`` broadcast to ``shape`` (NumPy rules), via the ``broadcast_in_dim`` primitive."""
    shape = tuple(shape)
    x_shape = tuple(x._shape)
    if x_shape == shape:
        return x
    if len(x_shape) > len(shape) or broadcast_shapes(x_shape, shape) != shape:
        raise ValueError(f"cannot broadcast a tensor of shape {list(x_shape)} to {list(shape)}")
    lead = len(shape) - len(x_shape)
    return prims.broadcast_in_dim(x, shape=shape,
                                  broadcast_dimensions=tuple(range(lead, len(shape))))


_SCALARS = (int, float, bool, complex)


_constants = register_cache({})  # holds arrays: emptied when the backend changes


def scalar_constant(shape, value, dtype) -> Tensor:
    """A tensor of ``shape`` filled with the Python scalar ``value``.

    Eager code repeats the same scalars (``x * 1.0001`` in a loop), so the constant tensors
    are cached; a cached tensor changed in place (version > 0) is replaced. Inside
    transforms the ``full`` primitive is bound as usual, so traces see it.
    """
    if state.trace_stack:
        return prims.full(shape=tuple(shape), value=value, dtype=dtype)
    key = (shape, value, dtype)
    t = _constants.get(key)
    if t is None or t._version:
        t = prims.full(shape=tuple(shape), value=value, dtype=dtype)
        if len(_constants) >= 256:
            _constants.clear()
        _constants[key] = t
    return t


def binary_operands(x, y):
    """Promotes and broadcasts the two operands of an elementwise binary op.

    Python scalars are weak: ``float32_tensor * 2.0`` stays float32.
    """
    x_is_t, y_is_t = isinstance(x, Tensor), isinstance(y, Tensor)
    if x_is_t and y_is_t:
        dx, dy = x.dtype, y.dtype
        if dx is not dy:
            d = dtypes.promote_types(dx, dy)
            x, y = cast(x, d), cast(y, d)
        sx, sy = x._shape, y._shape
        if sx != sy:
            shape = broadcast_shapes(sx, sy)
            x, y = broadcast_to(x, shape), broadcast_to(y, shape)
        return x, y
    if x_is_t and type(y) in _SCALARS:
        dx = x.dtype
        d = dtypes.result_type_with_scalar(dx, y)
        if d is not dx:
            x = prims.convert_element_type(x, dtype=d)
        return x, scalar_constant(x._shape, y, d)
    if y_is_t and type(x) in _SCALARS:
        dy = y.dtype
        d = dtypes.result_type_with_scalar(dy, x)
        if d is not dy:
            y = prims.convert_element_type(y, dtype=d)
        return scalar_constant(y._shape, x, d), y
    # lists, arrays, or two scalars: make tensors and try again
    return binary_operands(x if x_is_t else as_tensor(x), y if y_is_t else as_tensor(y))


def float_operand(x) -> Tensor:
    """A floating tensor: integer and bool inputs become the default float dtype (as
    ``pf.sin(int_tensor)`` does in NumPy and Paddle)."""
    x = as_tensor(x)
    return x if x.dtype.is_floating else cast(x, dtypes.default_float())


def normalize_axis(axis, ndim, allow_none=True) -> tuple:
    """Axis argument (None, int, list or tuple) to a sorted tuple of non-negative dims."""
    if axis is None:
        if not allow_none:
            raise ValueError("an axis is required")
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = set()
    for a in axes:
        if not isinstance(a, int):
            raise TypeError(f"axis entries must be ints, got {a!r}")
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise ValueError(f"axis {a} is out of range for a tensor with {ndim} dims")
        out.add(a % ndim if ndim else 0)
    if ndim == 0:
        return ()
    return tuple(sorted(out))


def shape_arg(shape) -> tuple:
    """Shape argument (list, tuple, int or 1-d int tensor) to a tuple of ints."""
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    if isinstance(shape, int):
        return (shape,)
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be a list or tuple of ints, got {shape!r}") from None
    for s in out:
        if s < 0:
            raise ValueError(f"shape entries must be >= 0, got {list(out)}")
    return out


def exact_reshape(x, shape) -> Tensor:
    """``x`` reshaped to exactly ``shape``: for internal code whose target shapes may hold
    zero-size dims, which ``pf.reshape`` reads as Paddle's "copy this dim". Returns ``x``
    itself when the shape is unchanged.

    Example:
        >>> import primflow as pf
        >>> exact_reshape(pf.zeros([1, 0, 2]), [0, 2]).shape
        [0, 2]
    """
    shape = tuple(int(s) for s in shape)
    return x if tuple(x._shape) == shape else prims.reshape(x, shape=shape)
