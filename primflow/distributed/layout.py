"""How a distributed tensor's blocks sit on the processes: the mesh as this process sees it
(its coordinates, its groups along each mesh dim) and ``relayout``, which moves a tensor's
local block from one layout to another with the collective primitives (Paddle's reshard
table). ``dtensor.py`` builds distributed tensors on it."""

from __future__ import annotations

from ..backends import communicator as comms
from ..core.tensor import Tensor
from .. import prims
from ..prims.sharding import LINEAR_PARTIALS, is_partial, is_shard
from .env import world


# ---- the mesh as seen by this process --------------------------------------------------------
def effective_shape(mesh):
    """The mesh's shape for layouts: in a world of one process every mesh dim counts as
    size 1 (the whole tensor lives here), so a distributed script runs unchanged on one
    process; under a launcher the mesh's ranks must exist."""
    comm = world()
    if comm.size == 1:
        return (1,) * mesh.ndim
    check_fits(mesh, comm)
    return tuple(mesh.shape)


def check_fits(mesh, comm):
    """A clear error when ``mesh`` names ranks the job does not have."""
    missing = [r for r in mesh.process_ids if not 0 <= r < comm.size]
    if missing:
        raise ValueError(f"{mesh} has {len(mesh.process_ids)} processes and names ranks "
                         f"{missing}, but the job's world has {comm.size} processes (ranks "
                         f"0..{comm.size - 1}); start it with primflow launch -n "
                         f"{max(mesh.process_ids) + 1}, or build the mesh from ranks "
                         f"below {comm.size}")


def coords(mesh):
    comm = world()
    if comm.size == 1:
        return (0,) * mesh.ndim
    return mesh.coords(comm.rank)


def is_member(mesh):
    comm = world()
    return comm.size == 1 or mesh.contains(comm.rank)


comm_cache = {}


def comm_along(mesh, k):
    comm = world()
    if comm.size == 1:
        return comm
    key = (mesh, k)
    c = comm_cache.get(key)
    if c is None:
        check_fits(mesh, comm)
        c = comm_cache[key] = comm.sub(mesh.ranks_along(k, comm.rank))
    return c


def create_mesh_comms(mesh):
    """Sub-communicators of every mesh dim, created in dim order on every member (so the
    group creations of different dims never interleave differently across ranks)."""
    if world().size > 1 and is_member(mesh):
        for k in range(mesh.ndim):
            comm_along(mesh, k)


# ---- relayout of local blocks ------------------------------------------------------------------
def group(mesh, k):
    """The world ranks of this rank's group along mesh dim ``k`` (a collective's ``ranks``)."""
    return comm_along(mesh, k).ranks


def block(local, axis, parts, index):
    """Block ``index`` of ``local`` split along ``axis`` into ``parts`` chunks (the
    ``slice`` primitive: traced like any op)."""
    n = local._shape[axis]
    c = -(-n // parts)
    start = [0] * len(local._shape)
    limit = list(local._shape)
    start[axis] = min(n, index * c)
    limit[axis] = min(n, start[axis] + c)
    if start[axis] == 0 and limit[axis] == n:
        return local
    return prims.slice(local, start=tuple(start), limit=tuple(limit),
                       strides=(1,) * len(start))


def relayout(local, shape, mesh, src, dst):
    """This rank's block (a tensor) of a tensor of global ``shape`` after changing its layout
    from the specs ``src`` to ``dst`` on ``mesh`` (Paddle's reshard table, one mesh dim at a
    time: S->R all_gather, S(i)->S(j) all_to_all, P->R all_reduce, P->S reduce_scatter, R->S
    local slice, R->P keep on one rank / zeros elsewhere). The communication is done by the
    collective primitives (``prims/collective.py``), so ``pf.jit`` records it."""
    src, dst = tuple(src), tuple(dst)
    if src == dst or local is None:
        return local
    sizes = effective_shape(mesh)
    where = coords(mesh)
    cur = list(src)

    def others(k):
        return {cur[j] for j in range(len(cur)) if j != k}

    # 1. shards that change: all_to_all into a free dim, else gather
    for k in range(len(cur)):
        s, t = cur[k], dst[k]
        if not is_shard(s) or s == t:
            continue
        m = sizes[k]
        if is_shard(t) and t not in others(k) and t not in dst[:k] + dst[k + 1:]:
            local = prims.all_to_all(
                local, split_axis=t, concat_axis=s,
                split_sizes=tuple(comms.chunk_sizes(shape[t], m)),
                concat_sizes=tuple(comms.chunk_sizes(shape[s], m)), ranks=group(mesh, k))
            cur[k] = t
        else:
            local = prims.all_gather(local, axis=s, sizes=tuple(comms.chunk_sizes(shape[s], m)),
                                     ranks=group(mesh, k))
            cur[k] = None
    # 2. partials that change: reduce_scatter into a free dim (sum, avg), else all_reduce
    for k in range(len(cur)):
        s, t = cur[k], dst[k]
        if not is_partial(s) or s == t:
            continue
        if is_shard(t) and t not in others(k) and s in LINEAR_PARTIALS:
            local = prims.reduce_scatter(local, op=s, axis=t,
                                         sizes=tuple(comms.chunk_sizes(shape[t], sizes[k])),
                                         ranks=group(mesh, k))
            cur[k] = t
        else:
            local = prims.all_reduce(local, op=s, ranks=group(mesh, k))
            cur[k] = None
    # 3. replicated -> shard (a local slice) or partial
    for k in range(len(cur)):
        s, t = cur[k], dst[k]
        if s == t:
            continue
        if s is None and is_shard(t):
            local = block(local, t, sizes[k], where[k])
        elif s is None and is_partial(t):
            if where[k] != 0 and t in ("sum", "prod"):
                local = prims.full(shape=tuple(local._shape), value=0 if t == "sum" else 1,
                                   dtype=local.dtype)
        else:
            raise AssertionError(f"relayout {src} -> {dst} left {cur}")
        cur[k] = t
    return local


def relayout_native(value, shape, mesh, src, dst):
    """``relayout`` of a native array (eager helpers: a native array back)."""
    return relayout(Tensor._wrap(value), shape, mesh, src, dst)._value
