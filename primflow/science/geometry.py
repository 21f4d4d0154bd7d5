"""Geometries and point samplers for physics-informed training.

Every geometry samples its interior and its boundary with one of three methods:

* ``"uniform"`` - independent uniform draws (primflow's random primitives),
* ``"lhs"`` - Latin hypercube: in every coordinate each of the ``n`` equal strata holds
  exactly one point (a random permutation of the strata per coordinate plus a uniform
  jitter inside each stratum),
* ``"sobol"`` - a scrambled Sobol sequence from ``scipy.stats.qmc`` (needs SciPy).

Samples are drawn in the unit cube ``[0, 1)^k`` and mapped onto the geometry by a
measure-preserving map (an affine map for boxes, ``r = R sqrt(u)`` for the disk, the arc
length for boundaries), so stratification carries over. ``seed=None`` draws from primflow's
global random stream (``pf.seed``); an integer ``seed`` gives an independent, reproducible
stream that leaves the global one untouched.

Boundary samples come with outward unit normals: ``sample_boundary(n, normals=True)``
returns ``(points, normals)``; ``geometry.normal(points)`` gives the normals of points that
lie on the boundary.

Example:
    >>> import primflow as pf
    >>> from primflow.science import Rectangle
    >>> sq = Rectangle([0.0, 0.0], [1.0, 2.0])
    >>> X = sq.sample_interior(100, method="lhs", seed=0)
    >>> X.shape
    [100, 2]
    >>> Xb, nb = sq.sample_boundary(40, seed=1, normals=True)
    >>> bool(sq.on_boundary(Xb).all())
    True
"""

from __future__ import annotations

import math
import random as _pyrandom
import warnings

import primflow as pf
from primflow import prims
from primflow.core import dtypes
from primflow.core.random import next_key

__all__ = [
    "SAMPLING_METHODS",
    "Ball",
    "Box",
    "Disk",
    "Geometry",
    "Interval",
    "Polygon",
    "Rectangle",
    "unit_samples",
]

SAMPLING_METHODS = ("uniform", "lhs", "sobol")
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _mix(seed, stream):
    """A 63-bit key from a user seed and a stream number (splitmix64 mixing)."""
    z = (int(seed) * 0x9E3779B97F4A7C15 + (stream + 1) * 0xD1B54A32D192ED03) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 1


class _Keys:
    """Keys for one sampling call: from the seed when given, else from the global stream."""

    def __init__(self, seed):
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)
                                 or seed < 0):
            raise ValueError(f"seed must be None or a non-negative int, got {seed!r}")
        self.seed = seed
        self.count = 0

    def __call__(self):
        self.count += 1
        return next_key() if self.seed is None else _mix(self.seed, self.count)


def _dtype(dtype):
    return dtypes.default_float() if dtype is None else dtypes.as_dtype(dtype)


def _uniform(shape, dtype, key):
    return prims.random_uniform(shape=tuple(shape), dtype=dtype, key=key)


def _check_n(n, what="n"):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{what} must be a non-negative int, got {n!r}")


def unit_samples(n, dim, method="uniform", seed=None, dtype=None):
    """``n`` points in the unit cube ``[0, 1)^dim`` as a ``[n, dim]`` tensor.

    Args:
        n: number of points.
        dim: dimension.
        method: ``"uniform"``, ``"lhs"`` (Latin hypercube) or ``"sobol"`` (SciPy).
        seed: None (global stream, see ``pf.seed``) or an int for a private stream.
        dtype: floating dtype (default: ``pf.get_default_dtype()``).

    Example:
        >>> from primflow.science.geometry import unit_samples
        >>> unit_samples(8, 2, method="lhs", seed=3).shape
        [8, 2]
    """
    _check_n(n)
    _check_n(dim, "dim")
    dtype = _dtype(dtype)
    keys = _Keys(seed)
    if method == "uniform":
        return _uniform((n, dim), dtype, keys())
    if method == "lhs":
        return _latin_hypercube(n, dim, dtype, keys)
    if method == "sobol":
        return _sobol(n, dim, dtype, keys)
    raise ValueError(f"unknown sampling method {method!r}; choose one of "
                     f"{', '.join(SAMPLING_METHODS)}")


