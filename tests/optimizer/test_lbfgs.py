"""LBFGS and its strong-Wolfe line search."""

import math

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import import_extra
from primflow.optimizer._lbfgs import _cubic_minimizer


def _rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def _closure_for(opt, x, fn, counter=None):
    def closure():
        opt.clear_grad()
        loss = fn(x)
        loss.backward()
        if counter is not None:
            counter.append(float(loss))
        return loss
    return closure


def test_rosenbrock_from_standard_start():
    x = pf.to_tensor([-1.5, 2.0], dtype="float64", stop_gradient=False)
    opt = pf.optimizer.LBFGS(learning_rate=1.0, max_iter=500, history_size=10,
                             tolerance_grad=1e-10, tolerance_change=1e-14, parameters=[x],
                             line_search_fn="strong_wolfe")
    evals = []
    first = opt.step(_closure_for(opt, x, _rosenbrock, evals))
    assert float(first) == pytest.approx(_rosenbrock(np.array([-1.5, 2.0])))
    assert float(_rosenbrock(x)) < 1e-6
    np.testing.assert_allclose(x.numpy(), [1.0, 1.0], atol=1e-3)
    assert len(evals) <= 300, len(evals)
    assert opt.state_dict()["state"]["func_evals"] == len(evals)


def test_fixed_step_lbfgs_on_a_convex_quadratic():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((5, 5))
    a = m @ m.T + 5 * np.eye(5)
    b = rng.standard_normal(5)
    at, bt = pf.to_tensor(a), pf.to_tensor(b)
    x = pf.to_tensor(np.zeros(5), stop_gradient=False)
    opt = pf.optimizer.LBFGS(learning_rate=1.0, max_iter=100, parameters=[x],
                             tolerance_grad=1e-10, tolerance_change=1e-14)
    opt.step(_closure_for(opt, x, lambda v: 0.5 * (v * (at @ v)).sum() - (bt * v).sum()))
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-5, atol=1e-7)


def test_weight_decay_enters_loss_and_gradient():
    c = np.array([2.0, -4.0])
    x = pf.to_tensor(np.zeros(2), stop_gradient=False)
    opt = pf.optimizer.LBFGS(parameters=[x], weight_decay=1.0, line_search_fn="strong_wolfe",
                             max_iter=50)
    opt.step(_closure_for(opt, x, lambda v: 0.5 * ((v - pf.to_tensor(c)) ** 2).sum()))
    np.testing.assert_allclose(x.numpy(), c / 2, rtol=1e-6)


def _wolfe_check(fn, x0, d, t0, c1=1e-4, c2=0.9):
    """Runs the line search on fn along d from x0 and asserts both strong Wolfe conditions."""
    x0 = pf.to_tensor(x0)
    d = pf.to_tensor(d)

    def value_and_grad(x):
        x = x.detach()
        x.stop_gradient = False
        f = fn(x)
        (g,) = pf.grad(f, x)
        return float(f), g

    def obj(x, t, direction):
        return value_and_grad(x + t * direction)

    f0, g0 = value_and_grad(x0)
    gtd0 = float((g0 * d).sum())
    f, g, t, n = pf.optimizer.strong_wolfe(obj, x0, t0, d, f0, g0, gtd0, c1=c1, c2=c2)
    f_check, g_check = value_and_grad(x0 + t * d)
    assert f == pytest.approx(f_check) and np.allclose(g.numpy(), g_check.numpy())
    assert f <= f0 + c1 * t * gtd0, "sufficient decrease (Armijo) violated"
    assert abs(float((g * d).sum())) <= c2 * abs(gtd0), "curvature condition violated"
    return t, n


def test_strong_wolfe_when_the_first_step_overshoots():
    # Rosenbrock from the standard start, steepest descent with a unit step: far too long,
    # so the search must bracket and zoom
    x0 = np.array([-1.5, 2.0])
    g = np.array([-2 * (1 - x0[0]) - 400 * x0[0] * (x0[1] - x0[0] ** 2),
                  200 * (x0[1] - x0[0] ** 2)])
    t, n = _wolfe_check(_rosenbrock, x0, -g, 1.0)
    assert t < 1.0 and n > 1
    t, n = _wolfe_check(_rosenbrock, x0, -g, 1.0, c2=0.1)  # tight curvature: more zooming
    assert t < 1.0


