"""Shape manipulation: reshape, transpose, squeeze, concat, stack, split, flip, gather...
all written over the shape and index primitives.

Aliasing rule (Paddle's): the view-like ops ``reshape``/``view``, ``flatten``,
``squeeze``, ``unsqueeze``, ``transpose``, ``t``/``.T`` and ``moveaxis`` return a new
Tensor that shares data with its input, also when nothing changes (``reshape(x,
x.shape)``, ``flatten`` of a 1-d tensor): an in-place update of either (``y[0] = 1``,
``y.add_(1)``, ``x.set_value(...)``) shows in the other. As in Paddle only values are
shared, not the autograd graph; versions follow, so a backward that saved the other tensor
refuses to run. Every other op returns a new tensor that shares nothing (``expand``,
``flip``, ``concat``, ``astype``/``cast``, ``clone``...). Inside transforms (jit, vmap,
grad of a function) views are not tracked: updates there are functional. Unlike Paddle,
``detach()`` and indexing results (``x[0]``) do not share data.
"""

from __future__ import annotations

import math as _math

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor, register_view, view_of
from ..core.trace import Tracer
from .helpers import (as_tensor, broadcast_shapes, broadcast_to, cast, int_arg, int_list,
                      normalize_axis, shape_arg, single_axis)


def reshape(x, shape) -> Tensor:
    """Same elements, new shape. One entry may be -1 (inferred); 0 copies the input's dim
    (Paddle).

    Example:
        >>> import primflow as pf
        >>> pf.reshape(pf.arange(6), [2, -1]).shape
        [2, 3]
    """
    x = as_tensor(x)
    shape = int_list(shape, "reshape: shape")
    shape = [x._shape[i] if s == 0 and i < x.ndim else s for i, s in enumerate(shape)]
    if any(s < -1 for s in shape):
        raise ValueError(f"reshape: dims must be >= 0 or -1 (inferred), got {shape}")
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: only one dim may be -1, got {shape}")
    if -1 in shape:
        known = _math.prod(s for s in shape if s != -1)
        if known == 0 or x.size % known:
            raise ValueError(f"cannot reshape a tensor of shape {x.shape} ({x.size} elements) "
                             f"into {shape}")
        shape[shape.index(-1)] = x.size // known
    if _math.prod(shape) != x.size:
        raise ValueError(f"cannot reshape a tensor of shape {x.shape} ({x.size} elements) into "
                         f"{shape} ({_math.prod(shape)} elements)")
    out = prims.reshape(x, shape=tuple(shape))  # a new tensor even for the same shape
    _share(x, out, ("reshape", tuple(shape)))
    return out


def _new_handle(x):
    """``x``'s values as a new tensor in the graph that shares nothing with ``x``."""
    return prims.reshape(x, shape=tuple(x._shape))


def _share(x, out, step):
    """Registers ``out`` as a view of the tensor owning ``x``'s data (the aliasing rule
    above). ``step`` is ``("reshape", shape)`` or ``("transpose", perm)`` applied to ``x``;
    the steps from the root are kept short: consecutive reshapes merge into the last one,
    consecutive transposes into one permutation."""
    if isinstance(x, Tracer) or isinstance(out, Tracer):
        return
    parent = view_of(x)
    root, steps = (x, []) if parent is None else (parent[0], list(parent[1]))
    kind, arg = step
    in_shape = tuple(x._shape)
    if steps and steps[-1][0] == kind == "reshape":
        steps = steps[:-1] + [("reshape", arg, steps[-1][2])]
    elif steps and steps[-1][0] == kind == "transpose":
        first = steps[-1][1]
        steps = steps[:-1] + [("transpose", tuple(first[i] for i in arg), steps[-1][2])]
    else:
        steps = steps + [(kind, arg, in_shape)]

    # (the primitives' kernels on native values: nothing here is recorded or traced)
    def forward(value):
        for kind_, arg_, _ in steps:
            value = (prims.reshape.impl(value, shape=arg_) if kind_ == "reshape"
                     else prims.transpose.impl(value, perm=arg_))
        return value

    def inverse(value):
        for kind_, arg_, in_shape_ in reversed(steps):
            if kind_ == "reshape":
                value = prims.reshape.impl(value, shape=in_shape_)
            else:
                value = prims.transpose.impl(value, perm=tuple(
                    sorted(range(len(arg_)), key=lambda i: arg_[i])))
        return value

    register_view(root, out, forward, inverse, tuple(steps))



