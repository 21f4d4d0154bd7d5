"""Tensor creation: from data, constant fills, ranges, identity and random draws."""

from __future__ import annotations

import math as _math
import numbers

from .. import prims
from ..backends import backend_for_device, get_backend
from ..core import dtypes
from ..core.random import next_key
from ..core.tensor import Tensor
from ..core.trace import Tracer
from .helpers import (as_tensor, binary_operands, cast, holds_tensors, int_arg, integer_misfit,
                      new_tensor, real_arg, shape_arg, stack_nested)


def _float_dtype(dtype):
    return dtypes.default_float() if dtype is None else dtypes.as_dtype(dtype)


def to_tensor(data, dtype=None, place=None, stop_gradient=True) -> Tensor:
    """A new tensor from Python data, a NumPy array or a tensor (copied).

    Python floats get the default float dtype, ints int64, bools bool; NumPy arrays keep
    theirs unless ``dtype`` is given. ``place`` (``"cpu"``, ``"gpu:0"``, a Place) puts it
    on that device (default: the current one, ``pf.get_device()``).

    A tensor is copied into a new one without its graph (Paddle's rule). A list or tuple
    holding tensors is stacked (Paddle's rule too): with ``stop_gradient=True`` (the
    default) the result is a constant; with ``stop_gradient=False`` it stays linked to the
    tensors in the list, so gradients reach them.

    Example:
        >>> import primflow as pf
        >>> pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
        Tensor(shape=[2], dtype=float64, stop_gradient=False,
               [1., 2.])
    """
    if isinstance(data, Tensor):
        data = data.numpy()
    elif isinstance(data, (list, tuple)) and holds_tensors(data):
        return _stacked_to_tensor(data, dtype, place, stop_gradient)
    if place is not None and backend_for_device(place) is not get_backend():
        # devices: made as usual (dtype inference), then copied to the device
        from .tensor_methods import to_device  # noqa: PLC0415 - it imports this module

        out = to_device(new_tensor(data, dtype, "to_tensor"), place)
        out.stop_gradient = bool(stop_gradient)
        return out
    out = new_tensor(data, dtype, "to_tensor")
    if not isinstance(data, (list, tuple, int, float, bool)):
        # arrays may share memory with the caller's: copy, so later writes to them don't
        # change the tensor (convert_element_type always returns a new array)
        out = prims.convert_element_type(out, dtype=out.dtype)
    out.stop_gradient = bool(stop_gradient)
    return out


def _stacked_to_tensor(data, dtype, place, stop_gradient):
    out = stack_nested(data, dtype)
    if place is not None and backend_for_device(place) is not get_backend():
        from .tensor_methods import to_device  # noqa: PLC0415 - it imports this module

        out = to_device(out, place)
    if stop_gradient or out.stop_gradient:  # a constant, or a new leaf of the values
        out = Tensor._wrap(out._value) if not isinstance(out, Tracer) else out.detach()
    out.stop_gradient = bool(stop_gradient)
    return out


