"""The parallel environment: which process this is, how many there are, and groups.

A process started by an MPI launcher (``primflow launch -n N``, ``mpiexec``, ``srun``)
joins the MPI world on first use; any other process is a world of one, so the same script
runs unchanged on one process. Everything here talks to a ``Communicator``
(``primflow/backends/communicator.py``), never to MPI directly.
"""

from __future__ import annotations

import sys
import time
import traceback

from ..backends.communicator import world_communicator
from ..core.config import config

_world = None


def _install_abort_hook(comm):
    """An uncaught exception on one rank ends the whole job (MPI_Abort) after printing its
    traceback, instead of leaving the other ranks waiting in a collective forever."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        sys.stderr.write(f"primflow.distributed: rank {comm.rank} of {comm.size} raised:\n")
        sys.stderr.write("".join(traceback.format_exception(kind, value, tb)))
        sys.stderr.flush()
        if kind is KeyboardInterrupt:
            previous(kind, value, tb)
        # mpiexec forwards a rank's stderr asynchronously and drops what it has not
        # forwarded when the job aborts: give it a moment to pass the traceback on
        time.sleep(0.5)
        comm.abort(1)

    sys.excepthook = hook


def world():
    """The world communicator (created on first use)."""
    global _world
    if _world is None:
        _world = world_communicator()
        if _world.size > 1:
            _install_abort_hook(_world)
    return _world


def init_parallel_env(timeout=None):
    """Joins the parallel environment (MPI under a launcher, else a world of one).

    Calling it is optional: every distributed function initialises on first use. Returns
    the world group. ``timeout`` (seconds or a ``datetime.timedelta``, as
    ``torch.distributed.init_process_group``'s) sets ``pf.config.dist_timeout``: how long
    a rank waits in a collective for the others before the job ends with an error naming
    the rank and the collective (default 30 minutes).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.init_parallel_env().nranks >= 1
        True
        >>> _ = dist.init_parallel_env(timeout=600)  # a hung collective fails after 10 min
        >>> import primflow as pf; pf.config.dist_timeout = 1800
    """
    if timeout is not None:
        config.dist_timeout = timeout
    world()
    return _world_group()


def is_initialized() -> bool:
    """Whether the parallel environment has been set up (``init_parallel_env``).

    Example:
        >>> import primflow.distributed as dist
        >>> _ = dist.init_parallel_env(); dist.is_initialized()
        True
    """
    return _world is not None


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (default: the world); -1 if not a member.

    Example:
        >>> import primflow.distributed as dist
        >>> dist.get_rank()
        0
    """
    if group is None:
        return world().rank
    return group.rank


def get_world_size(group=None) -> int:
    """The number of processes in ``group`` (default: the world).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.get_world_size()
        1
    """
    if group is None:
        return world().size
    return group.nranks


def barrier(group=None):
    """Waits until every process of ``group`` (default: the world) has called it.

    Example:
        >>> import primflow.distributed as dist
        >>> dist.barrier()
    """
    comm = _comm_of(group)
    if comm is not None:
        comm.barrier()


class Group:
    """A set of processes that run collectives together (Paddle's ``Group``).

    ``ranks`` are world ranks; ``rank`` is this process's index among them (-1 if it is not
    a member); ``nranks`` their number. Make one with ``new_group``.

    Example:
        >>> import primflow.distributed as dist
        >>> g = dist.new_group([0])
        >>> g.ranks, g.rank, g.nranks
        ([0], 0, 1)
    """

    def __init__(self, ranks, comm):
        self.ranks = list(ranks)
        self.nranks = len(self.ranks)
        self.comm = comm
        self.rank = comm.rank if comm is not None else -1

    def is_member(self) -> bool:
        """Whether this process belongs to the group."""
        return self.comm is not None

    def get_group_rank(self, rank: int) -> int:
        """The group rank of world rank ``rank`` (-1 if it is not a member)."""
        return self.ranks.index(rank) if rank in self.ranks else -1

    def __repr__(self):
        return f"Group(ranks={self.ranks})"


def _world_group():
    comm = world()
    return Group(range(comm.size), comm)


def new_group(ranks=None, backend=None):
    """A group of the world ranks ``ranks`` (all ranks if None). Every member must call it
    (non-members may call it too and get a group they are not a member of).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.new_group().nranks == dist.get_world_size()
        True
    """
    comm = world()
    if ranks is None:
        return _world_group()
    ranks = [int(r) for r in ranks]
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks {ranks} contain duplicates")
    bad = [r for r in ranks if not 0 <= r < comm.size]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are outside the world of {comm.size} "
                         f"process(es) (valid: 0..{comm.size - 1})")
    if comm.rank not in ranks:
        return Group(ranks, None)
    return Group(ranks, comm.sub(ranks))


def _comm_of(group):
    """The communicator of ``group`` (None for a non-member)."""
    if group is None:
        return world()
    if not isinstance(group, Group):
        raise TypeError(f"group must be a primflow.distributed.Group (from new_group), got "
                        f"{type(group).__name__}")
    return group.comm
