"""Distributed tensors: a tensor's global value laid out over a ``ProcessMesh``.

Design. A ``DistTensor`` is a tracer of one ``DistTrace`` that lives at level 0 for the
whole program (an *ambient* trace: ``core.state.enable_ambient_tracers``). It holds this
rank's local block (an ordinary tensor), the mesh and one placement per mesh dim; its
``shape`` is the global shape. Every primitive applied to it goes through
``DistTrace.process_primitive``: the primitive's sharding rule (``prims/sharding.py``) says
which layouts the inputs need and what the output's is, the inputs are relaid out (the
collectives of Paddle's reshard table), and the primitive runs on the local blocks.

Because a DistTensor behaves exactly like the single-process tensor of its global value,
autodiff needs nothing special: the tape records primitives on DistTensors, their rules run
on DistTensors again (inserting whatever collectives *their* layouts need), and every order
works. A Replicate parameter used with Shard(0) data gets a Partial gradient, which its
``.grad`` keeps while contributions accumulate; ``reduce_gradients`` reduces all of them in
one bucketed collective (or the first use of one reduces it). Explicit
relayouts (``reshard``) are the identity on global values; their adjoint reshards the
cotangent back.

Transforms nest above: ``pf.jvp``/``pf.vmap`` tracers (level >= 1) carry DistTensors as
their payload. Relayouts run the collective primitives (``prims/collective.py``) on the
local blocks, so a program can be staged: ``staging()`` pushes a DistTrace above a
``pf.jit`` trace, whose tracers are then the local blocks, and the jitted program holds
the collectives as ops (``dist.to_static`` compiles its step this way, and ``pf.jit`` of a
function called with DistTensors: ``staged_jit.py``).

Plain tensors mixed with DistTensors count as Replicate (Paddle's rule). A rank outside a
tensor's mesh holds no local block (``None``) and skips the computation.
"""

from __future__ import annotations

import contextlib
import zlib

from ..backends import communicator as comms
from ..core.primitive import Aval, record_custom
from ..core.state import enable_ambient_tracers, no_grad
from ..core.tensor import Tensor
from ..core.trace import Trace, Tracer, new_trace
from ..prims import full
from ..prims.sharding import (LINEAR_PARTIALS, check_layout, expand, is_partial, is_shard,
                               local_shape, sharded_dims, sharding_rule)
from .env import world
from .layout import (coords, create_mesh_comms, effective_shape, is_member, relayout,
                     relayout_native)
from .placement import ProcessMesh, from_spec, to_spec