def _latin_hypercube(n, dim, dtype, keys):
    if n == 0:
        return pf.zeros([0, dim], dtype=dtype)
    cols = []
    for _ in range(dim):
        perm = list(range(n))
        _pyrandom.Random(keys()).shuffle(perm)  # O(n) Fisher-Yates, seeded by our key
        cols.append(perm)
    f64 = dtypes.float64  # in float64, so that stratum n-1 plus jitter stays below 1
    strata = pf.transpose(pf.to_tensor(cols, dtype=f64), [1, 0])  # [n, dim]
    jitter = _uniform((n, dim), f64, keys())
    return ((strata + jitter) * (1.0 / n)).astype(dtype)


def _sobol(n, dim, dtype, keys):
    try:
        from scipy.stats import qmc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "method='sobol' needs SciPy (scipy.stats.qmc); install it with "
            "`pip install scipy` (or `pip install primflow[sobol]`), or use "
            "method='lhs' or 'uniform'") from exc
    if n == 0:
        return pf.zeros([0, dim], dtype=dtype)
    engine = qmc.Sobol(d=dim, scramble=True, seed=keys() % (2 ** 32))
    with warnings.catch_warnings():  # n need not be a power of two for our purposes
        warnings.simplefilter("ignore")
        values = engine.random(n)
    return pf.to_tensor(values, dtype=dtype)


def _as_points(X, dim, what="points"):
    X = X if isinstance(X, pf.Tensor) else pf.to_tensor(X)
    if X.ndim != 2 or X.shape[1] != dim:
        raise ValueError(f"{what} must have shape [N, {dim}], got {X.shape}")
    return X


class Geometry:
    """Base class: a domain in R^dim that can sample its interior and its boundary."""

    dim: int

    def sample_interior(self, n, method="uniform", seed=None, dtype=None):
        """``n`` points inside the domain, ``[n, dim]``."""
        raise NotImplementedError

    def sample_boundary(self, n, method="uniform", seed=None, dtype=None, normals=False):
        """``n`` points on the boundary, ``[n, dim]``; with ``normals=True`` also the outward
        unit normals ``[n, dim]``."""
        raise NotImplementedError

    def inside(self, X, tol=1e-12):
        """Bool ``[N]``: whether each point lies in the closed domain (within ``tol``)."""
        raise NotImplementedError

    def on_boundary(self, X, tol=1e-9):
        """Bool ``[N]``: whether each point lies on the boundary (within ``tol``)."""
        raise NotImplementedError

    def normal(self, X):
        """Outward unit normals ``[N, dim]`` of boundary points ``X``."""
        raise NotImplementedError

    def bounds(self):
        """``(lower, upper)`` corners of the bounding box as lists."""
        raise NotImplementedError

    @property
    def measure(self):
        """Length / area / volume of the domain."""
        raise NotImplementedError


