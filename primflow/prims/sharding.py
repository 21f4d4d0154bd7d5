"""Sharding (SPMD) rules: how each primitive's inputs and output are laid out over a mesh.

``primflow.distributed`` runs a primitive on distributed tensors by asking its rule which
layouts the inputs must have (inserting the collectives that produce them) and which layout
the output then has, and running the primitive on each rank's local blocks.

Rules are written for **one mesh dimension** (PyTorch's lesson: N-D rules written by hand
are where sharding bugs live) and ``expand`` applies them per dimension of an N-D mesh. On
one mesh dimension a tensor's layout (a *spec*) is one of

* ``None``: replicated, every rank holds the whole tensor,
* an int ``d``: sharded along tensor dim ``d`` (``torch.chunk`` blocks, uneven allowed),
* a reduction name (``"sum"``, ``"avg"``, ``"max"``, ``"min"``, ``"prod"``): partial, the
  value is that reduction of the ranks' local values.

A rule is ``propagate(specs, avals, out_aval, size, **params) -> (in_specs, out_spec)``:
the specs the inputs must be resharded to and the output's spec (``size``: the mesh
dimension's extent, for divisibility). ``localize(params, in_shapes, out_shape,
in_sharded)`` gives the parameters of the local computation (only primitives with shape
parameters need one). Composites need no rules: they decompose into these primitives.

Families (generic builders): elementwise (with the partial-preserving linear cases),
reductions (a reduced sharded dim gives Partial), reshape, transpose, broadcast, slice,
pad, concatenate, gather/scatter, dot_general (row, column, batch and contracting shards),
creation. Each primitive declares its rule (``Primitive(..., shard=...)``);
``SHARDING_RULES`` maps names to the declared rules; a test fails if a primitive has none.

Example:
    >>> from primflow.prims.sharding import SHARDING_RULES
    >>> from primflow.core.primitive import Aval
    >>> from primflow.core import dtypes
    >>> a = Aval((4, 3), dtypes.float64)
    >>> SHARDING_RULES["reduce_sum"].propagate([0], [a], Aval((3,), dtypes.float64), 2,
    ...                                        axes=(0,))
    ([0], 'sum')
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..core.primitive import get_primitive, primitives

LINEAR_PARTIALS = ("sum", "avg")  # partial kinds that linear maps preserve


def is_partial(spec) -> bool:
    """Whether a one-mesh-dim spec is partial (a reduction name)."""
    return isinstance(spec, str)


def is_shard(s):
    """Whether the spec ``s`` shards a tensor dim (an int; None is replicated, a string
    partial)."""
    return isinstance(s, int) and not isinstance(s, bool)


class ShardingRule:
    """A primitive's sharding rule: ``propagate`` and (for shape parameters) ``localize``."""

    def __init__(self, propagate, localize=None, name="", empty_fill=None):
        self.propagate = propagate
        self.localize = localize or _same_params
        # the local result where a rank's block is empty (an uneven shard's last blocks):
        # the reduction's identity, since max/min of nothing has no value
        self.empty_fill = empty_fill
        self.name = name or getattr(propagate, "__name__", "rule")

    def __repr__(self):
        return f"ShardingRule({self.name})"


def _same_params(params, in_shapes, out_shape, in_sharded):
    return params


# ---- elementwise ----------------------------------------------------------------------------

