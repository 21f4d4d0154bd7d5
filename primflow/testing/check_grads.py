"""Numerical derivative checkers in float64 (JAX ``check_grads`` style), reusable by any test.

Every checker takes ``fn(*xs) -> Tensor or list of Tensors`` and ``primals``, a list of
float64 NumPy arrays (the inputs to differentiate), and compares automatic derivatives with
independent oracles:

* ``check_jvp``: forward mode (``pf.jvp``) against one central finite difference.
* ``check_vjp``: the dot-product test ``<u, J v> == <J^T u, v>``, with ``J v`` from forward
  mode and ``J^T u`` from the tape (``pf.grad(..., grad_outputs=u)``), so every vjp rule is
  checked against its jvp rule.
* ``check_order``: the derivative of order k, as in JAX ``check_grads``. Let
  ``g_0(x) = <w, f(x)>`` with random weights ``w`` and ``g_k(x) = <grad g_{k-1}(x), v_k>``
  with random directions ``v_k``, every gradient computed by AD. At order k the AD value of
  ``g_k`` is compared with ONE central difference of the AD function ``g_{k-1}`` along
  ``v_k``. Differences are never nested, so order 4 stays accurate in float64. The same
  derivative is computed by several modes: ``"rev"`` (reverse over reverse, create_graph),
  ``"fwd_over_rev"`` (``pf.jvp`` of a function that calls ``pf.grad(create_graph=True)``)
  ``"fwd"`` (nested ``pf.jvp``) and ``"rev_over_fwd"`` (``pf.grad`` of a ``pf.jvp``
  result); each is compared with the difference quotient and with the reverse-mode value.
* ``check_jet``: Taylor mode (``pf.jet``) to any order against nested forward mode. Along
  a random polynomial path ``x(t) = x0 + sum_k c_k t^k / k!`` the derivative-form output
  coefficients ``y_1..y_K`` of a random weighting of the outputs are compared with the
  derivatives of ``t -> f(x(t))`` at 0 by ``pf.jvp`` nested k times in the scalar ``t``
  (forward mode is checked against differences up to order 4 by ``check_order``); AD
  against AD, so the tolerance is tight and only grows with the order.
* ``check_collapsed``: collapsed Taylor mode (``pf.autograd``'s default operator engine:
  coefficients below K per direction, the top one summed over directions) against the
  weighted sum of one ``pf.jet`` per direction; it relies on every Taylor rule being linear
  in its top input coefficient and on the rules running under vmap.

Example:
    >>> import numpy as np, primflow as pf
    >>> from primflow.testing.check_grads import check_grads
    >>> check_grads(lambda x: pf.sin(x) * x, [np.array([0.3, 1.2])], order=3)
"""

from __future__ import annotations

import math

import numpy as np

EPS_MACHINE = float(np.finfo(np.float64).eps)

#: (atol, rtol) used when a caller gives none. The difference-quotient checks also allow
#: the rounding error of the quotient itself, ``~1e3 ulp * |g| / eps``.
DEFAULT_TOL = {
    "forward": (1e-12, 1e-10),
    "jvp": (1e-13, 1e-6),
    "vjp": (1e-14, 1e-10),
    "order1": (1e-13, 1e-6),
    "order2": (1e-13, 1e-6),
    "order3": (1e-13, 1e-5),
    "order4": (1e-13, 1e-5),
    "modes": (1e-14, 1e-9),  # one AD mode against another (no differencing error)
    # jet vs nested jvp at order k: (atol, rtol * JET_GROWTH ** (k - 1)), relative to
    # sum_j <|w_j|, |y_kj|> (the scale of the weighted sum's rounding error)
    "jet": (1e-13, 1e-12),
}

#: per-order growth of the ``check_jet`` relative tolerance (order 6: 243x the base)
JET_GROWTH = 3.0


class GradCheckError(AssertionError):
    """An automatic derivative disagrees with its numerical oracle."""


def _pf():
    import primflow as pf  # primflow.testing sits above the package: import lazily

    return pf


# ---- plumbing -------------------------------------------------------------------------------

def as_list(out):
    """A function's output as a list of tensors."""
    return list(out) if isinstance(out, (list, tuple)) else [out]


def leaves(arrays, requires_grad=True):
    """Fresh float64 leaf tensors for ``arrays``."""
    pf = _pf()
    return [pf.to_tensor(np.asarray(a, dtype=np.float64), dtype="float64",
                         stop_gradient=not requires_grad) for a in arrays]


