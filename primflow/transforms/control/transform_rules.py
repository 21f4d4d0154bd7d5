"""Forward-mode, batching and Taylor rules of the control-flow primitives
(``RegionPrimitive.jvp``, ``batch``, ``taylor``): what ``pf.jvp``, ``pf.vmap`` and
``pf.jet`` do to a ``cond``, ``while`` or ``scan`` being staged by ``pf.jit``. A loop
stays one operation, carrying tangents, lanes or Taylor coefficients beside its values
(it is not unrolled); a ``cond`` becomes a ``cond`` of the transformed branches, or with a
per-lane index under ``pf.vmap`` runs every branch and selects per lane."""

from __future__ import annotations

from ...autodiff.forward import jvp
from ...autodiff.taylor import taylor_series
from ...core.pytree import replace_at
from ...ir import evaluate_bound
from ...ops.creation import zeros_like
from ...ops.math import where
from ...ops.reduction import any as any_
from ...prims import move_axis, with_batch_front
from ..vmap import vmap
from .api import branch, scan, select, while_loop
from .reverse import float_positions


def _jvp_region(region, values, tangents):
    """``(outputs, output tangents)`` of ``region`` at ``values``, pushing ``tangents``
    (None: zero) by forward mode."""
    positions = [i for i, t in enumerate(tangents) if t is not None]
    if not positions:
        outs = evaluate_bound(region, list(values))
        return outs, [zeros_like(o) if o.dtype.is_floating else None for o in outs]

    def f(*diff):
        return evaluate_bound(region, replace_at(values, positions, diff))

    outs, dots = jvp(f, tuple(values[i] for i in positions), tuple(tangents[i] for i in positions))
    return list(outs), [d if o.dtype.is_floating else None for o, d in zip(outs, dots)]


def _placed(positions, values, n):
    """A list of ``n`` Nones with ``values`` at ``positions``."""
    return replace_at([None] * n, positions, values)


def _augmented_loop(kind, params, primals, extras, fill, through):
    """A staged loop carrying, beside each float carry (and each scanned input that has
    one), an extra: its tangent (jvp) or its Taylor coefficients (jet). ``fill(value,
    extra)`` makes the extra where there is none (zeros); ``through(region, values,
    extras) -> (outs, out_extras)`` runs the body on both. The loop stays one operation
    instead of being unrolled. Returns the outputs and their extras (None: none)."""
    k = params["n_carry"]
    fc = float_positions(primals[:k])
    carry_e = [fill(primals[i], extras[i]) for i in fc]
    if kind == "while":
        consts_p, consts_e = primals[k:], extras[k:]

        def cond_fn(state):
            return evaluate_bound(params["cond"], list(state[0]) + consts_p)[0]

        def body_fn(state):
            cp, ce = state
            outs, out_e = through(params["body"], list(cp) + consts_p,
                                  _placed(fc, ce, k) + consts_e)
            return outs, [fill(outs[i], out_e[i]) for i in fc]

        cp, ce = while_loop(cond_fn, body_fn, (primals[:k], carry_e))
        return list(cp), _placed(fc, ce, k)
    m = params["n_xs"]
    xs_p, xs_e = primals[k:k + m], extras[k:k + m]
    consts_p, consts_e = primals[k + m:], extras[k + m:]
    tx = [i for i, e in enumerate(xs_e) if e is not None]

    def step(carry, x):
        (cp, ce), (xp, xe) = carry, x
        outs, out_e = through(params["body"], list(cp) + list(xp) + consts_p,
                              _placed(fc, ce, k) + _placed(tx, xe, m) + consts_e)
        fy = float_positions(outs[k:])
        return ((outs[:k], [fill(outs[i], out_e[i]) for i in fc]),
                (outs[k:], [fill(outs[k + j], out_e[k + j]) for j in fy]))

    (cp, ce), (ys, ye) = scan(step, (primals[:k], carry_e),
                              (xs_p, [fill(xs_p[i], xs_e[i]) for i in tx]),
                              length=params["length"], reverse=params["reverse"])
    return list(cp) + list(ys), _placed(fc, ce, k) + _placed(float_positions(ys), ye, len(ys))


def _through_taylor(order):
    """Runs a region in Taylor mode: ``(outs, out coefficients)`` for input coefficients."""
    def through(region, values, in_series):
        outs = taylor_series(lambda *v: evaluate_bound(region, list(v)), list(values),
                             [None if c is None else list(c) for c in in_series], order)
        return [o[0] for o in outs], [o[1:] for o in outs]

    return through


def _filled(order):
    """Coefficients ``coeffs`` of ``value`` with zeros where there are none."""
    def filled(value, coeffs):
        return [c if c is not None else zeros_like(value) for c in (coeffs or [None] * order)]

    return filled


def _order(series):
    return next(len(s) - 1 for s in series if s is not None)


def _tangent_or_zeros(value, tangent):
    return zeros_like(value) if tangent is None else tangent


def loop_jvp(kind):
    """The jvp rule of a loop (``kind``: ``"scan"`` or ``"while"``): a loop carrying
    primals and tangents, whose body is the jvp of the body (every float carry gets a
    tangent, zero where it had none)."""
    def rule(primals, tangents, **params):
        return _augmented_loop(kind, params, primals, tangents, _tangent_or_zeros, _jvp_region)

    return rule


def loop_taylor(kind):
    """The Taylor rule of a loop: a loop carrying each float carry's Taylor coefficients
    (zeros where it has none), whose body propagates them through the body in Taylor
    mode."""
    def rule(primals, series, out=None, **params):
        order = _order(series)
        coeffs = [None if s is None else list(s[1:]) for s in series]
        outs, out_c = _augmented_loop(kind, params, primals, coeffs, _filled(order),
                                      _through_taylor(order))
        return outs, [None if c is None else [o] + list(c) for o, c in zip(outs, out_c)]

    return rule


