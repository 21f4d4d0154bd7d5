"""Differential operators of networks and functions at a batch of points.

``f`` maps a batch of points ``X`` of shape ``[N, d]`` to values ``[N, 1]`` (or ``[N]``),
row by row: the value at a point depends on that row of ``X`` only (true of MLPs and of
any pointwise formula). The operators return derivatives at every point, shaped like
``f(X)`` (``gradient`` gives ``[N, d]``). Every result stays on the tape: it can be
differentiated again - with respect to ``X`` or to the parameters ``f`` reads - which is
what PINN training needs (the loss backpropagates through the operator).

Methods (``method=``):

* ``"reverse"`` - nested reverse mode: ``pf.grad(u.sum(), X, create_graph=True)``
  gives every first partial at every point at once (rows are independent), and repeating
  it gives higher ones. :class:`Derivatives` memoises the partials so a residual that
  needs ``u_x``, ``u_xx`` and ``u_t`` computes each once; the biharmonic differentiates
  the Laplacian twice more.
* ``"forward"`` - nested forward mode (``pf.jvp``): ``k`` nested jvps along ``v`` give the
  directional derivative ``D_v^k f``; the Laplacian is ``sum_i D_{e_i}^2 f`` and the
  biharmonic the exact interpolation formula
  ``(1 - (d-1)/3) sum_i D_{e_i}^4 f + (1/6) sum_{i<j} (D_{e_i+e_j}^4 f + D_{e_i-e_j}^4 f)``.
* ``"taylor"`` - the same directional derivatives, each from one Taylor-mode pass
  (``pf.autograd.laplacian(..., method="taylor")`` and friends).
* ``"collapsed"`` - collapsed Taylor mode (Dangel et al. 2025): one Taylor pass whose top
  coefficient is already summed over the directions (``pf.autograd``'s default).
* ``"stochastic"`` (``laplacian`` and ``biharmonic`` only) - unbiased randomised estimates
  from Gaussian directions (STDE), with ``samples`` and ``seed``.

``DEFAULT_METHOD`` gives the default of each operator, chosen by timing the PINN training
step (operator, loss, backward pass to the parameters) on the eager NumPy backend,
float64, one BLAS thread, 2-core machine, minimum of 4-5 interleaved repetitions:

* plate loss (biharmonic at 1,024 points + boundary Laplacian at 256), 2-20-20-20-1 tanh
  MLP: reverse 221 ms, collapsed 94 ms, taylor 145 ms; 2-64-64-64-1: reverse 921 ms,
  collapsed 465 ms, taylor 456 ms; 2-16-16-1 at 256 points: 76 / 32 / 30 ms. Default
  for the biharmonic: ``"collapsed"``.
* Laplacian at 1,024 points, 2-20-20-20-1: reverse 17.3 ms, collapsed 18.1, taylor 22.3,
  forward 26.2; 2-64-64-64-1: 61 / 57 / 82 / 84 ms; at 4,096 points: 225 / 266 / 239 /
  277 ms. Default for the Laplacian (and for gradients, partials, divergences, which
  share :class:`Derivatives`' memo): ``"reverse"``.

Example:
    >>> import math
    >>> import primflow as pf
    >>> from primflow.science import operators as ops
    >>> f = lambda X: pf.sin(math.pi * X[:, 0:1]) * pf.sin(math.pi * X[:, 1:2])
    >>> X = pf.to_tensor([[0.3, 0.4]], dtype="float64")
    >>> b = ops.biharmonic(f, X)
    >>> round(float(b / f(X)) / math.pi ** 4, 8)
    4.0
"""

from __future__ import annotations

import functools

import primflow as pf
from primflow.transforms import differential as _taylor

__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
    "Derivatives",
    "biharmonic",
    "directional",
    "divergence",
    "gradient",
    "laplacian",
    "partial",
]

METHODS = ("reverse", "forward", "taylor", "collapsed")
_RANDOMISED = ("stochastic",)

# The default method of each operator (see the module docstring and bench_operators).
DEFAULT_METHOD = {"gradient": "reverse", "divergence": "reverse", "partial": "reverse",
                  "laplacian": "reverse", "biharmonic": "collapsed",
                  "directional": "collapsed"}


