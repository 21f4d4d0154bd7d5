"""NumPy indexing for tensors, differentiable: ``x[key]`` and ``x[key] = value``.

Reading works in three steps: basic indices (ints, slices, None, Ellipsis) become one
``slice`` primitive plus a reshape; negative steps a flip; advanced indices (integer
tensors/lists and boolean masks) one ``gather``. Writing is functional underneath (a
select over the positions the key addresses), then rebinds the tensor in place with a new
version, so a backward that saved the old values raises instead of using wrong ones.
"""

from __future__ import annotations

from .. import prims
from ..core import dtypes
from ..core.state import state
from ..core.tensor import Tensor, sync_views
from ..core.trace import Tracer, outside_update_error
from .helpers import alias, as_tensor, broadcast_shapes, broadcast_to, cast
from .manipulation import _check_index_range, flip, moveaxis, reshape


def _is_index_array(item):
    return isinstance(item, (Tensor, list)) or (
        hasattr(item, "__array__") and not isinstance(item, (int, float)))


def _expand_key(x, key):
    """Key as a list of items over x's dims; bool masks become integer index tensors."""
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for item in key:
        if _is_index_array(item):
            arr = as_tensor(item)
            if not (arr.dtype.is_bool or arr.dtype.is_integer):
                raise IndexError(f"tensors used as indices must be integer or bool, got "
                                 f"{arr.dtype.name}")
            items.append(arr)
        elif item is None or item is Ellipsis or isinstance(item, (int, slice)):
            items.append(item)
        else:
            raise IndexError(f"unsupported index {item!r}: use ints, slices, None, ..., "
                             f"integer tensors or boolean masks")
    # a k-dim mask consumes k dims
    width = [0 if i is None or i is Ellipsis else (
        i.ndim if isinstance(i, Tensor) and i.dtype.is_bool else 1) for i in items]
    consumed = sum(width)
    if consumed > x.ndim:
        raise IndexError(f"too many indices ({consumed}) for a tensor of shape {x.shape}")
    ellipses = [k for k, i in enumerate(items) if i is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out, dim = [], 0
    for item, w in zip(items, width):
        if item is Ellipsis:
            out += [slice(None)] * (x.ndim - consumed)
            dim += x.ndim - consumed
        elif isinstance(item, Tensor) and item.dtype.is_bool:
            _check_mask_shape(item, x, dim)
            # the mask stands for w integer index arrays (its nonzero positions)
            out.extend(_mask_to_indices(item))
            dim += w
        else:
            out.append(item)
            dim += w
    if not ellipses:
        out += [slice(None)] * (x.ndim - consumed)
    return out


def _check_mask_shape(mask, x, dim):
    """IndexError unless a boolean mask's shape equals the dims of ``x`` it covers (from
    ``dim``); without it a short mask silently picks from the first entries."""
    covered = tuple(x._shape[dim:dim + mask.ndim])
    for k, (m, n) in enumerate(zip(mask._shape, covered)):
        if m != n:
            raise IndexError(
                f"boolean index of shape {mask.shape} did not match the indexed tensor of "
                f"shape {x.shape} along axis {dim + k}: size of axis is {n} but size of "
                f"corresponding boolean axis is {m}")


def _mask_to_indices(mask):
    """The positions where a concrete boolean mask is True, one int64 tensor per dim."""
    if not hasattr(mask, "_value") or type(mask) is not Tensor:
        raise IndexError("boolean mask indexing needs concrete values (its result shape "
                         "depends on them); use pf.where inside transformed functions")
    count = int(prims.reduce_sum(cast(mask, dtypes.int64),
                                 axes=tuple(range(mask.ndim))).item())
    flat = prims.reshape(mask, shape=(mask.size,))
    # position of the j-th True: rank the True entries with a cumulative sum
    ranks = prims.cumsum(cast(flat, dtypes.int64), axis=0, reverse=False)
    positions = prims.iota(shape=(mask.size,), dtype=dtypes.int64, dimension=0)
    slot = prims.sub(ranks, prims.full(shape=(mask.size,), value=1, dtype=dtypes.int64))
    slot = prims.select(flat, slot, prims.full(shape=(mask.size,), value=count,
                                               dtype=dtypes.int64))
    # scatter each True position into its slot (an extra slot collects the False entries)
    table = prims.scatter_add(prims.full(shape=(count + 1,), value=0, dtype=dtypes.int64),
                              prims.reshape(slot, shape=(mask.size, 1)), positions)
    flat_idx = prims.reshape(prims.slice(table, start=(0,), limit=(count,), strides=(1,)),
                             shape=(count, 1))
    # coordinates along each dim, read at those flat positions
    shape = tuple(mask._shape)
    return [prims.gather(prims.reshape(prims.iota(shape=shape, dtype=dtypes.int64, dimension=d),
                                       shape=(mask.size,)), flat_idx)
            for d in range(len(shape))]


def getitem(x, key) -> Tensor:
    """``x[key]`` with NumPy semantics, differentiable with respect to ``x``.

    Example:
        >>> import primflow as pf
        >>> x = pf.arange(12).reshape([3, 4])
        >>> x[1:, [0, 3]].numpy()
        array([[ 4,  7],
               [ 8, 11]])
    """
    items = _expand_key(x, key)
    advanced = any(isinstance(i, Tensor) for i in items)
    start, limit, strides, flips = [], [], [], []
    new_shape, adv_dims, adv_arrays = [], [], []
    dim = 0
    for item in items:
        if item is None:
            new_shape.append(1)
            continue
        n = x._shape[dim]
        if isinstance(item, slice):
            b, e, s = item.indices(n)
            if s < 0:  # take the same elements with a positive step, then flip
                count = len(range(b, e, s))
                b, e, s = (b + (count - 1) * s, b + 1, -s) if count else (0, 0, 1)
                flips.append(len(new_shape))
            count = len(range(b, e, s))
            start.append(b)
            limit.append(b + (count - 1) * s + 1 if count else b)
            strides.append(s)
            new_shape.append(count)
        elif isinstance(item, int) and not advanced:
            if not -n <= item < n:
                raise IndexError(f"index {item} is out of range for dim {dim} of size {n} "
                                 f"(shape {x.shape})")
            item %= n
            start.append(item)
            limit.append(item + 1)
            strides.append(1)
        else:  # advanced: keep the whole dim for now, gather afterwards
            arr = as_tensor(item, dtype="int64") if isinstance(item, int) else item
            _check_index_range(arr, n, "indexing")
            start.append(0)
            limit.append(n)
            strides.append(1)
            adv_dims.append(len(new_shape))
            adv_arrays.append(arr)
            new_shape.append(n)
        dim += 1
    out = x
    if (tuple(start), tuple(limit), tuple(strides)) != (
            (0,) * x.ndim, tuple(x._shape), (1,) * x.ndim):
        out = prims.slice(out, start=tuple(start), limit=tuple(limit), strides=tuple(strides))
    out = reshape(out, new_shape)
    if flips:
        out = flip(out, flips)
    if adv_arrays:
        out = _gather_advanced(out, adv_dims, adv_arrays)
    return out


def _gather_advanced(x, dims, arrays):
    """NumPy advanced indexing on ``dims``: the broadcast index shape replaces them, in
    place when the dims are adjacent, in front otherwise."""
    shape = broadcast_shapes(*[a._shape for a in arrays])
    arrays = [broadcast_to(cast(a, dtypes.int64), shape) for a in arrays]
    moved = moveaxis(x, dims, list(range(len(dims))))
    indices = prims.concatenate(*[prims.reshape(a, shape=tuple(shape) + (1,)) for a in arrays],
                                axis=len(shape))
    out = prims.gather(moved, indices)
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    if adjacent and dims[0] != 0 and shape:
        out = moveaxis(out, list(range(len(shape))),
                       list(range(dims[0], dims[0] + len(shape))))
    return out


def setitem(x, key, value) -> None:
    """``x[key] = value``: replaces the addressed elements, broadcasting ``value``.

    Differentiable with respect to both ``x`` (the untouched elements) and ``value``.
    Positions repeated in an integer-array key receive the sum of their values. A leaf
    that requires grad cannot be changed in place while recording (wrap the update in
    ``pf.no_grad()``, as optimizers do).

    Example:
        >>> import primflow as pf
        >>> x = pf.zeros([3])
        >>> x[1] = 5.0
        >>> x.numpy()
        array([0., 5., 0.], dtype=float32)
    """
    if isinstance(x, Tracer):
        x._check_inplace("x[...] = value")  # a transform may refuse (jit: its arguments)
    if state.grad_enabled and x._node is None and not x.stop_gradient:
        raise RuntimeError(
            f"a leaf tensor (shape {x.shape}) that requires grad cannot be modified in place "
            f"while gradients are recorded; do it inside `with pf.no_grad():` or on a copy")
    size = x.size
    positions = reshape(prims.iota(shape=(size,), dtype=dtypes.int64, dimension=0), x.shape)
    picked = getitem(positions, key)  # flat positions the key addresses
    value = as_tensor(value) if not isinstance(value, (int, float, bool)) else value
    if isinstance(value, Tensor):
        value = cast(value, x.dtype)
        extra = value.ndim - picked.ndim  # NumPy drops leading size-1 dims of the value
        if extra > 0 and all(d == 1 for d in value._shape[:extra]):
            value = reshape(value, value.shape[extra:])
        value = broadcast_to(value, picked._shape) if value._shape != picked._shape else value
    else:
        value = prims.full(shape=tuple(picked._shape), value=value, dtype=x.dtype)
    flat_idx = prims.reshape(picked, shape=(picked.size, 1))
    flat_x = prims.reshape(alias(x), shape=(size,))  # not x: x is rebound below
    flat_v = prims.reshape(value, shape=(picked.size,))
    zeros = prims.full(shape=(size,), value=0, dtype=x.dtype)
    hit = prims.scatter_add(prims.full(shape=(size,), value=0, dtype=dtypes.int32), flat_idx,
                            prims.full(shape=(picked.size,), value=1, dtype=dtypes.int32))
    hit = prims.gt(hit, prims.full(shape=(size,), value=0, dtype=dtypes.int32))
    # keep x where not addressed; take the value where addressed
    new = prims.select(hit, prims.scatter_add(zeros, flat_idx, flat_v), flat_x)
    new = prims.reshape(new, shape=tuple(x._shape))
    _rebind(x, new, "x[...] = value")
    if new._node is not None:  # else nothing was recorded (no_grad): keep x's flag and node
        x._node = new._node
        x.stop_gradient = False
    x._version += 1
    sync_views(x)  # views of x and the tensor x is a view of follow


def _rebind(x, new, what):
    """Gives ``x`` the value of ``new`` (same shape and dtype) for the in-place update
    ``what``: the array, or for a tracer its transform's payload (the update is functional
    underneath, so it works under every transform)."""
    if not isinstance(x, Tracer):
        if isinstance(new, Tracer):  # x lives outside the transform: it cannot hold new
            raise outside_update_error(new._trace, x, what)
        x._value = new._value
        return
    if not (isinstance(new, Tracer) and new._trace is x._trace):
        # a value x's transform does not trace (fill_ or set_value under vmap or jvp, where
        # constants are not traced, or a value of an enclosing transform): select it over
        # x, so that x's transform processes it and gives back one of its tracers
        everywhere = prims.full(shape=tuple(x._shape), value=True, dtype=dtypes.bool_)
        new = prims.select(everywhere, new, alias(x))
        if not (isinstance(new, Tracer) and new._trace is x._trace):
            # x is a value of an enclosing transform, new one of an inner transform
            raise outside_update_error(new._trace, x, what)
    for cls in type(x).__mro__:
        if issubclass(cls, Tracer):
            for slot in cls.__dict__.get("__slots__", ()):
                setattr(x, slot, getattr(new, slot))