class Box(Geometry):
    """An axis-aligned box ``[lo_1, hi_1] x ... x [lo_d, hi_d]``.

    Example:
        >>> from primflow.science import Box
        >>> Box([0, 0, 0], [1, 2, 3]).sample_interior(5, seed=0).shape
        [5, 3]
    """

    def __init__(self, lower, upper):
        lower = [float(v) for v in lower]
        upper = [float(v) for v in upper]
        if len(lower) != len(upper) or not lower:
            raise ValueError(f"lower {lower} and upper {upper} must be non-empty and of the "
                             f"same length")
        for i, (a, b) in enumerate(zip(lower, upper)):
            if not b > a:
                raise ValueError(f"upper[{i}] = {b} must be greater than lower[{i}] = {a}")
        self.lower, self.upper = lower, upper
        self.dim = len(lower)

    def __repr__(self):
        return f"{type(self).__name__}({self.lower}, {self.upper})"

    def bounds(self):
        return list(self.lower), list(self.upper)

    @property
    def measure(self):
        return math.prod(b - a for a, b in zip(self.lower, self.upper))

    def _map(self, U):
        lo = pf.to_tensor(self.lower, dtype=U.dtype)
        width = pf.to_tensor([b - a for a, b in zip(self.lower, self.upper)], dtype=U.dtype)
        return lo + U * width

    def sample_interior(self, n, method="uniform", seed=None, dtype=None):
        return self._map(unit_samples(n, self.dim, method, seed, dtype))

    def inside(self, X, tol=1e-12):
        X = _as_points(X, self.dim)
        lo = pf.to_tensor(self.lower, dtype=X.dtype)
        hi = pf.to_tensor(self.upper, dtype=X.dtype)
        ok = pf.logical_and(X >= lo - tol, X <= hi + tol)
        return pf.all(ok, axis=1)

    def _face_distance(self, X):
        """``[N, 2 dim]``: distance of every point to each face plane (lower faces first)."""
        lo = pf.to_tensor(self.lower, dtype=X.dtype)
        hi = pf.to_tensor(self.upper, dtype=X.dtype)
        return pf.concat([pf.abs(X - lo), pf.abs(X - hi)], axis=1)

    def on_boundary(self, X, tol=1e-9):
        X = _as_points(X, self.dim)
        d = self._face_distance(X)
        return pf.logical_and(self.inside(X, tol), pf.min(d, axis=1) <= tol)

    def normal(self, X):
        X = _as_points(X, self.dim)
        d = self._face_distance(X)
        face = pf.argmin(d, axis=1)  # nearest face: 0..dim-1 lower, dim..2dim-1 upper
        eye = pf.eye(self.dim, dtype=X.dtype)
        eye = pf.concat([0.0 - eye, eye], axis=0)
        return pf.index_select(eye, face, axis=0)

    def sample_boundary(self, n, method="uniform", seed=None, dtype=None, normals=False):
        _check_n(n)
        dtype = _dtype(dtype)
        d = self.dim
        if d == 1:
            return Interval(self.lower[0], self.upper[0]).sample_boundary(
                n, method, seed, dtype, normals)
        if d == 2:
            x0, y0 = self.lower
            x1, y1 = self.upper
            return Polygon([(x0, y0), (x1, y0), (x1, y1), (x0, y1)]).sample_boundary(
                n, method, seed, dtype, normals)
        # d >= 3: the first coordinate picks a face in proportion to its area, the rest
        # place the point on it
        U = unit_samples(n, d, method, seed, dtype)
        widths = [b - a for a, b in zip(self.lower, self.upper)]
        areas = []
        for k in range(d):
            areas += [math.prod(w for j, w in enumerate(widths) if j != k)] * 2
        total = sum(areas)
        edges = [sum(areas[:i]) / total for i in range(len(areas) + 1)]
        s = U[:, 0]
        rest = U[:, 1:]
        X = pf.zeros([n, d], dtype=dtype)
        N = pf.zeros([n, d], dtype=dtype)
        lo = pf.to_tensor(self.lower, dtype=dtype)
        width = pf.to_tensor(widths, dtype=dtype)
        for f in range(2 * d):
            k, upper = f // 2, f % 2
            mask = pf.logical_and(s >= edges[f], s < edges[f + 1]) if f < 2 * d - 1 else (
                s >= edges[f])
            cols = []
            r = 0
            for j in range(d):
                if j == k:
                    cols.append(pf.full([n], self.upper[j] if upper else self.lower[j],
                                        dtype=dtype))
                else:
                    cols.append(lo[j] + rest[:, r] * width[j])
                    r += 1
            pts = pf.stack(cols, axis=1)
            nrm = [0.0] * d
            nrm[k] = 1.0 if upper else -1.0
            m2 = pf.unsqueeze(mask, 1)
            X = pf.where(m2, pts, X)
            N = pf.where(m2, pf.to_tensor(nrm, dtype=dtype) + pf.zeros([n, d], dtype=dtype), N)
        return (X, N) if normals else X

    def grid(self, *counts, dtype=None):
        """A tensor-product grid with ``counts[i]`` points along axis i (ends included),
        ``[prod(counts), dim]``, the last axis varying fastest ("ij" indexing: reshape the
        values to ``counts`` to get an array indexed like the axes).

        Example:
            >>> from primflow.science import Rectangle
            >>> Rectangle([0, 0], [1, 1]).grid(3, 2).shape
            [6, 2]
        """
        if len(counts) == 1 and isinstance(counts[0], (list, tuple)):
            counts = tuple(counts[0])
        if len(counts) == 1 and self.dim > 1:
            counts = counts * self.dim
        if len(counts) != self.dim:
            raise ValueError(f"grid needs {self.dim} counts, got {len(counts)}")
        dtype = _dtype(dtype)
        axes = [pf.linspace(a, b, c, dtype=dtype)
                for a, b, c in zip(self.lower, self.upper, counts)]
        return meshgrid_points(axes)

    def axes(self, *counts, dtype=None):
        """The 1-D coordinate vectors of ``grid(*counts)``."""
        if len(counts) == 1 and self.dim > 1:
            counts = counts * self.dim
        dtype = _dtype(dtype)
        return [pf.linspace(a, b, c, dtype=dtype)
                for a, b, c in zip(self.lower, self.upper, counts)]


