"""Communicators: the one interface through which primflow.distributed moves arrays between
processes.

``primflow.distributed`` (collectives on tensors, reshard of distributed tensors) talks only
to the ``Communicator`` protocol below, on native arrays. Two transports implement it:

* ``LocalCommunicator``: a world of one process (no MPI needed). Every collective is the
  identity, so single-process programs run unchanged.
* ``MPICommunicator`` (``mpi_transport.py``): mpi4py over any MPI (the ``primflow[mpi]``
  extra installs mpi4py and the MPICH wheel). Buffers are passed to the upper-case,
  zero-copy mpi4py calls, non-blocking and waited for against ``pf.config.dist_timeout``;
  uneven shards use the ``v`` variants (Allgatherv, Reduce_scatter, Alltoallv), so no
  padding.

A later NCCL or gloo transport implements the same methods on its arrays.

Conventions: ``sizes`` lists, per member in rank order, the extent along ``axis`` of that
member's block; reduction ops are the strings ``"sum"``, ``"max"``, ``"min"``, ``"prod"``,
``"avg"``.

Example:
    >>> from primflow.backends.communicator import LocalCommunicator
    >>> comm = LocalCommunicator()
    >>> comm.rank, comm.size
    (0, 1)
"""

from __future__ import annotations

import abc
import os
import shutil
import sys

import numpy as np

REDUCE_OPS = ("sum", "max", "min", "prod", "avg")

# environment variables that MPI launchers set in every rank (MPICH/Hydra, Open MPI, Slurm,
# Intel MPI, MVAPICH): their presence means "we run under a launcher, initialise MPI"
LAUNCHER_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
                           "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS")

MPI_EXTRA_HINT = ("install the MPI extra: pip install 'primflow[mpi]' (mpi4py and the MPICH "
                  "wheel)")


class CommunicationError(RuntimeError):
    """A collective cannot run: MPI is missing, or ranks disagree about its arguments."""


