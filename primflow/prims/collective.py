"""Collective primitives: all_reduce, all_gather, reduce_scatter and all_to_all over a group
of processes.

Each acts on this process's tensor and the tensors of the other members of the group
``ranks`` (a tuple of world ranks, this process among them); the kernel runs the group's
``Communicator`` (``backends/communicator.py``: MPI under a launcher, the identity in a
world of one). Being primitives, they are recorded by ``pf.jit`` like any other operation,
so a distributed program's communication is visible in its IR (``primflow.distributed``
relays out distributed tensors with them; ``dist.to_static`` compiles the whole step).

Gradient convention (as in ``primflow.distributed.collective``): the objective of a
multi-process program is the sum of the ranks' objectives. Under it the adjoints are
collectives again, so every order works:

* ``all_reduce`` sum (avg): all_reduce sum (avg) of the cotangents. max/min: the summed
  cotangent goes to the members holding the extremum (split on ties); prod: the summed
  cotangent times ``out / x`` (its Taylor rule gathers every member's series and multiplies
  them).
* ``all_gather`` along ``axis`` and ``reduce_scatter`` (sum) along it are each other's
  transpose; ``all_to_all`` is transposed by the all_to_all that sends the blocks back.

``sizes`` list, per member in group order, the extent of that member's block along
``axis`` (uneven blocks are fine).
"""

from __future__ import annotations

from ..backends.communicator import REDUCE_OPS, world_communicator
from ..core.primitive import Aval, Primitive, PrimitiveError, RuleTemplate
from . import _batching as bt, _taylor as tl, compare, elementwise as ew
from . import shape as sh
from . import sharding as sr
from ._util import full_like
from .families import COLLECTIVE

LINEAR_OPS = sr.LINEAR_PARTIALS  # the reductions that commute with sums


def _check_group(what, ranks, sizes=None):
    if not isinstance(ranks, tuple) or not ranks:
        raise PrimitiveError(f"{what}: ranks must be a non-empty tuple of world ranks, got "
                             f"{ranks!r}")
    if sizes is not None and len(sizes) != len(ranks):
        raise PrimitiveError(f"{what}: {len(sizes)} block sizes for a group of {len(ranks)} "
                             f"ranks {list(ranks)}")


def _check_axis(what, x, axis, sizes=None):
    """``axis`` is a dim of x (and, given ``sizes``, their sum is its extent)."""
    if not 0 <= axis < len(x.shape):
        raise PrimitiveError(f"{what}: axis {axis} is out of range for shape {list(x.shape)}")
    if sizes is not None and x.shape[axis] != sum(sizes):
        raise PrimitiveError(f"{what}: the blocks' extents {list(sizes)} do not add up to dim "
                             f"{axis} of shape {list(x.shape)}")


# ---- all_reduce --------------------------------------------------------------------------------

def _all_reduce_infer(x, *, op, ranks):
    if op not in REDUCE_OPS:
        raise PrimitiveError(f"all_reduce: unknown reduction {op!r}; use one of {REDUCE_OPS}")
    _check_group("all_reduce", ranks)
    return Aval(x.shape, x.dtype)


def _extremum_share(x, out, ranks):
    """1 / (number of members attaining the extremum) where this member attains it, else 0:
    how the derivative of max/min is split among the members (ties share it)."""
    hit = compare.convert_element_type(compare.eq(x, out), dtype=x.dtype)
    return ew.div(hit, all_reduce(hit, op="sum", ranks=ranks))


def _all_reduce_jvp(t, out, x, *, op, ranks):
    if op in LINEAR_OPS:
        return all_reduce(t, op=op, ranks=ranks)
    if op == "prod":  # d(prod x_r) = prod * sum_r dx_r / x_r
        return ew.mul(out, all_reduce(ew.div(t, x), op="sum", ranks=ranks))
    return all_reduce(ew.mul(t, _extremum_share(x, out, ranks)), op="sum", ranks=ranks)


def _all_reduce_vjp(g, out, x, *, op, ranks):
    if op in LINEAR_OPS:
        return all_reduce(g, op=op, ranks=ranks)
    total = all_reduce(g, op="sum", ranks=ranks)
    if op == "prod":
        return ew.div(ew.mul(total, out), x)
    return ew.mul(total, _extremum_share(x, out, ranks))


def _make_all_reduce_taylor(prim):
    # sum/avg: linear, applied to every coefficient; max/min: the coefficients of the
    # members attaining the extremum (averaged over ties)
    def rule(primals, series, out=None, *, op, ranks):
        (x0,), (xs,) = primals, series
        out = prim.bind(x0, op=op, ranks=ranks) if out is None else out
        if op in LINEAR_OPS:
            return out, [out] + [None if c is None else prim.bind(c, op=op, ranks=ranks)
                                 for c in xs[1:]]
        if op == "prod":
            return out, [out] + _product_series(x0, xs, ranks)[1:]
        share = _extremum_share(x0, out, ranks)
        return out, [out] + [None if c is None else
                             prim.bind(ew.mul(c, share), op="sum", ranks=ranks)
                             for c in xs[1:]]

    return rule