def meshgrid_points(axes):
    """``[prod(len(a)), len(axes)]`` points of the tensor product of 1-D tensors ("ij")."""
    shape = [a.shape[0] for a in axes]
    cols = []
    for i, a in enumerate(axes):
        view = [1] * len(axes)
        view[i] = shape[i]
        full = pf.reshape(a, view) + pf.zeros(shape, dtype=a.dtype)
        cols.append(pf.reshape(full, [-1]))
    return pf.stack(cols, axis=1)


class Interval(Box):
    """The interval ``[a, b]`` (points are ``[N, 1]``).

    Example:
        >>> from primflow.science import Interval
        >>> Interval(0.0, 1.0).sample_boundary(2).numpy().ravel().tolist()
        [0.0, 1.0]
    """

    def __init__(self, a=0.0, b=1.0):
        super().__init__([a], [b])
        self.a, self.b = float(a), float(b)

    def __repr__(self):
        return f"Interval({self.a}, {self.b})"

    def sample_boundary(self, n, method="uniform", seed=None, dtype=None, normals=False):
        """The two end points, alternately (``a, b, a, b, ...``); the method and seed are
        accepted for a uniform interface (the boundary is two points)."""
        _check_n(n)
        if method not in SAMPLING_METHODS:
            raise ValueError(f"unknown sampling method {method!r}; choose one of "
                             f"{', '.join(SAMPLING_METHODS)}")
        dtype = _dtype(dtype)
        X = pf.to_tensor([[self.a if i % 2 == 0 else self.b] for i in range(n)], dtype=dtype)
        X = pf.reshape(X, [n, 1])
        if not normals:
            return X
        N = pf.reshape(pf.to_tensor([-1.0 if i % 2 == 0 else 1.0 for i in range(n)],
                                    dtype=dtype), [n, 1])
        return X, N


class Rectangle(Box):
    """The rectangle ``[x0, x1] x [y0, y1]`` given by its lower and upper corners.

    Example:
        >>> from primflow.science import Rectangle
        >>> Rectangle([0.0, 0.0], [2.0, 3.0]).measure
        6.0
    """

    def __init__(self, lower=(0.0, 0.0), upper=(1.0, 1.0)):
        super().__init__(lower, upper)
        if self.dim != 2:
            raise ValueError(f"Rectangle is 2-D; got corners of dimension {self.dim} (use Box)")

    def sample_side(self, side, n, method="uniform", seed=None, dtype=None):
        """``n`` points on one side: ``"left"`` (x = x0), ``"right"``, ``"bottom"`` (y = y0)
        or ``"top"``."""
        sides = {"left": (0, 0), "right": (0, 1), "bottom": (1, 0), "top": (1, 1)}
        if side not in sides:
            raise ValueError(f"unknown side {side!r}; choose one of {', '.join(sides)}")
        axis, upper = sides[side]
        dtype = _dtype(dtype)
        s = unit_samples(n, 1, method, seed, dtype)[:, 0]
        other = 1 - axis
        t = self.lower[other] + s * (self.upper[other] - self.lower[other])
        fixed = pf.full([n], self.upper[axis] if upper else self.lower[axis], dtype=dtype)
        cols = [fixed, t] if axis == 0 else [t, fixed]
        return pf.stack(cols, axis=1)


