"""Taylor mode beyond the OpInfo table: how ``pf.jet`` composes with the other transforms,
its input errors, and the differential operators built on it (``pf.autograd.laplacian``,
``biharmonic``, ``partial``, ``linear_operator``, ``directional_derivative``) in every
method against closed forms, against each other and against the Hessian, their gradients
with respect to network parameters, and the stochastic estimators' bias. float64 throughout.

The per-primitive check (jet against nested forward mode to order 6 over the OpInfo
table) is in tests/test_opinfo.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import primflow as pf
from primflow.autodiff.taylor import taylor_series
from primflow.testing import check_grads as cg
from primflow.transforms.differential import biharmonic_directions, interpolation_weights

A = pf.autograd
PI = math.pi
METHODS = ("collapsed", "taylor", "nested", "stochastic")
EXACT = ("collapsed", "taylor", "nested")


def T(a):
    return pf.to_tensor(np.asarray(a, dtype=np.float64), dtype="float64")


def nested_jvp_along(f, x, v, k):
    """D_v^k f(x) by pf.jvp nested k times in t (f(x + t v) at t = 0)."""
    return cg.nested_jvp(lambda t: f(pf.add(x, pf.multiply(v, t))), T(0.0), k)


# ---- a small MLP with explicit float64 parameters ---------------------------------------------

def mlp_params(sizes, seed=0, requires_grad=True):
    rng = np.random.default_rng(seed)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        w = T(rng.standard_normal((a, b)) / math.sqrt(a))
        c = T(0.1 * rng.standard_normal(b))
        w.stop_gradient = c.stop_gradient = not requires_grad
        params += [w, c]
    return params


def mlp(params, act=pf.tanh):
    def f(X):
        h = X
        for i in range(0, len(params), 2):
            h = pf.add(pf.matmul(h, params[i]), params[i + 1])
            if i + 2 < len(params):
                h = act(h)
        return h

    return f


def points(n, d, seed=1, lo=-1.0, hi=1.0):
    return T(np.random.default_rng(seed).uniform(lo, hi, (n, d)))


def rel_err(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# ==== jet: conventions, compositions, errors ===================================================

def test_jet_derivative_form_closed_forms():
    """sin along a line: cos, -sin, -cos, sin; exp along x0 + a t + b t^2 / 2: y1 = e a,
    y2 = e (a^2 + b), y3 = e (a^3 + 3 a b) (Faa di Bruno)."""
    x = T([0.3, -1.2, 2.0])
    one, zero = pf.ones_like(x), pf.zeros_like(x)
    y0, ys = pf.jet(pf.sin, (x,), ([one, zero, zero, zero],))
    xn = x.numpy()
    np.testing.assert_allclose(y0.numpy(), np.sin(xn), rtol=1e-15)
    for y, ref in zip(ys, [np.cos(xn), -np.sin(xn), -np.cos(xn), np.sin(xn)]):
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-13, atol=1e-15)
    a, b = T([0.5, -2.0, 1.0]), T([1.5, 0.25, -1.0])
    _, ys = pf.jet(pf.exp, (x,), ([a, b, zero],))
    e, an, bn = np.exp(xn), a.numpy(), b.numpy()
    for y, ref in zip(ys, [e * an, e * (an ** 2 + bn), e * (an ** 3 + 3 * an * bn)]):
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-13)


def test_taylor_series_is_the_normalised_jet():
    """taylor_series coefficients are jet's divided by k!; None marks an exact zero."""
    x, v = T([0.4, 0.9]), T([1.0, -0.5])
    f = lambda z: pf.tanh(z) * pf.exp(z)  # noqa: E731
    _, ys = pf.jet(f, (x,), ([v, pf.zeros_like(v), pf.zeros_like(v)],))
    s = taylor_series(f, (x,), ([v, None, None],), 3)
    assert len(s) == 4
    for k in (1, 2, 3):
        np.testing.assert_allclose(s[k].numpy() * math.factorial(k), ys[k - 1].numpy(),
                                   rtol=1e-13)
    const = taylor_series(lambda z: pf.ones_like(z), (x,), ([v, None],), 2)
    assert const[1] is None and const[2] is None