def elementwise(partial_mode=None, positions=None):
    """Rule of elementwise primitives (equal shapes). ``partial_mode`` says when a partial
    input gives a partial output: ``"additive"`` (add, sub, select's branches: partial
    inputs of one linear kind at ``positions``; replicated ones there become partial),
    ``"single"`` (mul, div, neg, casts: exactly one partial input, at a position in
    ``positions``, the others replicated), None (not linear: partial inputs are reduced)."""

    def propagate(specs, avals, out_aval, size, **params):
        n = len(specs)
        usable = positions if positions is not None else range(n)
        mode = partial_mode
        if mode == "single" and "dtype" in params and not params["dtype"].is_floating:
            mode = None  # a cast to integers does not commute with the sum
        shard = next((s for s in specs if is_shard(s)), None)
        partial = [i for i, s in enumerate(specs) if is_partial(s)]
        if shard is None and partial and mode is not None:
            kinds = {specs[i] for i in partial}
            if len(kinds) == 1 and kinds <= set(LINEAR_PARTIALS):
                kind = kinds.pop()
                if mode == "additive" and set(partial) <= set(usable):
                    # replicated operands become partial for free (kept on one rank, zeros
                    # elsewhere): P + R stays P, and the reduction waits until a consumer
                    # needs the value (backward passes add many such cotangents)
                    return [kind if i in usable else None for i in range(n)], kind
                if mode == "single" and len(partial) == 1 and partial[0] in usable:
                    return [kind if i in partial else None for i in range(n)], kind
        if shard is None:
            return [None] * n, None
        return [shard] * n, shard

    return ShardingRule(propagate, name=f"elementwise({partial_mode})")


def elementwise_from_linearity(linear, linear_in, n_inputs):
    """The elementwise rule of a primitive from what its declaration says it is linear in
    (the elementwise families' default, so no declaration restates it): jointly linear in
    two inputs (add, sub) adds partial sums; linear in one input (neg, div's numerator) or
    in each factor alone (mul) passes one partial input through; otherwise none.

    Example:
        >>> elementwise_from_linearity(True, frozenset(), 2) is ADDITIVE
        True
    """
    if linear and (n_inputs or 1) > 1:
        return ADDITIVE
    if linear or linear_in == {0}:
        return SINGLE
    if linear_in:
        return PRODUCT
    return NONLINEAR


# ---- reductions -----------------------------------------------------------------------------

def reduction(kind, linear, empty_fill=None):
    """Rule of ``reduce_*(x, axes)``: a sharded reduced dim gives ``Partial(kind)``; other
    sharded dims shift down; a partial input stays partial when the reduction is linear."""

    def propagate(specs, avals, out_aval, size, *, axes):
        (s,) = specs
        if s is None:
            return [None], None
        if is_partial(s):
            if linear and s in LINEAR_PARTIALS:
                return [s], s
            return [None], None
        if s in axes:
            return [s], kind
        return [s], s - sum(1 for a in axes if a < s)

    return ShardingRule(propagate, name=f"reduction({kind})", empty_fill=empty_fill)


def along_axis(linear):
    """Rule of ops along one ``axis`` (argmax, argmin, cumsum): that axis must be whole."""

    def propagate(specs, avals, out_aval, size, *, axis, **params):
        (s,) = specs
        if s is None or s == axis:
            return [None], None
        if is_partial(s):
            return ([s], s) if linear and s in LINEAR_PARTIALS else ([None], None)
        removed = out_aval is not None and len(out_aval.shape) < len(avals[0].shape)
        return [s], (s - 1 if removed and s > axis else s)

    return ShardingRule(propagate, name="along_axis")


# ---- shape ----------------------------------------------------------------------------------

def _shape_op(dim_rule):
    """Rule of a one-input shape op (linear): replicated stays replicated, a linear partial
    stays partial (other partials are reduced first), and a dim sharded along ``s`` maps to
    ``dim_rule(s, in_shape, size, **params)`` (None: the op needs it whole, replicate)."""

    def propagate(specs, avals, out_aval, size, **params):
        (s,) = specs
        if s is None or (is_partial(s) and s not in LINEAR_PARTIALS):
            return [None], None
        out = s if is_partial(s) else dim_rule(s, avals[0].shape, size, **params)
        return ([None], None) if out is None else ([s], out)

    propagate.__name__ = dim_rule.__name__
    return propagate


@_shape_op
def _broadcast_dim(s, in_shape, size, *, shape, broadcast_dimensions):
    # a size-1 dim that broadcasts: every rank needs it
    return broadcast_dimensions[s] if in_shape[s] == shape[broadcast_dimensions[s]] else None


@_shape_op
def _transpose_dim(s, in_shape, size, *, perm):
    return list(perm).index(s)