# ---- the tensor -------------------------------------------------------------------------------
class DistTensor(Tracer):
    """A tensor laid out over a process mesh (made by ``shard_tensor``, ``reshard``,
    ``dtensor_from_local`` or any op on one). ``shape`` is the global shape; ``numpy()``
    gathers the global value (a collective: call it on every rank of the mesh)."""

    __slots__ = ("_local", "_mesh", "_specs", "__dict__")

    # ---- construction (internal) -----------------------------------------------------------
    @classmethod
    def _make(cls, local, mesh, specs, aval):
        t = object.__new__(cls)
        t._local = local
        t._mesh = mesh
        t._specs = tuple(specs)
        t._init_tracer(_trace(), aval)
        return t

    def __copy__(self):
        t = DistTensor._make(self._local, self._mesh, self._specs, self.aval)
        t._node = self._node
        t.stop_gradient = self.stop_gradient
        t.__dict__.update(self.__dict__)
        return t

    # ---- pf.jit (transforms/jit/jitted.py hands calls with distributed arguments here) ----
    @classmethod
    def _jit_call(cls, jitted, args, kwargs):
        from .staged_jit import jit_call  # it builds on this module

        return jit_call(jitted, args, kwargs)

    @classmethod
    def _jit_lower(cls, jitted, args, kwargs):
        from .staged_jit import jit_lower

        return jit_lower(jitted, args, kwargs)

    # ---- Paddle's API --------------------------------------------------------------------
    @property
    def placements(self) -> list:
        """One placement per mesh dim."""
        return [from_spec(s) for s in self._specs]

    @property
    def process_mesh(self) -> ProcessMesh:
        return self._mesh

    def is_dist(self) -> bool:
        """True: this tensor is laid out over a process mesh."""
        return True

    def _local_value(self, grad_placements=None):
        """This rank's block (an ordinary tensor; differentiable: its cotangent is this
        rank's block of the DistTensor's, Partial where the tensor is not sharded unless
        ``grad_placements`` says otherwise, e.g. Replicate when every rank's cotangent is
        already the whole one)."""
        return local_value(self, grad_placements)

    @property
    def _value(self):
        """The global value (gathered: a collective)."""
        return full_value(self)

    def numpy(self):
        """The global value as a NumPy array (a collective over the mesh's ranks)."""
        return comms.to_numpy_copy(full_value(self))

    def detach(self):
        return DistTensor._make(self._local, self._mesh, self._specs, self.aval)

    @property
    def grad(self):
        return Tracer.grad.__get__(self)

    @grad.setter
    def grad(self, value):
        # a leaf's gradient takes the leaf's layout, except that a Partial gradient of a
        # Replicate leaf (a parameter used on sharded data) stays Partial: contributions
        # then accumulate without communication, and ``dist.reduce_gradients`` (called by
        # shard_optimizer, to_static and the trainer) reduces all of them in one
        # collective; any other use reduces it on the way (its value is the gradient)
        if value is not None and not (isinstance(value, DistTensor) and
                                      value._mesh == self._mesh and
                                      pending_reduction(value._specs, self._specs)):
            with no_grad():
                value = reshard(value, self._mesh, self.placements)
        Tracer.grad.__set__(self, value)

    def _check_inplace(self, what):
        raise TypeError(
            f"{what}: in-place writes into a distributed tensor ({_describe(self)}) are not "
            f"supported; compute a new tensor instead (x + y, pf.where(mask, v, x)) or "
            f"update a parameter with set_value")

    def set_value(self, value):
        """Replaces the values (global, any layout or a plain tensor); keeps the layout."""
        self._set_value(value)

    def _set_value(self, value):
        if isinstance(value, DistTensor):
            new = reshard(value, self._mesh, self.placements)._local
        else:
            t = value if isinstance(value, Tensor) else Tensor(value, dtype=self.dtype)
            if tuple(t._shape) != tuple(self._shape):
                raise ValueError(f"set_value: expected shape {self.shape}, got {t.shape}")
            new = relayout(Tensor._wrap(t._value), self._shape, self._mesh,
                           (None,) * len(self._specs), self._specs)
        if isinstance(new, Tensor) and new.dtype != self.dtype:
            from ..ops import astype as cast  # noqa: PLC0415
            new = cast(new, self.dtype)
        self._local = new
        self._version += 1

    def __repr__(self):
        local = None if self._local is None else comms.to_numpy_copy(self._local._value)
        return (f"DistTensor(shape={self.shape}, dtype={self.dtype.name}, "
                f"placements={self.placements}, mesh={self._mesh.shape}, "
                f"local={local!r})")

    __str__ = __repr__


def pending_reduction(grad_specs, leaf_specs):
    """Whether a gradient laid out by ``grad_specs`` may stay on a leaf laid out by
    ``leaf_specs``: the same, or linear-partial where the leaf is replicated."""
    return all(g == s or (s is None and g in LINEAR_PARTIALS)
               for g, s in zip(grad_specs, leaf_specs))


def _describe(x):
    name = f" {x.name!r}" if getattr(x, "name", None) else ""
    return (f"tensor{name} {x.dtype.name}{list(x._shape)} with placements {x.placements} on "
            f"{x._mesh}")


