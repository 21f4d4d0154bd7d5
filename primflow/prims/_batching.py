"""Helpers for the primitives' batching (vmap) rules, written in primitives.

A batching rule has the signature ``rule(vals, bdims, **params) -> (out, out_bdim)``:
``vals`` are the unbatched-level values (each carries the batch as one of its dims),
``bdims[i]`` is the position of that batch dim in ``vals[i]`` or None when input i is not
batched. Most rules move the batch dim to the front and shift the params by one.
"""

from __future__ import annotations

# the shape primitives are looked up by name: shape.py imports this module (through
# families.py), so it cannot be imported here
from ..core.primitive import RuleTemplate, get_primitive


def move_to_front(x, bdim):
    """``x`` with dim ``bdim`` moved to position 0."""
    return move_axis(x, bdim, 0)


def move_axis(x, src, dst):
    """``x`` with dim ``src`` moved to position ``dst``."""
    if src == dst:
        return x
    order = [d for d in range(len(x._shape)) if d != src]
    order.insert(dst, src)
    return get_primitive("transpose").bind(x, perm=tuple(order))


def batch_size(vals, bdims):
    for v, b in zip(vals, bdims):
        if b is not None:
            return v._shape[b]
    raise ValueError("no batched input")


def with_batch_front(x, bdim, size):
    """``x`` with the batch at dim 0: moved there, or broadcast when ``x`` is unbatched."""
    if bdim is None:
        shape = (size,) + tuple(x._shape)
        return get_primitive("broadcast_in_dim").bind(
            x, shape=shape, broadcast_dimensions=tuple(range(1, len(shape))))
    return move_to_front(x, bdim)


def all_front(vals, bdims):
    """Every value with the batch at dim 0 (unbatched ones broadcast)."""
    size = batch_size(vals, bdims)
    return [with_batch_front(v, b, size) for v, b in zip(vals, bdims)]


def _make_elementwise_batch(prim):
    def rule(vals, bdims, **params):
        first = next(b for b in bdims if b is not None)
        if all(b == first for b in bdims):
            return prim.bind(*vals, **params), first
        return prim.bind(*all_front(vals, bdims), **params), 0

    return rule


def _make_front_batch(prim):
    def rule(vals, bdims, **params):  # acts on trailing dims: the batch goes in front
        return prim.bind(*all_front(vals, bdims), **params), 0

    return rule


def _make_axes_batch(prim):
    def rule(vals, bdims, *, axes, **params):  # batch to the front, the axes shift by one
        return prim.bind(move_to_front(vals[0], bdims[0]), axes=shift_axes(axes), **params), 0

    return rule


def _make_axis_batch(prim):
    def rule(vals, bdims, *, axis, **params):
        return prim.bind(move_to_front(vals[0], bdims[0]), axis=axis + 1, **params), 0

    return rule


# batching rule of an elementwise primitive (any number of same-shaped inputs)
elementwise_batch = RuleTemplate(_make_elementwise_batch)
# of a primitive on the trailing dims (matrices): every input's batch dim in front
front_batch = RuleTemplate(_make_front_batch)
# of an operation over ``axes`` (reductions, FFT) and along one ``axis`` (one input)
axes_batch = RuleTemplate(_make_axes_batch)
axis_batch = RuleTemplate(_make_axis_batch)


def shift_axes(axes):
    return tuple(a + 1 for a in axes)

