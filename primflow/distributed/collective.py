"""Paddle's collectives on tensors, differentiable.

Each rank passes its own (local, ordinary) tensor. all_reduce, all_gather, reduce_scatter
and alltoall are the collective primitives (``prims/collective.py``): eagerly one call of
the group's ``Communicator``, under ``pf.jit`` an op of the program (``pf.vmap`` and
``pf.jvp`` work too); their adjoints are collectives again, so derivatives of every order
work. broadcast, send and recv run eagerly.

Gradient convention: the objective of a multi-process program is the **sum of the ranks'
objectives** (each rank differentiates its own loss; a loss that is the same on every rank
is counted once per rank, so divide it by the world size or reduce with ``AVG`` if it
should count once). Under it the adjoints are collectives again:

==========================  ===========================================================
forward                      backward (cotangent ``g`` on every rank)
==========================  ===========================================================
all_reduce SUM               all_reduce SUM of ``g``
all_reduce AVG               all_reduce AVG of ``g``
all_reduce MAX / MIN         all_reduce SUM of ``g``, sent to the ranks holding the
                             extremum (split evenly between ties)
all_reduce PROD              all_reduce SUM of ``g`` times ``out / x``
all_gather                   reduce_scatter SUM of the list's cotangents
reduce_scatter SUM           all_gather of ``g``
alltoall                     alltoall of the cotangents (the inverse permutation)
broadcast                    all_reduce SUM of ``g`` kept on ``src``, zero elsewhere
send / recv                  not differentiable
==========================  ===========================================================

Distributed tensors (``shard_tensor``) do not need these: their ops insert collectives
with their own adjoints (see ``dtensor.py``).
"""

from __future__ import annotations

import sys
import zlib

from ..core import dtypes, state
from ..core.primitive import record_custom
from ..core.tensor import Tensor
from ..core.trace import Tracer
from .. import prims
from ..backends import communicator as comms
from ..ops import assign, reshape, stack, to_tensor, zeros_like
from .env import _comm_of, world


class ReduceOp:
    """Reduction applied by ``all_reduce`` and ``reduce_scatter`` (Paddle names).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.ReduceOp.SUM
        'sum'
    """

    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"
    AVG = "avg"


_OPS = (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PROD, ReduceOp.AVG)


def _check_op(op, what):
    if op not in _OPS:
        raise ValueError(f"{what}: unknown reduction {op!r}; use dist.ReduceOp.SUM, MAX, MIN, "
                         f"PROD or AVG")
    return op


def _plain(tensor, what, traced_ok=True):
    if isinstance(tensor, Tracer):
        if getattr(tensor, "is_dist", lambda: False)():
            raise TypeError(
                f"{what}: got a distributed tensor ({tensor.placements} on "
                f"{tensor.process_mesh}); collectives take each rank's local tensor: pass "
                f"x._local_value(), or use dist.reshard to change a distributed tensor's "
                f"placements")
        if not traced_ok:
            raise TypeError(f"{what}: cannot run inside a transform "
                            f"({tensor._trace.transform_name}); call it outside it")
    elif not isinstance(tensor, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(tensor).__name__}")
    return tensor


_signatures = {}


def _signature(shape, dtype):
    """(ndim, dtype, the first 8 extents, a hash of all of them): a fixed-length row of
    ints, the same length for every tensor, so ranks can compare them in one collective."""
    key = (shape, dtype.name)
    sig = _signatures.get(key)
    if sig is None:
        extents = (list(shape) + [-1] * 8)[:8]
        sig = ((len(shape), zlib.crc32(dtype.name.encode())) + tuple(extents)
               + (zlib.crc32(repr(shape).encode()),))
        if len(_signatures) > 1024:
            _signatures.clear()
        _signatures[key] = sig
    return sig


def _check_same(comm, tensor, what):
    """Every member passes a tensor of the same shape and dtype, or a clear error naming
    the ranks that differ (instead of a hang or garbage). One tiny collective on reused
    buffers (a few microseconds; ``Communicator.same_signature``)."""
    if comm.size == 1:
        return
    rows = comm.same_signature(_signature(tuple(tensor._shape), tensor.dtype))
    if rows is not None:
        _raise_disagreement(comm, rows, what)