# ---- the trace -------------------------------------------------------------------------------
class DistTrace(Trace):
    """Runs primitives on distributed tensors (see the module docstring)."""

    @property
    def transform_name(self):
        return "primflow.distributed"

    def process_primitive(self, prim, args, params):
        if prim.multiple_results:  # control flow: its regions' primitives, one by one
            return prim.unroll(list(args), **params)
        mesh = None
        for a in args:
            if isinstance(a, DistTensor):
                if mesh is None:
                    mesh = a._mesh
                elif a._mesh != mesh:
                    raise ValueError(
                        f"{prim.name}: its inputs live on different meshes ({mesh} and "
                        f"{a._mesh}); move one with dist.reshard(x, mesh, placements) first")
        ndim = mesh.ndim
        avals = [a.aval if isinstance(a, DistTensor) else Aval(a._shape, a.dtype)
                 for a in args]
        specs = [a._specs if isinstance(a, DistTensor) else (None,) * ndim for a in args]
        plan = _plan(prim, mesh, avals, specs, params)
        out_aval, wanted, out_specs, local_params, out_shape, rule = plan
        if not is_member(mesh):
            return DistTensor._make(None, mesh, out_specs, out_aval)
        locals_ = []
        for a, src, dst, av in zip(args, specs, wanted, avals):
            # this rank's block, cut from any tape (the DistTensor op itself is recorded)
            local = a._local if isinstance(a, DistTensor) else a.detach()
            locals_.append(relayout(local, av.shape, mesh, src, dst))
        if rule.empty_fill is not None and any(not t.size for t in locals_):
            out_local = full(shape=out_shape, value=rule.empty_fill, dtype=out_aval.dtype)
        else:
            out_local = prim.bind(*locals_, **local_params)
        return DistTensor._make(out_local, mesh, out_specs, out_aval)


_plans = {}


def _plan(prim, mesh, avals, specs, params):
    """What running ``prim`` on these layouts takes: the output's aval and specs, the
    inputs' wanted specs, the local computation's params and output shape. Depends only on
    hashable metadata, so it is cached (eager loops repeat the same calls)."""
    try:
        key = (prim.name, mesh, tuple(avals), tuple(specs), tuple(sorted(params.items())))
        hash(key)
    except TypeError:  # an unhashable parameter: plan without the cache
        key = None
    plan = _plans.get(key) if key is not None else None
    if plan is None:
        out_aval = prim.infer(*avals, **params)
        # the declaration's rule (Primitive(..., shard=...)), else the table's
        rule = getattr(prim, "shard", None) or sharding_rule(prim.name)
        sizes = effective_shape(mesh)
        wanted, out_specs = expand(rule, specs, avals, out_aval, sizes, params)
        where = coords(mesh) if is_member(mesh) else (0,) * mesh.ndim
        in_shapes = [local_shape(av.shape, w, sizes, where) for av, w in zip(avals, wanted)]
        out_shape = local_shape(out_aval.shape, out_specs, sizes, where)
        local_params = rule.localize(params, in_shapes, out_shape,
                                     [sharded_dims(w) for w in wanted])
        plan = (out_aval, wanted, out_specs, local_params, out_shape, rule)
        if key is not None:
            if len(_plans) > 4096:
                _plans.clear()
            _plans[key] = plan
    return plan


_the_trace = None
_staging_trace = None


def _trace():
    if _staging_trace is not None:
        return _staging_trace
    global _the_trace
    if _the_trace is None:
        enable_ambient_tracers()
        _the_trace = DistTrace(0)
    return _the_trace


@contextlib.contextmanager
def staging():
    """Stages a distributed program for a transform that is tracing (``pf.jit``: what
    ``dist.to_static`` compiles). Distributed tensors made inside belong to a ``DistTrace``
    pushed *above* the transform's trace: their ops are relaid out first (the collectives
    they need become primitives on the local blocks, which the transform records), and
    values the transform traces that are not distributed (constants made inside) mix with
    them as Replicate. Their local blocks are the transform's tracers."""
    global _staging_trace
    previous = _staging_trace
    with new_trace(DistTrace) as trace:
        _staging_trace = trace
        try:
            yield trace
        finally:
            _staging_trace = previous


