"""Fused Taylor kernels (backends/numpy_taylor.py, dispatched by backends/fast_paths.py:
taylor_series) against the Taylor rules written in primitives (forced by ``pf.decompose()``):
every kernel'd primitive at orders 1..8, with dense, line, gapped, constant and top-only
input series, in float32 and float64, over several blocks; several series at once (the
collapsed operators' directions); that transforms and the tape still get the primitive
rules (and correct derivatives); pf.jet's zero test and in-place conversion to derivative
form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import primflow as pf
from primflow.autodiff.taylor import taylor_series
from primflow.backends import fast_paths, get_backend, numpy_taylor

A = pf.autograd
KERNELS = get_backend().fast_paths["taylor"]

# primitive name -> (public op, input range where it is smooth)
OPS = {
    "tanh": (pf.tanh, (-2.0, 2.0)),
    "logistic": (pf.sigmoid, (-3.0, 3.0)),
    "exp": (pf.exp, (-1.0, 1.0)),
    "expm1": (pf.expm1, (-1.0, 1.0)),
    "sin": (pf.sin, (-3.0, 3.0)),
    "cos": (pf.cos, (-3.0, 3.0)),
    "log": (pf.log, (0.5, 2.0)),
    "log1p": (pf.log1p, (-0.4, 2.0)),
    "sqrt": (pf.sqrt, (0.5, 2.0)),
}
PATTERNS = ("dense", "line", "gaps", "constant", "top")
SHAPE = (3, 7)


def test_every_kernel_is_tested():
    assert set(KERNELS) == set(OPS)


@pytest.fixture
def calls(monkeypatch):
    """Counts the backend kernel calls by name (a spy on the table)."""
    seen = {}
    for name, kernel in list(KERNELS.items()):
        def spy(*args, _name=name, _kernel=kernel, **kwargs):
            seen[_name] = seen.get(_name, 0) + 1
            return _kernel(*args, **kwargs)

        monkeypatch.setitem(KERNELS, name, spy)
    return seen


def _series(pattern, order, dtype, rng, shape=SHAPE):
    """Derivative-form input coefficients [x1, ..., xK] of one of the PATTERNS."""
    dense = [pf.to_tensor(rng.standard_normal(shape), dtype=dtype) for _ in range(order)]
    zero = pf.zeros(list(shape), dtype=dtype)
    if pattern == "dense":
        return dense
    if pattern == "line":  # x0 + t v: the directional-derivative series
        return [dense[0]] + [zero] * (order - 1)
    if pattern == "gaps":  # exact zeros at the even orders
        return [zero if k % 2 == 0 else c for k, c in enumerate(dense, start=1)]
    if pattern == "constant":  # broadcast scalars, as ones_like / full make
        return [pf.full(list(shape), 0.5 + 0.25 * k, dtype=dtype) for k in range(order)]
    return [zero] * (order - 1) + [dense[-1]]  # top only: the collapsed top coefficient


def _point(name, dtype, rng, shape=SHAPE):
    lo, hi = OPS[name][1]
    return pf.to_tensor(rng.uniform(lo, hi, shape), dtype=dtype)


def _both_paths(fn, x, series):
    """(kernel path, primitive path) of pf.jet."""
    fast = pf.jet(fn, (x,), (series,))
    with pf.decompose():
        slow = pf.jet(fn, (x,), (series,))
    return fast, slow


def _assert_close(fast, slow, dtype):
    (y0, ys), (z0, zs) = fast, slow
    np.testing.assert_array_equal(y0.numpy(), z0.numpy())
    rtol = 1e-12 if dtype == "float64" else 2e-5
    for k, (a, b) in enumerate(zip(ys, zs), start=1):
        assert a.dtype == b.dtype and a.shape == b.shape
        scale = max(1.0, float(np.max(np.abs(b.numpy()))))
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=rtol * scale,
                                   err_msg=f"coefficient {k}")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_kernel_matches_the_primitive_rule(name, dtype, calls):
    """Orders 1..8 on every input pattern: the same coefficients as the rule in primitives,
    and the kernel really ran (the primitive path never calls it)."""
    rng = np.random.default_rng(hash(name) % 2**32)
    fn, x = OPS[name][0], _point(name, dtype, rng)
    for order in range(1, 9):
        for pattern in PATTERNS if order in (1, 2, 3, 8) else ("dense", "line"):
            before = calls.get(name, 0)
            fast, slow = _both_paths(fn, x, _series(pattern, order, dtype, rng))
            assert calls.get(name, 0) == before + 1, "the kernel should run once, eagerly"
            _assert_close(fast, slow, dtype)


@pytest.mark.parametrize("name", sorted(OPS))
def test_exact_zeros_match_the_primitive_rule(name):
    """The kernel returns None (an exact zero) for the same coefficients as the rule."""
    rng = np.random.default_rng(1)
    x = _point(name, "float64", rng)
    v = pf.to_tensor(rng.standard_normal(SHAPE))
    for series in ([None, v, None, None, None], [v, None, None, None, None],
                   [None, None, None, None, v], [None, v, None, v, None]):
        fast = taylor_series(OPS[name][0], (x,), (series,), 5)
        with pf.decompose():
            slow = taylor_series(OPS[name][0], (x,), (series,), 5)
        assert [c is None for c in fast] == [c is None for c in slow], series


def test_blocks_and_leading_dims(monkeypatch):
    """Several blocks (the last one partial) and coefficients with leading dims (one series
    per direction) give the same coefficients as one series at a time."""
    monkeypatch.setattr(numpy_taylor, "BLOCK", 12)
    rng = np.random.default_rng(2)
    for name, (fn, _) in OPS.items():
        x = _point(name, "float64", rng, (5, 9))
        z = fn(x)
        lead = [pf.to_tensor(rng.standard_normal((2, 3, 5, 9))) for _ in range(3)] + [None]
        zs = fast_paths.taylor_series(name, x, z, [x] + lead, {})
        w = pf.to_tensor(rng.standard_normal(6))
        summed = fast_paths.taylor_series(name, x, z, [x] + lead, {}, top_weights=w)
        want = np.tensordot(w.numpy(), zs[4].numpy().reshape(6, 5, 9), axes=1)
        np.testing.assert_allclose(summed[4].numpy(), want, rtol=1e-12, atol=1e-13)
        for k in range(1, 4):
            np.testing.assert_array_equal(summed[k].numpy(), zs[k].numpy())
        for i in range(2):
            for j in range(3):
                one = [x] + [None if c is None else c[i, j] for c in lead]
                with pf.decompose():
                    _, want = get_prim(name).taylor([x], [one], z)
                for k in range(1, 5):
                    if want[k] is None:
                        assert zs[k] is None
                    else:
                        np.testing.assert_allclose(zs[k].numpy()[i, j], want[k].numpy(),
                                                   rtol=1e-12, atol=1e-13)


def get_prim(name):
    from primflow.core.primitive import get_primitive
    return get_primitive(name)


# ---- when the kernel may not run ---------------------------------------------------------------

def test_reverse_over_taylor_uses_the_primitive_rules(calls):
    """pf.grad of a jet output: the tape must see the primitives, so no kernel runs, and
    the gradient is d/dx of the k-th derivative (here d/dx tanh'''(x) = tanh''''(x))."""
    x0 = np.array([0.3, -0.7, 1.1])
    x = pf.to_tensor(x0, stop_gradient=False)
    ones, zeros = pf.ones_like(x), pf.zeros_like(x)
    _, ys = pf.jet(pf.tanh, (x,), ([ones, zeros, zeros],))
    (g,) = pf.grad(ys[2].sum(), x)
    assert not calls
    t = np.tanh(x0)
    d4 = 8 * t * (1 - t ** 2) * (2 - 3 * t ** 2)  # tanh'''' by hand: P_4(t)
    np.testing.assert_allclose(g.numpy(), d4, rtol=1e-12)
    # and with the recording off, the same jet does use the kernel
    with pf.no_grad():
        pf.jet(pf.tanh, (x,), ([ones, zeros, zeros],))
    assert calls == {"tanh": 1}


def test_gradient_wrt_closed_over_parameters_uses_the_primitive_rules(calls):
    w = pf.to_tensor([0.5, -1.5], stop_gradient=False)
    x = pf.to_tensor([0.2, 0.4])

    def third(w):
        _, ys = pf.jet(lambda x: pf.sin(x * w), (x,), ([pf.ones_like(x)] + [pf.zeros_like(x)] * 2,))
        return ys[2].sum()

    (g,) = pf.grad(third(w), w)
    assert not calls
    # d/dw [-w^3 cos(w x)] = -3 w^2 cos(w x) + w^3 x sin(w x)
    wn, xn = w.numpy(), x.numpy()
    want = -3 * wn ** 2 * np.cos(wn * xn) + wn ** 3 * xn * np.sin(wn * xn)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
    eps = 1e-6  # and against central differences of the eager (kernel) value
    with pf.no_grad():
        fd = [(float(third(pf.to_tensor(wn + eps * e))) - float(third(pf.to_tensor(wn - eps * e))))
              / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(g.numpy(), fd, rtol=1e-6)


def test_jit_and_vmap_use_the_primitive_rules(calls):
    x = pf.to_tensor(np.linspace(-1, 1, 6).reshape(2, 3))

    def d3(x):
        _, ys = pf.jet(pf.tanh, (x,), ([pf.ones_like(x), pf.zeros_like(x), pf.zeros_like(x)],))
        return ys[2]

    eager = d3(x).numpy()
    assert calls == {"tanh": 1}
    calls.clear()
    np.testing.assert_allclose(pf.jit(d3)(x).numpy(), eager, rtol=1e-12)
    np.testing.assert_allclose(pf.vmap(d3)(x).numpy(), eager, rtol=1e-12)
    assert not calls


def test_decompose_uses_the_primitive_rules(calls):
    x = pf.to_tensor([0.5])
    with pf.decompose():
        pf.jet(pf.exp, (x,), ([pf.ones_like(x)],))
    assert not calls


# ---- collapsed operators ------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["laplacian", "biharmonic"])
def test_collapsed_operators_match_the_primitive_rules(op, calls):
    """The collapsed trace hands a unary primitive all directions at once to the kernel."""
    rng = np.random.default_rng(3)
    params = [pf.to_tensor(rng.standard_normal(s) / 2) for s in [(2, 8), (8,), (8, 8), (8,),
                                                                     (8, 1), (1,)]]

    def u(X):
        h = pf.tanh(X @ params[0] + params[1])
        h = pf.sigmoid(h @ params[2] + params[3])
        return pf.sin(h @ params[4] + params[5])

    X = pf.to_tensor(rng.uniform(-1, 1, (5, 2)))
    fast = getattr(A, op)(u, X)
    assert calls.get("tanh") and calls.get("logistic") and calls.get("sin")
    with pf.decompose():
        slow = getattr(A, op)(u, X)
    np.testing.assert_allclose(fast.numpy(), slow.numpy(), rtol=1e-11,
                               atol=1e-11 * float(np.max(np.abs(slow.numpy()))))
    nested = getattr(A, op)(u, X, method="nested")
    np.testing.assert_allclose(fast.numpy(), nested.numpy(), rtol=1e-9,
                               atol=1e-9 * float(np.max(np.abs(nested.numpy()))))


def test_add_of_a_constant_passes_coefficients_through():
    """x + c: the series of x, not x's coefficients plus zeros."""
    x, c = pf.to_tensor([1.0, 2.0]), pf.to_tensor([3.0, 4.0])
    v = pf.to_tensor([0.5, 0.25])
    s = taylor_series(lambda x: x + c, (x,), ([v, None],), 2)
    assert s[1] is v and s[2] is None
    s = taylor_series(lambda x: c - x, (x,), ([v, None],), 2)
    np.testing.assert_array_equal(s[1].numpy(), -v.numpy())


# ---- pf.jet's own steps -------------------------------------------------------------------------

def test_is_zero():
    is_zero = numpy_taylor.is_zero
    assert is_zero(np.broadcast_to(np.float64(0.0), (5, 4)))
    assert is_zero(np.zeros(7)) and is_zero(np.array(-0.0)) and is_zero(np.zeros(0))
    assert not is_zero(np.broadcast_to(np.float32(2.0), (3,)))
    assert not is_zero(np.array([0.0, 0.0, 1e-300]))
    assert not is_zero(np.array([0.0, np.nan]))


def test_derivative_form_is_safe_for_shared_and_repeated_outputs():
    """Kernel outputs are scaled in place to derivative form; outputs that share memory,
    repeat, or are the caller's own input coefficients are not corrupted."""
    x = pf.to_tensor(np.linspace(0.1, 0.9, 6))
    v = pf.to_tensor(np.full(6, 0.5))
    series = ([v, pf.zeros_like(x), pf.zeros_like(x)],)
    v_before = v.numpy().copy()
    t = np.tanh(x.numpy())
    d = [0.5 * (1 - t ** 2), 0.25 * (-2 * t * (1 - t ** 2)),
         0.125 * (-2 * (1 - t ** 2) * (1 - 3 * t ** 2))]

    def f(x):
        y = pf.tanh(x)
        return y, y, y.reshape([2, 3]), y.expand([2, 6]), y[1:].T, x

    _, (a, b, c, e, g, ident) = pf.jet(f, (x,), series)
    for ys in (a, b, c):
        for got, want in zip(ys, d):
            np.testing.assert_allclose(got.numpy().ravel(), want, rtol=1e-12)
    for got, want in zip(e, d):  # a read-only broadcast view
        np.testing.assert_allclose(got.numpy(), np.broadcast_to(want, (2, 6)), rtol=1e-12)
    for got, want in zip(g, d):
        np.testing.assert_allclose(got.numpy(), want[1:], rtol=1e-12)
    np.testing.assert_array_equal(ident[0].numpy(), v_before)
    np.testing.assert_array_equal(v.numpy(), v_before)
    # a later call does not write into what an earlier one returned
    _, ys = pf.jet(pf.tanh, (x,), series)
    kept = [y.numpy().copy() for y in ys]
    pf.jet(pf.tanh, (x,), series)
    for y, k in zip(ys, kept):
        np.testing.assert_array_equal(y.numpy(), k)


def test_rescale_in_place_only_for_private_blocks():
    x0 = np.linspace(-1, 1, 4)
    zs = KERNELS["tanh"](x0, np.tanh(x0), [np.ones(4), None, None])
    mine = np.ones(4)
    out = numpy_taylor.rescale([zs[1], zs[2], mine], [2.0, 6.0, 2.0], [zs[0]])
    assert out[0] is zs[1] and out[1] is zs[2]  # the kernel's block: in place
    assert out[2] is not mine and mine[0] == 1.0  # anything else: a fresh array
    again = numpy_taylor.rescale([zs[1]], [2.0])  # returned once: no longer private
    assert again[0] is not zs[1]
    # two values overlapping in one private block are not scaled in place
    zs = KERNELS["tanh"](x0, np.tanh(x0), [np.ones(4), None])
    out = numpy_taylor.rescale([zs[1], zs[1][:2]], [2.0, 2.0])
    assert out[0] is not zs[1] and out[1] is not zs[1]


def test_taylor_series_declines_what_it_cannot_run():
    x = pf.to_tensor([0.5, 0.25], dtype="float64")
    z, v = pf.tanh(x), pf.ones_like(x)
    assert fast_paths.taylor_series("integer_pow", x, z, [x, v], {"y": 2}) is None  # no kernel
    assert fast_paths.taylor_series("tanh", x, z, [x, None, None], {}) is None  # nothing to do
    assert fast_paths.taylor_series("tanh", x, z, [x, pf.ones([3])], {}) is None  # shape mismatch
    assert fast_paths.taylor_series("tanh", x, z, [x, pf.ones([2], dtype="float32")], {}) is None
    e = pf.zeros([0], dtype="float64")
    assert fast_paths.taylor_series("tanh", e, e, [e, e], {}) is None  # empty
    w = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    assert fast_paths.taylor_series("tanh", x, z, [x, w], {}) is None  # would need recording
    with pf.no_grad():
        assert fast_paths.taylor_series("tanh", x, z, [x, w], {}) is not None
    zs = fast_paths.taylor_series("tanh", x, z, [x, v, None], {})
    assert zs[0] is z and math.isclose(float(zs[1][0]), 1 - math.tanh(0.5) ** 2)
