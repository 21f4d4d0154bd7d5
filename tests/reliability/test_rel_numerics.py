"""Numerics at the edges: infinities and masks in logsumexp/softmax, statistics of empty
inputs, integer division by zero, complex-to-real casts and the SVD at a zero singular value.
Each result is compared with what NumPy/SciPy/PyTorch give, or with a closed form or float64
finite differences."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import requires_extra

F = pf.nn.functional
NINF, INF = -math.inf, math.inf

# the three ways a composite runs: the eager fused kernel, its primitive decomposition and
# the compiled program
MODES = ("eager", "decomposed", "jit")


def _run(mode, fn, *args):
    if mode == "jit":
        return pf.jit(fn)(*args)
    if mode == "decomposed":
        with pf.decompose():
            return fn(*args)
    return fn(*args)


def _f64(values, **kw):
    return pf.to_tensor(np.asarray(values, dtype=np.float64), **kw)


# ---- logsumexp, softmax and log_softmax with infinities (masks) ---------------------------

@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # NumPy's log(0)
@pytest.mark.parametrize("mode", MODES)
def test_logsumexp_of_infinite_rows_is_what_scipy_gives(mode):
    rows = [[NINF, NINF, NINF], [INF, 1.0, 2.0], [NINF, 0.0, NINF], [INF, INF, NINF]]
    out = _run(mode, lambda x: pf.logsumexp(x, axis=1), _f64(rows))
    # scipy.special.logsumexp (and PyTorch, JAX): -inf, inf, 0, inf
    np.testing.assert_array_equal(out.numpy(), [NINF, INF, 0.0, INF])


def test_logsumexp_of_all_minus_inf_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(pf.logsumexp(pf.to_tensor([NINF, NINF]))) == NINF


@pytest.mark.parametrize("mode", MODES)
def test_logsumexp_gradient_is_the_softmax_with_zeros_at_masked_entries(mode):
    x = [[NINF, 1.0, 2.0], [0.5, NINF, NINF]]
    grad = _run(mode, pf.grad(lambda t: pf.logsumexp(t, axis=1).sum()), _f64(x))
    e1, e2 = math.exp(1.0), math.exp(2.0)
    np.testing.assert_allclose(grad.numpy(), [[0.0, e1 / (e1 + e2), e2 / (e1 + e2)],
                                              [1.0, 0.0, 0.0]], rtol=1e-12)
    assert grad.numpy()[0, 0] == 0.0 and grad.numpy()[1, 1] == 0.0


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf
def test_logsumexp_gradient_where_the_row_has_no_finite_maximum_is_nan_as_in_pytorch():
    # PyTorch's rule grad * exp(x - logsumexp(x)): nan at inf - inf, 0 at finite entries of
    # a row whose maximum is +inf
    x = _f64([[NINF, NINF], [INF, 1.0]], stop_gradient=False)
    pf.logsumexp(x, axis=1).sum().backward()
    g = x.grad.numpy()
    assert np.isnan(g[0]).all() and np.isnan(g[1, 0]) and g[1, 1] == 0.0


def test_logsumexp_second_derivative_at_a_masked_entry_is_the_closed_form():
    x = _f64([NINF, 0.3, -1.1])
    h = pf.hessian(lambda t: pf.logsumexp(t))(x).numpy()
    p = np.array([0.0, math.exp(0.3), math.exp(-1.1)])
    p /= p.sum()
    np.testing.assert_allclose(h, np.diag(p) - np.outer(p, p), atol=1e-14)


@pytest.mark.parametrize("mode", MODES)
def test_softmax_with_masks_gives_exact_zeros_and_finite_gradients(mode):
    x = [[NINF, 1.0, 2.0, NINF], [0.0, 0.0, NINF, 0.0]]
    w = _f64([[0.3, -1.2, 0.7, 2.0], [1.0, 2.0, -0.5, 0.25]])
    y = _run(mode, F.softmax, _f64(x)).numpy()
    e1, e2 = math.exp(1.0), math.exp(2.0)
    np.testing.assert_allclose(y, [[0, e1 / (e1 + e2), e2 / (e1 + e2), 0],
                                   [1 / 3, 1 / 3, 0, 1 / 3]], rtol=1e-12)
    assert y[0, 0] == y[0, 3] == y[1, 2] == 0.0
    g = _run(mode, pf.grad(lambda t: (F.softmax(t) * w).sum()), _f64(x)).numpy()
    p = y
    closed = p * (w.numpy() - (p * w.numpy()).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(g, closed, atol=1e-14)
    assert g[0, 0] == g[0, 3] == g[1, 2] == 0.0


@pytest.mark.parametrize("mode", MODES)
def test_log_softmax_with_masks_keeps_minus_inf_and_pytorchs_gradient(mode):
    x = [[NINF, 1.0, 2.0]]
    w = _f64([[0.3, -1.2, 0.7]])
    y = _run(mode, F.log_softmax, _f64(x)).numpy()
    assert y[0, 0] == NINF
    np.testing.assert_allclose(y[0, 1:], [1.0, 2.0] - np.log(math.exp(1) + math.exp(2)))
    g = _run(mode, pf.grad(lambda t: (F.log_softmax(t) * w).sum()), _f64(x)).numpy()
    # PyTorch: g - exp(out) * sum(g): the masked entry keeps its own cotangent
    p = np.exp(y)
    np.testing.assert_allclose(g, w.numpy() - p * w.numpy().sum(), atol=1e-14)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_a_fully_masked_row_is_nan_as_in_pytorch_and_jax(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = fn(_f64([[NINF, NINF], [0.0, 1.0]])).numpy()
    assert np.isnan(out[0]).all() and np.isfinite(out[1]).all()


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("mode", MODES)
def test_softmax_over_an_empty_axis_is_empty(fn, mode):
    out = _run(mode, fn, pf.zeros([2, 0]))
    assert out.shape == [2, 0] and out.dtype == pf.float32


@pytest.mark.parametrize("mode", MODES)
def test_logsumexp_over_an_empty_axis_is_minus_inf(mode):
    out = _run(mode, lambda x: pf.logsumexp(x, axis=1, keepdim=True), pf.zeros([3, 0]))
    assert out.shape == [3, 1]
    np.testing.assert_array_equal(out.numpy(), np.full((3, 1), NINF))


# ---- statistics with no degrees of freedom -------------------------------------------------

@pytest.mark.parametrize("fn,kwargs", [
    (pf.var, {}), (pf.std, {}), (pf.var, {"unbiased": False}), (pf.mean, {}),
], ids=["var", "std", "var-biased", "mean"])
def test_statistics_of_an_empty_tensor_are_nan_with_a_warning(fn, kwargs):
    with pytest.warns(RuntimeWarning, match="is nan"):
        out = fn(pf.zeros([0]), **kwargs)
    assert np.isnan(out.numpy())  # NumPy: nan; this gave -0.0 for var and std


def test_unbiased_variance_of_one_element_is_nan_with_a_warning_as_numpy():
    with pytest.warns(RuntimeWarning, match="degrees of freedom <= 0"):
        out = pf.var(pf.to_tensor([[1.0, 2.0]]), axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.var(np.array([[1.0, 2.0]]), axis=0, ddof=1)
    np.testing.assert_array_equal(out.numpy(), expected)
    assert float(pf.var(pf.to_tensor([2.0]), unbiased=False)) == 0.0


def test_statistics_over_an_empty_axis_keep_the_other_dims():
    with pytest.warns(RuntimeWarning):
        out = pf.std(pf.zeros([3, 0]), axis=1, keepdim=True)
    assert out.shape == [3, 1] and np.isnan(out.numpy()).all()


# ---- integer division --------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "jit", "vmap"])
@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_integer_division_by_zero_raises_in_every_mode(op, mode):
    fn = getattr(pf, op)
    x, y = pf.to_tensor([7, 8, 9]), pf.to_tensor([2, 0, 3])
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        if mode == "jit":
            pf.jit(fn)(x, y)
        elif mode == "vmap":
            pf.vmap(fn)(x, y)
        else:
            fn(x, y)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_integer_division_is_exact_and_floors_as_numpy(mode):
    a = np.array([7, -7, 7, -7, 2 ** 62 + 1, -(2 ** 62) - 3], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 1, 7], dtype=np.int64)
    x, y = pf.to_tensor(a), pf.to_tensor(b)
    q = (pf.jit(pf.floor_divide) if mode == "jit" else pf.floor_divide)(x, y)
    r = (pf.jit(pf.remainder) if mode == "jit" else pf.remainder)(x, y)
    np.testing.assert_array_equal(q.numpy(), a // b)  # (via float64 2**62 + 1 was off by 1)
    np.testing.assert_array_equal(r.numpy(), a % b)
    assert q.dtype == pf.int64


def test_float_division_by_zero_still_gives_inf_and_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q = pf.to_tensor([1.0, -1.0, 0.0]) // 0.0
    np.testing.assert_array_equal(q.numpy()[:2], [INF, NINF])
    assert np.isnan(q.numpy()[2])


# ---- complex to real casts ---------------------------------------------------------------

@pytest.mark.parametrize("cast", [lambda z: z.astype("float32"), lambda z: pf.cast(z, "float64"),
                                  lambda z: pf.astype(z, "int64")],
                         ids=["astype", "cast", "astype-int"])
def test_casting_complex_to_real_warns_as_numpy(cast):
    z = pf.to_tensor([1 + 2j, 3 - 1j])
    with pytest.warns(pf.ComplexWarning, match="discards the imaginary part"):
        out = cast(z)
    np.testing.assert_array_equal(out.numpy(), [1, 3])
    assert issubclass(pf.ComplexWarning, RuntimeWarning)


def test_casts_that_keep_every_value_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pf.to_tensor([1 + 2j]).astype("complex128")
        pf.to_tensor([1.5]).astype("int64")
        z = pf.to_tensor([1 + 2j, 3 - 1j], stop_gradient=False)
        pf.grad(lambda t: pf.abs(t).sum())(z)  # gradient rules cast internally


# ---- svd at a zero singular value ----------------------------------------------------------

def _keep_zero_direction(a, d):
    """``d`` without the part that moves the zero singular value off 0 to first order
    (where the nuclear norm has a kink): then the directional derivative is defined."""
    u, s, vh = np.linalg.svd(a, full_matrices=True)
    v0 = vh[-1]  # the right vector of the zero singular value
    u1 = u[:, :a.shape[1] - 1]  # the left vectors of the nonzero ones
    return d - np.outer((np.eye(a.shape[0]) - u1 @ u1.T) @ d @ v0, v0)


@pytest.mark.parametrize("a", [np.diag([3.0, 0.0]), np.array([[3.0, 0.0], [0.0, 0.0],
                                                               [0.0, 0.0]]),
                               np.outer([1.0, 2.0, 2.0], [2.0, 1.0])],
                         ids=["diag(3,0)", "tall", "rank-one"])
def test_gradient_of_the_sum_of_singular_values_with_a_zero_one_is_u_vt(a):
    g = pf.grad(lambda t: pf.linalg.svdvals(t).sum())(_f64(a)).numpy()
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    assert s[-1] < 1e-12 < s[0]
    np.testing.assert_allclose(g, u @ vh, atol=1e-12)  # was all nan
    forward = pf.jacfwd(lambda t: pf.linalg.svdvals(t).sum())(_f64(a)).numpy()
    np.testing.assert_allclose(forward, g, atol=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(3):
        d = _keep_zero_direction(a, rng.normal(size=a.shape))
        h = 1e-6
        fd = (np.linalg.svd(a + h * d, compute_uv=False).sum()
              - np.linalg.svd(a - h * d, compute_uv=False).sum()) / (2 * h)
        assert abs((g * d).sum() - fd) < 1e-6


@pytest.mark.parametrize("a", [np.diag([3.0, 0.0]), np.array([[3.0, 0.0], [0.0, 0.0],
                                                               [0.0, 0.0]])],
                         ids=["square", "tall"])
def test_singular_vector_derivatives_next_to_a_zero_singular_value_match_differences(a):
    # u1 v1^T (the pair of the nonzero singular value) is smooth there
    w = np.random.default_rng(1).normal(size=a.shape)

    def loss_np(m):
        u, s, vh = np.linalg.svd(m, full_matrices=False)
        return (w * np.outer(u[:, 0], vh[0])).sum()

    def loss(t):
        u, s, vh = pf.linalg.svd(t)
        return (pf.to_tensor(w) * (u[:, 0:1] @ vh[0:1, :])).sum()

    g = pf.grad(loss)(_f64(a)).numpy()
    assert np.isfinite(g).all()
    d = np.random.default_rng(2).normal(size=a.shape)
    h = 1e-6
    fd = (loss_np(a + h * d) - loss_np(a - h * d)) / (2 * h)
    assert abs((g * d).sum() - fd) < 1e-7


# ---- NaN in bfloat16 comparisons ------------------------------------------------------------

@requires_extra("bfloat16")
@pytest.mark.parametrize("mode", ("eager", "jit"))
def test_bfloat16_nan_checks_and_ordered_comparisons_do_not_warn(mode):
    # ml_dtypes's ordered bfloat16 comparisons set "invalid" at a NaN (float32 and float64
    # ones do not): isfinite warned "invalid value encountered in less"
    data = np.array([1.0, np.nan, np.inf, -2.0], dtype=np.float32)
    x = pf.to_tensor(data).astype("bfloat16")

    def checks(t):
        return pf.isfinite(t), pf.isinf(t), pf.isnan(t), t < 0.5, t >= 1.0, t > -INF

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _run(mode, checks, x)
    want = (np.isfinite(data), np.isinf(data), np.isnan(data), data < 0.5, data >= 1.0,
            data > -INF)
    for g, w in zip(got, want):
        assert g.dtype == pf.bool_
        np.testing.assert_array_equal(g.numpy(), w)
