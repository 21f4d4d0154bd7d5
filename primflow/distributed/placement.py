"""Process meshes and placements (Paddle's ``ProcessMesh``, ``Replicate``, ``Shard``,
``Partial``).

A placement list has one entry per mesh dimension and says how a tensor is laid out over
it. Internally each placement is a *spec* (``prims/sharding.py``): ``None`` replicated, an
int the sharded tensor dim, a reduction name partial.
"""

from __future__ import annotations

import math


class ReduceType:
    """How a ``Partial`` tensor's local values combine (Paddle names).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.Partial(dist.ReduceType.kRedMax)
        Partial(reduce_type=kRedMax)
    """

    kRedSum = "sum"
    kRedMax = "max"
    kRedMin = "min"
    kRedProd = "prod"
    kRedAvg = "avg"


_REDUCE_NAMES = {v: k for k, v in vars(ReduceType).items() if k.startswith("kRed")}


class Placement:
    """Base class of ``Replicate``, ``Shard`` and ``Partial``."""

    def is_replicated(self) -> bool:
        return False

    def is_shard(self, dim=None) -> bool:
        return False

    def is_partial(self) -> bool:
        return False

    def __eq__(self, other):
        return type(self) is type(other) and self._spec() == other._spec()

    def __hash__(self):
        return hash((type(self).__name__, self._spec()))


class Replicate(Placement):
    """Every process of the mesh dimension holds the whole tensor.

    Example:
        >>> import primflow.distributed as dist
        >>> dist.Replicate().is_replicated()
        True
    """

    def is_replicated(self) -> bool:
        return True

    def _spec(self):
        return None

    def __repr__(self):
        return "Replicate()"


class Shard(Placement):
    """The tensor is split along ``dim`` over the mesh dimension (``torch.chunk`` blocks:
    ``ceil(n / size)`` each, the last ones short or empty when ``n`` does not divide).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.Shard(1).get_dim()
        1
    """

    def __init__(self, dim: int):
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"Shard(dim) needs an int dim, got {dim!r}")
        self.dim = dim

    def get_dim(self) -> int:
        return self.dim

    def is_shard(self, dim=None) -> bool:
        return dim is None or dim == self.dim

    def _spec(self):
        return self.dim

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class Partial(Placement):
    """Each process holds a partial value; the tensor is their reduction
    (``reduce_type``: ``ReduceType.kRedSum`` by default).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.Partial().is_partial()
        True
    """

    def __init__(self, reduce_type=ReduceType.kRedSum):
        if reduce_type not in _REDUCE_NAMES:
            raise ValueError(f"Partial: unknown reduce_type {reduce_type!r}; use "
                             f"dist.ReduceType.kRedSum, kRedMax, kRedMin, kRedProd or kRedAvg")
        self.reduce_type = reduce_type

    def is_partial(self) -> bool:
        return True

    def _spec(self):
        return self.reduce_type

    def __repr__(self):
        return f"Partial(reduce_type={_REDUCE_NAMES[self.reduce_type]})"


def to_spec(p):
    if not isinstance(p, Placement):
        raise TypeError(f"placements must be dist.Replicate(), dist.Shard(dim) or "
                        f"dist.Partial(), got {p!r}")
    return p._spec()


def from_spec(spec) -> Placement:
    if spec is None:
        return Replicate()
    if isinstance(spec, str):
        return Partial(spec)
    return Shard(spec)


def _flatten(mesh):
    """Shape and flat list of a nested list of ints."""
    if isinstance(mesh, (list, tuple)):
        if not mesh:
            raise ValueError("ProcessMesh: the mesh is empty")
        parts = [_flatten(m) for m in mesh]
        shapes = {p[0] for p in parts}
        if len(shapes) != 1:
            raise ValueError(f"ProcessMesh: the mesh {mesh} is ragged; every row needs the "
                             f"same length")
        return (len(mesh),) + parts[0][0], [i for p in parts for i in p[1]]
    if hasattr(mesh, "tolist") and not isinstance(mesh, int):
        return _flatten(mesh.tolist())
    if isinstance(mesh, bool) or not isinstance(mesh, int):
        raise TypeError(f"ProcessMesh: entries must be process ranks (ints), got {mesh!r}")
    return (), [mesh]


class ProcessMesh:
    """An N-d grid of process ranks with optional dimension names (Paddle's
    ``ProcessMesh``).

    Example:
        >>> import primflow.distributed as dist
        >>> mesh = dist.ProcessMesh([[0, 1], [2, 3]], dim_names=["dp", "mp"])
        >>> mesh.shape, mesh.process_ids, mesh.get_dim_size("mp")
        ([2, 2], [0, 1, 2, 3], 2)
    """

    def __init__(self, mesh=None, dim_names=None, shape=None, process_ids=None):
        if mesh is None:
            if shape is None or process_ids is None:
                raise ValueError("ProcessMesh needs a mesh (nested list of ranks) or both "
                                 "shape and process_ids")
            shape, ids = tuple(shape), [int(i) for i in process_ids]
            if math.prod(shape) != len(ids):
                raise ValueError(f"ProcessMesh: shape {list(shape)} does not hold "
                                 f"{len(ids)} process ids")
        else:
            shape, ids = _flatten(mesh)
            if not shape:
                shape = (1,)
        if len(set(ids)) != len(ids):
            raise ValueError(f"ProcessMesh: process ids {ids} contain duplicates")
        if any(i < 0 for i in ids):
            raise ValueError(f"ProcessMesh: process ids must be >= 0, got {ids}")
        self._shape = tuple(shape)
        self._ids = ids
        if dim_names is None:
            dim_names = [f"d{i}" for i in range(len(shape))]
        if len(dim_names) != len(shape):
            raise ValueError(f"ProcessMesh: {len(dim_names)} dim_names for a {len(shape)}-d "
                             f"mesh")
        self._dim_names = list(dim_names)

    @property
    def shape(self) -> list:
        return list(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def process_ids(self) -> list:
        return list(self._ids)

    @property
    def dim_names(self) -> list:
        return list(self._dim_names)

    def get_dim_size(self, dim) -> int:
        """Extent of mesh dim ``dim`` (an index or a name)."""
        return self._shape[self._dim_index(dim)]

    def _dim_index(self, dim) -> int:
        if isinstance(dim, str):
            if dim not in self._dim_names:
                raise ValueError(f"mesh {self} has no dim named {dim!r}")
            return self._dim_names.index(dim)
        return int(dim)

    def contains(self, rank: int) -> bool:
        return rank in self._ids

    def coords(self, rank: int) -> tuple:
        """The mesh coordinates of world rank ``rank``."""
        i = self._ids.index(rank)
        out = []
        for n in reversed(self._shape):
            out.append(i % n)
            i //= n
        return tuple(reversed(out))

    def rank_at(self, coords) -> int:
        i = 0
        for c, n in zip(coords, self._shape):
            i = i * n + c
        return self._ids[i]

    def ranks_along(self, dim: int, rank: int) -> list:
        """The world ranks on the line through ``rank`` along mesh dim ``dim``."""
        c = list(self.coords(rank))
        out = []
        for j in range(self._shape[dim]):
            c[dim] = j
            out.append(self.rank_at(c))
        return out

    def __eq__(self, other):
        return (isinstance(other, ProcessMesh) and self._shape == other._shape
                and self._ids == other._ids)

    def __hash__(self):
        return hash((self._shape, tuple(self._ids)))

    def __repr__(self):
        return (f"ProcessMesh(shape={list(self._shape)}, process_ids={self._ids}, "
                f"dim_names={self._dim_names})")