@pytest.mark.parametrize("structure", ["tensor", "list", "tuple", "dict", "nested"])
def test_jet_pytree_outputs(structure):
    """The output's structure is kept: a list [y1..yK] in place of every tensor (a list
    output once came back garbled), integer leaves get zero coefficients of their dtype."""
    x, v = T([0.2, 0.7]), T([1.0, 2.0])
    zero = pf.zeros_like(v)

    def f(z):
        s, c = pf.sin(z), pf.cos(z)
        return {"tensor": s, "list": [s, c], "tuple": (s, c), "dict": {"s": s, "c": c},
                "nested": [s, (c, {"i": pf.argmax(z)})]}[structure]

    y0, ys = pf.jet(f, (x,), ([v, zero],))
    vn, xn = v.numpy(), x.numpy()
    sin_ref = [np.cos(xn) * vn, -np.sin(xn) * vn ** 2]
    cos_ref = [-np.sin(xn) * vn, -np.cos(xn) * vn ** 2]
    if structure == "tensor":
        pairs = [(y0, ys, np.sin(xn), sin_ref)]
    elif structure in ("list", "tuple"):
        assert type(y0) is type(ys) is {"list": list, "tuple": tuple}[structure]
        pairs = [(y0[0], ys[0], np.sin(xn), sin_ref), (y0[1], ys[1], np.cos(xn), cos_ref)]
    elif structure == "dict":
        pairs = [(y0["s"], ys["s"], np.sin(xn), sin_ref),
                 (y0["c"], ys["c"], np.cos(xn), cos_ref)]
    else:
        pairs = [(y0[0], ys[0], np.sin(xn), sin_ref), (y0[1][0], ys[1][0], np.cos(xn), cos_ref)]
        i0, iys = y0[1][1]["i"], ys[1][1]["i"]
        assert int(i0) == 1 and len(iys) == 2
        assert all(c.dtype == i0.dtype and not np.any(c.numpy()) for c in iys)
    for p, series, p_ref, refs in pairs:
        assert isinstance(series, list) and len(series) == 2
        np.testing.assert_allclose(p.numpy(), p_ref, rtol=1e-15)
        for y, ref in zip(series, refs):
            np.testing.assert_allclose(y.numpy(), ref, rtol=1e-13)


def test_jet_of_a_constant_and_of_an_ignored_input():
    x, y = T([0.5, 1.5]), T([2.0, -1.0])
    v = pf.ones_like(x)
    out, ys = pf.jet(lambda a, b: pf.sin(b), (x, y), ([v, v], [pf.zeros_like(v)] * 2))
    np.testing.assert_allclose(out.numpy(), np.sin(y.numpy()))
    assert len(ys) == 2 and all(c.shape == [2] and not np.any(c.numpy()) for c in ys)
    out, ys = pf.jet(lambda a: pf.full([3], 2.0, dtype="float64"), (x,), ([v],))
    assert not np.any(ys[0].numpy()) and ys[0].shape == [3]


def _jet_loss(w, x0, v):
    """A scalar built from jet coefficients of an MLP-like function of x that reads w."""
    f = lambda x: pf.sum(pf.tanh(pf.matmul(x, w)) * pf.sin(x[:, :1]))  # noqa: E731
    _, ys = pf.jet(f, (x0,), ([v, pf.multiply(v, 0.5), pf.zeros_like(v)],))
    return ys[0] * ys[1] + ys[2] ** 2 + 0.1 * ys[2]


def test_reverse_and_forward_over_taylor_match_finite_differences():
    """The jet coefficients stay on the tape and under pf.jvp: gradients of a loss built
    from them, w.r.t. closed-over parameters, the primal and the series, equal central
    differences (reverse over Taylor, forward over Taylor, and order 2 in all four modes)."""
    rng = np.random.default_rng(7)
    primals = [rng.standard_normal((3, 4)) / 2, rng.uniform(-1, 1, (2, 3)),
               rng.standard_normal((2, 3))]
    cg.check_grads(_jet_loss, primals, order=2, rng=rng)


def test_grad_of_jet_wrt_closed_over_parameters():
    """pf.grad of a jet-built loss w.r.t. parameters the function closes over (the PINN
    situation) equals a central difference along a random parameter direction."""
    rng = np.random.default_rng(3)
    params = mlp_params([2, 5, 1], seed=4)
    x0, v = T(rng.uniform(-1, 1, (3, 2))), T(rng.standard_normal((3, 2)))

    def loss():
        _, ys = pf.jet(lambda x: pf.sum(mlp(params)(x) ** 2), (x0,),
                       ([v, pf.zeros_like(v), pf.zeros_like(v)],))
        return ys[2] + ys[1] ** 2

    grads = pf.grad(loss(), params)
    dirs = [rng.standard_normal(p.shape) for p in params]
    base = [p.numpy().copy() for p in params]

    def at(eps):
        for p, b, d in zip(params, base, dirs):
            p.set_value(b + eps * d)
        with pf.no_grad():
            value = float(loss())
        for p, b in zip(params, base):
            p.set_value(b)
        return value

    eps = 1e-5
    fd = (at(eps) - at(-eps)) / (2 * eps)
    ad = sum(float(np.sum(g.numpy() * d)) for g, d in zip(grads, dirs))
    assert abs(ad - fd) <= 1e-7 * max(1.0, abs(fd)), (ad, fd)