def flatten(x, start_axis=0, stop_axis=-1) -> Tensor:
    """Merges dims start_axis..stop_axis into one.

    Example:
        >>> import primflow as pf
        >>> pf.flatten(pf.ones([2, 3, 4]), start_axis=1).shape
        [2, 12]
    """
    x = as_tensor(x)
    if x.ndim == 0:
        return reshape(x, [1])
    (start,) = normalize_axis(start_axis, x.ndim, what="flatten: start_axis")
    (stop,) = normalize_axis(stop_axis, x.ndim, what="flatten: stop_axis")
    if start > stop:
        raise ValueError(f"flatten: start_axis {start_axis} is after stop_axis {stop_axis}")
    shape = x.shape
    merged = _math.prod(shape[start:stop + 1])
    return reshape(x, shape[:start] + [merged] + shape[stop + 1:])


def transpose(x, perm) -> Tensor:
    """Permutes dims: ``out.shape[i] = x.shape[perm[i]]`` (Paddle signature).

    Example:
        >>> import primflow as pf
        >>> pf.transpose(pf.zeros([2, 3]), [1, 0]).shape
        [3, 2]
    """
    x = as_tensor(x)
    perm = int_list(perm, "transpose: perm")
    if len(perm) != x.ndim or any(not -x.ndim <= p < x.ndim for p in perm):
        raise ValueError(f"transpose: perm {list(perm)} is not a permutation of "
                         f"range({x.ndim}) for shape {x.shape}")
    perm = tuple(p % x.ndim for p in perm) if x.ndim else tuple(perm)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"transpose: perm {list(perm)} is not a permutation of "
                         f"range({x.ndim}) for shape {x.shape}")
    if perm == tuple(range(x.ndim)):
        return reshape(x, x.shape)  # a view: the identity permutation moves nothing
    out = prims.transpose(x, perm=perm)
    _share(x, out, ("transpose", perm))
    return out


def t(x) -> Tensor:
    """Transpose of a tensor with at most 2 dims.

    Example:
        >>> import primflow as pf
        >>> pf.t(pf.to_tensor([[1, 2, 3]])).shape
        [3, 1]
    """
    x = as_tensor(x)
    if x.ndim > 2:
        raise ValueError(f"t() expects at most 2 dims, got shape {x.shape}; use transpose")
    return reshape(x, x.shape) if x.ndim < 2 else transpose(x, [1, 0])


def moveaxis(x, source, destination) -> Tensor:
    """Moves dims to new positions.

    Example:
        >>> import primflow as pf
        >>> pf.moveaxis(pf.ones([2, 3, 4]), 0, -1).shape
        [3, 4, 2]
    """
    x = as_tensor(x)
    src = int_list(source, "moveaxis: source")
    dst = int_list(destination, "moveaxis: destination")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source!r} and destination {destination!r} "
                         f"name different numbers of dims")
    src = [normalize_axis(s, x.ndim)[0] for s in src]
    dst = [normalize_axis(d, x.ndim)[0] for d in dst]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def squeeze(x, axis=None) -> Tensor:
    """Removes size-1 dims (all of them, or those in ``axis`` that have size 1).

    Example:
        >>> import primflow as pf
        >>> pf.squeeze(pf.zeros([1, 3, 1])).shape
        [3]
    """
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim) if axis is not None else tuple(
        i for i, d in enumerate(x._shape) if d == 1)
    shape = [d for i, d in enumerate(x._shape) if not (i in axes and d == 1)]
    return reshape(x, shape)


def unsqueeze(x, axis) -> Tensor:
    """Inserts size-1 dims at ``axis`` (int or list, positions in the result).

    Example:
        >>> import primflow as pf
        >>> pf.unsqueeze(pf.zeros([3]), 0).shape
        [1, 3]
    """
    x = as_tensor(x)
    axes = int_list(axis, "unsqueeze: axis")
    ndim = x.ndim + len(axes)
    axes = list(normalize_axis(axes, ndim))  # positions in the result
    shape = list(x._shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, shape)