def from_local_like(local, template):
    """A distributed tensor with ``template``'s mesh, placements and global shape whose
    block here is ``local`` (no checks, no communication: ``dist.to_static``'s programs
    rebuild their distributed inputs from the blocks they are given)."""
    return DistTensor._make(local, template._mesh, template._specs,
                            Aval(template._shape, local.dtype))


# ---- conversions -----------------------------------------------------------------------------
def _check_placements(placements, mesh, shape, what):
    if not isinstance(mesh, ProcessMesh):
        raise TypeError(f"{what}: mesh must be a dist.ProcessMesh, got {type(mesh).__name__}")
    placements = list(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"{what}: {len(placements)} placements {placements} for a "
                         f"{mesh.ndim}-d mesh {mesh}; give one placement per mesh dim")
    specs = tuple(to_spec(p) for p in placements)
    # Shard(-1): the last dim, as Paddle and torch allow
    specs = tuple(s + len(shape) if is_shard(s) and -len(shape) <= s < 0 else s
                  for s in specs)
    check_layout(shape, specs, what)
    return specs


def _check_same_across_ranks(what, shape, dtype, specs, mesh):
    """All ranks agree on the global shape, dtype and placements (else a clear error naming
    the ranks), instead of a hang or garbage later."""
    comm = world()
    if comm.size == 1:
        return
    text = f"{list(shape)} {dtype.name} {[from_spec(s) for s in specs]} {mesh.process_ids}"
    rows = comm.allgather_ints([zlib.crc32(text.encode())])
    if any(r != rows[0] for r in rows):
        texts = comm.allgather_ints(list(text.encode()[:200].ljust(200)))
        described = "; ".join(f"rank {i}: {bytes(t).decode().strip()}"
                              for i, t in enumerate(texts))
        raise ValueError(f"{what}: ranks disagree about the tensor's global shape, dtype, "
                         f"placements or mesh: {described}. Every rank must pass the same")


def shard_tensor(data, mesh, placements, dtype=None, place=None, stop_gradient=None):
    """A distributed tensor with global value ``data`` laid out by ``placements`` on
    ``mesh`` (Paddle's ``dist.shard_tensor``). Every rank passes the same global value.

    ``stop_gradient=None`` keeps ``data``'s. A parameter stays a trainable leaf; a
    computed tensor stays connected to its graph.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> mesh = dist.ProcessMesh([0], dim_names=["x"])
        >>> x = dist.shard_tensor(pf.ones([4, 2]), mesh, [dist.Shard(0)])
        >>> x.shape, x.placements, x.is_dist()
        ([4, 2], [Shard(dim=0)], True)
    """
    if isinstance(data, DistTensor):
        return reshard(data, mesh, placements)
    t = data if isinstance(data, Tensor) else Tensor(data, dtype=dtype)
    # a value traced by the transform a distributed program is staged for (a constant or
    # a seed cotangent made inside it) is the same on every rank: it is laid out like a
    # global value, by traced ops
    staged = (isinstance(t, Tracer) and _staging_trace is not None
              and t._trace.level < _staging_trace.level)
    if isinstance(t, Tracer) and not staged:
        raise TypeError(f"shard_tensor cannot take a value traced by "
                        f"{t._trace.transform_name}; shard the inputs outside the transform")
    if dtype is not None and t.dtype.name != str(dtype).replace("paddle.", ""):
        from ..ops import cast  # noqa: PLC0415
        t = cast(t, dtype)
    specs = _check_placements(placements, mesh, t._shape, "shard_tensor")
    if not staged:
        _check_same_across_ranks("shard_tensor", t._shape, t.dtype, specs, mesh)
    create_mesh_comms(mesh)
    local = None
    if is_member(mesh):
        value = t.detach() if staged else Tensor._wrap(t._value)
        local = relayout(value, t._shape, mesh, (None,) * mesh.ndim, specs)
    out = DistTensor._make(local, mesh, specs, Aval(t._shape, t.dtype))
    out.name = getattr(t, "name", None)
    for attr in ("optimize_attr", "regularizer", "need_clip", "do_model_average"):
        if hasattr(t, attr):
            out.__dict__[attr] = getattr(t, attr)
            out.__dict__["_is_dist_parameter"] = True  # nn.Layer registers it as a parameter
    stop = t.stop_gradient if stop_gradient is None else bool(stop_gradient)
    if t._node is not None and not t.stop_gradient:
        out = record_custom(out, (t,), "shard_tensor",
                            lambda g, _o, _t: (unshard_dtensor(_as_dist(g, mesh, specs)),))
    out.stop_gradient = stop if out._node is None else False
    return out