def test_vmap_of_jet_equals_a_loop():
    rng = np.random.default_rng(5)
    w = T(rng.standard_normal((3, 3)))
    f = lambda x: pf.sum(pf.tanh(pf.matmul(w, x)) * pf.exp(-x))  # noqa: E731
    X, V, U = (T(rng.standard_normal((4, 3))) for _ in range(3))

    def third(x, v, u):
        return pf.stack(pf.jet(f, (x,), ([v, u, pf.zeros_like(v)],))[1])

    batched = pf.vmap(third)(X, V, U).numpy()
    loop = np.stack([third(X[i], V[i], U[i]).numpy() for i in range(4)])
    np.testing.assert_allclose(batched, loop, rtol=1e-12, atol=1e-14)


def test_jet_of_vmap_equals_per_example_jets():
    rng = np.random.default_rng(6)
    X, V = T(rng.standard_normal((4, 3))), T(rng.standard_normal((4, 3)))
    g = lambda x: pf.sum(pf.sin(x) * pf.sqrt(1.0 + x * x))  # noqa: E731
    _, ys = pf.jet(pf.vmap(g), (X,), ([V, pf.zeros_like(V), pf.zeros_like(V)],))
    for i in range(4):
        _, yi = pf.jet(g, (X[i],), ([V[i], pf.zeros_like(V[i]), pf.zeros_like(V[i])],))
        for a, b in zip(ys, yi):
            np.testing.assert_allclose(a.numpy()[i], b.numpy(), rtol=1e-12, atol=1e-14)


def test_jet_of_jet_gives_mixed_directional_derivatives():
    """jet along w of (x -> jet along u, order 2): d^a/ds^a d^2/dt^2 f(x + t u + s w),
    against nested pf.jvp."""
    rng = np.random.default_rng(8)
    x, u, w = (T(rng.standard_normal(3)) for _ in range(3))
    f = lambda z: pf.sum(pf.exp(pf.sin(z)) * z[0] * pf.tanh(z))  # noqa: E731

    def inner(z):
        return pf.jet(f, (z,), ([u, pf.zeros_like(u)],))[1][1]

    _, ys = pf.jet(inner, (x,), ([w, pf.zeros_like(w), pf.zeros_like(w)],))
    for k in (1, 2, 3):
        ref = nested_jvp_along(lambda z: nested_jvp_along(f, z, u, 2), x, w, k)
        np.testing.assert_allclose(float(ys[k - 1]), float(ref), rtol=1e-11)


def test_jet_of_grad_gives_derivatives_of_the_gradient():
    """jet of pf.grad(f) along v: D_v^k grad f (Taylor over reverse), against nested
    pf.jvp of pf.grad(f)."""
    rng = np.random.default_rng(9)
    x, v = T(rng.standard_normal(4)), T(rng.standard_normal(4))
    f = lambda z: pf.sum(pf.logsumexp(z) * pf.sin(z) + z ** 3)  # noqa: E731
    gf = pf.grad(f)
    _, ys = pf.jet(gf, (x,), ([v, pf.zeros_like(v), pf.zeros_like(v)],))
    for k in (1, 2, 3):
        ref = nested_jvp_along(gf, x, v, k)
        np.testing.assert_allclose(ys[k - 1].numpy(), ref.numpy(), rtol=1e-11, atol=1e-13)


def test_grad_of_jet_equals_jet_of_grad_for_the_hessian_action():
    """Two routes to the Hessian action: the first jet coefficient of pf.grad(f) along v
    (Taylor over reverse) is H v; pf.grad of jet's second coefficient v^T H v w.r.t. the
    series coefficient v (reverse over Taylor) is 2 H v; both match pf.hessian."""
    rng = np.random.default_rng(10)
    x, v = T(rng.standard_normal(3)), T(rng.standard_normal(3))
    f = lambda z: pf.sum(pf.cos(z) * z[1] + pf.exp(z[0] * z[2]))  # noqa: E731
    hv = pf.jet(pf.grad(f), (x,), ([v],))[1][0].numpy()
    vv = pf.to_tensor(v.numpy(), dtype="float64", stop_gradient=False)
    (g,) = pf.grad(pf.jet(f, (x,), ([vv, pf.zeros_like(vv)],))[1][1], [vv])
    np.testing.assert_allclose(g.numpy(), 2 * hv, rtol=1e-12)
    np.testing.assert_allclose(hv, pf.hessian(f)(x).numpy() @ v.numpy(), rtol=1e-12)