def expand(x, shape) -> Tensor:
    """Broadcasts to ``shape``; -1 keeps the input's size (Paddle).

    Example:
        >>> import primflow as pf
        >>> pf.expand(pf.to_tensor([[1.0], [2.0]]), [-1, 3]).numpy()
        array([[1., 1., 1.],
               [2., 2., 2.]], dtype=float32)
    """
    x = as_tensor(x)
    shape = int_list(shape, "expand: shape")
    if any(s < -1 for s in shape):
        raise ValueError(f"expand: shape entries must be >= 0 or -1 (keep the input's size), "
                         f"got {shape}")
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: shape {shape} has fewer dims than the input's {x.shape}")
    if any(s == -1 for s in shape[:lead]):
        raise ValueError(f"expand: -1 in shape {shape} names a new leading dim (the input has "
                         f"shape {x.shape}); give its size")
    shape = [x._shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
    out = broadcast_to(x, shape)
    return _new_handle(x) if out is x else out


def broadcast_tensors(inputs) -> list:
    """Broadcasts several tensors against each other.

    Example:
        >>> import primflow as pf
        >>> a, b = pf.broadcast_tensors([pf.ones([2, 1]), pf.ones([3])])
        >>> a.shape, b.shape
        ([2, 3], [2, 3])
    """
    tensors = [as_tensor(t) for t in inputs]
    shape = broadcast_shapes(*[t._shape for t in tensors])
    return [broadcast_to(t, shape) for t in tensors]


def concat(x, axis=0) -> Tensor:
    """Joins tensors along an existing axis (dtypes promoted).

    Example:
        >>> import primflow as pf
        >>> pf.concat([pf.ones([2]), pf.zeros([3])]).shape
        [5]
    """
    tensors = _tensor_sequence(x, "concat")
    d = tensors[0].dtype
    for t_ in tensors[1:]:
        d = dtypes.promote_types(d, t_.dtype)
    tensors = [cast(t_, d) for t_ in tensors]
    ndim = tensors[0].ndim
    if ndim == 0:
        raise ValueError("concat: zero-dimensional tensors cannot be concatenated; use stack")
    axis = single_axis(axis, ndim, "concat: axis")
    for i, t_ in enumerate(tensors):
        if t_.ndim != ndim or any(a != b for j, (a, b) in
                                  enumerate(zip(t_._shape, tensors[0]._shape)) if j != axis):
            raise ValueError(f"concat along axis {axis}: tensor {i} has shape {t_.shape} but "
                             f"tensor 0 has {tensors[0].shape}; all dims except {axis} must "
                             f"match")
    if len(tensors) == 1:
        return _new_handle(tensors[0])
    return prims.concatenate(*tensors, axis=axis)



def _tensor_sequence(x, name):
    """The list or tuple of tensors that concat and stack join; a single tensor (which
    Python could iterate along its first dim) is refused, as PyTorch does."""
    if isinstance(x, Tensor) or not isinstance(x, (list, tuple)):
        what = f"a Tensor of shape {x.shape}" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"{name} takes a list or tuple of tensors, got {what}; write "
                        f"pf.{name}([a, b], axis=...)")
    if not x:
        raise ValueError(f"{name} needs at least one tensor, got an empty {type(x).__name__}")
    return [as_tensor(t_) for t_ in x]


def stack(x, axis=0) -> Tensor:
    """Joins equally shaped tensors along a new axis.

    Example:
        >>> import primflow as pf
        >>> pf.stack([pf.ones([2]), pf.zeros([2])], axis=1).shape
        [2, 2]
    """
    tensors = _tensor_sequence(x, "stack")
    for i, t_ in enumerate(tensors):
        if t_._shape != tensors[0]._shape:
            raise ValueError(f"stack: tensor {i} has shape {t_.shape} but tensor 0 has "
                             f"{tensors[0].shape}; all must be equal")
    ndim = tensors[0].ndim + 1
    axis = single_axis(axis, ndim, "stack: axis")  # a position in the result
    return concat([unsqueeze(t_, axis) for t_ in tensors], axis=axis)