def full(shape, fill_value, dtype=None) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (dtype from the value if None).

    Example:
        >>> import primflow as pf
        >>> pf.full([2], 3.0).numpy()
        array([3., 3.], dtype=float32)
    """
    _check_number(fill_value, "full: fill_value")
    if dtype is None:
        dtype = dtypes.dtype_of_python(fill_value) if isinstance(
            fill_value, (bool, int, float)) else dtypes.default_float()
    dtype = dtypes.as_dtype(dtype)
    if dtype.is_integer and isinstance(fill_value, (int, float)) and not isinstance(
            fill_value, bool):
        found = integer_misfit(fill_value, dtype)
        if found:
            raise found[0](f"full: fill_value {fill_value} {found[1]}")
    return prims.full(shape=shape_arg(shape), value=fill_value, dtype=dtype)


def _check_number(value, what):
    """TypeError unless ``value`` is a number (Python, NumPy scalar or one-element tensor)."""
    if type(value) in (float, int, bool) or isinstance(value, (numbers.Number, Tensor)) or (
            getattr(value, "shape", None) == ()):
        return
    raise TypeError(f"{what} must be a number, got {value!r} ({type(value).__name__})")


def zeros(shape, dtype=None) -> Tensor:
    """Zeros of the default float dtype (or ``dtype``).

    Example:
        >>> import primflow as pf
        >>> pf.zeros([2, 3]).shape
        [2, 3]
        >>> pf.zeros([2], dtype='int64').numpy()
        array([0, 0])
    """
    return full(shape, 0.0, _float_dtype(dtype))


def ones(shape, dtype=None) -> Tensor:
    """Ones of the default float dtype (or ``dtype``).

    Example:
        >>> import primflow as pf
        >>> pf.ones([2]).numpy()
        array([1., 1.], dtype=float32)
    """
    return full(shape, 1.0, _float_dtype(dtype))


def empty(shape, dtype=None) -> Tensor:
    """Uninitialised in NumPy; zeros here (deterministic).

    Example:
        >>> import primflow as pf
        >>> pf.empty([2]).numpy()
        array([0., 0.], dtype=float32)
    """
    return zeros(shape, dtype)


def _like(x, value, dtype):
    x = as_tensor(x)
    d = x.dtype if dtype is None else dtypes.as_dtype(dtype)
    return prims.full(shape=tuple(x._shape), value=value, dtype=d)


def zeros_like(x, dtype=None) -> Tensor:
    """Zeros shaped (and typed) like ``x``.

    Example:
        >>> import primflow as pf
        >>> pf.zeros_like(pf.to_tensor([1, 2])).numpy()
        array([0, 0])
    """
    return _like(x, 0, dtype)


def ones_like(x, dtype=None) -> Tensor:
    """Ones shaped (and typed) like ``x``.

    Example:
        >>> import primflow as pf
        >>> pf.ones_like(pf.to_tensor([[1.0, 2.0]])).numpy()
        array([[1., 1.]], dtype=float32)
    """
    return _like(x, 1, dtype)


def full_like(x, fill_value, dtype=None) -> Tensor:
    """``fill_value`` shaped (and typed) like ``x``.

    Example:
        >>> import primflow as pf
        >>> pf.full_like(pf.zeros([2]), 7.0).numpy()
        array([7., 7.], dtype=float32)
    """
    _check_number(fill_value, "full_like: fill_value")
    return _like(x, fill_value, dtype)


def arange(start=0, end=None, step=1, dtype=None) -> Tensor:
    """Evenly spaced values in [start, end). int64 for int arguments, else default float.

    Example:
        >>> import primflow as pf
        >>> pf.arange(5).numpy()
        array([0, 1, 2, 3, 4])
    """
    if end is None:
        start, end = 0, start
    start, end = real_arg(start, "arange: start"), real_arg(end, "arange: end")
    if real_arg(step, "arange: step") == 0:
        raise ValueError("arange: step must not be zero")
    if dtype is None:
        is_int = all(isinstance(v, int) for v in (start, end, step))
        dtype = dtypes.int64 if is_int else dtypes.default_float()
    dtype = dtypes.as_dtype(dtype)
    n = max(0, _math.ceil((end - start) / step))
    idx = prims.iota(shape=(n,), dtype=dtypes.float64 if dtype.is_floating else dtypes.int64,
                     dimension=0)
    work = idx.dtype
    out = prims.add(prims.mul(idx, prims.full(shape=(n,), value=step, dtype=work)),
                    prims.full(shape=(n,), value=start, dtype=work))
    return cast(out, dtype)


def linspace(start, stop, num, dtype=None) -> Tensor:
    """``num`` evenly spaced values from start to stop, both included.

    Example:
        >>> import primflow as pf
        >>> pf.linspace(0, 1, 3).numpy()
        array([0. , 0.5, 1. ], dtype=float32)
    """
    dtype = _float_dtype(dtype)
    num = int_arg(num, "linspace: num", minimum=1)
    start, stop = real_arg(start, "linspace: start"), real_arg(stop, "linspace: stop")
    f64 = dtypes.float64
    idx = prims.iota(shape=(num,), dtype=f64, dimension=0)
    step = (stop - start) / (num - 1) if num > 1 else 0.0
    out = prims.add(prims.mul(idx, prims.full(shape=(num,), value=step, dtype=f64)),
                    prims.full(shape=(num,), value=float(start), dtype=f64))
    if num > 1:  # make the last value exactly `stop`
        last = prims.eq(idx, prims.full(shape=(num,), value=num - 1, dtype=f64))
        out = prims.select(last, prims.full(shape=(num,), value=float(stop), dtype=f64), out)
    return cast(out, dtype)


def eye(num_rows, num_columns=None, dtype=None) -> Tensor:
    """Identity matrix.

    Example:
        >>> import primflow as pf
        >>> pf.eye(2).numpy()
        array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    num_columns = num_rows if num_columns is None else num_columns
    shape = (int_arg(num_rows, "eye: num_rows", minimum=0),
             int_arg(num_columns, "eye: num_columns", minimum=0))
    rows = prims.iota(shape=shape, dtype=dtypes.int64, dimension=0)
    cols = prims.iota(shape=shape, dtype=dtypes.int64, dimension=1)
    return cast(prims.eq(rows, cols), _float_dtype(dtype))


def rand(shape, dtype=None) -> Tensor:
    """Uniform draws in [0, 1). Reproducible with ``pf.seed``.

    Example:
        >>> import primflow as pf
        >>> pf.seed(0); a = pf.rand([2, 3])
        >>> a.shape, bool(((a >= 0) & (a < 1)).all())
        ([2, 3], True)
    """
    return prims.random_uniform(shape=shape_arg(shape, "rand: shape"),
                                dtype=_float_dtype(dtype), key=next_key())