def _as_dist(x, mesh, specs):
    if isinstance(x, DistTensor):
        return x
    return shard_tensor(x, mesh, [from_spec(s) for s in specs])


def reshard(x, mesh, placements):
    """``x`` laid out by ``placements`` on ``mesh`` (Paddle's ``dist.reshard``): the same
    global value, moved by collectives; to another mesh by point-to-point messages.
    Differentiable (the adjoint reshards the cotangent back).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> mesh = dist.ProcessMesh([0])
        >>> x = dist.shard_tensor(pf.ones([4]), mesh, [dist.Shard(0)])
        >>> dist.reshard(x, mesh, [dist.Replicate()]).placements
        [Replicate()]
    """
    if not isinstance(x, DistTensor):
        return shard_tensor(x, mesh, placements)
    specs = _check_placements(placements, mesh, x._shape, "reshard")
    if mesh == x._mesh and specs == x._specs:
        return x
    if mesh == x._mesh:
        local = None
        if x._local is not None:
            local = relayout(x._local, x._shape, mesh, x._specs, specs)
    else:
        local = _cross_mesh(x, mesh, specs)
    out = DistTensor._make(local, mesh, specs, x.aval)
    src_mesh, src_placements = x._mesh, x.placements
    return record_custom(out, (x,), "reshard",
                         lambda g, _o, _x: (reshard(g, src_mesh, src_placements),))


def _cross_mesh(x, mesh, specs):
    """This rank's block on ``mesh`` of ``x`` (on another mesh): the same-status fast path
    (meshes of one shape, no partials: rank i of one sends its block to rank i of the
    other), else replicate on the source mesh, send the whole value, slice on arrival."""
    create_mesh_comms(x._mesh)
    create_mesh_comms(mesh)
    comm = world()
    me = comm.rank
    src_ids, dst_ids = x._mesh.process_ids, mesh.process_ids
    shape = x._shape
    same_status = (x._mesh.shape == mesh.shape and x._specs == specs
                   and not any(is_partial(s) for s in specs))
    if comm.size == 1:
        value = x._local._value
        if not same_status:
            value = relayout_native(value, shape, x._mesh, x._specs, (None,) * x._mesh.ndim)
            value = relayout_native(value, shape, mesh, (None,) * mesh.ndim, specs)
        return Tensor._wrap(value)
    if same_status:
        sends, recvs, out = [], [], None
        if me in src_ids:
            peer = dst_ids[src_ids.index(me)]
            if peer == me:
                out = x._local._value
            else:
                sends.append((x._local._value, peer))
        if me in dst_ids:
            peer = src_ids[dst_ids.index(me)]
            if peer != me:
                out = comms.empty(local_shape(shape, specs, effective_shape(mesh),
                                              mesh.coords(me)), x.dtype)
                recvs.append((out, peer))
        comm.sendrecv(sends, recvs)
        return None if out is None else Tensor._wrap(out)
    full = None
    if me in src_ids:
        full = relayout_native(x._local._value, shape, x._mesh, x._specs,
                                (None,) * x._mesh.ndim)
    sends, recvs = [], []
    for j, b in enumerate(dst_ids):
        a = b if b in src_ids else src_ids[j % len(src_ids)]
        if a == b:
            continue
        if a == me:
            sends.append((full, b))
        if b == me:
            full = comms.empty(tuple(shape), x.dtype)
            recvs.append((full, a))
    comm.sendrecv(sends, recvs)
    if me not in dst_ids:
        return None
    return relayout(Tensor._wrap(full), shape, mesh, (None,) * mesh.ndim, specs)


