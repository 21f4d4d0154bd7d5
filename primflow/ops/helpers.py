"""What every public op does before it binds primitives: turn Python data into tensors,
promote dtypes (NumPy rules, Python scalars weak), broadcast shapes and normalise axes.
"""

from __future__ import annotations

import copy
import math
import numbers
import operator

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
    return new_tensor(x, dtype)


def new_tensor(data, dtype=None, op=None) -> Tensor:
    """``Tensor(data, dtype)``; where that fails on Python data (nested lists of unequal
    lengths, an integer too large for the dtype, nan for an integer dtype, a string...),
    the error names the entry at fault (and the public op ``op``) instead of NumPy's words.

    Example:
        >>> from primflow.ops.helpers import new_tensor
        >>> new_tensor([[1, 2], [3]], op="to_tensor")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: to_tensor: data is ragged: data[1] has length 1 but data[0] has 2; ...
    """
    try:
        return Tensor(data, dtype=dtype)
    except (OverflowError, ValueError, TypeError) as e:
        problem = _bad_python_data(data, dtype)
        if problem is None:
            raise
        error_type, message = problem
        raise error_type(message if op is None else f"{op}: {message}") from e


def _bad_python_data(data, dtype):
    """``(error type, message)`` for what makes nested Python data unfit for a tensor of
    ``dtype`` (None when nothing is found: arrays and other objects are not inspected)."""
    leaves, lists, numbers_at = [], {}, {}  # depth -> (length, path) / path of a number

    def walk(value, path, depth):
        if isinstance(value, (list, tuple)):
            seen = lists.setdefault(depth, (len(value), path))
            if depth in numbers_at or seen[0] != len(value):
                other = (f"data{numbers_at[depth]} is a number" if depth in numbers_at
                         else f"data{seen[1]} has {seen[0]}")
                return (ValueError, f"data is ragged: data{path} has length {len(value)} "
                                    f"but {other}; nested lists must be rectangular")
            for i, v in enumerate(value):
                found = walk(v, f"{path}[{i}]", depth + 1)
                if found:
                    return found
            return None
        if depth in lists:
            return (ValueError, f"data is ragged: data{path} is a number but data"
                                f"{lists[depth][1]} is a list of {lists[depth][0]}; nested "
                                f"lists must be rectangular")
        numbers_at.setdefault(depth, path)
        leaves.append((path, value))
        return None

    found = walk(data, "", 0)
    if found:
        return found
    for path, v in leaves:
        if not (isinstance(v, numbers.Number) or hasattr(v, "__array__")):
            return (TypeError, f"data{path} is {v!r} ({type(v).__name__}); tensors hold "
                               f"numbers (bool, int, float, complex)")
    target = dtypes.int64 if dtype is None else dtypes.as_dtype(dtype)
    if not target.is_integer:
        return None
    for path, v in leaves:
        if not isinstance(v, numbers.Real) or (dtype is None and not isinstance(
                v, numbers.Integral)):
            continue  # (no dtype given: floats make a float tensor)
        found = integer_misfit(v, target)
        if found:
            error_type, what = found
            return error_type, f"data{path} = {v} {what}; use a float dtype"
    return None


def integer_misfit(value, dtype):
    """``(error type, reason)`` when the real Python number ``value`` cannot be stored in
    the integer ``dtype`` (nan/inf, or outside its range), else None.

    Example:
        >>> from primflow.core import dtypes
        >>> integer_misfit(300, dtypes.uint8)
        (<class 'OverflowError'>, 'is outside the range of uint8 [0, 255]')
    """
    if not isinstance(value, numbers.Integral) and not math.isfinite(value):
        return ValueError, f"cannot be held by an integer dtype ({dtype.name})"
    lo, hi = _integer_range(dtype)
    if not lo <= value <= hi:
        return OverflowError, f"is outside the range of {dtype.name} [{lo}, {hi}]"
    return None


_INTEGER_RANGES = {}  # dtype -> (lowest, highest): binary ops with an int scalar look it up


def _integer_range(dtype):
    found = _INTEGER_RANGES.get(dtype)
    if found is None:
        bits = 8 * dtype.itemsize
        found = _INTEGER_RANGES[dtype] = (0, 2 ** bits - 1) if dtype.name.startswith(
            "uint") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return found


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
    if x_is_t and type(y) is float:  # the common case: a float scalar keeps a float dtype
        dx = x.dtype
        if dx.is_floating:
            return x, scalar_constant(x._shape, y, dx)
    if x_is_t and type(y) in _SCALARS:
        dx = x.dtype
        d = dtypes.result_type_with_scalar(dx, y)
        if type(y) is int and d.is_integer:
            _check_int_scalar(y, d)
        if d is not dx:
            x = prims.convert_element_type(x, dtype=d)
        return x, scalar_constant(x._shape, y, d)
    if y_is_t and type(x) in _SCALARS:
        dy = y.dtype
        d = dtypes.result_type_with_scalar(dy, x)
        if type(x) is int and d.is_integer:
            _check_int_scalar(x, d)
        if d is not dy:
            y = prims.convert_element_type(y, dtype=d)
        return scalar_constant(y._shape, x, d), y
    # lists, arrays, or two scalars: make tensors and try again
    return binary_operands(x if x_is_t else as_tensor(x), y if y_is_t else as_tensor(y))