@pytest.mark.parametrize("case,exc,match", [
    ("lengths", ValueError, "same length"),
    ("shape", ValueError, "has shape"),
    ("order0", ValueError, "positive int"),
    ("count", ValueError, "one list per primal"),
    ("bare_tensor", TypeError, "list of coefficients"),
    ("bare_scalar", TypeError, "list of coefficients"),
    ("not_a_sequence", ValueError, "one list per primal"),
    ("taylor_series_order", ValueError, "coefficients, the order"),
    ("dtype", TypeError, "coefficient 1 of input 0 is float32 but the primal is float64"),
    ("integer_primal", TypeError, "need floating inputs"),
])
def test_jet_bad_input(case, exc, match):
    x, y, s = T([1.0, 2.0]), T([0.5, 0.5]), T(0.3)
    v = pf.ones_like(x)
    calls = {
        "lengths": lambda: pf.jet(pf.multiply, (x, y), ([v], [v, v])),
        "shape": lambda: pf.jet(pf.sin, (x,), ([T([1.0, 2.0, 3.0])],)),
        "order0": lambda: pf.jet(pf.sin, (x,), ([],)),
        "count": lambda: pf.jet(pf.sin, (x,), ([v], [v])),
        "bare_tensor": lambda: pf.jet(pf.sin, (x,), (v,)),
        "bare_scalar": lambda: pf.jet(pf.sin, (s,), (s,)),
        "not_a_sequence": lambda: pf.jet(pf.sin, (x,), None),
        "taylor_series_order": lambda: taylor_series(pf.sin, (x,), ([v],), 3),
        "dtype": lambda: pf.jet(pf.sin, (x,), ([v.astype("float32")],)),
        "integer_primal": lambda: pf.jet(pf.sin, (pf.to_tensor([1, 2]),), ([v],)),
    }
    with pytest.raises(exc, match=match):
        calls[case]()


def test_jet_takes_numbers_and_arrays_in_the_primal_dtype():
    x = T([0.3, 1.7])
    _, (y1, y2) = pf.jet(pf.sin, (x,), ([np.ones(2), [0.0, 0.0]],))
    assert y1.dtype == x.dtype
    np.testing.assert_allclose(y1.numpy(), np.cos(x.numpy()), rtol=1e-15)
    np.testing.assert_allclose(y2.numpy(), -np.sin(x.numpy()), rtol=1e-15)


def test_jet_through_a_nondifferentiable_op_raises():
    x = T([0.3, 1.7])
    with pytest.raises(pf.NonDifferentiableError, match="floor"):
        pf.jet(lambda z: pf.floor(z) * z, (x,), ([pf.ones_like(x)],))


# ==== differential operators ===================================================================

def sinsin(P):
    return pf.sin(PI * P[:, 0]) * pf.sin(PI * P[:, 1])