def _recording(fn):
    """Runs ``fn`` with grad recording on: the operators build derivatives on the tape even
    inside ``pf.no_grad()`` (where a derivative of a derivative would otherwise be lost)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with pf.enable_grad():
            return fn(*args, **kwargs)
    return wrapped


def _method(op, method, extra=()):
    if method is None:
        return DEFAULT_METHOD[op]
    allowed = METHODS + tuple(extra)
    if method not in allowed:
        raise ValueError(f"unknown method {method!r} for {op}; choose one of "
                         f"{', '.join(allowed)}")
    return method


def _points(X):
    if not isinstance(X, pf.Tensor):
        X = pf.to_tensor(X)
    if X.ndim != 2:
        raise ValueError(f"the points X must be a [N, d] tensor, got shape {X.shape}")
    if not X.dtype.is_floating:
        raise TypeError(f"the points X must be floating point, got {X.dtype.name}")
    return X


def _watched(X):
    """``X`` itself when the tape already watches it (so derivatives also flow to it), else
    a fresh leaf with the same values."""
    if not X.stop_gradient:
        return X
    Xw = X.detach()
    Xw.stop_gradient = False
    return Xw


def _column(u, n):
    """``u`` as an ``[N, 1]`` column plus a function restoring the caller's layout."""
    if u.ndim == 2 and u.shape[1] == 1:
        return u, lambda v: v
    if u.ndim == 1:
        return pf.reshape(u, [n, 1]), lambda v: pf.reshape(v, [n])
    raise ValueError(f"f must return one value per point, shaped [N, 1] or [N]; got "
                     f"{u.shape} for N = {n}")


def _check_index(index, d):
    index = tuple(index) if isinstance(index, (tuple, list)) else (index,)
    for i in index:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < d:
            raise ValueError(f"partial index {i!r} is out of range for points of dimension {d}")
    return index


class Derivatives:
    """Partial derivatives of ``u = f(X)`` at the points ``X``, each computed once
    (nested reverse mode).

    ``D = Derivatives(f, X)``; ``D.u`` is ``f(X)``; ``D(0)`` is du/dx_0, ``D(0, 0)`` is
    d2u/dx_0^2, ``D(0, 1, 1)`` is d3u/dx_0 dx_1^2 (the order of indices does not matter).
    Each request reuses the lower derivatives already computed: one backward pass through
    the graph of a derivative gives all of its first partials. Results are ``[N, 1]``
    (``[N]`` when ``f`` returns ``[N]``) and differentiable with respect to whatever ``f``
    reads (network parameters) and to ``X``.

    Example:
        >>> import primflow as pf
        >>> from primflow.science.operators import Derivatives
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> D = Derivatives(lambda X: X[:, 0:1] ** 3 * X[:, 1:2], X)
        >>> float(D(0, 0)), float(D(0, 1))
        (12.0, 3.0)
    """

    @_recording
    def __init__(self, f, X):
        X = _points(X)
        self.X = _watched(X)
        self.n, self.d = X.shape
        u = f(self.X)
        if not isinstance(u, pf.Tensor):
            raise TypeError(f"f must return a Tensor, got {type(u).__name__}")
        self._u, self._restore = _column(u, self.n)
        self._memo = {(): self._u}

    @property
    def u(self):
        """``f(X)``."""
        return self._restore(self._u)

    def _zeros(self):
        return pf.zeros([self.n, 1], dtype=self._u.dtype)

    @_recording
    def _get(self, key):
        if key in self._memo:
            return self._memo[key]
        for i in range(self.d):
            if i not in key:
                continue
            parent = list(key)
            parent.remove(i)
            parent = tuple(parent)
            if parent in self._memo:  # prefer a parent that is already there
                break
        else:
            parent = key[:-1]
        base = self._get(parent)
        if base.stop_gradient:  # a constant (f is polynomial of lower degree): derivatives 0
            for j in range(self.d):
                self._memo.setdefault(tuple(sorted(parent + (j,))), self._zeros())
        else:
            g, = pf.grad(base.sum(), self.X, create_graph=True, allow_unused=True)
            for j in range(self.d):
                child = tuple(sorted(parent + (j,)))
                if child not in self._memo:
                    self._memo[child] = self._zeros() if g is None else g[:, j:j + 1]
        return self._memo[key]

    def __call__(self, *index):
        if len(index) == 1 and isinstance(index[0], (tuple, list)):
            index = tuple(index[0])
        index = _check_index(index, self.d)
        return self._restore(self._get(tuple(sorted(index))))

    @_recording
    def gradient(self):
        """``[N, d]``: all first partials."""
        return pf.concat([self._get((i,)) for i in range(self.d)], axis=1)

    @_recording
    def laplacian(self):
        """The Laplacian, ``sum_i d2u/dx_i^2``."""
        out = self._get((0, 0))
        for i in range(1, self.d):
            out = out + self._get((i, i))
        return self._restore(out)

    @_recording
    def biharmonic(self):
        """``sum_{i,j} d4u/dx_i^2 dx_j^2`` from the memoised partials (for a biharmonic
        alone, :func:`biharmonic` is cheaper: it differentiates the Laplacian)."""
        out = None
        for i in range(self.d):
            for j in range(self.d):
                term = self._get(tuple(sorted((i, i, j, j))))
                out = term if out is None else out + term
        return self._restore(out)