def _reshape_groups(src, dst):
    """Pairs of (src dims, dst dims) with equal products, each as small as possible."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        gi, gj, pi, pj = [], [], 1, 1
        # one dim from each side, then from the side with the smaller product until they match
        take_i, take_j = i < len(src), j < len(dst)
        while take_i or take_j:
            if take_i:
                gi.append(i)
                pi *= src[i]
                i += 1
            if take_j:
                gj.append(j)
                pj *= dst[j]
                j += 1
            take_i, take_j = pi < pj and i < len(src), pj < pi and j < len(dst)
        groups.append((gi, gj))
    return groups


@_shape_op
def _reshape_dim(s, src, size, *, shape):
    for gi, gj in _reshape_groups(tuple(src), tuple(shape)):
        if s not in gi:
            continue
        big_i = [d for d in gi if src[d] != 1]
        big_j = [d for d in gj if shape[d] != 1]
        if not big_i or big_i[0] != s or not big_j:
            return None
        e = big_j[0]
        if len(big_i) == 1 and len(big_j) == 1:
            return e  # the dim survives (maybe among size-1 dims)
        if src[s] % size == 0 and shape[e] % size == 0:
            return e  # leading dim of a merge or split: the blocks line up
        return None
    return None


def _reshape_localize(params, in_shapes, out_shape, in_sharded):
    return {**params, "shape": tuple(out_shape)}


@_shape_op
def _slice_dim(s, in_shape, size, *, start, limit, strides):
    return s if (start[s], limit[s], strides[s]) == (0, in_shape[s], 1) else None


def _slice_localize(params, in_shapes, out_shape, in_sharded):
    start, limit, strides = (list(params[k]) for k in ("start", "limit", "strides"))
    for d in in_sharded[0]:  # a sharded dim is sliced whole (_slice_dim): keep the block
        start[d], limit[d], strides[d] = 0, in_shapes[0][d], 1
    return {**params, "start": tuple(start), "limit": tuple(limit), "strides": tuple(strides)}


def _pad_propagate(specs, avals, out_aval, size, *, config):
    s = specs[0]
    if is_shard(s) and tuple(config[s]) == (0, 0, 0):
        return [s, None], s
    return [None, None], None


def _concatenate_propagate(specs, avals, out_aval, size, *, axis):
    n = len(specs)
    shard = next((s for s in specs if is_shard(s) and s != axis), None)
    if shard is not None:
        return [shard] * n, shard
    if len(set(specs)) == 1 and specs[0] in LINEAR_PARTIALS:
        return [specs[0]] * n, specs[0]
    return [None] * n, None


# ---- indexing -------------------------------------------------------------------------------

def _gather_propagate(specs, avals, out_aval, size):
    x, idx = specs
    k = avals[1].shape[-1]
    nb = len(avals[1].shape) - 1
    if is_shard(x) and x >= k:
        return [x, None], nb + x - k
    if is_shard(idx) and idx < nb:
        return [None, idx], idx
    if is_partial(x) and x in LINEAR_PARTIALS:
        return [x, None], x
    return [None, None], None


def _scatter_add_propagate(specs, avals, out_aval, size):
    op, idx, upd = specs
    k = avals[1].shape[-1]
    nb = len(avals[1].shape) - 1
    if is_shard(op) and op >= k:
        return [op, None, nb + op - k], op
    if is_shard(upd) and upd >= nb:
        return [upd - nb + k, None, upd], upd - nb + k
    batch = next((s for s in (upd, idx) if is_shard(s) and s < nb), None)
    if batch is not None:  # each rank adds its updates: the sum over ranks is the result
        return ["sum", batch, batch], "sum"
    if op in LINEAR_PARTIALS and upd == op and idx is None:
        return [op, None, op], op
    return [None, None, None], None


# ---- dot_general ----------------------------------------------------------------------------

def _dot_general_propagate(specs, avals, out_aval, size, *, contracting, batch):
    (lc, rc), (lb, rb) = contracting, batch
    nx, ny = len(avals[0].shape), len(avals[1].shape)
    x_free = [d for d in range(nx) if d not in lc and d not in lb]
    y_free = [d for d in range(ny) if d not in rc and d not in rb]
    sx, sy = specs
    # a partial operand with a replicated other: the product stays partial (bilinear)
    if is_partial(sx) and sy is None and sx in LINEAR_PARTIALS:
        return [sx, None], sx
    if is_partial(sy) and sx is None and sy in LINEAR_PARTIALS:
        return [None, sy], sy
    sx = None if is_partial(sx) else sx
    sy = None if is_partial(sy) else sy

    def sharded(d, mine, theirs, free, free_offset):
        """(the other operand's spec, the output's) for dim d of one operand sharded;
        ``mine``/``theirs``: the (contracting, batch) dims of the operand and of the other."""
        (my_c, my_b), (their_c, their_b) = mine, theirs
        if d in my_b:
            return their_b[my_b.index(d)], my_b.index(d)
        if d in my_c:
            return their_c[my_c.index(d)], "sum"
        return None, free_offset + free.index(d)

    if sx is not None:
        other, out = sharded(sx, (lc, lb), (rc, rb), x_free, len(lb))
        return [sx, other], out
    if sy is not None:
        other, out = sharded(sy, (rc, rb), (lc, lb), y_free, len(lb) + len(x_free))
        return [other, sy], out
    return [None, None], None


# ---- creation -------------------------------------------------------------------------------

def _creation_propagate(specs, avals, out_aval, size, **params):
    return [], None


# ---- the table ------------------------------------------------------------------------------

# the rules primitives declare (``Primitive(..., shard=...)`` in their family files)
NONLINEAR = elementwise()
ADDITIVE = elementwise("additive")
SINGLE = elementwise("single", positions=(0,))
PRODUCT = elementwise("single")  # mul: linear in either factor while the other is fixed
SELECT = elementwise("additive", positions=(1, 2))
REDUCE_SUM = reduction("sum", linear=True)
REDUCE_MAX = reduction("max", linear=False, empty_fill=-math.inf)
REDUCE_MIN = reduction("min", linear=False, empty_fill=math.inf)
ARG_AXIS = along_axis(linear=False)
CUMSUM = along_axis(linear=True)
BROADCAST = ShardingRule(_broadcast_dim, _reshape_localize, "broadcast")
RESHAPE = ShardingRule(_reshape_dim, _reshape_localize, "reshape")
TRANSPOSE = ShardingRule(_transpose_dim, name="transpose")
SLICE = ShardingRule(_slice_dim, _slice_localize, "slice")
PAD = ShardingRule(_pad_propagate, name="pad")
CONCATENATE = ShardingRule(_concatenate_propagate, name="concatenate")
GATHER = ShardingRule(_gather_propagate, name="gather")
SCATTER_ADD = ShardingRule(_scatter_add_propagate, name="scatter_add")
DOT_GENERAL = ShardingRule(_dot_general_propagate, name="dot_general")
CREATION = ShardingRule(_creation_propagate, name="creation")  # always replicated


# ---- scientific numerics: FFT and batched matrix decompositions ----

def _fft_propagate(specs, avals, out_aval, size, *, kind, axes, n_last, norm):
    # linear: partial sums pass through; a transformed dim must be whole on every rank
    spec = specs[0]
    if is_shard(spec) and spec in axes:
        spec = None
    return [spec], spec


def _local_only_propagate(specs, avals, out_aval, size, **params):
    raise TypeError("collective primitives act on each rank's local tensors, not on "
                    "distributed ones: pass x._local_value(), or change a distributed "
                    "tensor's placements with dist.reshard")


# ---- distributed: collectives take local tensors only
LOCAL_ONLY = ShardingRule(_local_only_propagate, name="local_only")


def batched_matrices(core):
    """Decompositions and solves: only the leading (batch) dims may be sharded, the same
    one for every input (the last ``core`` dims are the matrices); nonlinear, so partial
    inputs are reduced first."""

    def propagate(specs, avals, out_aval, size, **params):
        batch_dims = len(avals[0].shape) - core
        spec = next((s for s in specs if is_shard(s) and s < batch_dims), None)
        return [spec] * len(specs), spec

    return ShardingRule(propagate, name=f"batched matrices ({core} core dims)")


FFT = ShardingRule(_fft_propagate, name="fft")
MATRICES = batched_matrices(2)
PIVOTS = batched_matrices(1)


class _DeclaredRules(Mapping):
    """Every registered primitive's declared sharding rule, by name (read-only: a rule is
    part of the primitive's declaration)."""

    def __getitem__(self, name):
        prim = get_primitive(name, None)
        if prim is None or prim.shard is None:
            raise KeyError(name)
        return prim.shard

    def __iter__(self):
        return iter([n for n in primitives() if get_primitive(n).shard is not None])

    def __len__(self):
        return len(list(iter(self)))