def sinsinsin(P):
    return pf.sin(PI * P[:, 0]) * pf.sin(PI * P[:, 1]) * pf.sin(PI * P[:, 2])


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("d", [2, 3])
def test_closed_forms_of_sine_products(method, d):
    """u = prod_i sin(pi x_i): Laplacian -d pi^2 u, biharmonic d^2 pi^4 u (4 pi^4 u in 2-D,
    9 pi^4 u in 3-D)."""
    u = sinsin if d == 2 else sinsinsin
    X = points(6, d, seed=d)
    un = u(X).numpy()
    lap = A.laplacian(u, X, method=method)
    bih = A.biharmonic(u, X, method=method)
    assert lap.shape == bih.shape == [6]
    np.testing.assert_allclose(lap.numpy(), -d * PI ** 2 * un, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(bih.numpy(), d ** 2 * PI ** 4 * un, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("d", [2, 3])
def test_stochastic_estimators_are_unbiased(d):
    """E[D_v^2 u] = Δu and E[D_v^4 u] / 3 = Δ²u for v ~ N(0, I): the mean of 50 seeded
    estimates (256 directions each) is within 4 standard errors of the closed form at every
    point. The estimates do vary (the directions are random), and 4 standard errors stay
    below 20% of the value, so a wrong normalisation (1/2 for 1/3, say) would be caught."""
    u = sinsin if d == 2 else sinsinsin
    X = points(4, d, seed=10 + d, lo=0.15, hi=0.85)  # |u| >= sin(0.15 pi)^d: no zeros
    un = u(X).numpy()
    for op, exact in ((A.laplacian, -d * PI ** 2 * un), (A.biharmonic, d ** 2 * PI ** 4 * un)):
        est = np.stack([op(u, X, method="stochastic", samples=256, seed=s).numpy()
                        for s in range(50)])
        mean, se = est.mean(axis=0), est.std(axis=0, ddof=1) / math.sqrt(len(est))
        assert np.all(se > 1e-6 * np.abs(exact)), "no spread: the directions are not random"
        assert np.all(4 * se < 0.2 * np.abs(exact)), (op.__name__, se, exact)
        assert np.all(np.abs(mean - exact) <= 4 * se), (op.__name__, mean, exact, se)


def test_stochastic_estimate_is_the_mean_over_seeded_gaussian_directions():
    """With a seed the estimate is reproducible and equals the average of D_v^2 f (D_v^4 f
    / 3) over the standard normal directions drawn with that key; the global generator is
    left alone."""
    f = mlp(mlp_params([2, 8, 1], requires_grad=False))
    X = points(3, 2)
    a = A.laplacian(f, X, method="stochastic", samples=5, seed=11).numpy()
    b = A.laplacian(f, X, method="stochastic", samples=5, seed=11).numpy()
    c = A.laplacian(f, X, method="stochastic", samples=5, seed=12).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    for op, k, factor in ((A.laplacian, 2, 1.0), (A.biharmonic, 4, 1 / 3)):
        V = pf.prims.random_normal(shape=(5, 3, 2), dtype=pf.float64, key=11)
        ref = sum(A.directional_derivative(f, X, V[r], order=k).numpy() for r in range(5))
        got = op(f, X, method="stochastic", samples=5, seed=11).numpy()
        np.testing.assert_allclose(got, factor * ref / 5, rtol=1e-12)
    pf.seed(3)
    first = pf.rand([4]).numpy()
    pf.seed(3)
    A.laplacian(f, X, method="stochastic", samples=5, seed=11)
    np.testing.assert_array_equal(pf.rand([4]).numpy(), first)


def test_laplacian_of_an_mlp_is_the_trace_of_the_hessian():
    params = mlp_params([3, 12, 12, 1], seed=2, requires_grad=False)
    f = mlp(params)
    X = points(5, 3)
    H = pf.hessian(lambda x: f(pf.unsqueeze(x, 0))[0, 0])
    traces = np.array([np.trace(H(X[i]).numpy()) for i in range(5)])
    for method in EXACT:
        lap = A.laplacian(f, X, method=method)
        assert lap.shape == [5, 1]
        np.testing.assert_allclose(lap.numpy()[:, 0], traces, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("op", ["laplacian", "biharmonic"])
def test_collapsed_taylor_and_nested_agree_on_an_mlp(op):
    """MLP 2-16-16-1 (tanh): the three exact methods agree to ~1e-10 relative."""
    f = mlp(mlp_params([2, 16, 16, 1], requires_grad=False))
    X = points(8, 2)
    r = {m: getattr(A, op)(f, X, method=m).numpy() for m in EXACT}
    assert r["nested"].shape == (8, 1)
    assert rel_err(r["collapsed"], r["nested"]) < 1e-10
    assert rel_err(r["taylor"], r["nested"]) < 1e-10
    assert rel_err(r["collapsed"], r["taylor"]) < 1e-10


def test_methods_agree_on_a_network_of_many_primitives():
    """Collapsed == taylor == nested through gelu, softplus, layer_norm, softmax, logsumexp,
    max, atan2, pow, sqrt, div... (every collapsed rule's lower/top split)."""
    F = pf.nn.functional
    rng = np.random.default_rng(1)
    W1, b1 = T(rng.standard_normal((3, 8)) / 2), T(rng.standard_normal(8) * 0.1)
    W2, w3 = T(rng.standard_normal((8, 8)) / 3), T(rng.standard_normal((8, 1)))

    def zoo(X):
        h = pf.tanh(pf.matmul(X, W1) + b1)
        h = F.gelu(pf.matmul(h, W2)) + F.softplus(h) * pf.sin(h)
        h = F.layer_norm(h, 8)
        h = h * F.sigmoid(h) + pf.sqrt(1.0 + h * h) - pf.pow(1.5 + pf.cos(h), 0.5)
        h = F.softmax(h, axis=1) + h / (2.0 + h ** 2)
        out = (pf.matmul(h, w3) + pf.exp(-pf.sum(X ** 2, axis=1, keepdim=True))
               + pf.atan2(X[:, :1], 2.0 + X[:, 1:2]))
        return out + pf.logsumexp(h, axis=1, keepdim=True) + pf.max(h, axis=1, keepdim=True)

    X = points(4, 3)
    for op in (A.laplacian, A.biharmonic):
        r = {m: op(zoo, X, method=m).numpy() for m in EXACT}
        assert rel_err(r["collapsed"], r["nested"]) < 1e-10, op.__name__
        assert rel_err(r["taylor"], r["nested"]) < 1e-10, op.__name__
    for index in [(0, 1), (2, 2, 1), (0, 0, 1, 2)]:
        r = {m: A.partial(zoo, X, index, method=m).numpy() for m in EXACT}
        assert rel_err(r["collapsed"], r["nested"]) < 1e-10, index
        assert rel_err(r["taylor"], r["nested"]) < 1e-10, index


# f = x^3 y^2 z and its partials, by hand
def poly(P):
    return P[:, 0] ** 3 * P[:, 1] ** 2 * P[:, 2]


POLY_PARTIALS = {
    (0,): lambda x, y, z: 3 * x ** 2 * y ** 2 * z,
    (1,): lambda x, y, z: 2 * x ** 3 * y * z,
    (2,): lambda x, y, z: x ** 3 * y ** 2,
    (0, 0): lambda x, y, z: 6 * x * y ** 2 * z,
    (1, 1): lambda x, y, z: 2 * x ** 3 * z,
    (2, 2): lambda x, y, z: 0 * x,
    (0, 1): lambda x, y, z: 6 * x ** 2 * y * z,
    (2, 0): lambda x, y, z: 3 * x ** 2 * y ** 2,
    (1, 2): lambda x, y, z: 2 * x ** 3 * y,
    (0, 1, 2): lambda x, y, z: 6 * x ** 2 * y,
    (0, 0, 1): lambda x, y, z: 12 * x * y * z,
    (0, 0, 0): lambda x, y, z: 6 * y ** 2 * z,
    (1, 0, 1, 0): lambda x, y, z: 12 * x * z,
    (0, 0, 0, 0): lambda x, y, z: 0 * x,
    (0, 0, 0, 1, 1, 2): lambda x, y, z: 12 + 0 * x,
    (0, 0, 0, 1, 1, 1): lambda x, y, z: 0 * x,
}


@pytest.mark.parametrize("method", EXACT)
def test_mixed_partials_of_a_polynomial(method):
    X = points(5, 3, seed=4, lo=-1.5, hi=1.5)
    x, y, z = X.numpy().T
    for index, ref in POLY_PARTIALS.items():
        got = A.partial(poly, X, index, method=method)
        assert got.shape == [5], (index, got.shape)
        np.testing.assert_allclose(got.numpy(), ref(x, y, z), rtol=1e-11, atol=1e-10,
                                   err_msg=f"d/{index}")


@pytest.mark.parametrize("method", ["collapsed", "taylor"])
def test_linear_operator_of_a_polynomial(method):
    """Several orders at once: 2 f_x - f_xyz + 0.5 f_xxxyyz + f_xx + f_yy + f_zz - 3 f_yz."""
    X = points(5, 3, seed=5, lo=-1.5, hi=1.5)
    x, y, z = X.numpy().T
    terms = {(1, 0, 0): 2.0, (1, 1, 1): -1.0, (3, 2, 1): 0.5, (2, 0, 0): 1.0,
             (0, 2, 0): 1.0, (0, 0, 2): 1.0, (0, 1, 1): -3.0}
    ref = (2 * 3 * x ** 2 * y ** 2 * z - 6 * x ** 2 * y + 0.5 * 12 + 6 * x * y ** 2 * z
           + 2 * x ** 3 * z - 3 * 2 * x ** 3 * y)
    got = A.linear_operator(poly, X, terms, method=method)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-11, atol=1e-10)
    lap = A.linear_operator(poly, X, {(2, 0, 0): 1.0, (0, 2, 0): 1.0, (0, 0, 2): 1.0},
                            method=method)
    np.testing.assert_allclose(lap.numpy(), A.laplacian(poly, X, method="nested").numpy(),
                               rtol=1e-12, atol=1e-12)


def test_linear_operator_biharmonic_terms_equal_biharmonic():
    f = mlp(mlp_params([2, 8, 8, 1], seed=6, requires_grad=False))
    X = points(4, 2)
    terms = {(4, 0): 1.0, (2, 2): 2.0, (0, 4): 1.0}
    np.testing.assert_allclose(A.linear_operator(f, X, terms).numpy(),
                               A.biharmonic(f, X, method="nested").numpy(), rtol=1e-10)


@pytest.mark.parametrize("method", ["collapsed", "taylor"])
def test_directional_derivative_against_nested_jvp(method):
    """One direction for every point ([d]) or one per point ([N, d]), orders 1..5."""
    f = mlp(mlp_params([3, 8, 1], seed=7, requires_grad=False), act=pf.sin)
    X = points(4, 3)
    rng = np.random.default_rng(2)
    for v in (T(rng.standard_normal(3)), T(rng.standard_normal((4, 3)))):
        for k in range(1, 6):
            got = A.directional_derivative(f, X, v, order=k, method=method)
            ref = nested_jvp_along(f, X, v, k)
            assert got.shape == [4, 1]
            np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-11, atol=1e-12)


def test_interpolation_weights_known_cases():
    def check(terms, d, dirs, weights):
        got_dirs, got_w = interpolation_weights(terms, d)
        assert got_dirs == dirs
        np.testing.assert_allclose(got_w, weights, rtol=1e-15, atol=1e-15)

    check({(2, 0): 1.0, (0, 2): 1.0}, 2, [[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]],
          [0.5, 0.0, 0.5])  # Laplacian: D_{2 e_i}^2 / 2! = 2 f_ii
    check({(1, 1): 1.0}, 2, [[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]], [-0.25, 1.0, -0.25])
    check({(3,): 1.0}, 1, [[3.0]], [6 / 27])  # w 3^3 / 3! = 1
    check({(1, 0, 0): 2.0, (0, 0, 1): -1.0}, 3, [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0],
                                                   [1.0, 0.0, 0.0]], [-1.0, 0.0, 2.0])