# ---- forward mode: directional derivatives --------------------------------------------

def _direction(X, v):
    n, d = X.shape
    V = v if isinstance(v, pf.Tensor) else pf.to_tensor(v, dtype=X.dtype)
    if V.shape not in ([d], [n, d]):
        raise ValueError(f"direction must have length {d} or shape [{n}, {d}], got {V.shape}")
    return V


def _nested_jvp(f, X, directions):
    """``d/dt_1 ... d/dt_k f(X + t_1 v_1 + ... + t_k v_k)`` at 0 by nested jvps."""
    n, d = X.shape
    g = f
    for v in directions:
        V = pf.zeros([n, d], dtype=X.dtype) + v

        def g(x, inner=g, V=V):
            return pf.jvp(inner, (x,), (V,))[1]
    return g(X)


@_recording
def directional(f, X, v, order, method=None):
    """``D_v^k f``: the k-th derivative of ``t -> f(X + t v)`` at ``t = 0`` at every point.

    ``v`` is a direction of length d (the same for every point) or an ``[N, d]`` tensor.

    Example:
        >>> import primflow as pf
        >>> from primflow.science.operators import directional
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> float(directional(lambda X: X[:, 0:1] ** 2 * X[:, 1:2], X, [1.0, 1.0], 2))
        8.0
    """
    X = _points(X)
    method = _method("directional", method)
    if method == "reverse":
        raise ValueError("directional derivatives use method 'forward', 'taylor' or "
                         "'collapsed'")
    if isinstance(order, bool) or not isinstance(order, int) or order < 0:
        raise ValueError(f"order must be a non-negative int, got {order!r}")
    V = _direction(X, v)
    if order == 0:
        return f(X)
    if method == "forward":
        return _nested_jvp(f, X, [V] * order)
    return _taylor.directional_derivative(f, X, V, order=order, method=method)


def _unit(d, i):
    e = [0.0] * d
    e[i] = 1.0
    return e


# ---- the operators ---------------------------------------------------------------------

@_recording
def gradient(f, X, method=None):
    """``[N, d]``: the gradient of ``f`` at every point.

    Example:
        >>> import primflow as pf
        >>> from primflow.science.operators import gradient
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> gradient(lambda X: (X * X).sum(axis=1), X).numpy().tolist()
        [[2.0, 4.0]]
    """
    X = _points(X)
    method = _method("gradient", method)
    if method == "reverse":
        return Derivatives(f, X).gradient()
    n, d = X.shape
    cols = [pf.reshape(directional(f, X, _unit(d, i), 1, method), [n, 1]) for i in range(d)]
    return pf.concat(cols, axis=1)


