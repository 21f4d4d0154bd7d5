"""Geometries and samplers: points inside, boundary points on the boundary with unit
outward normals, Latin-hypercube stratification, seeding, errors."""

import math
import sys

import pytest

import primflow as pf
from primflow.testing.extras import requires_extra
from primflow.science import Box, Disk, Interval, Polygon, Rectangle, unit_samples

F64 = "float64"
METHODS = ["uniform", "lhs", pytest.param("sobol", marks=requires_extra("sobol"))]
L_SHAPE = [(0, 0), (2, 0), (2, 1), (1, 1), (1, 2), (0, 2)]  # non-convex
GEOMETRIES = {
    "interval": lambda: Interval(-1.0, 2.0),
    "rectangle": lambda: Rectangle([0.0, -1.0], [2.0, 3.0]),
    "box3": lambda: Box([0.0, 0.0, 0.0], [1.0, 2.0, 0.5]),
    "disk": lambda: Disk([0.5, -0.5], 1.5),
    "triangle": lambda: Polygon([(0, 0), (1, 0), (0, 1)]),
    "lshape": lambda: Polygon(L_SHAPE),
    "lshape_cw": lambda: Polygon(L_SHAPE[::-1]),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_interior_points_inside(name, method):
    g = GEOMETRIES[name]()
    X = g.sample_interior(200, method=method, seed=1, dtype=F64)
    assert X.shape == [200, g.dim] and X.dtype == pf.float64
    assert bool(g.inside(X).all())


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_boundary_points_and_normals(name, method):
    g = GEOMETRIES[name]()
    X, N = g.sample_boundary(120, method=method, seed=2, dtype=F64, normals=True)
    assert X.shape == [120, g.dim] and N.shape == [120, g.dim]
    assert bool(g.on_boundary(X, tol=1e-9).all())
    lengths = pf.sqrt((N * N).sum(axis=1))
    assert float(pf.abs(lengths - 1.0).max()) < 1e-12
    # sampled points miss the corners, where the normal is not unique
    assert float(pf.abs(g.normal(X) - N).max()) < 1e-12
    if g.dim == 2:  # outward: a small step along the normal leaves the domain
        assert not bool(g.inside(X + 1e-6 * N, tol=0.0).any())


def test_polygon_normals_match_edges():
    g = Polygon(L_SHAPE[::-1])  # clockwise input is re-oriented
    X = pf.to_tensor([[1.0, 0.0], [2.0, 0.5], [1.5, 1.0], [1.0, 1.5], [0.5, 2.0], [0.0, 1.0]],
                     dtype=F64)
    expected = [[0, -1], [1, 0], [0, 1], [1, 0], [0, 1], [-1, 0]]
    assert g.normal(X).numpy().tolist() == expected
    assert g.measure == pytest.approx(3.0)
    assert not bool(g.inside(pf.to_tensor([[1.5, 1.5]], dtype=F64)).any())  # the notch


def test_rectangle_normals_and_sides():
    r = Rectangle([0.0, 0.0], [2.0, 1.0])
    X = pf.to_tensor([[0.0, 0.5], [2.0, 0.5], [1.0, 0.0], [1.0, 1.0]], dtype=F64)
    assert r.normal(X).numpy().tolist() == [[-1, 0], [1, 0], [0, -1], [0, 1]]
    left = r.sample_side("left", 10, seed=0, dtype=F64)
    assert float(pf.abs(left[:, 0]).max()) == 0.0
    with pytest.raises(ValueError, match="unknown side"):
        r.sample_side("front", 3)


def test_boundary_is_spread_by_arc_length():
    r = Rectangle([0.0, 0.0], [3.0, 1.0])  # perimeter 8: long sides hold 3/8 each
    X = r.sample_boundary(8000, method="lhs", seed=0, dtype=F64)
    bottom = float(((X[:, 1] == 0.0) * 1.0).sum()) / 8000
    assert bottom == pytest.approx(3 / 8, abs=0.01)


def test_disk_normals_are_radial_and_interior_uniform():
    d = Disk([0.0, 0.0], 2.0)
    X, N = d.sample_boundary(50, seed=3, dtype=F64, normals=True)
    assert float(pf.abs(X - 2.0 * N).max()) < 1e-12
    inner = d.sample_interior(20000, method="lhs", seed=4, dtype=F64)
    r2 = (inner * inner).sum(axis=1)
    frac = float(((r2 <= 1.0) * 1.0).mean())  # area fraction of the radius-1 disk: 1/4
    assert frac == pytest.approx(0.25, abs=0.01)


@pytest.mark.parametrize("n,dim", [(1, 1), (7, 2), (100, 3), (1000, 5)])
def test_latin_hypercube_stratification(n, dim):
    U = unit_samples(n, dim, method="lhs", seed=11, dtype=F64)
    assert U.shape == [n, dim]
    strata = pf.floor(U * n).numpy()
    for j in range(dim):
        assert sorted(int(v) for v in strata[:, j]) == list(range(n))
    assert float(U.min()) >= 0.0 and float(U.max()) < 1.0


def test_lhs_carries_over_to_boxes():
    r = Rectangle([1.0, -2.0], [3.0, 2.0])
    X = r.sample_interior(50, method="lhs", seed=5, dtype=F64)
    sx = sorted(int(v) for v in pf.floor((X[:, 0] - 1.0) / 2.0 * 50).numpy())
    sy = sorted(int(v) for v in pf.floor((X[:, 1] + 2.0) / 4.0 * 50).numpy())
    assert sx == list(range(50)) and sy == list(range(50))


@pytest.mark.parametrize("method", METHODS)
def test_seeds(method):
    a = unit_samples(16, 2, method, seed=7, dtype=F64).numpy()
    b = unit_samples(16, 2, method, seed=7, dtype=F64).numpy()
    c = unit_samples(16, 2, method, seed=8, dtype=F64).numpy()
    assert (a == b).all() and not (a == c).all()
    # seed=None follows the global stream: reproducible with pf.seed
    pf.seed(3)
    d = unit_samples(16, 2, method, dtype=F64).numpy()
    pf.seed(3)
    e = unit_samples(16, 2, method, dtype=F64).numpy()
    assert (d == e).all()


def test_private_seed_leaves_global_stream_alone():
    pf.seed(5)
    a = pf.rand([3]).numpy()
    pf.seed(5)
    unit_samples(10, 2, "lhs", seed=1)
    b = pf.rand([3]).numpy()
    assert (a == b).all()


def test_grid_ordering():
    r = Rectangle([0.0, 10.0], [1.0, 12.0])
    G = r.grid(3, 2, dtype=F64).numpy().tolist()
    assert G == [[0.0, 10.0], [0.0, 12.0], [0.5, 10.0], [0.5, 12.0], [1.0, 10.0],
                 [1.0, 12.0]]


def test_interval_boundary():
    X, N = Interval(0.0, 1.0).sample_boundary(4, normals=True, dtype=F64)
    assert X.numpy().ravel().tolist() == [0.0, 1.0, 0.0, 1.0]
    assert N.numpy().ravel().tolist() == [-1.0, 1.0, -1.0, 1.0]


def test_errors():
    with pytest.raises(ValueError, match="uniform, lhs, sobol"):
        unit_samples(4, 2, method="halton")
    with pytest.raises(ValueError, match="greater than"):
        Rectangle([0.0, 0.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="seed"):
        unit_samples(4, 2, seed=-1)
    with pytest.raises(ValueError, match="non-negative int"):
        Rectangle().sample_interior(-3)
    with pytest.raises(ValueError, match="collinear"):
        Polygon([(0, 0), (1, 1), (2, 2)])
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        Rectangle().inside(pf.zeros([3, 3]))


def test_sobol_without_scipy_says_how_to_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    monkeypatch.setitem(sys.modules, "scipy.stats.qmc", None)
    with pytest.raises(ImportError, match="pip install scipy"):
        unit_samples(8, 2, method="sobol")


def test_measure():
    assert Rectangle([0, 0], [2, 3]).measure == 6.0
    assert Disk(radius=2.0).measure == pytest.approx(4 * math.pi)
    assert Box([0, 0, 0], [1, 2, 3]).measure == 6.0
