"""``dist.local_map``: run a function written for one rank's blocks on distributed tensors
(Paddle's ``dist.local_map``, torch's ``DTensor`` ``local_map``)."""

from __future__ import annotations

import functools

from ..core.tensor import Tensor
from .dtensor import DistTensor, dtensor_from_local, local_value, reshard
from .placement import Placement, ProcessMesh


def _is_placements(p):
    return isinstance(p, (list, tuple)) and all(isinstance(q, Placement) for q in p)


def local_map(func, out_placements, in_placements=None, process_mesh=None,
              reshard_inputs=False, in_grad_placements=None):
    """``func`` made to take and return distributed tensors: called with them, it runs on
    each rank's local blocks and wraps its results back into distributed tensors.

    Args:
        func: a function of tensors (each rank's blocks) returning a tensor or a tuple.
        out_placements: the placements of each result (one list per result; one list for a
            single result). ``None`` for a result that is not a tensor (returned as is).
        in_placements: the placements each distributed argument must have (one entry per
            positional argument; ``None`` for an argument that is not distributed or has
            no requirement). None: accept any.
        process_mesh: the mesh of the results (default: the arguments').
        reshard_inputs: reshard arguments whose placements differ from ``in_placements``
            (else that is an error).
        in_grad_placements: per argument, the placements of its block's cotangent (see
            ``DistTensor._local_value``); None: shards, and Partial(sum) elsewhere.

    Returns:
        The wrapped function. Gradients flow through it: the results' cotangents reach
        ``func``'s backward as blocks, and the blocks' cotangents become distributed ones.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> mesh = dist.ProcessMesh([0], dim_names=["x"])
        >>> x = dist.shard_tensor(pf.to_tensor([1.0, 2.0, 3.0, 4.0]), mesh, [dist.Shard(0)])
        >>> local_sum = dist.local_map(lambda t: t.sum(), out_placements=[dist.Partial()])
        >>> float(local_sum(x).numpy())  # the blocks' sums, reduced
        10.0
    """
    if not callable(func):
        raise TypeError(f"local_map needs a callable, got {type(func).__name__}")
    if process_mesh is not None and not isinstance(process_mesh, ProcessMesh):
        raise TypeError(f"local_map: process_mesh must be a dist.ProcessMesh, got "
                        f"{type(process_mesh).__name__}")
    single_out = _is_placements(out_placements)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        if in_placements is not None and len(in_placements) != len(args):
            raise ValueError(f"local_map({_name(func)}): in_placements has "
                             f"{len(in_placements)} entries for {len(args)} arguments")
        if in_grad_placements is not None and len(in_grad_placements) != len(args):
            raise ValueError(f"local_map({_name(func)}): in_grad_placements has "
                             f"{len(in_grad_placements)} entries for {len(args)} arguments")
        mesh = process_mesh
        blocks = []
        for i, a in enumerate(args):
            wanted = None if in_placements is None else in_placements[i]
            if not isinstance(a, DistTensor):
                if wanted is not None and isinstance(a, Tensor):
                    raise TypeError(f"local_map({_name(func)}): argument {i} is not a "
                                    f"distributed tensor but in_placements[{i}] is "
                                    f"{list(wanted)}; shard it with dist.shard_tensor")
                blocks.append(a)
                continue
            if mesh is None:
                mesh = a.process_mesh
            elif a.process_mesh != mesh:
                raise ValueError(f"local_map({_name(func)}): argument {i} lives on "
                                 f"{a.process_mesh}, the others on {mesh}; reshard it")
            if wanted is not None and list(wanted) != a.placements:
                if not reshard_inputs:
                    raise ValueError(
                        f"local_map({_name(func)}): argument {i} has placements "
                        f"{a.placements} but in_placements[{i}] is {list(wanted)}; "
                        f"reshard it (dist.reshard) or pass reshard_inputs=True")
                a = reshard(a, mesh, wanted)
            grad = None if in_grad_placements is None else in_grad_placements[i]
            blocks.append(local_value(a, grad))
        if mesh is None:
            raise ValueError(f"local_map({_name(func)}): no argument is a distributed tensor "
                             f"and no process_mesh was given, so the results have no mesh")
        out = func(*blocks, **kwargs)
        results = (out,) if single_out else tuple(out) if isinstance(out, (list, tuple)) \
            else (out,)
        placements = (out_placements,) if single_out else tuple(out_placements)
        if len(placements) != len(results):
            raise ValueError(f"local_map({_name(func)}): {len(results)} results but "
                             f"{len(placements)} out_placements")
        wrapped_out = []
        for j, (r, p) in enumerate(zip(results, placements)):
            if p is None:
                if isinstance(r, DistTensor):
                    raise TypeError(f"local_map({_name(func)}): result {j} is distributed; "
                                    f"func must return local blocks")
                wrapped_out.append(r)
                continue
            if not isinstance(r, Tensor) or isinstance(r, DistTensor):
                raise TypeError(f"local_map({_name(func)}): result {j} must be a local "
                                f"tensor (out_placements[{j}] is {list(p)}), got "
                                f"{type(r).__name__}")
            wrapped_out.append(dtensor_from_local(r, mesh, p))
        if single_out or not isinstance(out, (list, tuple)):
            return wrapped_out[0]
        return type(out)(wrapped_out) if isinstance(out, tuple) else wrapped_out

    return wrapped


def _name(func):
    return getattr(func, "__name__", type(func).__name__)
