"""Differential operators of functions f: R^d -> R evaluated at a batch of points, for PDEs.

Every linear operator of homogeneous order K is a weighted sum of K-th directional
derivatives, ``sum_r w_r D_{v_r}^K f`` (Griewank, Utke, Walther: exact interpolation), and
one Taylor pass of order K along ``v`` gives ``D_v^K f``. Methods:

* ``"collapsed"`` (default): coefficients 1..K-1 are propagated per direction but the top
  coefficient once, already summed over directions with the weights (Dangel et al. 2025;
  the forward Laplacian is the K = 2 case). Every Taylor rule is linear in its top input
  coefficient, which is what makes the sum commute with the propagation.
* ``"taylor"``: one full Taylor series per direction (vmapped over directions), then summed.
* ``"nested"``: nested reverse mode on the tape (``pf.grad(..., create_graph=True)``).
* ``"stochastic"``: unbiased randomised estimates (STDE, Shi et al. 2024):
  ``E[D_v^2 f] = laplacian``, ``E[D_v^4 f] = 3 biharmonic`` for ``v ~ N(0, I)``.

``f`` maps points ``X`` of shape ``[N, d]`` to ``[N]`` or ``[N, 1]``; results have f's
output shape. All methods are differentiable with respect to whatever ``f`` closes over
(network parameters), so PINN losses built from them train.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from .. import prims
from ..autodiff.tape import grad as tape_grad
from ..autodiff.taylor import TaylorTrace, taylor_series
from ..backends import fast_paths
from ..core.primitive import Aval
from ..core.random import next_key
from ..core.trace import Tracer, new_trace
from ..ops import creation, manipulation
from ..ops.helpers import as_tensor
from ..ops.math import add, multiply
from .vmap import vmap

METHODS = ("collapsed", "taylor", "nested", "stochastic")


# ---- collapsed Taylor mode -----------------------------------------------------------------

class CollapsedTracer(Tracer):
    """A value with per-direction coefficients 1..K-1 (each ``[R, *shape]`` or None) and
    one top coefficient already summed over the R directions (``[*shape]`` or None)."""

    __slots__ = ("primal", "lower", "top")

    def __init__(self, trace, primal, lower, top):
        self._init_tracer(trace, Aval(primal._shape, primal.dtype))
        self.primal = primal
        self.lower = lower
        self.top = top


class CollapsedTaylorTrace(TaylorTrace):
    def __init__(self, level, order, weights):
        super().__init__(level, order)
        self.weights = weights  # [R] tensor

    def process_primitive(self, prim, args, params):
        mine = [isinstance(a, CollapsedTracer) and a._trace is self for a in args]
        primals = [a.primal if m else a for a, m in zip(args, mine)]
        lowers = [a.lower if m else None for a, m in zip(args, mine)]
        tops = [a.top if m else None for a, m in zip(args, mine)]
        if prim.multiple_results:  # a loop runs step by step (no collapsed loop rule)
            return prim.unroll(list(args), **params)
        out = prim.bind(*primals, **params)
        untouched = all(lo is None for lo in lowers) and all(t is None for t in tops)
        if untouched or not out.dtype.is_floating:
            return out
        out_lower, summed = self._lower_part(prim, primals, lowers, out, params)
        top = self._top_part(prim, primals, tops, out, params)
        if summed is not None:
            top = summed if top is None else prims.add(top, summed)
        if all(c is None for c in out_lower) and top is None:
            return out
        return CollapsedTracer(self, out, out_lower, top)

    def _lower_part(self, prim, primals, lowers, out, params):
        """Coefficients 1..K-1 per direction, and the weighted sum over directions of each
        one's top coefficient with a zero top input (the terms products of lower
        coefficients contribute)."""
        K = self.order
        if len(primals) == 1 and lowers[0] is not None:
            # a unary primitive with a fused Taylor kernel takes the R directions at once,
            # and sums the top coefficient over them as it goes
            fast = fast_paths.taylor_series(prim.name, primals[0], out,
                                            [primals[0], *lowers[0], None], params, self.weights)
            if fast is not None:
                return fast[1:K], fast[K]
        present = [[i for i, c in enumerate(lo) if c is not None] if lo is not None else []
                   for lo in lowers]
        flat = [lowers[i][k] for i in range(len(lowers)) for k in present[i]]
        if not flat:
            return [None] * (K - 1), None
        pattern = []

        def per_direction(*coeffs):
            it = iter(coeffs)
            series = []
            for i, p in enumerate(primals):
                s = None if lowers[i] is None else [p] + [None] * K  # (None: nothing present)
                for k in present[i]:
                    s[k + 1] = next(it)
                series.append(s)
            _, out_series = prim.taylor(primals, series, out, **params)
            out_series = out_series or [None] * (K + 1)
            pattern[:] = [k for k in range(1, K + 1) if out_series[k] is not None]
            return [out_series[k] for k in pattern]

        results = vmap(per_direction)(*flat)
        out_lower = [None] * (K - 1)
        top = None
        for k, r in zip(pattern, results):
            if k == K:  # the weighted sum over directions, done once
                weights = self.weights
                if weights.dtype != r.dtype:  # (a float16 layer under pf.amp.auto_cast)
                    weights = prims.convert_element_type(weights, dtype=r.dtype)
                top = prims.dot_general(weights, r, contracting=((0,), (0,)), batch=((), ()))
            else:
                out_lower[k - 1] = r
        return out_lower, top

    def _top_part(self, prim, primals, tops, out, params):
        """The rule's linear action on the collapsed top input coefficients."""
        K = self.order
        if all(t is None for t in tops):
            return None
        series = [None if t is None else [p] + [None] * (K - 1) + [t]
                  for p, t in zip(primals, tops)]
        _, out_series = prim.taylor(primals, series, out, **params)
        return None if out_series is None else out_series[K]