class Polygon(Geometry):
    """A simple polygon given by its vertices (either orientation).

    Interior sampling is by rejection from the bounding box (the box samples follow
    ``method``); the boundary is sampled by arc length.

    Example:
        >>> from primflow.science import Polygon
        >>> tri = Polygon([(0, 0), (1, 0), (0, 1)])
        >>> round(tri.measure, 3)
        0.5
        >>> bool(tri.inside(tri.sample_interior(50, seed=0)).all())
        True
    """

    dim = 2

    def __init__(self, vertices):
        verts = [(float(x), float(y)) for x, y in vertices]
        if len(verts) < 3:
            raise ValueError(f"a polygon needs at least 3 vertices, got {len(verts)}")
        area2 = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in
                    zip(verts, verts[1:] + verts[:1]))
        if abs(area2) < 1e-300:
            raise ValueError("the polygon's vertices are collinear (zero area)")
        if area2 < 0:  # store counter-clockwise: the outward normal is the edge turned right
            verts = verts[::-1]
        self.vertices = verts
        self._area = abs(area2) / 2
        self._edges = list(zip(verts, verts[1:] + verts[:1]))
        self._lengths = [math.hypot(x1 - x0, y1 - y0) for (x0, y0), (x1, y1) in self._edges]
        self.perimeter = sum(self._lengths)

    def __repr__(self):
        return f"Polygon({self.vertices})"

    @property
    def measure(self):
        return self._area

    def bounds(self):
        xs = [v[0] for v in self.vertices]
        ys = [v[1] for v in self.vertices]
        return [min(xs), min(ys)], [max(xs), max(ys)]

    def _strictly_inside(self, X):
        x, y = X[:, 0], X[:, 1]
        odd = pf.zeros(x.shape, dtype="bool")
        for (x0, y0), (x1, y1) in self._edges:
            if y0 == y1:
                continue
            crosses = pf.not_equal(y < y0, y < y1)  # the edge straddles the ray's height
            xcross = (x1 - x0) * (y - y0) / (y1 - y0) + x0
            hit = pf.logical_and(crosses, x < xcross)
            odd = pf.not_equal(odd, hit)
        return odd

    def _edge_distance(self, X):
        """``[N, n_edges]`` distances of the points to each edge segment."""
        cols = []
        for (x0, y0), (x1, y1) in self._edges:
            ex, ey = x1 - x0, y1 - y0
            L2 = ex * ex + ey * ey
            t = pf.clip(((X[:, 0] - x0) * ex + (X[:, 1] - y0) * ey) / L2, 0.0, 1.0)
            dx = X[:, 0] - (x0 + t * ex)
            dy = X[:, 1] - (y0 + t * ey)
            cols.append(pf.sqrt(dx * dx + dy * dy))
        return pf.stack(cols, axis=1)

    def inside(self, X, tol=1e-12):
        X = _as_points(X, 2)
        near = pf.min(self._edge_distance(X), axis=1) <= tol
        return pf.logical_or(self._strictly_inside(X), near)

    def on_boundary(self, X, tol=1e-9):
        X = _as_points(X, 2)
        return pf.min(self._edge_distance(X), axis=1) <= tol

    def normal(self, X):
        X = _as_points(X, 2)
        edge = pf.argmin(self._edge_distance(X), axis=1)
        table = pf.to_tensor([self._edge_normal(k) for k in range(len(self._edges))],
                             dtype=X.dtype)
        return pf.index_select(table, edge, axis=0)

    def _edge_normal(self, k):
        (x0, y0), (x1, y1) = self._edges[k]
        L = self._lengths[k]
        return [(y1 - y0) / L, -(x1 - x0) / L]  # counter-clockwise: turn the edge right

    def sample_interior(self, n, method="uniform", seed=None, dtype=None):
        _check_n(n)
        dtype = _dtype(dtype)
        lo, hi = self.bounds()
        box = Box(lo, hi)
        ratio = self._area / box.measure
        keys = _Keys(seed)
        got, total = [], 0
        for attempt in range(64):
            m = max(16, math.ceil((n - total) / ratio * 1.2) + 8)
            sub_seed = None if seed is None else keys()
            cand = box.sample_interior(m, method, sub_seed, dtype)
            keep = cand[self._strictly_inside(cand)]
            got.append(keep)
            total += keep.shape[0]
            if total >= n:
                break
        else:  # pragma: no cover - needs an absurdly thin polygon
            raise RuntimeError("rejection sampling of the polygon failed to find enough points")
        return pf.concat(got, axis=0)[:n]

    def sample_boundary(self, n, method="uniform", seed=None, dtype=None, normals=False):
        _check_n(n)
        dtype = _dtype(dtype)
        s = unit_samples(n, 1, method, seed, dtype)[:, 0] * self.perimeter
        X = pf.zeros([n, 2], dtype=dtype)
        N = pf.zeros([n, 2], dtype=dtype)
        start = 0.0
        last = len(self._edges) - 1
        for k, ((x0, y0), (x1, y1)) in enumerate(self._edges):
            L = self._lengths[k]
            mask = s >= start if k == last else pf.logical_and(s >= start, s < start + L)
            t = pf.clip((s - start) / L, 0.0, 1.0)
            pts = pf.stack([x0 + t * (x1 - x0), y0 + t * (y1 - y0)], axis=1)
            m2 = pf.unsqueeze(mask, 1)
            X = pf.where(m2, pts, X)
            N = pf.where(m2, pf.to_tensor(self._edge_normal(k), dtype=dtype)
                         + pf.zeros([n, 2], dtype=dtype), N)
            start += L
        return (X, N) if normals else X


