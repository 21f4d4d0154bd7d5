"""Gradients of distributed parameters brought to the parameters' own placements, in
bucketed collectives (what data-parallel training does after backward)."""

from __future__ import annotations

import math

from ..core.tensor import Tensor
from ..core.trace import Tracer
from .. import prims
from ..ops import concat, reshape
from .dtensor import DistTensor, pending_reduction, reshard
from .layout import comm_along, group


def reduce_gradients(parameters):
    """Reduces the Partial gradients of distributed ``parameters`` to the parameters' own
    placements, bucketed: one all_reduce per mesh dim and dtype for all of them (what
    data-parallel training does after backward). ``shard_optimizer``, ``to_static`` and
    the trainer call it; a plain optimizer works without it (each gradient is then reduced
    when the update first needs it).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> mesh = dist.ProcessMesh([0])
        >>> w = dist.shard_tensor(pf.ones([2]), mesh, [dist.Replicate()], stop_gradient=False)
        >>> x = dist.shard_tensor(pf.ones([4, 2]), mesh, [dist.Shard(0)])
        >>> (x * w).sum().backward()
        >>> w.grad.placements
        [Partial(reduce_type=kRedSum)]
        >>> dist.reduce_gradients([w]); w.grad.placements
        [Replicate()]
    """
    buckets = {}
    for p in parameters:
        g = p.grad if isinstance(p, DistTensor) else None
        if not isinstance(g, DistTensor) or g._specs == p._specs:
            continue
        dims = tuple((k, s) for k, s in enumerate(g._specs) if s != p._specs[k])
        if g._local is None or g._mesh != p._mesh:
            continue
        buckets.setdefault((p._mesh, dims, g.dtype), []).append(p)
    for (mesh, dims, _dtype), params in buckets.items():
        arrays = [p.grad._local._value for p in params]
        for k, op in dims:
            arrays = comm_along(mesh, k).allreduce_many(arrays, op)
        for p, value in zip(params, arrays):
            g = DistTensor._make(Tensor._wrap(value), mesh, p._specs, p.grad.aval)
            Tracer.grad.__set__(p, g)


def reduced_gradients(grads, params):
    """``grads`` (of ``params``) laid out like the parameters, by the collective primitives
    (so a traced step records them): the Partial gradients of Replicate parameters in one
    bucketed all_reduce per mesh, reduced mesh dims and dtype (what ``reduce_gradients``
    does eagerly), any other layout by ``reshard``."""
    out = list(grads)
    buckets = {}
    for i, (g, p) in enumerate(zip(grads, params)):
        if not isinstance(g, DistTensor) or g._specs == p._specs:
            continue
        if g._mesh == p._mesh and g._local is not None and pending_reduction(g._specs,
                                                                                p._specs):
            dims = tuple((k, s) for k, s in enumerate(g._specs) if s != p._specs[k])
            buckets.setdefault((p._mesh, dims, g.dtype), []).append(i)
        else:
            out[i] = reshard(g, p._mesh, p.placements)
    for (mesh, dims, _dtype), members in buckets.items():
        blocks = [grads[i]._local for i in members]
        flat = concat([reshape(b, [-1]) for b in blocks]) if len(blocks) > 1 else \
            reshape(blocks[0], [-1])
        for k, op in dims:
            flat = prims.all_reduce(flat, op=op, ranks=group(mesh, k))
        start = 0
        for i, b in zip(members, blocks):
            n = math.prod(b._shape)
            part = prims.slice(flat, start=(start,), limit=(start + n,), strides=(1,))
            out[i] = DistTensor._make(reshape(part, list(b._shape)), mesh, params[i]._specs,
                                      grads[i].aval)
            start += n
    return out