@pytest.mark.parametrize("K,d", [(2, 3), (3, 2), (4, 2), (3, 3)])
def test_interpolation_weights_solve_the_moment_system(K, d):
    """For random coefficients: sum_j w_j j^i / i! = c_i for every multi-index |i| = K, so
    sum_j w_j D_j^K f / K! = sum_i c_i d^i f for every f."""
    import itertools

    rng = np.random.default_rng(K * 10 + d)
    indices = [i for i in itertools.product(range(K + 1), repeat=d) if sum(i) == K]
    terms = {i: float(rng.standard_normal()) for i in indices if rng.random() < 0.6}
    terms = terms or {indices[0]: 1.0}
    dirs, weights = interpolation_weights(terms, d)
    for i in indices:
        lhs = sum(w * np.prod([j_m ** i_m for j_m, i_m in zip(j, i)]) for j, w in
                  zip(dirs, weights)) / np.prod([math.factorial(m) for m in i])
        assert abs(lhs - terms.get(i, 0.0)) < 1e-12, (i, lhs, terms.get(i, 0.0))


def test_biharmonic_directions():
    """e_i with weight 1 - (d-1)/3 and e_i ± e_j (i < j) with 1/6: sum_r w_r (v_r . a)^4 =
    (a . a)^2 for every a, i.e. sum_r w_r D_{v_r}^4 = Δ²."""
    rng = np.random.default_rng(0)
    for d in (1, 2, 3, 4):
        dirs, weights = biharmonic_directions(d)
        assert len(dirs) == d * d
        for _ in range(3):
            a = rng.standard_normal(d)
            got = sum(w * float(np.dot(v, a)) ** 4 for v, w in zip(dirs, weights))
            assert abs(got - float(a @ a) ** 2) < 1e-12 * float(a @ a) ** 2