def _describe_signature(row):
    """'shape [3] float32' from a ``_signature`` row (shapes of more than 8 dims show
    their first 8 extents and '...')."""
    ndim, code = int(row[0]), int(row[1])
    shape = [int(n) for n in row[2:2 + min(ndim, 8)]]
    dims = ", ".join(map(str, shape)) + (", ..." if ndim > 8 else "")
    return f"shape [{dims}] {_DTYPE_BY_CODE.get(code, 'of an unknown dtype')}"


_DTYPE_BY_CODE = {zlib.crc32(name.encode()): name for name in dtypes.BY_NAME}


def _raise_disagreement(comm, rows, what):
    raise ValueError(f"{what}: ranks disagree about the tensor's shape/dtype: " + "; ".join(
        f"rank {comm.ranks[i]}: {_describe_signature(r)}" for i, r in enumerate(rows))
        + " (every rank must pass a tensor of the same shape and dtype)")


def _owned_buffer(tensor):
    """Whether ``tensor``'s array may be overwritten: C-contiguous, writeable, owning its
    memory, and referenced by this tensor alone (no other tensor, view, saved value of a
    recorded op or user variable holds it: CPython's reference count says so)."""
    value = tensor._value
    flags = getattr(value, "flags", None)
    if flags is None or not (flags.c_contiguous and flags.writeable and flags.owndata):
        return False
    del flags  # it holds a reference to the array
    # the references: the tensor's slot, ``value`` here and getrefcount's argument
    return sys.getrefcount(value) <= 3


def _rebind(tensor, new):
    """Makes ``tensor`` hold ``new``'s values and graph position (Paddle's collectives
    write their result into the tensor passed)."""
    tensor._value = new._value
    if new._node is not None:
        tensor._node = new._node
        tensor.stop_gradient = False
    tensor._version += 1
    return tensor


# ---- functional forms (differentiable; the collective primitives, so pf.jit records them) ----
def all_reduce_value(x, op, comm):
    """``op`` over the ranks of ``comm`` of the tensors ``x`` (a new tensor)."""
    return prims.all_reduce(x, op=op, ranks=comm.ranks)


def all_gather_value(x, comm):
    """The ranks' tensors stacked along a new first axis (a new tensor)."""
    front = reshape(x, [1] + list(x._shape))
    return prims.all_gather(front, axis=0, sizes=(1,) * comm.size, ranks=comm.ranks)


def reduce_scatter_value(stacked, op, comm):
    """``op`` over ranks of ``stacked`` (first axis: one entry per rank), keeping this
    rank's entry (a new tensor without the first axis)."""
    if stacked._shape[0] != comm.size:
        raise ValueError(f"reduce_scatter: needs one entry per rank ({comm.size}), got "
                         f"{stacked._shape[0]}")
    if op in (ReduceOp.SUM, ReduceOp.AVG):
        mine = prims.reduce_scatter(stacked, op=op, axis=0, sizes=(1,) * comm.size,
                                    ranks=comm.ranks)
        return reshape(mine, list(stacked._shape[1:]))
    # max, min, prod: reduce everything, keep this rank's entry
    return prims.all_reduce(stacked, op=op, ranks=comm.ranks)[comm.rank]


def alltoall_value(stacked, comm):
    """Entry j of ``stacked`` goes to rank j; entry j of the result came from rank j."""
    if stacked._shape[0] != comm.size:
        raise ValueError(f"alltoall: needs one entry per rank ({comm.size}), got "
                         f"{stacked._shape[0]}")
    ones = (1,) * comm.size
    return prims.all_to_all(stacked, split_axis=0, concat_axis=0, split_sizes=ones,
                            concat_sizes=ones, ranks=comm.ranks)


def broadcast_value(x, src_index, comm):
    """Member ``src_index``'s tensor on every member (a new tensor)."""
    out = Tensor._wrap(comm.bcast(x._value, src_index))

    def vjp(g, _y, _x):
        total = all_reduce_value(g, ReduceOp.SUM, comm)
        return (total if comm.rank == src_index else zeros_like(total),)

    return record_custom(out, (x,), "broadcast", vjp)