class Disk(Geometry):
    """The disk of radius ``radius`` about ``center``.

    Example:
        >>> from primflow.science import Disk
        >>> X, N = Disk([0.0, 0.0], 2.0).sample_boundary(10, seed=0, dtype="float64", normals=True)
        >>> bool((abs((X * X).sum(axis=1) - 4.0) < 1e-12).all())
        True
    """

    dim = 2

    def __init__(self, center=(0.0, 0.0), radius=1.0):
        self.center = [float(c) for c in center]
        if len(self.center) != 2:
            raise ValueError(f"Disk center must have 2 coordinates, got {center!r}")
        self.radius = float(radius)
        if not self.radius > 0:
            raise ValueError(f"radius must be positive, got {radius!r}")

    def __repr__(self):
        return f"Disk({self.center}, {self.radius})"

    @property
    def measure(self):
        return math.pi * self.radius ** 2

    def bounds(self):
        return ([c - self.radius for c in self.center], [c + self.radius for c in self.center])

    def _rel(self, X):
        return X - pf.to_tensor(self.center, dtype=X.dtype)

    def sample_interior(self, n, method="uniform", seed=None, dtype=None):
        U = unit_samples(n, 2, method, seed, dtype)
        r = self.radius * pf.sqrt(U[:, 0])  # equal-area map: stratification carries over
        th = (2 * math.pi) * U[:, 1]
        return pf.stack([self.center[0] + r * pf.cos(th), self.center[1] + r * pf.sin(th)],
                        axis=1)

    def sample_boundary(self, n, method="uniform", seed=None, dtype=None, normals=False):
        U = unit_samples(n, 1, method, seed, dtype)
        th = (2 * math.pi) * U[:, 0]
        N = pf.stack([pf.cos(th), pf.sin(th)], axis=1)
        X = pf.to_tensor(self.center, dtype=N.dtype) + self.radius * N
        return (X, N) if normals else X

    def inside(self, X, tol=1e-12):
        X = _as_points(X, 2)
        R = self._rel(X)
        return pf.sqrt((R * R).sum(axis=1)) <= self.radius + tol

    def on_boundary(self, X, tol=1e-9):
        X = _as_points(X, 2)
        R = self._rel(X)
        return pf.abs(pf.sqrt((R * R).sum(axis=1)) - self.radius) <= tol

    def normal(self, X):
        X = _as_points(X, 2)
        R = self._rel(X)
        return R / pf.sqrt((R * R).sum(axis=1, keepdim=True))