def chunk_sizes(n: int, parts: int) -> list:
    """Extents of ``torch.chunk``'s blocks: ``ceil(n / parts)`` each, the last ones short or
    empty.

    Example:
        >>> chunk_sizes(5, 4)
        [2, 2, 1, 0]
    """
    c = -(-n // parts) if parts else 0
    return [max(0, min(c, n - i * c)) for i in range(parts)]


def to_numpy_copy(array):
    """A NumPy copy of a native array."""
    return np.array(array, copy=True)


def int_buffer(values):
    """A native int64 array of ``values`` (small messages: shapes, signatures)."""
    return np.asarray(list(values), dtype=np.int64)


def empty(shape, dtype):
    """An uninitialised native array of ``shape`` and primflow ``dtype`` (receive buffers)."""
    from . import get_backend  # noqa: PLC0415 - backends/__init__ imports the backends

    return np.empty(shape, dtype=get_backend().native_dtype(dtype))


def assemble(box, blocks, dtype):
    """The array covering ``box`` (per dim [start, stop)) from stored ``blocks`` (a list
    of (box, array)), or None if they leave part of it uncovered (checkpoint loading)."""
    shape = tuple(b - a for a, b in box)
    out = np.empty(shape, dtype=dtype)
    covered = np.zeros(shape, dtype=bool)
    for bbox, array in blocks:
        lo = [max(a, c) for (a, _), (c, _) in zip(box, bbox)]
        hi = [min(b, d) for (_, b), (_, d) in zip(box, bbox)]
        if any(h <= l for l, h in zip(lo, hi)) and out.size:
            continue
        dst = tuple(slice(l - a, h - a) for l, h, (a, _) in zip(lo, hi, box))
        src = tuple(slice(l - c, h - c) for l, h, (c, _) in zip(lo, hi, bbox))
        out[dst] = array[src]
        covered[dst] = True
    return out if covered.all() else None


class Communicator(abc.ABC):
    """A group of processes that run collectives together.

    ``rank`` is this process's index in the group, ``size`` the group's size and ``ranks``
    the members' ranks in the world communicator, in group order.
    """

    rank: int
    size: int
    ranks: tuple

    @abc.abstractmethod
    def allreduce(self, array, op="sum"):
        """The elementwise reduction over members of same-shape arrays (a new array)."""

    def allreduce_inplace(self, array, op="sum"):
        """``allreduce`` written into ``array`` itself (a C-contiguous, writeable buffer
        that nothing else reads: the caller checks). No result buffer is allocated, which
        for large arrays is most of the cost beyond the transport's."""
        array[...] = self.allreduce(array, op)

    def same_signature(self, signature):
        """The members' ``signature`` (a tuple of ints, the same length everywhere) if they
        all passed the same one, else the list of every member's (to name who differs).
        One small collective; the transports that can detect disagreement cheaper may
        override it."""
        rows = self.allgather_ints(list(signature))
        return None if all(tuple(r) == tuple(signature) for r in rows) else rows

    def allreduce_checked(self, array, op, signature, inplace):
        """``allreduce`` (into ``array`` itself if ``inplace``) after checking that every
        member passed the same ``signature`` (see ``same_signature``). Returns ``(result,
        rows)``: ``rows`` is None when the signatures agree, else every member's (and the
        result is garbage: the caller raises). Transports may overlap the check with the
        reduction (MPI does)."""
        rows = self.same_signature(signature)
        if rows is not None:
            return None, rows
        if inplace:
            self.allreduce_inplace(array, op)
            return array, None
        return self.allreduce(array, op), None

    def allreduce_many(self, arrays, op="sum"):
        """``allreduce`` of each array, in one collective (a flat bucket)."""
        if not arrays:
            return []
        total = np.concatenate([np.ravel(a) for a in arrays])
        self.allreduce_inplace(total, op)  # the bucket is ours: reduce it in place
        out, start = [], 0
        for a in arrays:
            out.append(total[start:start + a.size].reshape(a.shape))
            start += a.size
        return out

    @abc.abstractmethod
    def allgather(self, array, axis, sizes):
        """Every member's block concatenated along ``axis`` (``sizes[i]``: block i's extent)."""

    @abc.abstractmethod
    def reduce_scatter(self, array, op, axis, sizes):
        """Reduce same-shape arrays over members, then keep block ``rank`` along ``axis``."""

    @abc.abstractmethod
    def alltoall(self, array, split_axis, concat_axis, split_sizes, concat_sizes):
        """Send block j (along ``split_axis``, extents ``split_sizes``) to member j; return
        the blocks received, concatenated along ``concat_axis`` (member j's extent there is
        ``concat_sizes[j]``)."""

    @abc.abstractmethod
    def bcast(self, array, root):
        """Member ``root``'s array on every member (same shape and dtype everywhere)."""

    @abc.abstractmethod
    def sendrecv(self, sends, recvs, what="send/recv"):
        """Point-to-point exchange: ``sends`` is a list of (array, world_rank), ``recvs`` a
        list of (out_array, world_rank) filled in place; returns when all completed."""

    @abc.abstractmethod
    def barrier(self):
        """Returns when every member has called it."""

    @abc.abstractmethod
    def sub(self, world_ranks):
        """The communicator of the members ``world_ranks`` (called by those members only)."""

    @abc.abstractmethod
    def allgather_ints(self, values):
        """Every member's list of ``len(values)`` integers, as a list of lists."""

    @abc.abstractmethod
    def abort(self, code=1):
        """Ends every process of the job (after an error on this one)."""


class LocalCommunicator(Communicator):
    """A world of one process: every collective returns its input's values."""

    rank = 0
    size = 1
    ranks = (0,)
    name = "local"

    def allreduce(self, array, op="sum"):
        return array.copy()

    def allreduce_inplace(self, array, op="sum"):
        pass  # one member: the reduction of one array is itself (also for avg)

    def same_signature(self, signature):
        return None

    def allgather(self, array, axis, sizes):
        return array

    def reduce_scatter(self, array, op, axis, sizes):
        return array

    def alltoall(self, array, split_axis, concat_axis, split_sizes, concat_sizes):
        return array

    def bcast(self, array, root):
        return array

    def sendrecv(self, sends, recvs, what="send/recv"):
        by_peer = {}
        for array, peer in sends:
            by_peer.setdefault(peer, []).append(array)
        for out, peer in recvs:
            out[...] = by_peer[peer].pop(0)

    def barrier(self):
        pass

    def sub(self, world_ranks):
        return self

    def allgather_ints(self, values):
        return [list(values)]

    def abort(self, code=1):
        os._exit(code)


def launched_by_mpi() -> bool:
    """Whether an MPI launcher (mpiexec, srun...) started this process with more than one
    rank in the job."""
    for name in LAUNCHER_SIZE_VARIABLES:
        value = os.environ.get(name)
        if value is not None:
            try:
                return int(value) > 1
            except ValueError:
                continue
    return False


def mpi_communicator() -> Communicator:
    """The world communicator of MPI (initialising MPI), or a clear error naming the extra."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 - initialises MPI: only when wanted
    except ImportError as e:
        raise CommunicationError(
            f"this process was started by an MPI launcher but mpi4py is not installed "
            f"({e}); {MPI_EXTRA_HINT}") from None
    from .mpi_transport import MPICommunicator  # noqa: PLC0415 - it imports this module

    return MPICommunicator(MPI.COMM_WORLD)


_world = None


def world_communicator() -> Communicator:
    """The communicator of every process of the job: MPI's world under a launcher (joined
    on first use), else a world of one. ``primflow.distributed`` and the collective
    primitives' kernels share it.

    Example:
        >>> world_communicator().size >= 1
        True
    """
    global _world
    if _world is None:
        _world = mpi_communicator() if launched_by_mpi() else LocalCommunicator()
    return _world


def group_communicator(ranks) -> Communicator:
    """The communicator of the world ranks ``ranks`` (a tuple, this process among them):
    what a collective primitive's ``ranks`` parameter names. Created on first use by every
    member (``primflow.distributed`` creates a mesh's groups when the mesh is first used,
    in the same order on every rank), then cached.

    Example:
        >>> group_communicator((0,)).size
        1
    """
    world = world_communicator()
    ranks = tuple(ranks)
    if world.size > 1 and world.rank not in ranks:
        raise CommunicationError(f"rank {world.rank} runs a collective of the group {list(ranks)} "
                                 f"it is not a member of")
    return world.sub(ranks)


# ---- kernels of the collective primitives (prims/collective.py) ----------------------------
# host arrays (MPI reads and writes host memory); other backends wrap them (array_api.py)

def _all_reduce_kernel(x, *, op, ranks):
    return group_communicator(ranks).allreduce(x, op)


def _all_gather_kernel(x, *, axis, sizes, ranks):
    return group_communicator(ranks).allgather(x, axis, list(sizes))


def _reduce_scatter_kernel(x, *, op, axis, sizes, ranks):
    return group_communicator(ranks).reduce_scatter(x, op, axis, list(sizes))


def _all_to_all_kernel(x, *, split_axis, concat_axis, split_sizes, concat_sizes, ranks):
    return group_communicator(ranks).alltoall(x, split_axis, concat_axis, list(split_sizes),
                                              list(concat_sizes))


KERNELS = {"all_reduce": _all_reduce_kernel, "all_gather": _all_gather_kernel,
           "reduce_scatter": _reduce_scatter_kernel, "all_to_all": _all_to_all_kernel}


def find_mpiexec():
    """Path of ``mpiexec`` (next to the running Python first, where the MPICH wheel puts
    it), or None."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    return shutil.which("mpiexec") or shutil.which("mpirun")