@pytest.mark.parametrize("op", ["laplacian", "biharmonic"])
def test_pinn_loss_gradient_matches_the_nested_method(op):
    """pf.grad of mean((op(u) - q)^2) w.r.t. the network weights is the same with every
    exact method, and equals a central difference along a random parameter direction;
    the stochastic method's loss is differentiable too."""
    params = mlp_params([2, 16, 16, 1], seed=3)
    f = mlp(params)
    X = points(8, 2, lo=0.0, hi=1.0)
    q = T(4 * PI ** 4 * sinsin(X).numpy()[:, None])

    def loss(method, **kw):
        r = pf.subtract(getattr(A, op)(f, X, method=method, **kw), q)
        return pf.mean(r * r)

    def grads(method, **kw):
        gs = pf.grad(loss(method, **kw), params, allow_unused=True)
        return [np.zeros(p.shape) if g is None else g.numpy() for g, p in zip(gs, params)]

    ref = grads("nested")
    for method in ("collapsed", "taylor"):
        for g, r in zip(grads(method), ref):
            np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-10 * np.max(np.abs(ref[0])))
    rng = np.random.default_rng(4)
    dirs = [rng.standard_normal(p.shape) for p in params]
    base = [p.numpy().copy() for p in params]

    def at(eps):
        for p, b, d in zip(params, base, dirs):
            p.set_value(b + eps * d)
        with pf.no_grad():
            value = float(loss("collapsed"))
        for p, b in zip(params, base):
            p.set_value(b)
        return value

    eps = 1e-6
    fd = (at(eps) - at(-eps)) / (2 * eps)
    ad = sum(float(np.sum(g * d)) for g, d in zip(ref, dirs))
    assert abs(ad - fd) <= 1e-6 * abs(fd), (ad, fd)
    stochastic = grads("stochastic", samples=4, seed=0)
    assert all(np.all(np.isfinite(g)) for g in stochastic) and np.any(stochastic[0])


@pytest.mark.parametrize("method", METHODS)
def test_operators_of_affine_and_low_degree_functions(method):
    """Zero Laplacian/biharmonic for an affine f in every method (the result keeps f's
    shape, [N, 1] or [N]); Δ|x|^2 = 2d and Δ²|x|^2 = 0 in the exact methods."""
    X = points(4, 3)
    kw = {"seed": 0} if method == "stochastic" else {}
    affine = lambda P: pf.matmul(P, T([[1.0], [2.0], [3.0]])) + 0.5  # noqa: E731
    for op in (A.laplacian, A.biharmonic):
        r = op(affine, X, method=method, **kw)
        assert r.shape == [4, 1] and not np.any(r.numpy())
    square = lambda P: pf.sum(P * P, axis=1)  # noqa: E731
    assert A.biharmonic(square, X, method=method, **kw).shape == [4]
    if method != "stochastic":
        np.testing.assert_allclose(A.laplacian(square, X, method=method).numpy(), 6.0,
                                   rtol=1e-14)
        assert not np.any(A.biharmonic(square, X, method=method).numpy())


