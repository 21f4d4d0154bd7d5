"""Differential operators against closed forms, pf.hessian and finite differences; both
methods; differentiability with respect to parameters."""

import itertools
import math

import pytest

import primflow as pf
from primflow.science import operators as ops
from primflow.science.operators import Derivatives

F64 = "float64"
PI = math.pi
METHODS = ["reverse", "forward", "taylor", "collapsed"]


def sinsin(X):
    return pf.sin(PI * X[:, 0:1]) * pf.sin(PI * X[:, 1:2])


def points(n, d, seed=0):
    pf.seed(seed)
    return pf.rand([n, d], dtype=F64)


class TinyMLP:
    """tanh MLP d -> 8 -> 8 -> 1 with float64 parameters that require grad."""

    def __init__(self, d, seed=0):
        pf.seed(seed)
        sizes = [d, 8, 8, 1]
        self.params = []
        for a, b in itertools.pairwise(sizes):
            W = pf.randn([a, b], dtype=F64) * (1.0 / math.sqrt(a))
            c = pf.randn([b], dtype=F64) * 0.1
            W.stop_gradient = False
            c.stop_gradient = False
            self.params += [W, c]

    def __call__(self, X):
        h = X
        for k in range(0, len(self.params) - 2, 2):
            h = pf.tanh(h @ self.params[k] + self.params[k + 1])
        return h @ self.params[-2] + self.params[-1]


def close(a, b, tol):
    return float(pf.abs(a - b).max()) <= tol * max(1.0, float(pf.abs(b).max()))


@pytest.mark.parametrize("method", METHODS)
def test_biharmonic_of_sin_sin(method):
    X = points(40, 2)
    b = ops.biharmonic(sinsin, X, method=method)
    assert b.shape == [40, 1]
    assert close(b, 4 * PI ** 4 * sinsin(X), 1e-11)