@_recording
def divergence(F, X, method=None):
    """``[N, 1]``: ``sum_i dF_i/dx_i`` of a vector field ``F: [N, d] -> [N, d]``.

    Example:
        >>> import primflow as pf
        >>> from primflow.science.operators import divergence
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> float(divergence(lambda X: X * X, X))
        6.0
    """
    X = _points(X)
    method = _method("divergence", method)
    n, d = X.shape
    if method == "reverse":
        Xw = _watched(X)
        V = F(Xw)
        if V.shape != [n, d]:
            raise ValueError(f"divergence: F must return [N, d] = [{n}, {d}], got {V.shape}")
        out = None
        for i in range(d):
            g = None
            if not V.stop_gradient:
                g, = pf.grad(V[:, i].sum(), Xw, create_graph=True, allow_unused=True)
            term = pf.zeros([n, 1], dtype=V.dtype) if g is None else g[:, i:i + 1]
            out = term if out is None else out + term
        return out
    out = None
    for i in range(d):
        term = directional(lambda Y, i=i: F(Y)[:, i:i + 1], X, _unit(d, i), 1, method)
        out = term if out is None else out + term
    return out


@_recording
def partial(f, X, index, method=None):
    """A mixed partial derivative: ``partial(f, X, (0, 1, 1))`` is d3f/dx_0 dx_1^2.

    Example:
        >>> import primflow as pf
        >>> from primflow.science.operators import partial
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> float(partial(lambda X: X[:, 0:1] ** 2 * X[:, 1:2] ** 3, X, (0, 1, 1)))
        24.0
    """
    X = _points(X)
    method = _method("partial", method)
    d = X.shape[1]
    index = _check_index(index, d)
    if not index:
        return f(X)
    if method == "reverse":
        return Derivatives(f, X)(*index)
    if method == "forward":
        units = [pf.to_tensor(_unit(d, i), dtype=X.dtype) for i in index]
        return _nested_jvp(f, X, units)
    return _taylor.partial(f, X, index, method=method)


@_recording
def laplacian(f, X, method=None, samples=16, seed=None, directions="gaussian"):
    """The Laplacian ``sum_i d2f/dx_i^2`` at every point (``samples``, ``seed`` and
    ``directions`` - ``"gaussian"``, ``"rademacher"`` or a ``[samples, N, d]`` tensor - for
    ``method="stochastic"``, see ``pf.autograd.laplacian``).

    Example:
        >>> import primflow as pf
        >>> from primflow.science.operators import laplacian
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> float(laplacian(lambda X: (X ** 3).sum(axis=1, keepdim=True), X))
        18.0
    """
    X = _points(X)
    method = _method("laplacian", method, _RANDOMISED)
    if method == "reverse":
        return Derivatives(f, X).laplacian()
    d = X.shape[1]
    if method == "forward":
        out = None
        for i in range(d):
            e = pf.to_tensor(_unit(d, i), dtype=X.dtype)
            term = _nested_jvp(f, X, [e, e])
            out = term if out is None else out + term
        return out
    return _taylor.laplacian(f, X, method=method, samples=samples, seed=seed,
                             directions=directions)


@_recording
def biharmonic(f, X, method=None, samples=16, seed=None):
    """The biharmonic ``Δ²f = sum_{i,j} d4f/dx_i^2 dx_j^2`` at every point.

    ``"reverse"`` differentiates the Laplacian twice more (for d = 2: 6 backward passes in
    all); the other methods use d^2 fourth-order directional derivatives (``samples`` and
    ``seed`` are for ``method="stochastic"``).

    Example:
        >>> import primflow as pf
        >>> from primflow.science.operators import biharmonic
        >>> X = pf.to_tensor([[1.0, 2.0]], dtype="float64")
        >>> float(biharmonic(lambda X: (X[:, 0:1] * X[:, 1:2]) ** 2, X))
        8.0
    """
    X = _points(X)
    method = _method("biharmonic", method, _RANDOMISED)
    n, d = X.shape
    if method == "reverse":
        Xw = _watched(X)
        lap = Derivatives(f, Xw).laplacian()
        lap_col, restore = _column(lap, n)
        return restore(Derivatives(lambda _: lap_col, Xw).laplacian())
    if method == "forward":
        dirs, weights = _taylor.biharmonic_directions(d)
        out = None
        for v, w in zip(dirs, weights):
            if w == 0.0:
                continue
            V = pf.to_tensor(v, dtype=X.dtype)
            term = _nested_jvp(f, X, [V] * 4) * w
            out = term if out is None else out + term
        return out
    return _taylor.biharmonic(f, X, method=method, samples=samples, seed=seed)