@pytest.mark.parametrize("call,exc,match", [
    (lambda f, X: A.laplacian(f, T([1.0, 2.0])), ValueError, r"\[N, d\]"),
    (lambda f, X: A.biharmonic(f, T(np.ones((2, 2, 2)))), ValueError, r"\[N, d\]"),
    (lambda f, X: A.laplacian(f, pf.to_tensor([[1, 2]])), TypeError, "floating"),
    (lambda f, X: A.laplacian(f, X, method="magic"), ValueError, "method must be one of"),
    (lambda f, X: A.biharmonic(f, X, method="forward"), ValueError, "method must be one of"),
    (lambda f, X: A.directional_derivative(f, X, [1.0, 0.0], method="nested"), ValueError,
     "method must be one of"),
    (lambda f, X: A.linear_operator(f, X, {(1, 0): 1.0}, method="stochastic"), ValueError,
     "method must be one of"),
    (lambda f, X: A.partial(f, X, (0,), method="stochastic"), ValueError,
     "method must be one of"),
    (lambda f, X: A.directional_derivative(f, X, [1.0, 0.0], order=0), ValueError,
     "positive int"),
    (lambda f, X: A.directional_derivative(f, X, [1.0, 0.0], order=-2), ValueError,
     "positive int"),
    (lambda f, X: A.directional_derivative(f, X, [1.0, 0.0], order=1.5), ValueError,
     "positive int"),
    (lambda f, X: A.directional_derivative(f, X, [1.0, 0.0, 0.0]), ValueError,
     r"pass \[d\] or \[N, d\]"),
    (lambda f, X: A.partial(f, X, ()), ValueError, "order >= 1"),
    (lambda f, X: A.partial(f, X, (), method="nested"), ValueError, "order >= 1"),
    (lambda f, X: A.partial(f, X, (0, 2)), ValueError, "out of range"),
    (lambda f, X: A.partial(f, X, (0, 2), method="nested"), ValueError, "out of range"),
    (lambda f, X: A.linear_operator(f, X, {(0, 0): 1.0}), ValueError, "order >= 1"),
    (lambda f, X: A.linear_operator(f, X, {(2, -1): 1.0}), ValueError, "non-negative"),
    (lambda f, X: A.linear_operator(f, X, {(1, 0, 0): 1.0}), ValueError, "2 non-negative"),
    (lambda f, X: A.linear_operator(f, X, {}), ValueError, "at least one"),
    (lambda f, X: A.laplacian(f, X, method="stochastic", samples=0), ValueError,
     "positive int"),
    (lambda f, X: interpolation_weights({(1, 0): 1.0, (2, 0): 1.0}, 2), ValueError,
     "single order"),
    (lambda f, X: interpolation_weights({(1, 0, 0): 1.0}, 2), ValueError, "2 entries"),
], ids=["X_1d", "X_3d", "X_int", "unknown_method", "biharmonic_method", "dd_nested",
        "linop_stochastic", "partial_stochastic", "order_0", "order_negative", "order_float",
        "direction_shape", "partial_empty", "partial_empty_nested", "partial_range",
        "partial_range_nested", "multiindex_order_0", "multiindex_negative",
        "multiindex_length", "no_terms", "samples_0", "mixed_orders", "weights_length"])
def test_operator_bad_input(call, exc, match):
    f = lambda P: pf.sin(P[:, 0]) * P[:, 1]  # noqa: E731
    X = points(3, 2)
    with pytest.raises(exc, match=match):
        call(f, X)


@pytest.mark.parametrize("method", ["collapsed", "taylor", "nested"])
def test_operators_of_a_vector_valued_function_act_per_component(method):
    # u(x, y) = [sin(x) y^3, y^4]: Laplacian [-sin(x) y^3 + 6 sin(x) y, 12 y^2] and
    # biharmonic [-12 sin(x) y + ... ] checked against the closed forms below
    X = points(6, 2)
    f = lambda P: pf.stack([pf.sin(P[:, 0]) * P[:, 1] ** 3, P[:, 1] ** 4], axis=1)  # noqa: E731
    x, y = X.numpy()[:, 0], X.numpy()[:, 1]
    lap = np.stack([-np.sin(x) * y ** 3 + 6 * np.sin(x) * y, 12 * y ** 2], axis=1)
    # Δ²(sin x y^3) = sin x y^3 - 2 * 6 sin x y + 0 ; Δ²(y^4) = 24
    bih = np.stack([np.sin(x) * y ** 3 - 12 * np.sin(x) * y, np.full_like(y, 24.0)], axis=1)
    np.testing.assert_allclose(pf.autograd.laplacian(f, X, method=method).numpy(), lap,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pf.autograd.biharmonic(f, X, method=method).numpy(), bih,
                               rtol=1e-11, atol=1e-11)