@pytest.mark.parametrize("method", METHODS)
def test_laplacian_gradient_partial_of_sin_sin(method):
    X = points(30, 2, seed=1)
    x, y = X[:, 0:1], X[:, 1:2]
    assert close(ops.laplacian(sinsin, X, method=method), -2 * PI ** 2 * sinsin(X), 1e-12)
    g = ops.gradient(sinsin, X, method=method)
    expected = pf.concat([PI * pf.cos(PI * x) * pf.sin(PI * y),
                          PI * pf.sin(PI * x) * pf.cos(PI * y)], axis=1)
    assert g.shape == [30, 2] and close(g, expected, 1e-12)
    p = ops.partial(sinsin, X, (0, 1, 1), method=method)
    assert close(p, -PI ** 3 * pf.cos(PI * x) * pf.sin(PI * y), 1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_biharmonic_3d_polynomial(method):
    # Δ²(x² y² z²) = 8 (x² + y² + z²): checks the d-dimensional interpolation formula
    X = points(10, 3, seed=2)
    f = lambda X: (X[:, 0:1] * X[:, 1:2] * X[:, 2:3]) ** 2
    b = ops.biharmonic(f, X, method=method)
    assert close(b, 8 * (X * X).sum(axis=1, keepdim=True), 1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_divergence(method):
    X = points(12, 3, seed=3)
    F = lambda X: pf.concat([X[:, 0:1] ** 2 * X[:, 1:2], pf.sin(X[:, 1:2]),
                             X[:, 2:3] * X[:, 0:1]], axis=1)
    expected = 2 * X[:, 0:1] * X[:, 1:2] + pf.cos(X[:, 1:2]) + X[:, 0:1]
    assert close(ops.divergence(F, X, method=method), expected, 1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_laplacian_of_mlp_is_trace_of_hessian(method):
    net = TinyMLP(3)
    X = points(5, 3, seed=4)
    lap = ops.laplacian(net, X, method=method)
    for i in range(5):
        H = pf.hessian(lambda x: net(pf.reshape(x, [1, 3])).sum())(X[i])
        trace = H[0, 0] + H[1, 1] + H[2, 2]
        assert abs(float(lap[i, 0]) - float(trace)) < 1e-12


def test_methods_agree_on_an_mlp_biharmonic():
    net = TinyMLP(2, seed=5)
    X = points(20, 2, seed=6)
    a = ops.biharmonic(net, X, method="reverse")
    b = ops.biharmonic(net, X, method="forward")
    assert close(a, b, 1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_operators_are_differentiable_in_the_parameters(method):
    # d/dW mean(Δ²u(X)^2) against a central finite difference in one weight
    net = TinyMLP(2, seed=7)
    X = points(16, 2, seed=8)
    W = net.params[2]

    def loss():
        b = ops.biharmonic(net, X, method=method)
        return (b * b).mean()

    g, = pf.grad(loss(), W)
    h = 1e-5
    base = W.detach()
    E = pf.zeros(W.shape, dtype=F64)
    E[1, 2] = 1.0
    vals = []
    for s in (1.0, -1.0):
        W.set_value(base + s * h * E)
        vals.append(float(loss()))
    W.set_value(base)
    fd = (vals[0] - vals[1]) / (2 * h)
    assert abs(float(g[1, 2]) - fd) <= 1e-6 * max(1.0, abs(fd))


def test_derivatives_memo_and_symmetry():
    X = points(6, 2, seed=9)
    f = lambda X: X[:, 0:1] ** 3 * X[:, 1:2] ** 2
    D = Derivatives(f, X)
    x, y = X[:, 0:1], X[:, 1:2]
    assert close(D(0, 1), 6 * x * x * y, 1e-13)
    assert D(0, 1) is D(1, 0)
    assert close(D(0, 0, 1, 1), 12 * x, 1e-13)
    assert close(D.u, f(X), 0.0)
    assert close(D.laplacian(), 6 * x * y * y + 2 * x ** 3, 1e-13)
    assert close(D.biharmonic(), 24 * x, 1e-12)


def test_polynomial_of_low_degree_gives_zeros():
    X = points(4, 2, seed=10)
    lin = lambda X: 2.0 * X[:, 0:1] + X[:, 1:2]
    assert float(pf.abs(ops.laplacian(lin, X)).max()) == 0.0
    assert float(pf.abs(ops.biharmonic(lin, X)).max()) == 0.0
    only_x = lambda X: X[:, 0:1] ** 2
    assert close(ops.partial(only_x, X, (0, 0)), 2.0 + 0 * X[:, 0:1], 0.0)
    assert float(pf.abs(ops.partial(only_x, X, (1,))).max()) == 0.0


def test_one_dimensional_outputs_keep_their_shape():
    X = points(5, 2, seed=11)
    f = lambda X: (X * X).sum(axis=1)
    assert ops.laplacian(f, X).shape == [5]
    assert float(pf.abs(ops.laplacian(f, X) - 4.0).max()) < 1e-13


def test_operators_work_under_no_grad():
    X = points(8, 2, seed=12)
    with pf.no_grad():
        b = ops.biharmonic(sinsin, X)
        lap = Derivatives(sinsin, X).laplacian()
    assert close(b, 4 * PI ** 4 * sinsin(X), 1e-11)
    assert close(lap, -2 * PI ** 2 * sinsin(X), 1e-12)


def test_derivative_flows_to_points_that_require_grad():
    X = points(3, 2, seed=13)
    X.stop_gradient = False
    lap = ops.laplacian(lambda X: (X ** 3).sum(axis=1, keepdim=True), X)  # 6x + 6y
    g, = pf.grad(lap.sum(), X)
    assert close(g, 6.0 + 0 * X, 1e-13)


def test_directional_derivative():
    X = points(4, 2, seed=14)
    v = [1.0, 2.0]
    f = lambda X: X[:, 0:1] ** 2 * X[:, 1:2] ** 2
    # d^4/dt^4 (x+t)^2 (y+2t)^2 = 4! * 1 * 4
    d4 = ops.directional(f, X, v, 4)
    assert close(d4, 96.0 + 0 * X[:, 0:1], 1e-12)


def test_errors():
    X = points(3, 2)
    with pytest.raises(ValueError, match="reverse, forward, taylor"):
        ops.laplacian(sinsin, X, method="magic")
    with pytest.raises(ValueError, match=r"\[N, d\]"):
        ops.laplacian(sinsin, pf.zeros([3], dtype=F64))
    with pytest.raises(ValueError, match="out of range"):
        ops.partial(sinsin, X, (0, 2))
    with pytest.raises(ValueError, match="one value per point"):
        ops.laplacian(lambda X: X, X)
    with pytest.raises(ValueError, match="unknown method 'stochastic' for partial"):
        ops.partial(sinsin, X, (0,), method="stochastic")
    with pytest.raises(ValueError, match="forward"):
        ops.directional(sinsin, X, [1.0, 0.0], 2, method="reverse")


def test_stochastic_estimates_are_unbiased():
    X = points(4, 2, seed=15)
    exact = 4 * PI ** 4 * sinsin(X)
    est = ops.biharmonic(sinsin, X, method="stochastic", samples=4000, seed=1)
    assert float(pf.abs(est - exact).max()) < 0.15 * float(pf.abs(exact).max())
    lap = ops.laplacian(sinsin, X, method="stochastic", samples=4000, seed=2)
    assert float(pf.abs(lap + 2 * PI ** 2 * sinsin(X)).max()) < 0.1 * 2 * PI ** 2


def test_defaults_are_valid_methods():
    for op, method in ops.DEFAULT_METHOD.items():
        assert method in ops.METHODS, (op, method)
