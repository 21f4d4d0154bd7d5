"""pf.linalg in use: a Gaussian-process fit with LBFGS, the Hessian of slogdet against its
closed form, eigh with repeated eigenvalues, and the errors for bad input."""

import importlib.util
import pathlib
import warnings

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import import_extra

_EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "gaussian_process.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("gaussian_process", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gaussian_process_fit():
    gp = _load_example()
    x, y = gp.make_data(n=25, seed=1)
    start = pf.to_tensor([0.3, -0.2, -1.0], dtype="float64")
    # the marginal likelihood's gradient (cholesky, cholesky_solve, slogdet) vs differences
    assert gp.check_gradient(start, x, y) < 1e-6
    params = gp.fit(x, y, start=(0.3, -0.2, -1.0))
    p = params.detach()
    p.stop_gradient = False
    (grad,) = pf.grad(gp.negative_log_likelihood(p, x, y), [p])
    assert np.abs(grad.numpy()).max() < 1e-3  # LBFGS reached a stationary point
    fitted = gp.negative_log_likelihood(params, x, y).item()
    assert fitted < gp.negative_log_likelihood(start, x, y).item() - 1.0
    # the same nll in NumPy, minimised by SciPy (an independent oracle of the optimum)
    xs, ys = x.numpy()[:, 0], y.numpy()[:, 0]

    def nll(log_params):
        length, signal, noise = np.exp(log_params)
        k = signal ** 2 * np.exp(-0.5 * (xs[:, None] - xs[None]) ** 2 / length ** 2)
        k += noise ** 2 * np.eye(len(xs))
        return (0.5 * ys @ np.linalg.solve(k, ys) + 0.5 * np.linalg.slogdet(k)[1]
                + 0.5 * len(xs) * np.log(2 * np.pi))

    assert abs(nll(params.numpy()) - fitted) < 1e-10
    optimize = import_extra("test", "scipy.optimize")
    best = optimize.minimize(nll, [0.3, -0.2, -1.0], method="Nelder-Mead",
                             options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
    assert fitted < best.fun + 1e-6
    np.testing.assert_allclose(params.numpy(), best.x, atol=2e-3)


def test_slogdet_hessian_matches_the_closed_form():
    """d2 log|det A| / dA_ij dA_kl = -(A^-1)_jk (A^-1)_li, by pf.hessian and by forward
    over reverse, for a general (non-symmetric) matrix."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3)) + 2 * np.eye(3)
    inv = np.linalg.inv(a)
    expected = -np.einsum("jk,li->ijkl", inv, inv)

    def logdet(m):
        return pf.linalg.slogdet(m)[1]

    h = pf.hessian(logdet)(pf.to_tensor(a)).numpy()
    np.testing.assert_allclose(h, expected, rtol=1e-10, atol=1e-12)
    h2 = pf.jacfwd(pf.jacrev(logdet))(pf.to_tensor(a)).numpy()
    np.testing.assert_allclose(h2, expected, rtol=1e-10, atol=1e-12)
    # third order by the Taylor rule: d3 along v equals 2 tr((A^-1 V)^3)
    v = rng.standard_normal((3, 3))
    _, series = pf.jet(logdet, (pf.to_tensor(a),), ([pf.to_tensor(v), pf.zeros([3, 3],
                                                                               "float64"),
                                                     pf.zeros([3, 3], "float64")],))
    m = inv @ v
    np.testing.assert_allclose(series[2].item(), 2 * np.trace(m @ m @ m), rtol=1e-10)


def _degenerate_matrix():
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return q @ np.diag([1.0, 1.0, 2.0]) @ q.T


def test_eigh_repeated_eigenvalues_invariant_loss_is_finite_and_right():
    a = pf.to_tensor(_degenerate_matrix(), stop_gradient=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the loss is basis-invariant
        w, v = pf.linalg.eigh(a)
        # sum of w^2 = |A|_F^2 (gradient 2A), and the projector onto the repeated eigenspace
        p = v[:, :2] @ v[:, :2].T
        loss = (w ** 2).sum() + (p * pf.to_tensor(np.arange(9.0).reshape(3, 3))).sum()
        (g,) = pf.grad(loss, [a])
    # closed form: the projector's derivative couples the two eigenspaces (gap 1)
    am = _degenerate_matrix()
    vals, vecs = np.linalg.eigh(am)
    c = np.arange(9.0).reshape(3, 3)
    c = 0.5 * (c + c.T)
    u, z = vecs[:, :2], vecs[:, 2:]
    # dP = -(U U^T dA Z Z^T + Z Z^T dA U U^T) / (2 - 1): gradient -2 sym(U U^T C Z Z^T)
    proj = -(u @ u.T @ c @ z @ z.T + z @ z.T @ c @ u @ u.T)
    assert np.isfinite(g.numpy()).all()
    np.testing.assert_allclose(g.numpy(), 2 * am + proj, atol=1e-10)


def test_eigh_repeated_eigenvalues_basis_dependent_loss_warns():
    a = pf.to_tensor(_degenerate_matrix(), stop_gradient=False)
    w, v = pf.linalg.eigh(a)
    with pytest.warns(RuntimeWarning, match="repeated eigenvalues"):
        pf.grad((v[:, 0] * pf.to_tensor([1.0, 2.0, 3.0])).sum(), [a])


def test_bad_input_errors_name_op_shapes_and_dtypes():
    with pytest.raises(pf.PrimitiveError, match="solve: the matrix is singular"):
        pf.linalg.solve(pf.zeros([2, 2], "float64"), pf.ones([2], "float64"))
    with pytest.raises(pf.PrimitiveError, match="solve: the matrix is singular"):
        pf.linalg.inv(pf.to_tensor([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(pf.PrimitiveError, match="not positive definite"):
        pf.linalg.cholesky(pf.to_tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match=r"cholesky: expects square .*\[2, 3\]"):
        pf.linalg.cholesky(pf.ones([2, 3]))
    with pytest.raises(ValueError, match=r"solve: the batch dims .*\[2, 3, 3\].*\[4, 3, 1\]"):
        pf.linalg.solve(pf.ones([2, 3, 3]), pf.ones([4, 3, 1]))
    with pytest.raises(ValueError, match=r"solve: shapes \[3, 3\] and \[2, 1\]"):
        pf.linalg.solve(pf.ones([3, 3]), pf.ones([2, 1]))
    with pytest.raises(TypeError, match=r"eigh: expects a floating-point matrix, got int64"):
        pf.linalg.eigh(pf.ones([3, 3], dtype="int64"))
    with pytest.raises(TypeError, match=r"det: complex matrices are not supported.*complex64"):
        pf.linalg.det(pf.ones([2, 2], dtype="complex64"))
    with pytest.raises(ValueError, match="matrix_norm: unsupported p"):
        pf.linalg.matrix_norm(pf.ones([2, 2]), p=3)


def test_batched_and_broadcast_solves_match_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 1, 3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((5, 3, 2))
    got = pf.linalg.solve(pf.to_tensor(a), pf.to_tensor(b)).numpy()
    np.testing.assert_allclose(got, np.linalg.solve(a, b), rtol=1e-12)
    spd = a @ np.swapaxes(a, -1, -2)
    np.testing.assert_allclose(pf.linalg.det(pf.to_tensor(spd)).numpy(),
                               np.linalg.det(spd), rtol=1e-10)
    np.testing.assert_allclose(pf.jit(lambda m: pf.linalg.inv(m))(pf.to_tensor(a)).numpy(),
                               np.linalg.inv(a), rtol=1e-10)
