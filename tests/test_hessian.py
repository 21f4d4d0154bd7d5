"""pf.hessian by second-order adjoints (transforms/second_order.py): values against closed
forms and float64 finite differences, argument structures, the fallback to forward over
reverse, derivatives of the Hessian, and vmap/jit. The OpInfo table checks every primitive's
term (tests/test_opinfo.py::test_hessian_by_adjoints)."""

import math

import numpy as np
import pytest

import primflow as pf
from primflow.transforms import second_order
from test_transforms import mlp, t64  # tanh MLP on (weight, bias) pairs, float64 tensors


def fd_jacobian(f, x, eps=1e-5):
    """Central differences of f: R^n -> R^m (NumPy in, NumPy out): [m..., n...]."""
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for e in np.eye(x.size):
        e = e.reshape(x.shape) * eps
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(cols[0]) + x.shape)


def mlp_weights(sizes=(4, 8, 8, 1), seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((a, b)) / math.sqrt(a), 0.1 * rng.standard_normal(b))
            for a, b in zip(sizes[:-1], sizes[1:])]


def mlp_hessian_closed_form(weights, x):
    """d2/dx2 of w3 . tanh(tanh(x W1 + b1) W2 + b2): sum over both layers of J^T D J."""
    (w1, b1), (w2, b2), (w3, _) = weights
    z1 = x @ w1 + b1
    h1 = np.tanh(z1)
    z2 = h1 @ w2 + b2
    h2 = np.tanh(z2)
    g2 = w3[:, 0] * (1 - h2 ** 2)  # df/dz2
    j1 = w1  # dz1/dx, [n, 8]
    j2 = (w1 * (1 - h1 ** 2)) @ w2  # dz2/dx
    c1 = (g2 @ w2.T) * (-2 * h1 * (1 - h1 ** 2))
    c2 = w3[:, 0] * (-2 * h2 * (1 - h2 ** 2))
    return (j1 * c1) @ j1.T + (j2 * c2) @ j2.T


def test_mlp_hessian_equals_the_closed_form_and_takes_the_adjoint_route():
    weights = mlp_weights()
    p = [(t64(w), t64(b)) for w, b in weights]
    x = np.linspace(-0.5, 0.7, 4)
    f = lambda v: mlp(p, v).sum()  # noqa: E731
    expected = mlp_hessian_closed_form(weights, x)
    np.testing.assert_allclose(pf.hessian(f)(t64(x)).numpy(), expected, rtol=1e-12, atol=1e-14)
    direct = second_order.hessian_by_adjoints(f, (t64(x),))
    assert direct is not None  # not the fallback
    np.testing.assert_allclose(direct.numpy(), expected, rtol=1e-12, atol=1e-14)


def test_bilinear_and_quotient_terms_against_finite_differences():
    a = t64([[2.0, 0.5, -1.0], [0.5, 1.0, 0.3], [-1.0, 0.3, 3.0]])

    def f(x):  # x A x (dot_general of two x-dependent operands), x0 * x1, a quotient, pow
        return ((x @ a) @ x + x[0] * x[1] + x[2] / (1.5 + x[0] ** 2)
                + pf.pow(1.2 + x[1] * x[1], x[2]) + pf.maximum(x, 0.1 * x).sum())

    x = np.array([0.3, -0.4, 0.8])
    h = pf.hessian(f)(t64(x)).numpy()
    fd = fd_jacobian(lambda v: pf.grad(f)(t64(v)).numpy(), x)
    np.testing.assert_allclose(h, fd, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(h, h.T, rtol=1e-12, atol=1e-13)


def test_several_arguments_and_pytrees_nest_like_forward_over_reverse():
    def f(x, d, y):
        return (pf.sin(x) * d["s"]).sum() * pf.tanh(y).sum() + (d["t"] ** 3).sum()

    args = (t64([0.3, -0.2]), {"s": t64([1.5, 0.4]), "t": t64([0.7])}, t64([0.1, 0.2, 0.3]))
    for argnums in (0, 1, (0, 2), (2, 1, 0)):
        got = pf.hessian(f, argnums=argnums)(*args)
        want = pf.jacfwd(pf.jacrev(f, argnums=argnums), argnums=argnums)(*args)
        got_leaves, got_tree = pf.tree_flatten(got)
        want_leaves, want_tree = pf.tree_flatten(want)
        assert got_tree == want_tree
        assert len(got_leaves) == len(want_leaves)
        for g, w in zip(got_leaves, want_leaves):
            assert g.shape == w.shape
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-14)


def test_output_of_shape_one_aux_and_argument_dtype():
    f = lambda x: ((pf.exp(x) * x).sum(keepdim=True), x.shape[0])  # noqa: E731
    x = np.array([0.2, -0.6, 1.1])
    h, aux = pf.hessian(f, has_aux=True)(t64(x))
    assert aux == 3 and h.shape == [1, 3, 3] and h.dtype == pf.float64
    np.testing.assert_allclose(h.numpy()[0], np.diag(np.exp(x) * (x + 2)), rtol=1e-13)
    h32 = pf.hessian(lambda v: (v ** 3).sum())(pf.to_tensor([1.0, 2.0]))
    assert h32.dtype == pf.float32