SHARDING_RULES = _DeclaredRules()


def sharding_rule(name: str) -> ShardingRule:
    """The rule of primitive ``name`` (a clear error if it has none)."""
    try:
        return SHARDING_RULES[name]
    except KeyError:
        raise NotImplementedError(
            f"primitive {name!r} has no sharding rule, so it cannot run on distributed "
            f"tensors; declare its shard= rule (builders in primflow/prims/sharding.py; or "
            f"reshard the inputs to Replicate and use their local values)") from None


# ---- N-D meshes -----------------------------------------------------------------------------

def expand(rule, placements, avals, out_aval, mesh_shape, params):
    """Applies a one-mesh-dim rule on every dim of a mesh of ``mesh_shape``.

    ``placements[i][k]`` is input i's spec on mesh dim k. Returns the inputs' required
    specs (same layout) and the output's specs (one per mesh dim). A tensor dim can be
    sharded by one mesh dim only: when a mesh dim's choice would shard a dim that an
    earlier mesh dim already shards, that mesh dim falls back to replicated inputs.
    """
    n = len(placements)
    wanted = [[None] * len(mesh_shape) for _ in range(n)]
    out = [None] * len(mesh_shape)
    for k, size in enumerate(mesh_shape):
        specs = [placements[i][k] for i in range(n)]
        in_specs, out_spec = rule.propagate(specs, avals, out_aval, size, **params)
        if _conflicts(k, in_specs, out_spec, wanted, out):
            in_specs, out_spec = rule.propagate([None] * n, avals, out_aval, size, **params)
        for i in range(n):
            wanted[i][k] = in_specs[i]
        out[k] = out_spec
    return wanted, out