def full_value(x):
    """The global value of ``x`` as a native array (a collective over its mesh)."""
    if x._local is None:
        raise RuntimeError(f"rank {world().rank} is not in the mesh of the {_describe(x)}, so "
                           f"it holds no part of it; read it on a rank of "
                           f"{x._mesh.process_ids} (or reshard it onto a mesh with this rank)")
    return relayout(x._local, x._shape, x._mesh, x._specs, (None,) * len(x._specs))._value


def unshard_dtensor(x):
    """The global value of ``x`` as an ordinary tensor on every rank of its mesh (Paddle's
    ``dist.unshard_dtensor``); differentiable.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> x = dist.shard_tensor(pf.ones([2]), dist.ProcessMesh([0]), [dist.Shard(0)])
        >>> dist.unshard_dtensor(x).is_dist()
        False
    """
    if not isinstance(x, DistTensor):
        return x
    out = Tensor._wrap(full_value(x))
    mesh, placements = x._mesh, x.placements
    return record_custom(out, (x,), "unshard_dtensor",
                         lambda g, _o, _x: (shard_tensor(g, mesh, placements),))


def local_value(x, grad_placements=None):
    """This rank's block of ``x`` as an ordinary tensor (differentiable).

    The block's cotangent becomes a distributed cotangent of ``x`` laid out by
    ``grad_placements`` (one per mesh dim), by default ``x``'s shards and ``Partial(sum)``
    elsewhere: each rank's cotangent is its contribution to the sum over ranks (the
    gradient convention of ``primflow.distributed``). Declare ``Replicate`` where every
    rank's cotangent is already the whole one (the same loss computed on every rank,
    counted once), as torch's ``to_local(grad_placements=...)``."""
    if x._local is None:
        raise RuntimeError(f"rank {world().rank} holds no block of the {_describe(x)}")
    out = x._local.detach()
    mesh = x._mesh
    if grad_placements is None:
        grad_specs = tuple(s if is_shard(s) else "sum" for s in x._specs)
    else:
        grad_specs = _check_placements(grad_placements, mesh, x._shape, "grad_placements")
        for k, (g, s) in enumerate(zip(grad_specs, x._specs)):
            if is_shard(s) != is_shard(g) or (is_shard(s) and g != s):
                raise ValueError(
                    f"grad_placements {list(grad_placements)}: mesh dim {k} of the "
                    f"{_describe(x)} is {from_spec(s)}, so its block's cotangent must be "
                    f"laid out the same way there (a shard stays that shard; Replicate or "
                    f"Partial where the tensor is not sharded)")
    shape = x._shape
    return record_custom(out, (x,), "local_value",
                         lambda g, _o, _x: (_from_local(g, mesh, grad_specs, shape),))


def _from_local(local, mesh, specs, shape):
    """A DistTensor from this rank's block with known global ``shape`` (differentiable).

    Its adjoint gives each rank its block of the cotangent laid out like the tensor, except
    that where the tensor is Partial (the sum of the blocks) every block's cotangent is the
    whole cotangent (Replicate), as in torch's ``DTensor.from_local``."""
    out = DistTensor._make(local.detach() if is_member(mesh) else None,
                           mesh, specs, Aval(shape, local.dtype))
    wanted = tuple(None if is_partial(s) else s for s in specs)
    return record_custom(out, (local,), "dtensor_from_local",
                         lambda g, _o, _l: (local_value(_reshard_specs(g, mesh, wanted)),))