def test_functions_this_cannot_take_fall_back_to_forward_over_reverse():
    x = t64([0.3, -0.7])
    vector_out = lambda v: pf.sin(v) * v[0]  # noqa: E731  (a vector output)
    assert second_order.hessian_by_adjoints(vector_out, (x,)) is None
    np.testing.assert_allclose(pf.hessian(vector_out)(x).numpy(),
                               pf.jacfwd(pf.jacrev(vector_out))(x).numpy(), rtol=1e-13)
    fd = fd_jacobian(lambda v: pf.jacrev(vector_out)(t64(v)).numpy(), x.numpy())
    np.testing.assert_allclose(pf.hessian(vector_out)(x).numpy(), fd, rtol=1e-7, atol=1e-9)

    @pf.custom_vjp
    def cube(v):
        return v ** 3

    cube.defvjp(lambda v: (v ** 3, v), lambda v, g: (3 * v * v * g,))
    scalar = lambda v: cube(v).sum()  # noqa: E731  (a custom rule on the path)
    assert second_order.hessian_by_adjoints(scalar, (x,)) is None
    np.testing.assert_allclose(pf.hessian(scalar)(x).numpy(), np.diag(6 * x.numpy()),
                               rtol=1e-13)


def test_functions_not_depending_on_the_input_have_zero_hessians():
    x = t64([0.3, -0.7])
    assert np.all(pf.hessian(lambda v: pf.sin(t64(1.0)) + 0 * v.sum())(x).numpy() == 0)
    assert np.all(pf.hessian(lambda v: (v * 2.0).sum())(x).numpy() == 0)
    assert np.all(pf.hessian(lambda v: v)(t64(0.5)).numpy() == 0)


def test_third_derivatives_through_the_hessian():
    f = lambda v: (pf.tanh(v) * pf.sin(v[::-1])).sum() + v[0] ** 2 * v[1]  # noqa: E731
    x = np.array([0.4, -0.3, 0.9])
    third = pf.jacfwd(pf.hessian(f))(t64(x)).numpy()
    fd = fd_jacobian(lambda v: pf.hessian(f)(t64(v)).numpy(), x)
    np.testing.assert_allclose(third, fd, rtol=1e-7, atol=1e-9)
    # on the tape: x requires grad, the Hessian's sum is backpropagated
    xt = t64(x, stop_gradient=False)
    pf.hessian(f)(xt).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), fd.sum(axis=(0, 1)), rtol=1e-7, atol=1e-9)


def test_gradient_of_a_hessian_loss_with_respect_to_closed_over_weights():
    weights = mlp_weights(sizes=(2, 5, 1), seed=3)
    x = t64([0.2, -0.4])

    def loss(w1):
        p = [(w1, t64(weights[0][1])), (t64(weights[1][0]), t64(weights[1][1]))]
        h = pf.hessian(lambda v: mlp(p, v).sum())(x)
        return (h * h).sum()  # e.g. a PDE residual built from second derivatives

    w1 = weights[0][0]
    g = pf.grad(loss)(t64(w1)).numpy()
    fd = fd_jacobian(lambda w: loss(t64(w)).numpy(), w1)
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_batched_hessian_under_vmap_and_jit(backend):
    weights = mlp_weights(sizes=(3, 16, 16, 1), seed=1)
    p = [(t64(w), t64(b)) for w, b in weights]
    f = lambda v: mlp(p, v).sum()  # noqa: E731
    xs = np.random.default_rng(2).uniform(-1, 1, (64, 3))
    expected = np.stack([mlp_hessian_closed_form(weights, x) for x in xs])
    batched = pf.vmap(pf.hessian(f))
    np.testing.assert_allclose(batched(t64(xs)).numpy(), expected, rtol=1e-11, atol=1e-13)
    jitted = pf.jit(batched, backend=backend)
    for _ in range(2):
        np.testing.assert_allclose(jitted(t64(xs)).numpy(), expected, rtol=1e-11, atol=1e-13)


def test_forward_over_reverse_is_kept_where_it_is_cheaper():
    """sum(sin(x)) with 400 inputs: the d x d contraction (d^3) costs far more than
    pushing d directions through a few elementwise ops (d^2), so pf.hessian falls back."""
    x = t64(np.linspace(-1, 1, 400))
    f = lambda v: (pf.sin(v) * v).sum()  # noqa: E731
    assert second_order.hessian_by_adjoints(f, (x,)) is None
    forced = second_order.hessian_by_adjoints(f, (x,), always=True)
    v = x.numpy()
    expected = np.diag(2 * np.cos(v) - v * np.sin(v))
    np.testing.assert_allclose(pf.hessian(f)(x).numpy(), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(forced.numpy(), expected, rtol=1e-12, atol=1e-14)


def test_composites_with_fused_kernels_take_the_adjoint_route():
    """silu, layer_norm and softmax record fused custom nodes in eager mode; the Hessian
    runs them as their primitives instead, and matches forward over reverse."""
    rng = np.random.default_rng(4)
    w1, w2 = t64(rng.standard_normal((3, 6))), t64(rng.standard_normal((6, 4)))
    F = pf.nn.functional

    def f(v):
        h = F.layer_norm(F.silu(v @ w1), [6])
        return (F.softmax(h @ w2, axis=-1) * t64([1.0, -2.0, 0.5, 3.0])).sum()

    x = t64([0.3, -0.2, 0.9])
    # always: with 3 inputs and these widths the cost estimate prefers forward over reverse
    got = second_order.hessian_by_adjoints(f, (x,), always=True)
    assert got is not None
    np.testing.assert_allclose(pf.hessian(f)(x).numpy(), got.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.numpy(), pf.jacfwd(pf.jacrev(f))(x).numpy(),
                               rtol=1e-10, atol=1e-12)
    fd = fd_jacobian(lambda v: pf.grad(f)(t64(v)).numpy(), x.numpy())
    np.testing.assert_allclose(got.numpy(), fd, rtol=1e-6, atol=1e-8)