# ---- Paddle's API ---------------------------------------------------------------------------
def _member_comm(group, what):
    comm = _comm_of(group)
    if comm is None:
        return None
    return comm


def all_reduce(tensor, op=ReduceOp.SUM, group=None, sync_op=True):
    """Reduces ``tensor`` over the ranks of ``group`` in place (every rank gets the result).

    Differentiable (see the module docstring). Returns ``tensor``.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> x = pf.to_tensor([1.0, 2.0])
        >>> dist.all_reduce(x).numpy()  # one process: the sum of one tensor
        array([1., 2.], dtype=float32)
    """
    _plain(tensor, "all_reduce")
    comm = _member_comm(group, "all_reduce")
    if comm is None:
        return tensor
    _check_op(op, "all_reduce")
    recorded = isinstance(tensor, Tracer) or (
        state.grad_enabled and (tensor._node is not None or not tensor.stop_gradient))
    if recorded:
        _check_same(comm, tensor, "all_reduce")
        if isinstance(tensor, Tracer):  # under pf.jit (recorded as an op), vmap or jvp
            return assign(all_reduce_value(tensor, op, comm), tensor)
        return _rebind(tensor, all_reduce_value(alias(tensor), op, comm))
    # nothing records it: reduce the buffer in place when this tensor alone holds it
    # (gradients, fresh results), else into a new one; either way no extra copy, and the
    # shape check travels with the reduction (no round of its own)
    inplace = _owned_buffer(tensor)
    result, rows = comm.allreduce_checked(
        tensor._value, op, _signature(tuple(tensor._shape), tensor.dtype), inplace)
    if rows is not None:
        _raise_disagreement(comm, rows, "all_reduce")
    if inplace:
        tensor._version += 1
    else:
        tensor._set_value(result)
    return tensor


def alias(tensor):
    """A new tensor object for ``tensor``'s value and graph position (so an in-place
    collective's node reads the value before the update)."""
    t = Tensor._wrap(tensor._value, tensor._node)
    t.stop_gradient = tensor.stop_gradient
    if tensor._node is None and not tensor.stop_gradient:
        raise RuntimeError(
            "a leaf tensor that requires grad cannot be updated in place by a collective; "
            "use a copy (x.clone()) or do it inside `with pf.no_grad():`")
    return t


def all_gather(tensor_list, tensor, group=None, sync_op=True):
    """Appends every rank's ``tensor`` (in rank order) to ``tensor_list``.

    Differentiable: the gradient of this rank's tensor sums the cotangents of its copies
    on all ranks (a reduce_scatter).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> out = []
        >>> dist.all_gather(out, pf.to_tensor([3.0]))
        >>> [t.numpy() for t in out]
        [array([3.], dtype=float32)]
    """
    _plain(tensor, "all_gather")
    comm = _member_comm(group, "all_gather")
    if comm is None:
        return
    _check_same(comm, tensor, "all_gather")
    gathered = all_gather_value(tensor, comm)
    tensor_list.extend(gathered[i] for i in range(comm.size))


def reduce_scatter(tensor, tensor_list, op=ReduceOp.SUM, group=None, sync_op=True):
    """Writes into ``tensor`` the reduction over ranks of their ``tensor_list[rank]``.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> out = pf.zeros([2])
        >>> dist.reduce_scatter(out, [pf.to_tensor([1.0, 2.0])]).numpy()
        array([1., 2.], dtype=float32)
    """
    _plain(tensor, "reduce_scatter")
    comm = _member_comm(group, "reduce_scatter")
    if comm is None:
        return tensor
    _check_op(op, "reduce_scatter")
    if len(tensor_list) != comm.size:
        raise ValueError(f"reduce_scatter: tensor_list needs one tensor per rank "
                         f"({comm.size}), got {len(tensor_list)}")
    stacked = stack([_as_tensor(t) for t in tensor_list])
    _check_same(comm, stacked, "reduce_scatter")
    result = reduce_scatter_value(stacked, op, comm)
    if tuple(result._shape) != tuple(tensor._shape):
        raise ValueError(f"reduce_scatter: output tensor has shape {tensor.shape}, the "
                         f"entries of tensor_list have shape {result.shape}")
    if isinstance(tensor, Tracer) or isinstance(result, Tracer):
        return assign(result, tensor)
    return _rebind(tensor, result)