def _weighted_top(f, X, directions, weights, order, method):
    """``sum_r w_r D_{v_r}^K f(X)``: ``directions`` is ``[R, d]`` (the same for every
    point) or ``[R, N, d]``; ``weights`` is ``[R]``."""
    X = as_tensor(X)
    directions = as_tensor(directions, dtype=X.dtype)
    weights = as_tensor(weights, dtype=X.dtype)
    if directions.ndim == 2:
        directions = manipulation.expand(manipulation.unsqueeze(directions, 1),
                                         [directions.shape[0]] + X.shape)
    if directions.shape[1:] != X.shape:
        raise ValueError(f"directions of shape {directions.shape} do not match points of shape "
                         f"{X.shape}; pass [R, d] or [R, N, d]")
    factorial = float(math.factorial(order))
    if method == "taylor":
        def per_direction(v):
            s = taylor_series(f, (X,), ([v] + [None] * (order - 1),), order)
            return s[order] if s[order] is not None else creation.zeros_like(s[0])

        values = vmap(per_direction)(directions)
        total = prims.dot_general(weights, values, contracting=((0,), (0,)), batch=((), ()))
        return multiply(total, factorial)
    # collapsed
    with new_trace(CollapsedTaylorTrace, order, weights) as trace:
        if order == 1:
            top = prims.dot_general(weights, directions, contracting=((0,), (0,)), batch=((), ()))
            x = CollapsedTracer(trace, X, [], top)
        else:
            x = CollapsedTracer(trace, X, [directions] + [None] * (order - 2), None)
        out = f(x)
    if isinstance(out, CollapsedTracer) and out._trace is trace:
        top = out.top if out.top is not None else creation.zeros_like(out.primal)
    else:
        top = creation.zeros_like(as_tensor(out))
    return multiply(top, factorial)


def _check(f, X, method, allowed=METHODS):
    if method not in allowed:
        raise ValueError(f"method must be one of {', '.join(allowed)}, got {method!r}")
    X = as_tensor(X)
    if X.ndim != 2:
        raise ValueError(f"points must have shape [N, d], got {X.shape}")
    if not X.dtype.is_floating:
        raise TypeError(f"points must be floating point, got {X.dtype.name}")
    return X


DIRECTIONS = ("gaussian", "rademacher")