def randn(shape, dtype=None) -> Tensor:
    """Standard normal draws.

    Example:
        >>> import primflow as pf
        >>> pf.seed(0); a = pf.randn([1000], 'float64')
        >>> abs(float(a.mean())) < 0.2, abs(float(a.std()) - 1.0) < 0.1
        (True, True)
    """
    return prims.random_normal(shape=shape_arg(shape, "randn: shape"),
                               dtype=_float_dtype(dtype), key=next_key())


def uniform(shape, dtype=None, min=-1.0, max=1.0, seed=0) -> Tensor:  # noqa: A002
    """Uniform draws in [min, max) (Paddle's argument order); ``min > max`` raises, as in
    PyTorch.

    Example:
        >>> import primflow as pf
        >>> a = pf.uniform([100], min=0.0, max=2.0)
        >>> bool(((a >= 0) & (a < 2)).all())
        True
    """
    del seed
    lo, hi = real_arg(min, "uniform: min"), real_arg(max, "uniform: max")
    if lo > hi:
        raise ValueError(f"uniform: min ({lo}) must be <= max ({hi})")
    u = rand(shape, dtype)
    lo = prims.full(shape=tuple(u._shape), value=min, dtype=u.dtype)
    width = prims.full(shape=tuple(u._shape), value=max - min, dtype=u.dtype)
    return prims.add(prims.mul(u, width), lo)


def normal(mean=0.0, std=1.0, shape=None, dtype=None) -> Tensor:
    """Normal draws with the given mean and std (Paddle's ``paddle.normal``); a negative
    (or nan) std raises, as in PyTorch.

    Example:
        >>> import primflow as pf
        >>> pf.normal(0.0, 2.0, [3]).shape
        [3]
    """
    if isinstance(mean, Tensor) or isinstance(std, Tensor):  # Paddle: shape from the tensors
        m, s = binary_operands(mean, std)
        if not isinstance(s, Tracer) and s.size and not bool(
                prims.reduce_min(prims.ge(s, prims.full(shape=tuple(s._shape), value=0,
                                                         dtype=s.dtype)),
                                 axes=tuple(range(s.ndim)))):
            raise ValueError(f"normal: std must be >= 0 everywhere, got a tensor with "
                             f"negative or nan entries (shape {s.shape})")
        z = randn(m._shape, m.dtype if m.dtype.is_floating else dtype)
        return prims.add(prims.mul(*binary_operands(z, s)), cast(m, z.dtype))
    if not real_arg(std, "normal: std") >= 0:
        raise ValueError(f"normal: std must be >= 0, got {std}")
    real_arg(mean, "normal: mean")
    if shape is None:
        shape = [1]
    z = randn(shape, dtype)
    return prims.add(prims.mul(z, prims.full(shape=tuple(z._shape), value=std, dtype=z.dtype)),
                     prims.full(shape=tuple(z._shape), value=mean, dtype=z.dtype))


def randint(low=0, high=None, shape=(1,), dtype="int64") -> Tensor:
    """Integers uniform in [low, high) (``low < high``, both ints; an integer ``dtype``).

    Example:
        >>> import primflow as pf
        >>> a = pf.randint(0, 10, [5])
        >>> a.dtype.name, bool(((a >= 0) & (a < 10)).all())
        ('int64', True)
    """
    if high is None:
        low, high = 0, low
    low, high = int_arg(low, "randint: low"), int_arg(high, "randint: high")
    if low >= high:
        raise ValueError(f"randint: low ({low}) must be < high ({high}): the range "
                         f"[low, high) is empty")
    if not dtypes.as_dtype(dtype).is_integer:
        raise TypeError(f"randint: dtype must be an integer dtype, got {dtype!r}")
    u = rand(shape_arg(shape, "randint: shape"), "float64")
    scaled = prims.floor(prims.add(
        prims.mul(u, prims.full(shape=tuple(u._shape), value=float(high - low),
                                dtype=dtypes.float64)),
        prims.full(shape=tuple(u._shape), value=float(low), dtype=dtypes.float64)))
    return cast(scaled, dtype)


def randperm(n, dtype="int64") -> Tensor:
    """A random permutation of 0..n-1 (argsort of uniform draws via ranks).

    Example:
        >>> import primflow as pf
        >>> sorted(pf.randperm(5).tolist())
        [0, 1, 2, 3, 4]
    """
    n = int_arg(n, "randperm: n", minimum=0)
    u = rand([n], "float64")
    # rank of each draw = number of draws smaller than it (O(n^2), fine for small n)
    col = prims.broadcast_in_dim(u, shape=(n, n), broadcast_dimensions=(0,))
    row = prims.broadcast_in_dim(u, shape=(n, n), broadcast_dimensions=(1,))
    ranks = prims.reduce_sum(cast(prims.lt(row, col), dtypes.int64), axes=(1,))
    return cast(ranks, dtype)