def evaluate(fn, arrays):
    """``fn`` at ``arrays`` as a list of NumPy arrays (no recording)."""
    pf = _pf()
    with pf.no_grad():
        return [np.asarray(o.numpy(), dtype=np.float64) for o in as_list(fn(*leaves(
            arrays, requires_grad=False)))]


def _random_like(rng, arrays, unit=False):
    vs = [rng.standard_normal(np.shape(a)) for a in arrays]
    if unit:
        norm = np.sqrt(sum(float(np.sum(v * v)) for v in vs))
        vs = [v / norm for v in vs] if norm > 0 else vs
    return vs


def _shift(arrays, dirs, step):
    return [np.asarray(a, dtype=np.float64) + step * d for a, d in zip(arrays, dirs)]


def _vdot(a, b):
    return float(np.sum(np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)))


def _norm(arrays):
    return float(np.sqrt(sum(float(np.sum(np.square(a))) for a in arrays)))


def _float_outputs(outs):
    return [o for o in outs if o.dtype.is_floating]


def _fail(what, actual, expected, bound, detail=""):
    raise GradCheckError(
        f"{what}: AD gives {actual!r} but the oracle gives {expected!r} "
        f"(|difference| {abs(actual - expected):.3e} > allowed {bound:.3e}){detail}")


def _check_scalar(what, actual, expected, atol, rtol, scale=0.0, detail=""):
    bound = atol + rtol * max(abs(actual), abs(expected), scale)
    if not np.isfinite(actual) or abs(actual - expected) > bound:
        _fail(what, actual, expected, bound, detail)


def central_difference(fn, arrays, dirs, eps):
    """``(fn(x + eps v) - fn(x - eps v)) / (2 eps)`` for each output of ``fn``."""
    plus = evaluate(fn, _shift(arrays, dirs, eps))
    minus = evaluate(fn, _shift(arrays, dirs, -eps))
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)], plus, minus


# ---- first order ----------------------------------------------------------------------------

def check_jvp(fn, primals, rng, eps=1e-6, atol=None, rtol=None):
    """Forward mode (``pf.jvp``) against a central difference along a random direction.

    Also checks that the primal output of ``pf.jvp`` equals ``fn`` evaluated directly.
    """
    pf = _pf()
    atol = DEFAULT_TOL["jvp"][0] if atol is None else atol
    rtol = DEFAULT_TOL["jvp"][1] if rtol is None else rtol
    dirs = _random_like(rng, primals)
    out, tangent = pf.jvp(fn, tuple(leaves(primals, False)), tuple(leaves(dirs, False)))
    outs, tangents = as_list(out), as_list(tangent)
    direct = evaluate(fn, primals)
    fds, plus, minus = central_difference(fn, primals, dirs, eps)
    for j, (o, t, d, fd) in enumerate(zip(outs, tangents, direct, fds)):
        o, t = o.numpy(), t.numpy()
        if o.shape != d.shape or not np.allclose(o, d, rtol=1e-12, atol=1e-13, equal_nan=True):
            raise GradCheckError(f"jvp: primal output {j} differs from a direct call")
        if t.shape != o.shape:
            raise GradCheckError(f"jvp: tangent {j} has shape {t.shape}, output has {o.shape}")
        scale = max(float(np.max(np.abs(fd), initial=0.0)), float(np.max(np.abs(t), initial=0)))
        rounding = 1e3 * EPS_MACHINE * float(np.max(np.abs(plus[j]) + np.abs(minus[j]),
                                                    initial=0.0)) / (2 * eps)
        err = float(np.max(np.abs(t - fd), initial=0.0))
        bound = atol + rtol * scale + rounding
        if not np.all(np.isfinite(t)) or err > bound:
            raise GradCheckError(
                f"jvp: tangent of output {j} differs from the central difference by {err:.3e} "
                f"(allowed {bound:.3e})\nAD:\n{t}\nFD:\n{fd}")