def _conflicts(k, in_specs, out_spec, wanted, out):
    if is_shard(out_spec) and out_spec in out[:k]:
        return True
    return any(is_shard(s) and s in wanted[i][:k] for i, s in enumerate(in_specs))


def local_extent(n: int, parts: int, index: int) -> int:
    """Extent of block ``index`` of ``n`` split into ``parts`` ``torch.chunk`` blocks."""
    c = -(-n // parts) if parts else 0
    return max(0, min(c, n - index * c))


def local_shape(shape, specs, mesh_shape, coords):
    """The local block's shape of a tensor of global ``shape`` with ``specs`` (one per mesh
    dim) on the rank at mesh ``coords``."""
    out = list(shape)
    for k, s in enumerate(specs):
        if is_shard(s):
            out[s] = local_extent(shape[s], mesh_shape[k], coords[k])
    return tuple(out)


def sharded_dims(specs):
    """The tensor dims sharded by some mesh dim."""
    return {s for s in specs if is_shard(s)}


def check_layout(shape, specs, what="tensor"):
    """Each tensor dim sharded by at most one mesh dim, and within range."""
    seen = set()
    for k, s in enumerate(specs):
        if is_shard(s):
            if not 0 <= s < len(shape):
                raise ValueError(f"{what}: Shard({s}) on mesh dim {k} is out of range for a "
                                 f"tensor with {len(shape)} dims (shape {list(shape)})")
            if s in seen:
                raise ValueError(f"{what}: tensor dim {s} is sharded by two mesh dims "
                                 f"({specs}); shard each tensor dim over at most one mesh dim")
            seen.add(s)
    return math.prod(shape)
