"""Reference solutions checked independently: by the operators (exact solutions), by
finite differences (the Cole–Hopf Burgers reference) and by the boundary conditions; and
the hard-constraint transforms enforce their conditions for any network output."""

import math

import pytest

import primflow as pf
from primflow.science import Derivatives
from primflow.science import operators as ops
from primflow.science.problems import Beam, Burgers, Heat1D, Plate, Poisson2D, cole_hopf

F64 = "float64"
PI = math.pi


def rand(shape, lo=0.0, hi=1.0, seed=0):
    pf.seed(seed)
    return lo + (hi - lo) * pf.rand(shape, dtype=F64)


def maxabs(t):
    return float(pf.abs(t).max())


def test_beam_exact_solution_satisfies_ode_and_bcs():
    p = Beam()
    X = rand([50, 1], seed=1)
    D = Derivatives(p.reference, X)
    assert maxabs(D(0, 0, 0, 0) + 1.0) < 1e-12
    ends = pf.to_tensor([[0.0], [1.0]], dtype=F64)
    E = Derivatives(p.reference, ends)
    assert maxabs(E.u[0]) == 0.0 and maxabs(E(0)[0]) == 0.0          # clamped at 0
    assert maxabs(E(0, 0)[1]) < 1e-15 and maxabs(E(0, 0, 0)[1]) < 1e-15  # free at 1


def test_poisson_exact_solution():
    p = Poisson2D()
    X = rand([40, 2], seed=2)
    assert maxabs(-ops.laplacian(p.reference, X) - p.source(X)) < 1e-11
    Xb = p.geometry.sample_boundary(40, seed=3, dtype=F64)
    assert maxabs(p.reference(Xb)) < 1e-15


@pytest.mark.parametrize("config", ["unit", "paddlescience"])
def test_plate_exact_solution_satisfies_d_biharmonic_w_equals_q(config):
    p = Plate(config)
    lo, hi = [0.0, 0.0], [p.a, p.b]
    X = pf.concat([rand([30, 1], lo[0], hi[0], seed=4), rand([30, 1], lo[1], hi[1], seed=5)],
                  axis=1)
    lhs = p.D * ops.biharmonic(p.exact_physical, X)
    q = p.load_physical(X)
    assert maxabs(lhs - q) <= 1e-9 * p.q0
    # simply supported: w = 0 and Δw = 0 on the edges
    from primflow.science import Rectangle
    Xb = Rectangle(lo, hi).sample_boundary(40, seed=6, dtype=F64)
    assert maxabs(p.exact_physical(Xb)) < 1e-15
    assert maxabs(ops.laplacian(p.exact_physical, Xb)) < 1e-14
    # the internal, scaled problem is the same one: w' = w / W at x' = x / L
    Xi = X / p.L
    assert maxabs(p.reference(Xi) * p.W - p.exact_physical(X)) < 1e-15
    assert maxabs(ops.biharmonic(p.reference, Xi) / p.K - p.load(Xi)) < 1e-9


def test_plate_paddlescience_numbers():
    p = Plate("paddlescience")
    assert p.D == pytest.approx(17944.9, abs=0.05)
    assert p.w_max == pytest.approx(4.30e-3, abs=1e-5)


def test_heat_series_satisfies_pde_ic_and_bcs():
    p = Heat1D()
    X = rand([50, 2], seed=7)
    D = Derivatives(p.reference, X)
    assert maxabs(D(1) - p.alpha * D(0, 0)) < 1e-11
    t = rand([20, 1], seed=8)
    zeros, ones = 0 * t, 0 * t + 1.0
    assert maxabs(p.reference(pf.concat([zeros, t], axis=1))) < 1e-15
    assert maxabs(p.reference(pf.concat([ones, t], axis=1))) < 1e-14
    x = rand([20, 1], seed=9)
    assert maxabs(p.reference(pf.concat([x, 0 * x], axis=1)) - p.initial(x)) < 1e-15


def _burgers_fd_residual(x, t, h=1e-4):
    u = cole_hopf(x, t)
    ux = (cole_hopf(x + h, t) - cole_hopf(x - h, t)) / (2 * h)
    uxx = (cole_hopf(x + h, t) - 2 * u + cole_hopf(x - h, t)) / (h * h)
    ut = (cole_hopf(x, t + h) - cole_hopf(x, t - h)) / (2 * h)
    nu = 0.01 / PI
    scale = pf.abs(ut) + pf.abs(u * ux) + nu * pf.abs(uxx)
    return ut + u * ux - nu * uxx, scale


def test_burgers_reference_satisfies_the_pde_by_finite_differences():
    # smooth region and the steep shock region around x = 0 at later times
    for x, t in ((rand([150], -0.95, 0.95, seed=10), rand([150], 0.05, 0.95, seed=11)),
                 (rand([100], -0.01, 0.01, seed=12), rand([100], 0.4, 0.95, seed=13))):
        r, scale = _burgers_fd_residual(x, t)
        assert float((pf.abs(r) / scale).max()) < 2e-4


def test_burgers_reference_conditions_and_quadrature_convergence():
    x = rand([64], -1.0, 1.0, seed=14)
    assert maxabs(cole_hopf(x, 0 * x) + pf.sin(PI * x)) < 1e-13        # u(x, 0)
    t = rand([32], 0.0, 1.0, seed=15)
    assert maxabs(cole_hopf(0 * t + 1.0, t)) < 1e-12                    # u(1, t) = 0
    assert maxabs(cole_hopf(0 * t - 1.0, t)) < 1e-12
    xs = rand([64], -1.0, 1.0, seed=16)
    ts = rand([64], 0.0, 1.0, seed=17)
    fine = cole_hopf(xs, ts, step=0.01, z_max=14.0)
    assert maxabs(cole_hopf(xs, ts) - fine) < 1e-12
    # the shock: the slope at x = 0 is steepest at t = 1.6037/pi, where it is -152.00516
    # (Basdevant et al., Computers & Fluids 14, 1986)
    h = 1e-6
    x0 = pf.to_tensor([-h, h], dtype=F64)
    u = cole_hopf(x0, 0 * x0 + 1.6037 / PI)
    assert float(u[1] - u[0]) / (2 * h) == pytest.approx(-152.00516, rel=1e-5)


@pytest.mark.parametrize("cls", [Poisson2D, Plate, Heat1D, Burgers, Beam])
def test_hard_constraints_hold_for_any_network(cls):
    p = cls()
    pf.seed(18)
    W = pf.randn([p.dim, 5], dtype=F64)

    def net(Z):
        return pf.tanh(Z @ W).sum(axis=1, keepdim=True) + 0.7

    u = lambda X: p.u(net, X)
    lo, hi = p.geometry.bounds()
    if cls is Beam:
        zero = pf.to_tensor([[0.0]], dtype=F64)
        D = Derivatives(u, zero)
        assert maxabs(D.u) == 0.0 and maxabs(D(0)) == 0.0
        return
    s = rand([25, 1], seed=19)
    if cls in (Poisson2D, Plate):
        Xb = p.geometry.sample_boundary(60, seed=20, dtype=F64)
        assert maxabs(u(Xb)) < 1e-14
        return
    x = lo[0] + (hi[0] - lo[0]) * s
    initial = pf.concat([x, 0 * x], axis=1)
    expected = p.reference(initial)
    assert maxabs(u(initial) - expected) < 1e-14
    for edge in (lo[0], hi[0]):
        X = pf.concat([0 * s + edge, s], axis=1)
        assert maxabs(u(X)) < 1e-14