def check_vjp(fn, primals, rng, atol=None, rtol=None):
    """Dot-product test ``<u, J v> == <J^T u, v>``: vjp (tape) against jvp (forward mode)."""
    pf = _pf()
    atol = DEFAULT_TOL["vjp"][0] if atol is None else atol
    rtol = DEFAULT_TOL["vjp"][1] if rtol is None else rtol
    dirs = _random_like(rng, primals)
    _, tangent = pf.jvp(fn, tuple(leaves(primals, False)), tuple(leaves(dirs, False)))
    xs = leaves(primals)
    outs = as_list(fn(*xs))
    keep = [j for j, o in enumerate(outs) if o.dtype.is_floating]
    tangents = [t.numpy() for t in as_list(tangent)]
    us = [rng.standard_normal(outs[j]._shape) for j in keep]
    lhs = sum(_vdot(u, tangents[j]) for u, j in zip(us, keep))
    needs = [outs[j] for j in keep if not outs[j].stop_gradient]
    if not needs:  # constant output: J = 0
        bars = [None] * len(xs)
    else:
        needs_u = [pf.to_tensor(u, dtype="float64") for u, j in zip(us, keep)
                   if not outs[j].stop_gradient]
        bars = pf.grad(needs, xs, grad_outputs=needs_u, allow_unused=True)
    rhs, scale = 0.0, 0.0
    for b, v, x in zip(bars, dirs, xs):
        if b is None:
            continue
        b = b.numpy()
        if b.shape != tuple(x._shape):
            raise GradCheckError(f"vjp: cotangent of shape {b.shape} for an input of shape "
                                 f"{tuple(x._shape)}")
        rhs += _vdot(b, v)
        scale += _norm([b]) * _norm([v])
    scale += sum(_norm([u]) * _norm([tangents[j]]) for u, j in zip(us, keep))
    _check_scalar("dot-product test <u, J v> (jvp) vs <J^T u, v> (vjp)", rhs, lhs, atol, rtol,
                  scale)


# ---- higher orders --------------------------------------------------------------------------

class _Chain:
    """The scalar functions ``g_0 .. g_K`` of one check (fixed weights and directions)."""

    def __init__(self, fn, primals, rng, max_order):
        self.fn = fn
        self.primals = [np.asarray(p, dtype=np.float64) for p in primals]
        outs = evaluate(fn, self.primals)
        self.weights = [rng.standard_normal(o.shape) for o in outs]
        self.dirs = [_random_like(rng, self.primals, unit=True) for _ in range(max_order)]

    def g0(self, xs):
        pf = _pf()
        total = None
        for o, w in zip(as_list(self.fn(*xs)), self.weights):
            if not o.dtype.is_floating:
                continue
            term = pf.sum(pf.multiply(o, pf.to_tensor(w, dtype="float64")))
            total = term if total is None else pf.add(total, term)
        return total

    def reverse_level(self, xs, k):
        """``(g_k(xs), grad g_k(xs))``, each gradient by the tape with create_graph=True.

        A level that no longer depends on ``xs`` (stop_gradient) has zero derivatives.
        """
        pf = _pf()
        g = self.g0(xs)
        grads = None
        for level in range(k + 1):
            if g is None or g.stop_gradient:
                grads = [None] * len(xs)
            else:
                grads = pf.grad(g, xs, create_graph=True, allow_unused=True)
            if level == k:
                break
            g = _directional(grads, self.dirs[level])
        return g, grads

    def value(self, arrays, k):
        """``g_k`` at ``arrays`` as a float (reverse mode)."""
        xs = leaves(arrays)
        g = self.g0(xs)
        for level in range(k):
            if g is None or g.stop_gradient:
                return 0.0 if g is None else float(g.item())
            grads = _pf().grad(g, xs, create_graph=True, allow_unused=True)
            g = _directional(grads, self.dirs[level])
        return 0.0 if g is None else float(g.item())

    def forward_level(self, xs, k, first_fwd):
        """``g_k`` with the last ``k - first_fwd`` levels done by nested ``pf.jvp``."""
        pf = _pf()
        if k == first_fwd:
            if k > 0:
                for x in xs:
                    x.stop_gradient = False  # the tape records on the tracers (fwd over rev)
            g = self.g0(xs)
            for level in range(k):
                if g is None or g.stop_gradient:
                    return _zero_like_scalar(xs)
                grads = pf.grad(g, xs, create_graph=True, allow_unused=True)
                g = _directional(grads, self.dirs[level])
            return _zero_like_scalar(xs) if g is None else g
        tangents = tuple(pf.to_tensor(d, dtype="float64") for d in self.dirs[k - 1])
        _, t = pf.jvp(lambda *ys: self.forward_level(list(ys), k - 1, first_fwd), tuple(xs),
                      tangents)
        return t