def alltoall(in_tensor_list, out_tensor_list, group=None, sync_op=True):
    """Sends ``in_tensor_list[j]`` to rank j; appends what rank j sent to
    ``out_tensor_list`` (in rank order). Differentiable.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> out = []
        >>> dist.alltoall([pf.to_tensor([5.0])], out)
        >>> out[0].numpy()
        array([5.], dtype=float32)
    """
    comm = _member_comm(group, "alltoall")
    if comm is None:
        return
    if len(in_tensor_list) != comm.size:
        raise ValueError(f"alltoall: in_tensor_list needs one tensor per rank ({comm.size}), "
                         f"got {len(in_tensor_list)}")
    stacked = stack([_plain(_as_tensor(t), "alltoall") for t in in_tensor_list])
    _check_same(comm, stacked, "alltoall")
    result = alltoall_value(stacked, comm)
    out_tensor_list.extend(result[i] for i in range(comm.size))


def broadcast(tensor, src, group=None, sync_op=True):
    """Overwrites ``tensor`` on every rank with the one of world rank ``src``.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> dist.broadcast(pf.to_tensor([7.0]), src=0).numpy()
        array([7.], dtype=float32)
    """
    _plain(tensor, "broadcast", traced_ok=False)
    comm = _member_comm(group, "broadcast")
    if comm is None:
        return tensor
    if src not in comm.ranks:
        raise ValueError(f"broadcast: src rank {src} is not in the group {list(comm.ranks)}")
    _check_same(comm, tensor, "broadcast")
    return _rebind(tensor, broadcast_value(alias(tensor), comm.ranks.index(src), comm))


def send(tensor, dst=0, group=None, sync_op=True):
    """Sends ``tensor`` to world rank ``dst`` (which calls ``recv``). Not differentiable.

    Example (two processes)::

        if dist.get_rank() == 0:
            dist.send(x, dst=1)
        else:
            dist.recv(x, src=0)
    """
    _plain(tensor, "send", traced_ok=False)
    _check_peer(dst, "send", "dst")
    comm = world()
    # the shape and dtype go first (a small message the receiver checks against its
    # buffer: a wrong-sized buffer would otherwise keep stale values or truncate)
    header = comms.int_buffer(_signature(tuple(tensor._shape), tensor.dtype))
    comm.sendrecv([(header, dst), (tensor._value, dst)], [], what="send")


def recv(tensor, src=0, group=None, sync_op=True):
    """Receives into ``tensor`` from world rank ``src``; it must have the shape and
    dtype of the tensor the sender passed (else a ``ValueError`` naming both). Not
    differentiable. See ``send``."""
    _plain(tensor, "recv", traced_ok=False)
    _check_peer(src, "recv", "src")
    comm = world()
    mine = _signature(tuple(tensor._shape), tensor.dtype)
    header = comms.int_buffer([0] * len(mine))
    comm.sendrecv([], [(header, src)], what="recv")
    if tuple(header.tolist()) != mine:
        raise ValueError(
            f"recv: rank {comm.rank} receives into a tensor of {_describe_signature(mine)}, "
            f"but rank {src} sent a tensor of {_describe_signature(header)}; the receiving "
            f"tensor must have the sender's shape and dtype")
    buf = tensor._value.copy()
    comm.sendrecv([], [(buf, src)], what="recv")
    tensor._value = buf
    tensor._version += 1
    return tensor


def _check_peer(peer, what, name):
    comm = world()
    if not 0 <= peer < comm.size or (peer == comm.rank and comm.size > 1):
        raise ValueError(f"{what}: {name}={peer} must be another rank of the world "
                         f"(0..{comm.size - 1}, this is rank {comm.rank})")


def _as_tensor(t):
    return t if isinstance(t, Tensor) else to_tensor(t)
