"""The MPI transport of the ``Communicator`` protocol (``communicator.py``): mpi4py's
zero-copy, upper-case calls, every one of them non-blocking and completed by ``_wait``.

Why non-blocking: a blocking MPI call waits forever when another rank never enters the
collective (it raised and was caught, finished its program, or waits in a different one).
``_wait`` polls the request against a deadline (``pf.config.dist_timeout``, 30 minutes by
default, as torch.distributed's) and raises ``CollectiveTimeoutError`` naming this rank,
the collective and its group; the abort hook of ``primflow.distributed`` then ends every
rank. While it waits it also reads the *exit notices* ranks send each other when their
program finishes normally: a rank waiting for a peer that has finished fails at once with
a message saying so, instead of waiting out the timeout.

Raw MPI errors ("Invalid rank", "Message truncated") become ``CommunicationError``\\ s
that name the collective and what to check.
"""

from __future__ import annotations

import atexit
import time

import numpy as np

from ..core.config import config
from .communicator import REDUCE_OPS, CommunicationError, Communicator

# point-to-point tags on the world communicator (collectives use their own MPI context,
# so these never meet them): the payload of send/recv, and the exit notices
DATA_TAG = 7
NOTICE_TAG = 31_007
HANDSHAKE_TAG = 31_011

# how long a rank keeps polling after it learnt that a peer of its collective finished:
# the peer's last messages may still be in flight
_FINISHED_GRACE_S = 1.0
_NOTICE_PERIOD_S = 0.05
_SPIN_S = 0.005  # poll without sleeping this long first (short collectives stay fast)


class CollectiveTimeoutError(CommunicationError):
    """A rank waited longer than ``pf.config.dist_timeout`` in a collective (or a peer
    of it finished without entering it)."""


def _contiguous(array):
    """``array`` as a C-contiguous buffer of the same shape (0-d arrays stay 0-d, which
    ``np.ascontiguousarray`` would make 1-d)."""
    return np.require(array, requirements="C")


def _to_front(array, axis):
    """``array`` with ``axis`` moved first, C-contiguous (what MPI buffers need)."""
    return np.ascontiguousarray(np.moveaxis(array, axis, 0))


class _Notices:
    """The world ranks that announced their program's normal end (see the module
    docstring); one per process, shared by every communicator."""

    def __init__(self, MPI):
        self._MPI = MPI
        self.finished = {}  # world rank -> time.monotonic() when this rank learnt it
        self._buffer = np.empty(1, dtype=np.int64)

    def poll(self):
        MPI, world = self._MPI, self._MPI.COMM_WORLD
        status = MPI.Status()
        while world.Iprobe(source=MPI.ANY_SOURCE, tag=NOTICE_TAG, status=status):
            source = status.Get_source()
            world.Recv(self._buffer, source=source, tag=NOTICE_TAG)
            self.finished.setdefault(source, time.monotonic())

    def announce_exit(self):
        """Tells every other rank that this one's program ended normally (at exit), then
        waits for theirs, so no notice is left unreceived when MPI finalizes (MPICH may
        then kill the job). A rank still working is waited for, as mpiexec would (at most
        ``pf.config.dist_timeout``: a rank that never used primflow.distributed sends no
        notice); one stuck in a collective with this rank reads the notice and ends the
        job."""
        MPI = self._MPI
        world = MPI.COMM_WORLD
        size, me = world.Get_size(), world.Get_rank()
        if size < 2:
            return
        note = np.zeros(1, dtype=np.int64)
        requests = [world.Isend(note, dest=peer, tag=NOTICE_TAG)
                    for peer in range(size) if peer != me]
        pause, give_up = 0.0, time.monotonic() + config.dist_timeout
        while len(self.finished) < size - 1 and time.monotonic() < give_up:
            self.poll()
            pause = min(0.01, pause + 1e-4)
            time.sleep(pause)
        for request in requests:
            request.Free()  # small eager messages: complete locally

_notices = None


def notices(MPI):
    global _notices
    if _notices is None:
        _notices = _Notices(MPI)
        atexit.register(_notices.announce_exit)
    return _notices


