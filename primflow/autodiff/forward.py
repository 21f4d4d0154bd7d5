"""Forward mode: ``pf.jvp(f, primals, tangents)`` by a JVP trace over the primitives' jvp
rules (true forward mode: one pass carries values and tangents together).

Each transform level wraps values in ``JVPTracer(primal, tangent)``; a tangent of None is a
symbolic zero, so untouched inputs cost nothing. The primal computation binds primitives
one level down, so the tape still records it: reverse-over-forward works.
"""

from __future__ import annotations

from .. import prims
from ..core.primitive import Aval, NonDifferentiableError
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.trace import Trace, Tracer, new_trace
from ..ops.helpers import as_tensor
from ..ops.creation import zeros_like


class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._init_tracer(trace, Aval(primal._shape, primal.dtype))
        self.primal = primal
        self.tangent = tangent

    def detach(self):
        """The primal, cut from every derivative: its tangent is zero (JAX stop_gradient)."""
        return self.primal.detach()


class JVPTrace(Trace):
    transform_name = "pf.jvp"

    def _unpack(self, a):
        if isinstance(a, JVPTracer) and a._trace is self:
            return a.primal, a.tangent
        return a, None

    def process_primitive(self, prim, args, params):
        primals, tangents = zip(*[self._unpack(a) for a in args]) if args else ((), ())
        if prim.multiple_results:  # control flow: its rule makes the results and tangents
            if all(t is None for t in tangents):
                return prim.bind(*primals, **params)
            outs, dots = prim.jvp(list(primals), list(tangents), **params)
            return [o if d is None else JVPTracer(self, o, d) for o, d in zip(outs, dots)]
        out = prim.bind(*primals, **params)
        if all(t is None for t in tangents) or not out.dtype.is_floating:
            return out
        return JVPTracer(self, out, push_tangents(prim, tangents, out, primals, params))


def push_tangents(prim, tangents, out, primals, params):
    """The tangent of ``out = prim(*primals, **params)`` for input ``tangents`` (None: a
    symbolic zero, at least one must be given), by the primitive's jvp rules.

    Example:
        >>> import primflow as pf
        >>> from primflow import prims
        >>> x = pf.to_tensor([0.0]); out = prims.sin(x)
        >>> push_tangents(prims.sin, [pf.to_tensor([2.0])], out, [x], {}).numpy()
        array([2.], dtype=float32)
    """
    if prim.jvp is None:
        raise NonDifferentiableError(
            f"primitive '{prim.name}' is not differentiable but lies on the path being "
            f"differentiated (forward mode); detach its input if a zero tangent is meant")
    if callable(prim.jvp):
        out_dot = prim.jvp(list(tangents), out, *primals, **params)
    else:
        out_dot = None
        for i, t in enumerate(tangents):
            if t is None:
                continue
            rule = prim.jvp[i]
            if rule is None:
                raise NonDifferentiableError(
                    f"primitive '{prim.name}' has no derivative with respect to input {i}")
            contribution = rule(t, out, *primals, **params)
            out_dot = contribution if out_dot is None else prims.add(out_dot, contribution)
    return out_dot


def jvp(f, primals, tangents):
    """Forward-mode derivative: ``(f(*primals), J_f(primals) @ tangents)``.

    Args:
        f: function of tensors returning a tensor or a pytree of tensors (tuple, list, dict).
        primals: tuple of inputs.
        tangents: tuple of tangents, same shapes as ``primals``.

    Example:
        >>> import primflow as pf
        >>> out, t = pf.jvp(pf.sin, (pf.to_tensor(0.0),), (pf.to_tensor(1.0),))
        >>> float(out), float(t)
        (0.0, 1.0)
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"pf.jvp(f, primals, tangents): primals and tangents must be tuples "
                        f"(or lists) with one entry per argument of f, got "
                        f"{type(primals).__name__} and {type(tangents).__name__}; for one "
                        f"argument write pf.jvp(f, (x,), (t,))")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    primals = tuple(as_tensor(p) for p in primals)
    # a Python number as a tangent takes its primal's dtype (numbers are weak)
    tangents = tuple(as_tensor(t, p.dtype) if isinstance(t, (int, float)) else as_tensor(t)
                     for p, t in zip(primals, tangents))
    for i, (p, t) in enumerate(zip(primals, tangents)):
        if p._shape != t._shape:
            raise ValueError(f"jvp: tangent {i} has shape {t.shape} but primal {i} has shape "
                             f"{p.shape}")
        if p.dtype.is_floating and t.dtype is not p.dtype:
            raise TypeError(f"jvp: tangent {i} has dtype {t.dtype.name} but primal {i} is "
                            f"{p.dtype.name}{p.shape}; a tangent must have its primal's dtype "
                            f"(t.astype('{p.dtype.name}'))")
    with new_trace(JVPTrace) as trace:
        inputs = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        out = f(*inputs)
        outs, out_tree = tree_flatten(out)  # a tensor, or a pytree of them (tuple, dict...)
        values, dots = split_tangents(trace, [as_tensor(o) for o in outs], fill=True)
    return tree_unflatten(out_tree, values), tree_unflatten(out_tree, dots)


def split_tangents(trace, values, fill=False):
    """``(primals, tangents)`` of ``values`` under the forward trace ``trace``: a tracer of
    it gives its primal and tangent, any other value itself and no tangent (None), or
    zeros where there is none with ``fill``."""
    primals, tangents = [], []
    for v in values:
        p, t = trace._unpack(v)
        primals.append(p)
        tangents.append(zeros_like(as_tensor(p)) if fill and t is None else t)
    return primals, tangents