def _zero_like_scalar(xs):
    pf = _pf()
    return pf.sum(pf.multiply(xs[0], pf.zeros_like(xs[0])))


def _directional(grads, dirs):
    pf = _pf()
    total = None
    for gr, d in zip(grads, dirs):
        if gr is None:
            continue
        term = pf.sum(pf.multiply(gr, pf.to_tensor(d, dtype="float64")))
        total = term if total is None else pf.add(total, term)
    return total


def check_order(fn, primals, order, rng, modes=("rev",), eps=1e-5, atol=None, rtol=None):
    """Checks the order-``order`` derivative of ``fn`` in each of ``modes``.

    ``modes``: ``"rev"`` (reverse over reverse), ``"fwd_over_rev"`` (the last level by
    ``pf.jvp``, the others by the tape), ``"fwd"`` (every level by nested ``pf.jvp``),
    ``"rev_over_fwd"`` (nested ``pf.jvp`` below, the last level by the tape).
    Each is compared with one central difference of the reverse-mode ``g_{order-1}``; the
    forward modes are also compared with the reverse-mode value.
    """
    key = f"order{min(order, 4)}"
    atol = DEFAULT_TOL[key][0] if atol is None else atol
    rtol = DEFAULT_TOL[key][1] if rtol is None else rtol
    chain = _Chain(fn, primals, rng, order)
    v = chain.dirs[order - 1]
    # reverse over reverse: directional derivative of g_{order-1} by one more tape pass
    xs = leaves(chain.primals)
    g_prev, grads = chain.reverse_level(xs, order - 1)
    grad_arrays = [np.zeros(x._shape) if gr is None else gr.numpy()
                   for gr, x in zip(grads, xs)]
    rev = sum(_vdot(gr, d) for gr, d in zip(grad_arrays, v))
    # the oracle: one central difference of the AD function g_{order-1}
    plus = chain.value(_shift(chain.primals, v, eps), order - 1)
    minus = chain.value(_shift(chain.primals, v, -eps), order - 1)
    fd = (plus - minus) / (2 * eps)
    scale = _norm(grad_arrays)  # |<grad, v>| <= |grad| for the unit direction v
    rounding = 1e3 * EPS_MACHINE * (abs(plus) + abs(minus)) / (2 * eps)
    detail = (f"\n  g_{order - 1}(x) = {0.0 if g_prev is None else float(g_prev.item())!r}, "
              f"|grad g_{order - 1}| = {scale:.3e}")
    results = {}
    for mode in modes:
        if mode == "rev":
            value = rev
        elif mode == "fwd_over_rev":
            value = float(chain.forward_level(leaves(chain.primals, False), order,
                                              order - 1).item())
        elif mode == "fwd":
            value = float(chain.forward_level(leaves(chain.primals, False), order, 0).item())
        elif mode == "rev_over_fwd":
            xs = leaves(chain.primals)
            g = chain.forward_level(xs, order - 1, 0)
            if g.stop_gradient:
                value = 0.0
            else:
                grads = _pf().grad(g, xs, allow_unused=True)
                value = sum(_vdot(gr.numpy(), d) for gr, d in zip(grads, v) if gr is not None)
        else:
            raise ValueError(f"unknown mode {mode!r}")
        results[mode] = value
        _check_scalar(f"order {order} ({mode}) vs central difference", value, fd, atol + rounding,
                      rtol, scale, detail)
        if mode != "rev":
            m_atol, m_rtol = DEFAULT_TOL["modes"]
            _check_scalar(f"order {order}: {mode} vs rev", value, rev, m_atol, m_rtol, scale,
                          detail)
    return results


# ---- Taylor mode --------------------------------------------------------------------------

def nested_jvp(h, t, k):
    """The k-th derivative of ``h`` (a function of one 0-d tensor) at ``t`` by ``pf.jvp``
    nested k times (a tensor or a list of tensors, like ``h``'s output)."""
    pf = _pf()
    if k == 0:
        return h(t)
    one = pf.ones_like(t)
    return pf.jvp(lambda s: nested_jvp(h, s, k - 1), (t,), (one,))[1]