def test_strong_wolfe_when_the_first_step_is_too_short():
    # a quadratic with its minimum at t = 1000 along d: the search must extrapolate
    x0 = np.array([10.0, -10.0])
    d = -x0 * 1e-3
    t, n = _wolfe_check(lambda x: 0.5 * (x ** 2).sum(), x0, d, 1.0)
    assert t > 10.0 and n > 1


def test_strong_wolfe_on_a_nonconvex_function():
    fn = lambda x: (pf.sin(3 * x) + 0.1 * x ** 2).sum()  # noqa: E731
    for start in (0.3, 1.7, -2.2):
        x0 = np.array([start])
        slope = 3 * math.cos(3 * start) + 0.2 * start
        _wolfe_check(fn, x0, np.array([-slope]), 1.0)


def test_strong_wolfe_needs_a_descent_direction():
    with pytest.raises(ValueError, match="descent direction"):
        pf.optimizer.strong_wolfe(None, None, 1.0, pf.ones([1]), 0.0, pf.ones([1]), 0.5)


def test_cubic_interpolation():
    # exact for a quadratic from any two points
    f = lambda t: (t - 0.3) ** 2  # noqa: E731
    df = lambda t: 2 * (t - 0.3)  # noqa: E731
    assert _cubic_minimizer(0.0, f(0.0), df(0.0), 1.0, f(1.0), df(1.0), 0, 1) == \
        pytest.approx(0.3)
    # exact for a cubic: t^3 - 3t has its local minimum at 1
    c = lambda t: t ** 3 - 3 * t  # noqa: E731
    dc = lambda t: 3 * t ** 2 - 3  # noqa: E731
    assert _cubic_minimizer(2.0, c(2.0), dc(2.0), 0.0, c(0.0), dc(0.0), 0, 2) == \
        pytest.approx(1.0)
    # clamped to the bounds; midpoint when no real minimiser exists
    assert _cubic_minimizer(0.0, f(0.0), df(0.0), 1.0, f(1.0), df(1.0), 0.5, 1.0) == 0.5
    assert _cubic_minimizer(0.0, 0.0, 3.0, 1.0, 2.0, 3.0, 0.0, 1.0) == 0.5  # monotone cubic


def test_state_dict_resume_matches_uninterrupted_run():
    def make():
        x = pf.to_tensor([-1.5, 2.0], dtype="float64", stop_gradient=False)
        opt = pf.optimizer.LBFGS(max_iter=5, parameters=[x], line_search_fn="strong_wolfe")
        return x, opt

    xa, oa = make()
    for _ in range(3):
        oa.step(_closure_for(oa, xa, _rosenbrock))
    xb, ob = make()
    ob.step(_closure_for(ob, xb, _rosenbrock))
    state = ob.state_dict()
    xc, oc = make()
    with pf.no_grad():
        xc.set_value(xb.numpy())
    oc.set_state_dict(state)
    for _ in range(2):
        oc.step(_closure_for(oc, xc, _rosenbrock))
    np.testing.assert_array_equal(xa.numpy(), xc.numpy())


def test_lbfgs_errors():
    x = pf.to_tensor([1.0], stop_gradient=False)
    opt = pf.optimizer.LBFGS(parameters=[x])
    with pytest.raises(TypeError, match="closure"):
        opt.step()
    with pytest.raises(NotImplementedError, match="step\\(closure\\)"):
        opt.minimize((x * x).sum())
    with pytest.raises(ValueError, match="grad_clip"):
        pf.optimizer.LBFGS(parameters=[x], grad_clip=pf.nn.ClipGradByGlobalNorm(1.0))
    with pytest.raises(ValueError, match="line_search_fn"):
        pf.optimizer.LBFGS(parameters=[x], line_search_fn="armijo")
    with pytest.raises(ValueError, match="parameters"):
        pf.optimizer.LBFGS()


# ---- convergence to the exact minimum (LBFGS stalled 3e-5 short of it) -----------