def _product_series(x0, xs, ranks):
    """The Taylor coefficients of the product over the group of every member's series
    ``xs``: each member's coefficients are gathered (one all_gather of them stacked), and
    the series are multiplied (Cauchy products) in group order, the same on every member."""
    order = len(xs) - 1
    shape = tuple(x0._shape)
    coeffs = [x0] + [tl.dense(c, x0) for c in xs[1:]]
    stacked = sh.concatenate(*[sh.reshape(c, shape=(1,) + shape) for c in coeffs], axis=0)
    every = all_gather(stacked, axis=0, sizes=(order + 1,) * len(ranks), ranks=ranks)
    zero, ones = (0,) * len(shape), (1,) * (len(shape) + 1)

    def coefficient(member, k):
        row = member * (order + 1) + k
        part = sh.slice(every, start=(row,) + zero, limit=(row + 1,) + shape, strides=ones)
        return sh.reshape(part, shape=shape)

    series = [coefficient(0, k) for k in range(order + 1)]
    for member in range(1, len(ranks)):
        series = tl.cauchy_series(series, [coefficient(member, k) for k in range(order + 1)])
    return series


all_reduce = Primitive(
    "all_reduce", family=COLLECTIVE, shard=sr.LOCAL_ONLY, infer=_all_reduce_infer,
    jvp=(_all_reduce_jvp,), vjp=(_all_reduce_vjp,), saves_out=True,
    batch=bt.elementwise_batch, taylor=RuleTemplate(_make_all_reduce_taylor),
    doc="elementwise reduction `op` (sum, max, min, prod, avg) of the same-shaped tensors "
        "of the group `ranks`, on every member")


# ---- all_gather and reduce_scatter ---------------------------------------------------------

def _all_gather_infer(x, *, axis, sizes, ranks):
    _check_group("all_gather", ranks, sizes)
    _check_axis("all_gather", x, axis)
    shape = list(x.shape)
    shape[axis] = sum(sizes)
    return Aval(tuple(shape), x.dtype)


def _all_gather_transpose(g, out, x, *, axis, sizes, ranks):
    return reduce_scatter(g, op="sum", axis=axis, sizes=sizes, ranks=ranks)


all_gather = Primitive(
    "all_gather", family=COLLECTIVE, shard=sr.LOCAL_ONLY, infer=_all_gather_infer,
    linear=True, transpose=(_all_gather_transpose,), batch=bt.axis_batch,
    doc="the members' blocks (extents `sizes` along `axis`) concatenated along `axis`, in "
        "group order, on every member")


def _reduce_scatter_infer(x, *, op, axis, sizes, ranks):
    if op not in LINEAR_OPS:
        raise PrimitiveError(f"reduce_scatter: op must be one of {LINEAR_OPS}, got {op!r} "
                             f"(all_reduce then slice for the others)")
    _check_group("reduce_scatter", ranks, sizes)
    _check_axis("reduce_scatter", x, axis, sizes)
    shape = list(x.shape)
    shape[axis] = _my_extent(sizes, ranks)
    return Aval(tuple(shape), x.dtype)


def _my_extent(sizes, ranks):
    world = world_communicator()
    return sizes[ranks.index(world.rank)] if world.size > 1 else sizes[0]


def _reduce_scatter_transpose(g, out, x, *, op, axis, sizes, ranks):
    gathered = all_gather(g, axis=axis, sizes=sizes, ranks=ranks)
    if op == "avg":
        gathered = ew.div(gathered, full_like(gathered, len(ranks)))
    return gathered


reduce_scatter = Primitive(
    "reduce_scatter", family=COLLECTIVE, shard=sr.LOCAL_ONLY, infer=_reduce_scatter_infer,
    linear=True, transpose=(_reduce_scatter_transpose,), batch=bt.axis_batch,
    doc="the sum (or average) over the group of same-shaped tensors, of which each member "
        "keeps its block along `axis` (extents `sizes`)")


# ---- all_to_all ----------------------------------------------------------------------------

def _all_to_all_infer(x, *, split_axis, concat_axis, split_sizes, concat_sizes, ranks):
    _check_group("all_to_all", ranks, split_sizes)
    _check_group("all_to_all", ranks, concat_sizes)
    _check_axis("all_to_all", x, split_axis, split_sizes)
    _check_axis("all_to_all", x, concat_axis)
    shape = list(x.shape)
    shape[split_axis] = _my_extent(split_sizes, ranks)
    shape[concat_axis] = sum(concat_sizes)
    return Aval(tuple(shape), x.dtype)


def _all_to_all_transpose(g, out, x, *, split_axis, concat_axis, split_sizes, concat_sizes,
                          ranks):
    # send every block back where it came from
    return all_to_all(g, split_axis=concat_axis, concat_axis=split_axis,
                      split_sizes=concat_sizes, concat_sizes=split_sizes, ranks=ranks)


def _all_to_all_batch(vals, bdims, *, split_axis, concat_axis, split_sizes, concat_sizes,
                      ranks):
    x = bt.move_to_front(vals[0], bdims[0])
    return all_to_all(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                      split_sizes=split_sizes, concat_sizes=concat_sizes, ranks=ranks), 0


all_to_all = Primitive(
    "all_to_all", family=COLLECTIVE, shard=sr.LOCAL_ONLY, infer=_all_to_all_infer,
    linear=True, transpose=(_all_to_all_transpose,), batch=_all_to_all_batch,
    doc="block j along `split_axis` (extents `split_sizes`) goes to member j; the blocks "
        "received are concatenated along `concat_axis` (extents `concat_sizes`)")