def check_jet(fn, primals, order, rng, vary=None, path="curved", atol=None, rtol=None,
              growth=JET_GROWTH):
    """``pf.jet`` of ``fn`` against nested ``pf.jvp`` at orders 1..``order``.

    Args:
        fn: function of float64 tensors returning a tensor or a list of tensors.
        primals: list of float64 NumPy arrays.
        order: the Taylor order K.
        rng: a ``numpy.random.Generator`` (weights of the outputs and the path).
        vary: positions of ``primals`` that move along the path (default: all); the
            others are passed to ``jet`` without a series (constants).
        path: ``"curved"``: every input coefficient c_1..c_K random, through ``pf.jet``
            (derivative form, Faa di Bruno terms exercised); ``"line"``: ``x0 + t v``
            through ``taylor_series`` with the coefficients 2..K given as ``None`` (the
            exact-zero skipping of the rules).
        atol, rtol, growth: the bound at order k is
            ``atol + rtol * growth ** (k - 1) * sum_j <|w_j|, |y_kj|>``.

    Returns:
        ``[(jet value, nested jvp value)]`` per order.
    """
    pf = _pf()
    from primflow.autodiff.taylor import taylor_series  # noqa: PLC0415 - test support

    atol = DEFAULT_TOL["jet"][0] if atol is None else atol
    rtol = DEFAULT_TOL["jet"][1] if rtol is None else rtol
    if path not in ("curved", "line"):
        raise ValueError(f"unknown path {path!r}")
    primals = [np.asarray(p, dtype=np.float64) for p in primals]
    vary = tuple(range(len(primals))) if vary is None else tuple(vary)
    outs = evaluate(fn, primals)
    weights = [rng.standard_normal(o.shape) for o in outs]
    n_coeffs = order if path == "curved" else 1
    coeffs = {i: [rng.standard_normal(primals[i].shape) for _ in range(n_coeffs)]
              for i in vary}
    x0 = leaves(primals, False)
    fixed_args = {i: x for i, x in enumerate(x0) if i not in vary}

    def call(moving):
        it = iter(moving)
        return fn(*[fixed_args[i] if i in fixed_args else next(it)
                    for i in range(len(x0))])

    moving0 = tuple(x0[i] for i in vary)
    with pf.no_grad():
        multi = isinstance(fn(*x0), (list, tuple))
    if path == "curved":
        series = tuple([pf.to_tensor(c, dtype="float64") for c in coeffs[i]] for i in vary)
        y0, ys = pf.jet(lambda *m: call(m), moving0, series)
        for j, (a, b) in enumerate(zip(as_list(y0), outs)):
            a = a.numpy()
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-12, atol=1e-13,
                                                     equal_nan=True):
                raise GradCheckError(f"jet: primal output {j} differs from a direct call")
        # the output's structure with a list [y1..yK] in place of each tensor
        ys = list(ys) if multi else [ys]
    else:
        series = tuple([pf.to_tensor(coeffs[i][0], dtype="float64")] + [None] * (order - 1)
                       for i in vary)
        raw = taylor_series(lambda *m: call(m), moving0, series, order)
        raw = list(raw) if multi else [raw]
        ys = [[None if s[k] is None else pf.multiply(s[k], float(math.factorial(k)))
               for k in range(1, order + 1)] for s in raw]
    t0 = pf.to_tensor(0.0, dtype="float64")

    def moved(t):
        moving = []
        for i in vary:
            x = x0[i]
            for k, c in enumerate(coeffs[i], start=1):
                step = t if k == 1 else pf.pow(t, k)
                x = pf.add(x, pf.multiply(pf.to_tensor(c / math.factorial(k),
                                                       dtype="float64"), step))
            moving.append(x)
        return call(moving)

    results = []
    for k in range(1, order + 1):
        expected = [np.asarray(o.numpy(), dtype=np.float64)
                    for o in as_list(nested_jvp(moved, t0, k))]
        got, ref, scale = 0.0, 0.0, 0.0
        for j, (w, o) in enumerate(zip(weights, outs)):
            if o.dtype.kind != "f":
                continue
            y = ys[j][k - 1]
            y = np.zeros(o.shape) if y is None else np.asarray(y.numpy(), dtype=np.float64)
            if y.shape != o.shape:
                raise GradCheckError(f"jet: coefficient {k} of output {j} has shape "
                                     f"{y.shape}, the output has {o.shape}")
            got += _vdot(w, y)
            ref += _vdot(w, expected[j])
            scale += float(np.sum(np.abs(w) * (np.abs(y) + np.abs(expected[j]))))
        _check_scalar(f"jet ({path} path) order {k} vs nested jvp", got, ref, atol,
                      rtol * growth ** (k - 1), scale)
        results.append((got, ref))
    return results