def _quadratic_problem(n, condition, seed):
    """A random SPD matrix with the given condition number, and b: min 0.5 x'Ax - b'x."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    a = q @ np.diag(np.linspace(1.0, condition, n)) @ q.T
    return a, rng.normal(size=n)


def _run_lbfgs(fn, x0, steps, line_search_fn="strong_wolfe", max_iter=20):
    x = pf.to_tensor(x0, dtype="float64", stop_gradient=False)
    opt = pf.optimizer.LBFGS(learning_rate=1.0, max_iter=max_iter, tolerance_grad=1e-12,
                             parameters=[x], line_search_fn=line_search_fn)
    closure = _closure_for(opt, x, fn)
    for _ in range(steps):
        opt.step(closure)
    return x, opt


@pytest.mark.parametrize("line_search_fn", ["strong_wolfe", None])
@pytest.mark.parametrize("n,condition,seed", [(3, 3.5, 0), (3, 3.5, 1), (5, 10.0, 2),
                                              (8, 50.0, 3)])
def test_lbfgs_reaches_the_exact_minimum_of_quadratics(n, condition, seed, line_search_fn):
    a, b = _quadratic_problem(n, condition, seed)
    at, bt = pf.to_tensor(a), pf.to_tensor(b)

    def loss(x):
        return 0.5 * (x * pf.matmul(at, x)).sum() - (bt * x).sum()

    x, opt = _run_lbfgs(loss, np.zeros(n), steps=8, line_search_fn=line_search_fn)
    grad = a @ x.numpy() - b
    assert np.abs(grad).max() <= 1e-10, np.abs(grad).max()
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-9, atol=1e-10)
    assert opt.state_dict()["state"]["n_iter"] <= 4 * n + 8


def test_every_step_call_moves_until_the_gradient_is_zero():
    """The reported case: a 3-variable quadratic, condition 3.5, default tolerances except
    tolerance_grad. Each step(closure) past the first used to evaluate without moving."""
    a, b = _quadratic_problem(3, 3.5, 0)
    at, bt = pf.to_tensor(a), pf.to_tensor(b)
    x = pf.to_tensor(np.zeros(3), dtype="float64", stop_gradient=False)
    opt = pf.optimizer.LBFGS(parameters=[x], tolerance_grad=1e-12,
                             line_search_fn="strong_wolfe")
    closure = _closure_for(opt, x, lambda v: 0.5 * (v * pf.matmul(at, v)).sum()
                           - (bt * v).sum())
    norms = []
    for _ in range(6):
        opt.step(closure)
        norms.append(np.abs(a @ x.numpy() - b).max())
        if norms[-1] <= 1e-10:
            break
    assert norms[-1] <= 1e-10, norms
    assert all(later < earlier for earlier, later in zip(norms, norms[1:])), norms


def test_lbfgs_rosenbrock_matches_scipy():
    scipy_optimize = import_extra("test", "scipy.optimize")
    x0 = np.array([-1.2, 1.0])
    x, opt = _run_lbfgs(_rosenbrock, x0, steps=10, max_iter=100)
    reference = scipy_optimize.minimize(scipy_optimize.rosen, x0, jac=scipy_optimize.rosen_der,
                                        method="BFGS", options={"gtol": 1e-11})
    g = scipy_optimize.rosen_der(x.numpy())
    assert np.abs(g).max() <= 1e-10, g
    np.testing.assert_allclose(x.numpy(), [1.0, 1.0], atol=1e-10)  # the known minimum
    np.testing.assert_allclose(x.numpy(), reference.x, atol=1e-6)
    assert opt.state_dict()["state"]["n_iter"] <= 100


def test_lbfgs_agrees_with_torch_when_installed():
    torch = pytest.importorskip("torch")
    a, b = _quadratic_problem(3, 3.5, 0)
    xt = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    at, bt = torch.tensor(a), torch.tensor(b)
    opt_t = torch.optim.LBFGS([xt], tolerance_grad=1e-12, line_search_fn="strong_wolfe")

    def closure_t():
        opt_t.zero_grad()
        loss = 0.5 * xt @ at @ xt - bt @ xt
        loss.backward()
        return loss

    for _ in range(4):
        opt_t.step(closure_t)
    pa, pb = pf.to_tensor(a), pf.to_tensor(b)
    x, _ = _run_lbfgs(lambda v: 0.5 * (v * pf.matmul(pa, v)).sum() - (pb * v).sum(),
                      np.zeros(3), steps=4)
    np.testing.assert_allclose(x.numpy(), xt.detach().numpy(), atol=1e-8)