def split(x, num_or_sections, axis=0) -> list:
    """Splits along ``axis`` into equal parts (int) or parts of given sizes (list; one
    entry may be -1).

    Example:
        >>> import primflow as pf
        >>> [p.shape for p in pf.split(pf.zeros([5, 2]), [2, 3])]
        [[2, 2], [3, 2]]
    """
    x = as_tensor(x)
    axis = single_axis(axis, x.ndim, "split: axis")
    n = x._shape[axis]
    if not isinstance(num_or_sections, (list, tuple, Tensor)):
        num_or_sections = int_arg(num_or_sections, "split: num_or_sections", minimum=1)
        if n % num_or_sections:
            raise ValueError(f"split: size {n} of axis {axis} is not divisible by "
                             f"{num_or_sections}")
        sizes = [n // num_or_sections] * num_or_sections
    else:
        sizes = int_list(num_or_sections, "split: num_or_sections")
        if any(s < -1 for s in sizes) or sizes.count(-1) > 1:
            raise ValueError(f"split: sections must be >= 0, with at most one -1 (inferred), "
                             f"got {sizes}")
        if sizes.count(-1) == 1:
            sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
        if sum(sizes) != n:
            raise ValueError(f"split: sections {list(num_or_sections)} do not add up to {n}")
    parts, offset = [], 0
    for s in sizes:
        parts.append(slice_axis(x, axis, offset, offset + s))
        offset += s
    return parts


def chunk(x, chunks, axis=0) -> list:
    """Splits into ``chunks`` equal parts.

    Example:
        >>> import primflow as pf
        >>> a, b = pf.chunk(pf.arange(4), 2)
        >>> a.numpy(), b.numpy()
        (array([0, 1]), array([2, 3]))
    """
    return split(x, int_arg(chunks, "chunk: chunks", minimum=1), axis)


def unbind(x, axis=0) -> list:
    """Removes ``axis``, returning the slices along it.

    Example:
        >>> import primflow as pf
        >>> [r.numpy() for r in pf.unbind(pf.to_tensor([[1, 2], [3, 4]]))]
        [array([1, 2]), array([3, 4])]
    """
    x = as_tensor(x)
    axis = single_axis(axis, x.ndim, "unbind: axis")
    return [squeeze(p, axis) for p in split(x, x._shape[axis], axis)]


def slice_axis(x, axis, start, stop, step=1) -> Tensor:
    """``x[..., start:stop:step, ...]`` on one axis (non-negative, in range)."""
    shape = tuple(x._shape)
    begin = tuple(start if d == axis else 0 for d in range(len(shape)))
    limit = tuple(stop if d == axis else shape[d] for d in range(len(shape)))
    strides = tuple(step if d == axis else 1 for d in range(len(shape)))
    return prims.slice(x, start=begin, limit=limit, strides=strides)


def index_select(x, index, axis=0) -> Tensor:
    """Picks entries of ``axis`` by an integer index tensor (Paddle's ``index_select``).

    Example:
        >>> import primflow as pf
        >>> pf.index_select(pf.to_tensor([10.0, 20.0, 30.0]), pf.to_tensor([2, 0])).numpy()
        array([30., 10.], dtype=float32)
    """
    x = as_tensor(x)
    index = as_tensor(index)
    if not index.dtype.is_integer:
        raise TypeError(f"index_select: index must be an integer tensor, got {index.dtype}")
    if index.ndim != 1:
        raise ValueError(f"index_select: index must be 1-d, got shape {index.shape}")
    axis = single_axis(axis, x.ndim, "index_select: axis")
    _check_index_range(index, x._shape[axis], "index_select")
    moved = moveaxis(x, axis, 0)
    picked = prims.gather(moved, prims.reshape(index, shape=(index.size, 1)))
    return moveaxis(picked, 0, axis)


def gather(x, index, axis=0) -> Tensor:
    """Paddle's ``gather``: same as ``index_select`` for a 1-d index.

    Example:
        >>> import primflow as pf
        >>> pf.gather(pf.to_tensor([10.0, 20.0, 30.0]), pf.to_tensor([2, 0])).numpy()
        array([30., 10.], dtype=float32)
    """
    return index_select(x, index, axis)


def _check_index_range(index, size, name):
    """IndexError for indices outside [-size, size) (eager only: traced values are unknown)."""
    if index.size == 0 or isinstance(index, Tracer):
        return
    everything = tuple(range(index.ndim))
    lo = int(prims.reduce_min(index, axes=everything).item())
    hi = int(prims.reduce_max(index, axes=everything).item())
    if lo < -size or hi >= size:
        raise IndexError(f"{name}: index out of range for a dim of size {size} "
                         f"(got values from {lo} to {hi})")


def flip(x, axis) -> Tensor:
    """Reverses the order of elements along ``axis`` (int or list).

    Example:
        >>> import primflow as pf
        >>> pf.flip(pf.to_tensor([1.0, 2.0, 3.0]), 0).numpy()
        array([3., 2., 1.], dtype=float32)
    """
    x = x_in = as_tensor(x)
    for a in normalize_axis(axis, x.ndim):
        n = x._shape[a]
        rev = prims.sub(prims.full(shape=(n,), value=n - 1, dtype=dtypes.int64),
                        prims.iota(shape=(n,), dtype=dtypes.int64, dimension=0))
        moved = moveaxis(x, a, 0)
        x = moveaxis(prims.gather(moved, prims.reshape(rev, shape=(n, 1))), 0, a)
    return x if x is not x_in else _new_handle(x)


def tile(x, repeat_times) -> Tensor:
    """Repeats the whole tensor along each dim.

    Example:
        >>> import primflow as pf
        >>> pf.tile(pf.to_tensor([[1, 2]]), [2, 1]).numpy()
        array([[1, 2],
               [1, 2]])
    """
    x = as_tensor(x)
    reps = int_list(repeat_times, "tile: repeat_times")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repeat_times must be >= 0, got {reps}")
    if len(reps) < x.ndim:
        reps = [1] * (x.ndim - len(reps)) + reps
    # (prims.reshape, not reshape: the result is a copy, never a view of x)
    x = prims.reshape(x, shape=tuple([1] * (len(reps) - x.ndim) + x.shape))
    # interleave a new size-r dim before each dim, broadcast, then merge the pairs
    expanded_shape, target = [], []
    for r, d in zip(reps, x._shape):
        expanded_shape += [1, d]
        target += [r, d]
    y = broadcast_to(prims.reshape(x, shape=tuple(expanded_shape)), target)
    return prims.reshape(y, shape=tuple(r * d for r, d in zip(reps, x._shape)))


def tril(x, diagonal=0) -> Tensor:
    """Lower triangle of the last two dims (others zeroed).

    Example:
        >>> import primflow as pf
        >>> pf.tril(pf.ones([2, 2])).numpy()
        array([[1., 0.],
               [1., 1.]], dtype=float32)
    """
    return _triangle(x, diagonal, lower=True)


def triu(x, diagonal=0) -> Tensor:
    """Upper triangle of the last two dims (others zeroed).

    Example:
        >>> import primflow as pf
        >>> pf.triu(pf.ones([2, 2])).numpy()
        array([[1., 1.],
               [0., 1.]], dtype=float32)
    """
    return _triangle(x, diagonal, lower=False)


def _triangle(x, diagonal, lower):
    x = as_tensor(x)
    diagonal = int_arg(diagonal, "tril/triu: diagonal")
    if x.ndim < 2:
        raise ValueError(f"tril/triu need at least 2 dims, got shape {x.shape}")
    shape = tuple(x._shape)
    rows = prims.iota(shape=shape, dtype=dtypes.int64, dimension=len(shape) - 2)
    cols = prims.iota(shape=shape, dtype=dtypes.int64, dimension=len(shape) - 1)
    shifted = prims.add(rows, prims.full(shape=shape, value=diagonal, dtype=dtypes.int64))
    keep = prims.le(cols, shifted) if lower else prims.ge(cols, shifted)
    return prims.select(keep, x, prims.full(shape=shape, value=0, dtype=x.dtype))