def check_collapsed(fn, primals, order, rng, directions=3, atol=None, rtol=None):
    """``sum_r w_r y_K(v_r)`` by collapsed Taylor mode against ``pf.jet`` per direction.

    Every input moves along its own R random directions (``x + t v_r``), with random
    weights ``w_r``; each output's collapsed top coefficient (times K!) must equal the
    weighted sum of the K-th jet coefficients. Bound: ``atol + rtol * sum_r |w_r| |y_K|``.
    """
    pf = _pf()
    from primflow.core.trace import new_trace  # noqa: PLC0415 - test support
    from primflow.transforms.differential import (  # noqa: PLC0415
        CollapsedTaylorTrace, CollapsedTracer)

    atol = DEFAULT_TOL["jet"][0] if atol is None else atol
    rtol = DEFAULT_TOL["jet"][1] * JET_GROWTH ** (order - 1) if rtol is None else rtol
    primals = [np.asarray(p, dtype=np.float64) for p in primals]
    dirs = [rng.standard_normal((directions,) + p.shape) for p in primals]
    weights = rng.standard_normal(directions)
    x0 = leaves(primals, False)
    with new_trace(CollapsedTaylorTrace, order, pf.to_tensor(weights, dtype="float64")) as tr:
        xs = []
        for x, v in zip(x0, dirs):
            if order == 1:
                top = pf.to_tensor(np.tensordot(weights, v, axes=1), dtype="float64")
                xs.append(CollapsedTracer(tr, x, [], top))
            else:
                xs.append(CollapsedTracer(tr, x, [pf.to_tensor(v, dtype="float64")]
                                          + [None] * (order - 2), None))
        got = []
        for o in as_list(fn(*xs)):
            mine = isinstance(o, CollapsedTracer) and o._trace is tr and o.top is not None
            got.append(o.top.numpy() * math.factorial(order) if mine else
                       np.zeros(o.shape))
    ref = [np.zeros(g.shape) for g in got]
    scale = [np.zeros(g.shape) for g in got]
    for r in range(directions):
        series = tuple([pf.to_tensor(v[r], dtype="float64")]
                       + [pf.zeros_like(x)] * (order - 1) for v, x in zip(dirs, x0))
        out, ys = pf.jet(fn, tuple(x0), series)
        ys = list(ys) if isinstance(out, (list, tuple)) else [ys]
        for j, y in enumerate(ys):
            y = np.asarray(y[order - 1].numpy(), dtype=np.float64)
            ref[j] = ref[j] + weights[r] * y
            scale[j] = scale[j] + abs(weights[r]) * np.abs(y)
    for j, (g, e, sc) in enumerate(zip(got, ref, scale)):
        if g.shape != e.shape:
            raise GradCheckError(f"collapsed: output {j} top coefficient has shape {g.shape}, "
                                 f"the jets give {e.shape}")
        err = np.abs(g - e)
        bound = atol + rtol * sc
        if not np.all(np.isfinite(g)) or np.any(err > bound):
            raise GradCheckError(
                f"collapsed order {order}: output {j} differs from the weighted jets by "
                f"{float(np.max(err, initial=0.0)):.3e} (allowed "
                f"{float(np.min(bound, initial=0.0)):.3e} and up)\ncollapsed:\n{g}\njets:\n{e}")


ALL_MODES = ("rev", "fwd_over_rev", "fwd", "rev_over_fwd")


def check_grads(fn, primals, order=2, modes=ALL_MODES, rng=None, eps=1e-5):
    """Runs ``check_jvp``, ``check_vjp`` and ``check_order`` for orders 1..``order``.

    Args:
        fn: function of float64 tensors returning a tensor or a list of tensors.
        primals: list of float64 NumPy arrays to differentiate at.
        order: highest derivative order to check.
        modes: which AD compositions to check at orders >= 2 (order 1 checks "rev").
        rng: a ``numpy.random.Generator`` (default: seeded with 0).
        eps: finite-difference step for the order checks.

    Raises:
        GradCheckError: with the two values and the allowed difference.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    check_jvp(fn, primals, rng)
    check_vjp(fn, primals, rng)
    for k in range(1, order + 1):
        check_order(fn, primals, k, rng, modes=("rev",) if k == 1 else modes, eps=eps)