def _check_int_scalar(value, dtype):
    """A Python int operand takes the integer tensor's dtype (weak typing): refuse one it
    cannot hold instead of NumPy's error from inside a kernel."""
    lo, hi = _integer_range(dtype)
    if not lo <= value <= hi:
        found = integer_misfit(value, dtype)
        raise OverflowError(f"the Python int {value} {found[1]}, the dtype of the tensor it "
                            f"meets; cast the tensor first (e.g. x.astype('int64') or "
                            f"x.astype('float64'))")


def float_operand(x) -> Tensor:
    """A floating tensor: integer and bool inputs become the default float dtype (as
    ``pf.sin(int_tensor)`` does in NumPy and Paddle)."""
    x = as_tensor(x)
    return x if x.dtype.is_floating else cast(x, dtypes.default_float())


def int_arg(value, what, minimum=None) -> int:
    """``value`` as a Python int for the argument ``what`` (a phrase such as ``"fft: n"``).

    Ints, NumPy integers and one-element integer tensors pass; a float (even ``2.0``), a
    bool or a string raises TypeError (as NumPy and PyTorch do for sizes: a silently
    truncated ``2.5`` is a wrong shape), a value below ``minimum`` ValueError.

    Example:
        >>> from primflow.ops.helpers import int_arg
        >>> int_arg(3, "n")
        3
        >>> int_arg(2.5, "fft: n")
        Traceback (most recent call last):
        ...
        TypeError: fft: n must be an int, got 2.5 (float)
    """
    if isinstance(value, bool):  # an int subclass, but never meant as a size or an axis
        raise TypeError(f"{what} must be an int, got {value!r} (bool)")
    try:
        out = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {value!r} "
                        f"({type(value).__name__})") from None
    if minimum is not None and out < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {out}")
    return out


def int_list(value, what) -> list:
    """An int or a sequence of ints (list, tuple, 1-d integer tensor...) as a list of
    Python ints, each checked by ``int_arg``; the argument ``what`` is named in errors.

    Example:
        >>> from primflow.ops.helpers import int_list
        >>> int_list(2, "axis"), int_list((0, -1), "axis")
        ([2], [0, -1])
    """
    if type(value) is int:  # the common case, kept cheap (reductions call this)
        return [value]
    if isinstance(value, Tensor):
        if not (value.dtype.is_integer and value.ndim <= 1):
            raise TypeError(f"{what} must be ints, got a {value.dtype.name} tensor of shape "
                            f"{value.shape}; use an int list or a 1-d integer tensor")
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"{what} must be an int or a list/tuple of ints, got {value!r} "
                            f"({type(value).__name__})")
        return [int_arg(value, what)]
    items = list(value)
    for i, v in enumerate(items):
        if type(v) is not int:
            items[i] = int_arg(v, f"{what}[{i}]")
    return items


def normalize_axis(axis, ndim, allow_none=True, what="axis") -> tuple:
    """Axis argument (None, int, list or tuple) to a sorted tuple of non-negative dims; a
    non-int entry, an axis out of range or one named twice raises (naming ``what``)."""
    if axis is None:
        if not allow_none:
            raise ValueError("an axis is required")
        return tuple(range(ndim))
    if type(axis) is int and -ndim <= axis < ndim:  # the common case, kept cheap
        return (axis % ndim,)
    out = set()
    for a in int_list(axis, what):
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise ValueError(f"{what} {a} is out of range for a tensor with {ndim} dims")
        a = a % ndim if ndim else 0
        if a in out:
            raise ValueError(f"{what} {axis!r} names dim {a} twice (a tensor with {ndim} dims); "
                             f"give each dim once")
        out.add(a)
    if ndim == 0:
        return ()
    return tuple(sorted(out))


def real_arg(value, what) -> float:
    """A finite real Python number for the argument ``what`` (bounds, slopes, epsilons;
    a one-element real tensor gives its value).

    Example:
        >>> from primflow.ops.helpers import real_arg
        >>> real_arg(0.5, "p")
        0.5
    """
    if isinstance(value, Tensor) and value.size == 1 and not value.dtype.is_complex:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value}")
    return value


def single_axis(axis, ndim, what="axis") -> int:
    """One axis (an int) of a tensor with ``ndim`` dims as a dim in ``[0, ndim)``; a 0-d
    tensor has none (NumPy's and PyTorch's rule), a list of axes is refused.

    Example:
        >>> from primflow.ops.helpers import single_axis
        >>> single_axis(-1, 3)
        2
    """
    a = int_arg(axis, what)
    if ndim == 0:
        raise ValueError(f"{what} {a}: a 0-d tensor has no axes; reshape it to 1-d first")
    if not -ndim <= a < ndim:
        raise ValueError(f"{what} {a} is out of range for a tensor with {ndim} dims")
    return a % ndim


def shape_arg(shape, what="shape") -> tuple:
    """Shape argument (list, tuple, int or 1-d int tensor) to a tuple of ints >= 0; a
    float, bool or negative entry raises, naming ``what``."""
    out = tuple(int_list(shape, what))
    for s in out:
        if s < 0:
            raise ValueError(f"{what} entries must be >= 0, got {list(out)}")
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