# ---- high-dimensional domains ---------------------------------------------------

class Ball(Geometry):
    """The ball of radius ``radius`` about ``center`` in any dimension ``dim >= 1``.

    Interior points: a direction uniform on the sphere (a normalised standard normal vector)
    times ``R u^(1/d)`` (so points are uniform in volume; in high dimension they crowd near
    the sphere, as the volume does); the sampling ``method`` stratifies ``u``.

    Example:
        >>> from primflow.science.geometry import Ball
        >>> X = Ball(dim=100).sample_interior(50, seed=0, dtype="float64")
        >>> X.shape, bool(Ball(dim=100).inside(X).all())
        ([50, 100], True)
    """

    def __init__(self, center=None, radius=1.0, dim=None):
        if center is None:
            if dim is None:
                raise ValueError("Ball needs a center or a dim")
            center = [0.0] * int(dim)
        self.center = [float(c) for c in center]
        if dim is not None and len(self.center) != dim:
            raise ValueError(f"Ball center has {len(self.center)} coordinates, dim is {dim}")
        if len(self.center) < 1:
            raise ValueError("a Ball needs dimension at least 1")
        self.dim = len(self.center)
        self.radius = float(radius)
        if not self.radius > 0:
            raise ValueError(f"radius must be positive, got {radius!r}")

    def __repr__(self):
        return f"Ball(dim={self.dim}, radius={self.radius})"

    @property
    def measure(self):
        d = self.dim
        return math.pi ** (d / 2) / math.gamma(d / 2 + 1) * self.radius ** d

    def bounds(self):
        return ([c - self.radius for c in self.center], [c + self.radius for c in self.center])

    def _rel(self, X):
        return X - pf.to_tensor(self.center, dtype=X.dtype)

    def _directions(self, n, dtype, keys):
        G = prims.random_normal(shape=(n, self.dim), dtype=dtype, key=keys())
        return G / pf.sqrt((G * G).sum(axis=1, keepdim=True))

    def sample_interior(self, n, method="uniform", seed=None, dtype=None):
        _check_n(n)
        dtype = _dtype(dtype)
        keys = _Keys(seed)
        U = unit_samples(n, 1, method, None if seed is None else _mix(seed, 991), dtype)
        r = self.radius * U[:, 0:1] ** (1.0 / self.dim)
        return pf.to_tensor(self.center, dtype=dtype) + r * self._directions(n, dtype, keys)

    def sample_boundary(self, n, method="uniform", seed=None, dtype=None, normals=False):
        _check_n(n)
        dtype = _dtype(dtype)
        N = self._directions(n, dtype, _Keys(seed))
        X = pf.to_tensor(self.center, dtype=dtype) + self.radius * N
        return (X, N) if normals else X

    def inside(self, X, tol=1e-12):
        X = _as_points(X, self.dim)
        R = self._rel(X)
        return pf.sqrt((R * R).sum(axis=1)) <= self.radius + tol

    def on_boundary(self, X, tol=1e-9):
        X = _as_points(X, self.dim)
        R = self._rel(X)
        return pf.abs(pf.sqrt((R * R).sum(axis=1)) - self.radius) <= tol

    def normal(self, X):
        X = _as_points(X, self.dim)
        R = self._rel(X)
        return R / pf.sqrt((R * R).sum(axis=1, keepdim=True))