class MPICommunicator(Communicator):
    """Collectives through mpi4py on ``comm`` (an ``MPI.Comm``)."""

    name = "mpi"

    def __init__(self, comm, world_ranks=None):
        from mpi4py import MPI  # noqa: PLC0415 - only when MPI is in use

        self._MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.ranks = tuple(world_ranks) if world_ranks is not None else tuple(range(self.size))
        self.world_rank = MPI.COMM_WORLD.Get_rank()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD,
                     "avg": MPI.SUM}
        self._subs = {}
        self._signature_buffers = {}
        self._verified = set()  # signatures whose all_reduce check has passed
        self._notices = notices(MPI)

    # ---- completing requests ----------------------------------------------------------
    def _wait(self, requests, what, peers=None):
        """Completes ``requests`` (an MPI request or a list), or raises
        ``CollectiveTimeoutError`` after ``pf.config.dist_timeout`` seconds, or soon after
        one of ``peers`` (world ranks; default: the group's other members) finished."""
        MPI = self._MPI
        if not isinstance(requests, list):
            requests = [requests]
        try:
            if MPI.Request.Testall(requests):
                return
            start = time.monotonic()
            timeout = config.dist_timeout
            next_check = start + _NOTICE_PERIOD_S
            pause = 0.0
            while not MPI.Request.Testall(requests):
                now = time.monotonic()
                if now >= next_check:
                    next_check = now + _NOTICE_PERIOD_S
                    self._check_peers(what, peers, now)
                    if now - start > timeout:
                        raise CollectiveTimeoutError(self._stuck_message(what, timeout, peers))
                if now - start > _SPIN_S:
                    pause = min(1e-3, pause + 5e-5)
                    time.sleep(pause)
        except MPI.Exception as e:
            raise self._mpi_error(what, e) from None

    def _others(self, peers):
        return [r for r in (self.ranks if peers is None else peers) if r != self.world_rank]

    def _check_peers(self, what, peers, now):
        self._notices.poll()
        gone = [r for r in self._others(peers)
                if now - self._notices.finished.get(r, now) > _FINISHED_GRACE_S]
        if gone:
            raise CollectiveTimeoutError(
                f"rank {self.world_rank} waits in {what} over ranks {list(self.ranks)}, but "
                f"rank(s) {gone} finished their program without entering it: every rank of "
                f"the group must call the same collectives in the same order (look for a "
                f"collective inside an `if` on the rank, or an early return)")

    def _stuck_message(self, what, timeout, peers):
        return (f"rank {self.world_rank} waited {timeout:g} s in {what} over ranks "
                f"{list(self.ranks)}, and rank(s) {self._others(peers)} did not all enter it "
                f"(one failed, is stuck elsewhere or calls a different collective); ending "
                f"the job. The limit is pf.config.dist_timeout (or "
                f"dist.init_parallel_env(timeout=...)), now {timeout:g} s")

    def _mpi_error(self, what, e):
        text = e.Get_error_string() if hasattr(e, "Get_error_string") else str(e)
        hint = ""
        if "truncat" in text.lower():
            hint = ("; a rank received more data than its buffer holds: every rank must "
                    "pass tensors of the same shape and dtype (recv: the sender's)")
        elif "rank" in text.lower():
            hint = f"; a rank named in it is outside the group of ranks {list(self.ranks)}"
        return CommunicationError(f"{what} over ranks {list(self.ranks)} failed on rank "
                                  f"{self.world_rank}: MPI says {text.strip()!r}{hint}")

    def _op(self, op):
        try:
            return self._ops[op]
        except KeyError:
            raise ValueError(f"unknown reduction {op!r}; use one of {REDUCE_OPS}") from None

    def _start(self, what, call, *args, **kwargs):
        """``call(*args)`` (an MPI non-blocking start), its MPI error made clear."""
        try:
            return call(*args, **kwargs)
        except self._MPI.Exception as e:
            raise self._mpi_error(what, e) from None

    # ---- the collectives ----------------------------------------------------------------
    def allreduce(self, array, op="sum"):
        send = _contiguous(array)
        out = np.empty_like(send)
        self._wait(self._start("all_reduce", self.comm.Iallreduce, send, out,
                               op=self._op(op)), "all_reduce")
        if op == "avg":
            out /= self.size
        return out

    def allreduce_inplace(self, array, op="sum"):
        self._wait(self._start("all_reduce", self.comm.Iallreduce, self._MPI.IN_PLACE, array,
                               op=self._op(op)), "all_reduce")
        if op == "avg":
            array /= self.size

    def same_signature(self, signature):
        # every member sends its signature and the negated one; one MAX reduction then
        # gives (max, -min) per entry, and they agree iff max == min everywhere. It costs
        # the same as an Allgather but its buffers are reused (no allocation per call).
        n = len(signature)
        buf = self._signature_buffers.get(n)
        if buf is None:
            buf = self._signature_buffers[n] = np.empty(2 * n, dtype=np.int64)
        buf[:n] = signature
        np.negative(buf[:n], out=buf[n:])
        self._wait(self.comm.Iallreduce(self._MPI.IN_PLACE, buf, op=self._MPI.MAX),
                   "a collective's shape check")
        if np.array_equal(buf[:n], -buf[n:]):
            return None
        return self.allgather_ints(list(signature))

    def allreduce_checked(self, array, op, signature, inplace):
        # the signatures travel in a nonblocking Iallgather started just before the
        # reduction (on every member in the same order, as MPI requires). The first time a
        # signature is seen, the check completes before the reduction starts, so a
        # disagreement is reported as such (naming every member's shape). Once it has
        # passed, the check overlaps the reduction and adds no round of its own: a later
        # disagreement in size makes MPI fail the reduction (a truncated message), one in
        # shape only is reported after the reduction
        n = len(signature)
        buffers = self._signature_buffers.get(("rows", n))
        if buffers is None:
            buffers = self._signature_buffers[("rows", n)] = (
                np.empty(n, dtype=np.int64), np.empty((self.size, n), dtype=np.int64))
        mine, rows = buffers
        mine[:] = signature
        request = self.comm.Iallgather(mine, rows)
        if signature not in self._verified:
            self._wait(request, "all_reduce")
            if not (rows == mine).all():
                return None, rows.tolist()
            if len(self._verified) > 1024:
                self._verified.clear()
            self._verified.add(signature)
        try:
            if inplace:
                self.allreduce_inplace(array, op)
                result = array
            else:
                result = self.allreduce(array, op)
        except CollectiveTimeoutError:
            raise
        except CommunicationError:
            self._wait(request, "all_reduce")
            if (rows == mine).all():
                raise
            return None, rows.tolist()
        self._wait(request, "all_reduce")
        if (rows == mine).all():
            return result, None
        return None, rows.tolist()

    def allgather(self, array, axis, sizes):
        front = _to_front(array, axis)
        rest = front.shape[1:]
        inner = int(np.prod(rest, dtype=np.int64))
        out = np.empty((sum(sizes),) + rest, dtype=front.dtype)
        counts = [s * inner for s in sizes]
        self._wait(self._start("all_gather", self.comm.Iallgatherv, front, [out, counts]),
                   "all_gather")
        return np.moveaxis(out, 0, axis)

    def reduce_scatter(self, array, op, axis, sizes):
        front = _to_front(array, axis)
        rest = front.shape[1:]
        inner = int(np.prod(rest, dtype=np.int64))
        out = np.empty((sizes[self.rank],) + rest, dtype=front.dtype)
        self._wait(self._start("reduce_scatter", self.comm.Ireduce_scatter, front, out,
                               [s * inner for s in sizes], op=self._op(op)), "reduce_scatter")
        if op == "avg":
            out /= self.size
        return np.moveaxis(out, 0, axis)

    def alltoall(self, array, split_axis, concat_axis, split_sizes, concat_sizes):
        # send: blocks along split_axis, each flattened (C order) one after the other
        blocks, start = [], 0
        for s in split_sizes:
            key = [slice(None)] * array.ndim
            key[split_axis] = slice(start, start + s)
            blocks.append(np.ascontiguousarray(array[tuple(key)]).reshape(-1))
            start += s
        send = np.concatenate(blocks) if blocks else np.empty(0, array.dtype)
        send_counts = [b.size for b in blocks]
        shapes = []
        for j in range(self.size):
            shape = list(array.shape)
            shape[split_axis] = split_sizes[self.rank]
            shape[concat_axis] = concat_sizes[j]
            shapes.append(tuple(shape))
        recv_counts = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        recv = np.empty(sum(recv_counts), dtype=array.dtype)
        self._wait(self._start("alltoall", self.comm.Ialltoallv, [send, send_counts],
                               [recv, recv_counts]), "alltoall")
        parts, start = [], 0
        for shape, n in zip(shapes, recv_counts):
            parts.append(recv[start:start + n].reshape(shape))
            start += n
        return np.concatenate(parts, axis=concat_axis)

    def bcast(self, array, root):
        buf = _contiguous(array) if self.rank == root else np.empty_like(array)
        self._wait(self._start("broadcast", self.comm.Ibcast, buf, root=root), "broadcast")
        return buf

    def sendrecv(self, sends, recvs, what="send/recv"):
        world = self._MPI.COMM_WORLD
        requests = [self._start(what, world.Isend, _contiguous(a), dest=peer, tag=DATA_TAG)
                    for a, peer in sends]
        copies = []
        for out, peer in recvs:
            buf = out if out.flags.c_contiguous else np.empty_like(out)
            requests.append(self._start(what, world.Irecv, buf, source=peer, tag=DATA_TAG))
            if buf is not out:
                copies.append((out, buf))
        peers = sorted({peer for _, peer in recvs})
        self._wait(requests, what, peers=peers)
        for out, buf in copies:
            out[...] = buf

    def probe_count(self, peer, what):
        """The size in bytes of the next message from world rank ``peer`` (waiting for it
        like a collective: against the timeout, and failing if ``peer`` finished)."""
        MPI, world = self._MPI, self._MPI.COMM_WORLD
        status = MPI.Status()
        start = time.monotonic()
        next_check = start + _NOTICE_PERIOD_S
        while not world.Iprobe(source=peer, tag=DATA_TAG, status=status):
            now = time.monotonic()
            if now >= next_check:
                next_check = now + _NOTICE_PERIOD_S
                self._check_peers(what, [peer], now)
                if now - start > config.dist_timeout:
                    raise CollectiveTimeoutError(
                        self._stuck_message(what, config.dist_timeout, [peer]))
            time.sleep(1e-4 if now - start > _SPIN_S else 0)
        return status.Get_count(MPI.BYTE)

    def barrier(self):
        self._wait(self.comm.Ibarrier(), "barrier")

    def sub(self, world_ranks):
        key = tuple(world_ranks)
        if key == self.ranks:
            return self
        comm = self._subs.get(key)
        if comm is None:
            world_size = self._MPI.COMM_WORLD.Get_size()
            outside = [r for r in key if not 0 <= r < world_size]
            if outside:
                raise CommunicationError(
                    f"a group of ranks {list(key)} names ranks {outside}, but the job has "
                    f"{world_size} processes (ranks 0..{world_size - 1})")
            self._handshake(key)
            group = self._MPI.COMM_WORLD.Get_group().Incl(list(key))
            # collective over the members only, so meshes that leave out some ranks work
            sub_comm = self._MPI.COMM_WORLD.Create_group(group, tag=11)
            group.Free()
            comm = self._subs[key] = MPICommunicator(sub_comm, key)
        return comm

    def _handshake(self, members):
        """Every member of a new group meets the others first (point to point, against
        the timeout), so a member that never comes is named instead of a hang in MPI's
        blocking group creation."""
        world = self._MPI.COMM_WORLD
        me = np.zeros(1, dtype=np.int64)
        peers = [r for r in members if r != self.world_rank]
        got = [np.empty(1, dtype=np.int64) for _ in peers]
        requests = [world.Isend(me, dest=r, tag=HANDSHAKE_TAG) for r in peers]
        requests += [world.Irecv(b, source=r, tag=HANDSHAKE_TAG) for b, r in zip(got, peers)]
        self._wait(requests, f"the creation of the group of ranks {list(members)} (a "
                             f"ProcessMesh dimension or new_group)", peers=peers)

    def allgather_ints(self, values):
        send = np.asarray(values, dtype=np.int64)
        out = np.empty((self.size, send.size), dtype=np.int64)
        self._wait(self.comm.Iallgather(send, out), "a collective's shape check")
        return out.tolist()

    def abort(self, code=1):
        self.comm.Abort(code)