def _batch_size(vals, bdims):
    return next(v._shape[b] for v, b in zip(vals, bdims) if b is not None)


def loop_batch(kind):
    """The batching rule of a loop: a loop over the whole batch (batch axis 0 of every
    carry; scanned inputs batched along axis 1), whose body is the vmapped body; a batched
    ``while`` runs until every lane's condition is false, freezing the finished lanes."""
    def rule(vals, axes, **params):
        size = _batch_size(vals, axes)
        k = params["n_carry"]
        carry = [with_batch_front(v, b, size) for v, b in zip(vals[:k], axes[:k])]
        if kind == "while":
            consts, in_axes = vals[k:], [0] * k + list(axes[k:])
            lane_cond = _vmapped(params["cond"], in_axes)
            lane_body = _vmapped(params["body"], in_axes)

            def cond_fn(c):
                return any_(lane_cond(*c, *consts)[0])

            def body_fn(c):
                active = lane_cond(*c, *consts)[0]
                new = lane_body(*c, *consts)
                return [vmap(lambda a, n, o: where(a, n, o))(active, n, o) for n, o in zip(new, c)]

            out = while_loop(cond_fn, body_fn, carry)
            return list(out), [0] * len(out)
        m = params["n_xs"]
        xs, x_axes = vals[k:k + m], axes[k:k + m]
        consts, c_axes = vals[k + m:], axes[k + m:]
        # a batched scanned input: scan axis first, batch axis second
        xs = [x if b is None else move_axis(x, b, 1) for x, b in zip(xs, x_axes)]
        slice_axes = [None if b is None else 0 for b in x_axes]
        lane_body = _vmapped(params["body"], [0] * k + slice_axes + list(c_axes))

        def step(c, x):
            outs = lane_body(*c, *x, *consts)
            return list(outs[:k]), list(outs[k:])

        c_out, ys = scan(step, carry, xs, length=params["length"], reverse=params["reverse"])
        return list(c_out) + list(ys), [0] * len(c_out) + [1] * len(ys)

    return rule


def _vmapped(region, in_axes):
    """``region``, a function of its inputs, vmapped over their axes ``in_axes``."""
    def run(*args):
        return evaluate_bound(region, list(args))

    return vmap(run, in_axes=tuple(in_axes))


# ---- cond ------------------------------------------------------------------------------------

def _float_outputs(region):
    """Positions of ``region``'s floating outputs (the ones with derivatives)."""
    return [i for i, v in enumerate(region.outputs) if v.aval.dtype.is_floating]


def _branch_names(branches, what):
    return [f"branch {i}'s {what}" for i in range(len(branches))]


def cond_jvp(primals, tangents, *, branches, message=None):
    """The jvp rule of ``cond``: a ``cond`` of the branches' jvps (every float result gets
    a tangent)."""
    index, ops, tans = primals[0], primals[1:], tangents[1:]
    n = len(ops)
    positions = [i for i, t in enumerate(tans) if t is not None]
    floats = _float_outputs(branches[0])

    def branch_jvp(region):
        def run(*args):
            outs, dots = _jvp_region(region, list(args[:n]), _placed(positions, args[n:], n))
            return list(outs), [_tangent_or_zeros(outs[i], dots[i]) for i in floats]
        return run

    outs, dots = branch(index, [branch_jvp(b) for b in branches],
                        (*ops, *[tans[i] for i in positions]), "pf.switch",
                        _branch_names(branches, "jvp"), message)
    return list(outs), _placed(floats, dots, len(outs))


def cond_taylor(primals, series, out=None, *, branches, message=None):
    """The Taylor rule of ``cond``: a ``cond`` of the branches in Taylor mode."""
    order = _order(series)
    index, ops = primals[0], primals[1:]
    n = len(ops)
    positions = [i for i, s in enumerate(series[1:]) if s is not None]
    floats = _float_outputs(branches[0])
    fill, through = _filled(order), _through_taylor(order)

    def branch_taylor(region):
        def run(*args):
            coeffs = [list(args[n + order * j:n + order * (j + 1)]) for j in range(len(positions))]
            outs, out_c = through(region, list(args[:n]), _placed(positions, coeffs, n))
            return list(outs), [c for i in floats for c in fill(outs[i], out_c[i])]
        return run

    flat_in = [c for i in positions for c in fill(ops[i], series[1 + i][1:])]
    outs, flat_out = branch(index, [branch_taylor(b) for b in branches], (*ops, *flat_in),
                            "pf.switch", _branch_names(branches, "Taylor series"), message)
    out_series = [None] * len(outs)
    for j, i in enumerate(floats):
        out_series[i] = [outs[i]] + list(flat_out[order * j:order * (j + 1)])
    return list(outs), out_series


def cond_batch(vals, axes, *, branches, message=None):
    """The batching rule of ``cond``: with one index for the whole batch, a ``cond`` of the
    vmapped branches; with an index per lane, every branch runs and each lane takes its
    own (the index checked per lane)."""
    if axes[0] is None:
        outs = branch(vals[0], [_vmapped(b, axes[1:]) for b in branches], tuple(vals[1:]),
                      "pf.switch", _branch_names(branches, "result"), message)
        return list(outs), [0] * len(outs)

    def per_lane(index, *ops):
        return select(index, [evaluate_bound(b, list(ops)) for b in branches], message)

    outs = vmap(per_lane, in_axes=tuple(axes))(*vals)
    return list(outs), [0] * len(outs)