def _gaussian_directions(samples, X, seed, kind="gaussian"):
    """Random directions [samples, N, d]: standard normal (``"gaussian"``) or independent
    random signs (``"rademacher"``). ``seed`` picks the draw without touching the global
    generator (None: the next key of the global generator)."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be a positive int, got {samples!r}")
    if kind not in DIRECTIONS:
        raise ValueError(f"directions must be one of {', '.join(DIRECTIONS)}, got {kind!r}")
    key = next_key() if seed is None else int(seed)
    shape = (samples, *X._shape)
    if kind == "gaussian":
        return prims.random_normal(shape=shape, dtype=X.dtype, key=key)
    # Rademacher: E[v v^T] = I as for Gaussians, but v_i^2 = 1 removes the Hessian's
    # diagonal from the variance (2 sum_{i != j} H_ij^2 instead of 2 ||H||_F^2)
    U = prims.random_uniform(shape=shape, dtype=X.dtype, key=key)
    return prims.sign(prims.sub(U, creation.full_like(U, 0.5)))


# ---- nested reverse mode -------------------------------------------------------------------

def _watched(X):
    if X.stop_gradient:
        h = X.detach()
        h.stop_gradient = False
        return h
    return prims.reshape(X, shape=tuple(X._shape))


def _nested_partial(f, X, index):
    """d^|index| f / dx_{i1} ... dx_{ik} by nested reverse mode (index is a tuple of dims).
    ``f`` gives one value per point ([N]) or several ([N, ...]: each component separately,
    since reverse mode differentiates one scalar, the sum over points, at a time)."""
    Xw = _watched(X)
    u = f(Xw)
    if u.ndim <= 1:
        return _nested_chain(u, Xw, index)
    flat = manipulation.reshape(u, [u.shape[0], -1])
    parts = [_nested_chain(flat[:, j], Xw, index) for j in range(flat.shape[1])]
    return manipulation.reshape(manipulation.stack(parts, axis=1), u.shape)


def _nested_chain(u, Xw, index):
    for i in index:
        if u.stop_gradient:
            return creation.zeros_like(u)
        (g,) = tape_grad(u.sum(), Xw, create_graph=True, allow_unused=True)
        if g is None:
            return creation.zeros_like(u)
        u = manipulation.reshape(g[:, i], u.shape)
    return u


def _nested_laplacian(f, X):
    total = None
    for i in range(X.shape[1]):
        term = _nested_partial(f, X, (i, i))
        total = term if total is None else add(total, term)
    return total


# ---- public operators ----------------------------------------------------------------------

def random_directions(samples, X, kind="gaussian", seed=None):
    """``[samples, N, d]`` random directions for the stochastic estimators at the points
    ``X`` [N, d]: standard normal (``"gaussian"``) or random signs (``"rademacher"``), both
    with ``E[v v^T] = I``. ``seed`` draws them reproducibly without touching the global
    generator. Pass them as ``laplacian(..., method="stochastic", directions=V)`` to fix
    the estimator's directions (e.g. for a deterministic objective).

    Example:
        >>> import primflow as pf
        >>> from primflow.transforms.differential import random_directions
        >>> X = pf.zeros([3, 5], dtype="float64")
        >>> V = random_directions(4, X, "rademacher", seed=0)
        >>> V.shape, sorted(set(V.numpy().ravel().tolist()))
        ([4, 3, 5], [-1.0, 1.0])
    """
    X = as_tensor(X)
    if X.ndim != 2:
        raise ValueError(f"points must have shape [N, d], got {X.shape}")
    return _gaussian_directions(samples, X, seed, kind)


def directional_derivative(f, X, v, order=1, method="collapsed"):
    """``D_v^k f(X)``: the k-th derivative of ``t -> f(X + t v)`` at 0, per point.

    Example:
        >>> import primflow as pf
        >>> X = pf.to_tensor([[0.3, 0.2]], dtype="float64")
        >>> f = lambda p: pf.sin(p[:, 0]) * p[:, 1]
        >>> float(pf.autograd.directional_derivative(f, X, [1.0, 0.0], order=2)[0])
        -0.0591040413322...
    """
    X = _check(f, X, method, ("collapsed", "taylor"))
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be a positive int, got {order!r}")
    v = as_tensor(v, dtype=X.dtype)
    if v.shape not in ([X.shape[1]], X.shape):
        raise ValueError(f"direction of shape {v.shape} for points of shape {X.shape}; pass "
                         f"[d] or [N, d]")
    v = manipulation.unsqueeze(v, 0)
    return _weighted_top(f, X, v, creation.ones([1], dtype=X.dtype), order, method)


def laplacian(f, X, method="collapsed", samples=16, seed=None, directions="gaussian"):
    """``sum_i d^2 f / dx_i^2`` at each point of ``X`` [N, d].

    ``method="stochastic"`` averages ``D_v^2 f = v^T H v`` over ``samples`` random
    directions per point (``directions``: ``"gaussian"`` or ``"rademacher"``, whose variance
    leaves out the Hessian's diagonal, or a ``[samples, N, d]`` tensor of directions with
    ``E[v v^T] = I`` drawn by the caller); the estimate is unbiased and differentiable, and
    costs ``samples`` directions instead of d.

    Example:
        >>> import primflow as pf, math
        >>> X = pf.to_tensor([[0.25, 0.5]], dtype="float64")
        >>> u = lambda p: pf.sin(math.pi * p[:, 0]) * pf.sin(math.pi * p[:, 1])
        >>> round(float(pf.autograd.laplacian(u, X)[0]), 6)  # -2 pi^2 u
        -13.957728
    """
    X = _check(f, X, method)
    d = X.shape[1]
    if method == "nested":
        return _nested_laplacian(f, X)
    if method == "stochastic":
        if isinstance(directions, str):
            V = _gaussian_directions(samples, X, seed, directions)
        else:  # directions drawn by the caller, e.g. to keep them fixed for L-BFGS
            V = as_tensor(directions, dtype=X.dtype)
            if V.ndim != 3 or V.shape[1:] != X.shape:
                raise ValueError(f"directions must be 'gaussian', 'rademacher' or a "
                                 f"[samples, N, d] tensor for points of shape {X.shape}, got "
                                 f"shape {V.shape}")
        w = creation.full([V.shape[0]], 1.0 / V.shape[0], dtype=X.dtype)
        return _weighted_top(f, X, V, w, 2, "collapsed")
    return _weighted_top(f, X, creation.eye(d, dtype=X.dtype), creation.ones([d], X.dtype),
                         2, method)


def biharmonic_directions(d):
    """Directions and weights with ``Δ²f = sum_r w_r D_{v_r}^4 f`` in d dimensions:
    e_i with weight 1 - (d - 1)/3, and e_i ± e_j (i < j) with weight 1/6."""
    dirs = [[float(k == i) for k in range(d)] for i in range(d)]
    weights = [1.0 - (d - 1) / 3.0] * d
    for i, j in itertools.combinations(range(d), 2):
        for sign in (1.0, -1.0):
            dirs.append([1.0 if k == i else sign if k == j else 0.0 for k in range(d)])
            weights.append(1.0 / 6.0)
    return dirs, weights


def biharmonic(f, X, method="collapsed", samples=16, seed=None):
    """``Δ²f = sum_ij d^4 f / dx_i^2 dx_j^2`` at each point of ``X`` [N, d].

    Example:
        >>> import primflow as pf, math
        >>> X = pf.to_tensor([[0.25, 0.5]], dtype="float64")
        >>> u = lambda p: pf.sin(math.pi * p[:, 0]) * pf.sin(math.pi * p[:, 1])
        >>> round(float(pf.autograd.biharmonic(u, X)[0]) / (4 * math.pi ** 4), 6)
        0.707107
    """
    X = _check(f, X, method)
    d = X.shape[1]
    if method == "nested":
        return _nested_laplacian(lambda P: _nested_laplacian(f, P), X)
    if method == "stochastic":
        V = _gaussian_directions(samples, X, seed)
        w = creation.full([samples], 1.0 / (3.0 * samples), dtype=X.dtype)
        return _weighted_top(f, X, V, w, 4, "collapsed")
    dirs, weights = biharmonic_directions(d)
    return _weighted_top(f, X, as_tensor(dirs, dtype=X.dtype), as_tensor(weights, X.dtype), 4,
                         method)


def interpolation_weights(terms, d):
    """Directions j (integer vectors with |j| = K) and weights w_j such that
    ``sum_alpha c_alpha d^alpha f = sum_j w_j D_j^K f / K!`` for ``terms = {alpha: c}``
    of one order K (exact interpolation, Griewank, Utke and Walther 2000).

    Since ``D_j^K f / K! = sum_{|i|=K} (d^i f / i!) j^i``, the weights solve the square
    system ``sum_j w_j j^i / i! = c_i`` over all multi-indices i of order K; it is solved
    exactly in rational arithmetic.

    Example:
        >>> from primflow.transforms.differential import interpolation_weights
        >>> dirs, w = interpolation_weights({(2, 0): 1.0, (0, 2): 1.0}, 2)  # Laplacian
        >>> dirs, [round(x, 6) for x in w]
        ([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]], [0.5, 0.0, 0.5])
    """
    if any(len(a) != d for a in terms):
        raise ValueError(f"interpolation_weights: every multi-index needs {d} entries")
    orders = {sum(a) for a in terms}
    if len(orders) != 1:
        raise ValueError("interpolation_weights needs terms of a single order")
    K = orders.pop()
    indices = [j for j in itertools.product(range(K + 1), repeat=d) if sum(j) == K]
    # row i, column j: j^i / i!
    rows = []
    for i in indices:
        i_factorial = math.prod(math.factorial(i_m) for i_m in i)
        row = [math.prod((Fraction(j_m) ** i_m for j_m, i_m in zip(j, i)), start=Fraction(1))
               / i_factorial for j in indices]
        rows.append(row + [Fraction(terms.get(i, 0.0))])
    weights = _solve_exact(rows)
    return [list(map(float, j)) for j in indices], [float(w) for w in weights]


def _solve_exact(rows):
    """Gauss-Jordan elimination on an augmented matrix of Fractions."""
    n = len(rows)
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        p = rows[col][col]
        rows[col] = [v / p for v in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    return [rows[r][n] for r in range(n)]


def partial(f, X, index, method="collapsed"):
    """A mixed partial derivative: ``index`` lists the differentiated dims, e.g. (0, 0, 1)
    for d^3 f / dx0^2 dx1.

    Example:
        >>> import primflow as pf
        >>> X = pf.to_tensor([[0.5, 2.0]], dtype="float64")
        >>> f = lambda p: p[:, 0] ** 2 * p[:, 1] ** 3
        >>> float(pf.autograd.partial(f, X, (0, 1, 1))[0])  # 2 x * 6 y
        12.0
    """
    X = _check(f, X, method, ("collapsed", "taylor", "nested"))
    d = X.shape[1]
    alpha = [0] * d
    for i in index:
        if not 0 <= i < d:
            raise ValueError(f"partial: dim {i} is out of range for points with {d} dims")
        alpha[i] += 1
    if not index:
        raise ValueError("partial: index must name at least one dim (order >= 1)")
    if method == "nested":
        return _nested_partial(f, X, tuple(index))
    return linear_operator(f, X, {tuple(alpha): 1.0}, method=method)


def linear_operator(f, X, terms, method="collapsed"):
    """``sum_alpha c_alpha d^alpha f`` for ``terms = {alpha: c_alpha}`` (alpha: a tuple of
    d exponents), grouped by order; each order is one collapsed Taylor pass through exact
    interpolation of directional derivatives.

    Example:
        >>> import primflow as pf
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> f = lambda p: p[:, 0] ** 3 * p[:, 1] ** 2
        >>> float(pf.autograd.linear_operator(f, X, {(2, 0): 1.0, (1, 1): 3.0})[0])
        60.0
    """
    X = _check(f, X, method, ("collapsed", "taylor"))
    d = X.shape[1]
    if not terms:
        raise ValueError("linear_operator: terms must name at least one multi-index")
    by_order = {}
    for alpha, c in terms.items():
        alpha = tuple(int(a) for a in alpha)
        if len(alpha) != d or min(alpha) < 0 or sum(alpha) == 0:
            raise ValueError(f"multi-index {alpha} must have {d} non-negative entries and "
                             f"order >= 1")
        by_order.setdefault(sum(alpha), {})[alpha] = float(c)
    total = None
    for order, group in sorted(by_order.items()):
        dirs, weights = interpolation_weights(group, d)
        kept = [(v, w) for v, w in zip(dirs, weights) if abs(w) > 1e-14]
        V = as_tensor([v for v, _ in kept], dtype=X.dtype)
        W = as_tensor([w / math.factorial(order) for _, w in kept], dtype=X.dtype)
        term = _weighted_top(f, X, V, W, order, method)
        total = term if total is None else add(total, term)
    return total


__all__ = ["biharmonic", "biharmonic_directions", "directional_derivative", "random_directions",
           "interpolation_weights", "laplacian", "linear_operator", "partial"]