def _reshard_specs(g, mesh, specs):
    return reshard(g, mesh, [from_spec(s) for s in specs])


def dtensor_from_local(local_tensor, mesh, placements, shape=None):
    """A distributed tensor from each rank's block (Paddle's ``dtensor_from_local``). The
    global shape is ``shape`` if given, else the sum of the blocks along sharded dims (so
    uneven blocks work; ranks must hold ``torch.chunk`` blocks).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> x = dist.dtensor_from_local(pf.ones([3]), dist.ProcessMesh([0]), [dist.Shard(0)])
        >>> x.shape
        [3]
    """
    t = local_tensor if isinstance(local_tensor, Tensor) else Tensor(local_tensor)
    specs0 = tuple(to_spec(p) for p in placements)
    if len(specs0) != mesh.ndim:
        raise ValueError(f"dtensor_from_local: {len(specs0)} placements for a {mesh.ndim}-d "
                         f"mesh {mesh}; give one placement per mesh dim")
    comm = world()
    local_shape_ = list(t._shape)
    if shape is None:
        shape = list(local_shape_)
        if comm.size > 1:
            rows = comm.allgather_ints([len(local_shape_)] + (local_shape_ + [0] * 8)[:8])
            for k, s in enumerate(specs0):
                if is_shard(s):
                    line = mesh.ranks_along(k, comm.rank)
                    shape[s] = sum(rows[r][1 + s] for r in line)
            for d in range(len(local_shape_)):
                if d not in sharded_dims(specs0):
                    bad = {r: rows[r][1 + d] for r in mesh.process_ids
                           if rows[r][1 + d] != local_shape_[d]}
                    if bad:
                        raise ValueError(
                            f"dtensor_from_local: dim {d} is not sharded but its extent "
                            f"differs across ranks: rank {comm.rank} has {local_shape_[d]}, "
                            f"ranks {sorted(bad)} have {sorted(set(bad.values()))}")
    specs = _check_placements(placements, mesh, tuple(shape), "dtensor_from_local")
    create_mesh_comms(mesh)
    expected = local_shape(tuple(shape), specs, effective_shape(mesh), coords(mesh))
    if is_member(mesh) and tuple(local_shape_) != expected:
        raise ValueError(f"dtensor_from_local: rank {comm.rank}'s block has shape "
                         f"{local_shape_}, but a tensor of shape {list(shape)} with "
                         f"placements {list(placements)} gives it {list(expected)} "
                         f"(torch.chunk blocks)")
    return _from_local(t, mesh, specs, tuple(shape))


def dtensor_from_fn(fn, mesh, placements, *args, **kwargs):
    """``shard_tensor(fn(*args, **kwargs), mesh, placements)`` (Paddle's
    ``dtensor_from_fn``).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> x = dist.dtensor_from_fn(pf.ones, dist.ProcessMesh([0]), [dist.Shard(0)], [4])
        >>> x.shape
        [4]
    """
    return shard_tensor(fn(*args, **kwargs), mesh, placements)


def dtensor_to_local(x, mesh=None, placements=None, grad_placements=None):
    """This rank's block of ``x`` (Paddle's ``dtensor_to_local``; differentiable, see
    ``grad_placements`` in ``DistTensor._local_value``).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> x = dist.shard_tensor(pf.ones([4]), dist.ProcessMesh([0]), [dist.Shard(0)])
        >>> dist.dtensor_to_local(x).shape
        [4]
    """
    if mesh is not None or placements is not None:
        x = reshard(x, mesh if mesh is not None else x._mesh,
                    placements if placements is not None else x.placements)
    return local_value(x, grad_placements)


def is_dist_tensor(x) -> bool:
    """Whether ``x`` is a distributed tensor."""
    return isinstance(x, DistTensor)
