"""Control flow run as Python control flow on the values: what a control-flow function
does when its predicate or trip count is concrete, and what the control-flow primitives
do when nothing is being staged (``RegionPrimitive.unroll``): every step's primitives are
bound, so the tape and the transforms of concrete values (eager ``pf.jvp``, ``pf.vmap``,
``pf.jet``) see each one. A predicate batched by ``pf.vmap`` runs until every lane is
done, freezing the lanes that finished."""

from __future__ import annotations

from ...autodiff.forward import JVPTracer
from ...autodiff.taylor import TaylorTracer
from ...backends import get_backend
from ...core import dtypes
from ...core.trace import Tracer
from ...ops.helpers import as_tensor
from ...ops.manipulation import stack
from ...ops.math import where
from ..jit import JitTracer
from ..vmap import BatchTracer

BATCHED = object()  # concrete_value's answer for a value that differs between vmap lanes


def concrete_value(t):
    """The backend array under ``t`` (through forward-mode and Taylor tracers; a
    distributed tensor's global value), ``BATCHED`` when a vmap lane axis is in the way,
    or None when it is staged (a jit tracer) or has no value."""
    while True:
        if isinstance(t, JitTracer):
            return None
        if isinstance(t, JVPTracer):
            t = t.primal
        elif isinstance(t, TaylorTracer):
            t = t.series[0]
        elif isinstance(t, BatchTracer):
            return BATCHED
        else:  # a tensor, or another transform's value with a global array (distributed)
            try:
                return t._value
            except AttributeError:  # none (NoConcreteValueError): treated as staged
                return None


def lanes(t):
    """The per-lane values of a batched boolean scalar ``t`` (a BatchTracer), as a backend
    array, or None when they are staged."""
    while isinstance(t, (BatchTracer, JVPTracer, TaylorTracer)):
        t = t.val if isinstance(t, BatchTracer) else (
            t.primal if isinstance(t, JVPTracer) else t.series[0])
    return None if isinstance(t, Tracer) else t._value


def first(array):
    """The first element of a native array, on the host (any backend)."""
    return get_backend().to_numpy(array).reshape(-1)[0]


def as_int(array) -> int:
    return int(first(array))


def check_index(i, n, message=None):
    """``i`` when it is a valid branch index; else an IndexError, or for a check staged as
    a ``cond`` (``message`` given, see ``api._finished_within``) a RuntimeError saying it."""
    if not 0 <= i < n:
        if message is not None:
            raise RuntimeError(message)
        raise IndexError(f"switch: the branch index is {i} but there are {n} branches "
                         f"(valid indices 0..{n - 1})")
    return i


def scalar_check(x, what, allow_int, allow_bool=True):
    """``x`` as a scalar (shape []) boolean (or integer) tensor, else a TypeError saying
    how to make one."""
    x = as_tensor(x)
    if x.size != 1 or len(x._shape) > 1:
        raise TypeError(f"{what} must be a scalar (shape [] or [1]), got shape {x.shape}; "
                        f"reduce it first (e.g. pf.all(x > 0) or (x > 0).any())")
    kind_ok = (x.dtype is dtypes.bool_ and allow_bool) or (
        allow_int and not x.dtype.is_floating and x.dtype is not dtypes.bool_)
    if not kind_ok:
        want = "boolean" if not allow_int else "boolean or integer"
        raise TypeError(f"{what} must be a {want} scalar, got {x.dtype.name}; compare first "
                        f"(e.g. x > 0)")
    return x.reshape([]) if x._shape else x


def while_python(cond_fn, body_fn, carry):
    """Runs a while loop on flat lists; a predicate batched by vmap runs until every lane is
    done, freezing finished lanes with ``where``."""
    carry = list(carry)
    while True:
        pred = cond_fn(carry)
        value = concrete_value(pred)
        if value is None:
            raise TypeError(
                "pf.while_loop: the loop condition is a value staged by pf.jit inside another "
                "transform (vmap/jvp under jit); move the transform outside pf.jit, or use "
                "pf.fori_loop/pf.scan with a static trip count")
        if value is BATCHED:
            per_lane = lanes(pred)
            if per_lane is None:
                raise TypeError(
                    "pf.while_loop: a vmap-batched loop condition inside pf.jit is not "
                    "supported; apply pf.vmap outside pf.jit, or use pf.fori_loop/pf.scan")
            if not per_lane.any():
                return carry
            carry = [where(pred, b, a) for a, b in zip(carry, body_fn(carry))]
            continue
        if not bool(first(value)):
            return carry
        carry = list(body_fn(carry))


def scan_python(step, carry, xs, n, reverse):
    """A scan on flat lists: ``step(carry, x) -> (carry, ys)``; returns carry + stacked ys."""
    carry = list(carry)
    ys = []
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        carry, y = step(carry, [x[i] for x in xs])
        carry = list(carry)
        ys.append(list(y))
    if reverse:
        ys.reverse()
    n_y = len(ys[0]) if ys else 0
    return carry + [stack([y[j] for y in ys]) for j in range(n_y)]
