"""Functional transforms (grad, value_and_grad, vjp, jvp, vmap, jacfwd, jacrev, hessian):
values against closed forms and float64 finite differences, and their compositions."""

import math

import numpy as np
import pytest

import primflow as pf


def t64(a, **kw):
    return pf.to_tensor(np.asarray(a, dtype=np.float64), **kw)


def fd_grad(f, x, eps=1e-6):
    """Central finite-difference gradient of scalar f: R^n -> R at numpy x."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def mlp_params(seed=0, sizes=(3, 8, 8, 1)):
    rng = np.random.default_rng(seed)
    return [(t64(rng.normal(size=(a, b)) / math.sqrt(a)), t64(rng.normal(size=(b,)) * 0.1))
            for a, b in zip(sizes[:-1], sizes[1:])]


def mlp(params, x):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            x = pf.tanh(x)
    return x


# ---- seed values ---------------------------------------------------------------------------

def test_grad_of_tanh_seed_values():
    d1 = pf.grad(pf.tanh)(2.0)
    d2 = pf.grad(pf.grad(pf.tanh))(2.0)
    d3 = pf.grad(pf.grad(pf.grad(pf.tanh)))(2.0)
    np.testing.assert_allclose([float(d1), float(d2), float(d3)],
                               [0.070650816, -0.13621868, 0.25265405], rtol=1e-5)


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_nested_grad_matches_closed_form_of_sin(order):
    f = pf.sin
    for _ in range(order):
        f = pf.grad(f)
    x = 0.7
    expected = [math.cos(x), -math.sin(x), -math.cos(x), math.sin(x)][(order - 1) % 4]
    assert float(f(t64(x))) == pytest.approx(expected, rel=1e-12)


# ---- grad / value_and_grad / vjp -----------------------------------------------------------

def test_grad_argnums_and_pytrees_against_finite_differences():
    def f(a, params, c):
        return (pf.sin(a * params["w"]) * params["v"][0] + c * params["v"][1]).sum()

    a = t64([0.3, -0.4])
    params = {"w": t64([1.5, 0.5]), "v": [t64([2.0, 1.0]), t64([0.1, 0.2])]}
    ga, gp = pf.grad(f, argnums=(0, 1))(a, params, 3.0)
    assert set(gp) == {"w", "v"} and isinstance(gp["v"], list)
    w, v0, v1 = (params["w"].numpy(), params["v"][0].numpy(), params["v"][1].numpy())

    def f_np(a_, w_=w):
        return float((np.sin(a_ * w_) * v0 + 3.0 * v1).sum())

    np.testing.assert_allclose(ga.numpy(), fd_grad(f_np, a.numpy()), rtol=1e-7)
    np.testing.assert_allclose(gp["w"].numpy(), fd_grad(lambda w_: f_np(a.numpy(), w_), w),
                               rtol=1e-7)
    np.testing.assert_allclose(gp["v"][1].numpy(), [3.0, 3.0])


def test_value_and_grad_has_aux():
    def f(x):
        y = (x ** 2).sum()
        return y, {"norm": pf.sqrt(y)}

    (value, aux), g = pf.value_and_grad(f, has_aux=True)(t64([3.0, 4.0]))
    assert float(value) == 25.0 and float(aux["norm"]) == 5.0
    np.testing.assert_allclose(g.numpy(), [6.0, 8.0])
    g2, aux2 = pf.grad(f, has_aux=True)(t64([3.0, 4.0]))
    np.testing.assert_allclose(g2.numpy(), [6.0, 8.0])
    assert float(aux2["norm"]) == 5.0


def test_vjp_matches_tape():
    x = t64([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    ct = t64(np.arange(2.0)[:, None] + np.ones((2, 2)))
    w = t64(np.linspace(-1, 1, 6).reshape(3, 2))
    out, vjp_fn = pf.vjp(lambda a, b: pf.tanh(a @ b), x, w)
    gx, gw = vjp_fn(ct)
    xt, wt = t64(x.numpy(), stop_gradient=False), t64(w.numpy(), stop_gradient=False)
    tx, tw = pf.grad(pf.tanh(xt @ wt), [xt, wt], grad_outputs=ct)
    np.testing.assert_allclose(gx.numpy(), tx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), tw.numpy(), rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), np.tanh(x.numpy() @ w.numpy()))


def test_seed_style_training_loop_with_weights():
    # MindSpore's call shape: value_and_grad(forward_fn, grad_position=None, weights, has_aux)
    pf.seed(0)
    params = mlp_params(sizes=(2, 16, 1))
    weights = [t for layer in params for t in layer]
    x = t64(np.random.default_rng(1).uniform(-1, 1, size=(64, 2)))
    target = pf.sin(x[:, :1] * 2.0) * pf.cos(x[:, 1:])

    def forward_fn(data, label):
        pred = mlp(params, data)
        loss = ((pred - label) ** 2).mean()
        return loss, pred

    step = pf.value_and_grad(forward_fn, None, weights, has_aux=True)
    losses = []
    for _ in range(200):
        (loss, pred), grads = step(x, target)
        assert len(grads) == len(weights)
        with pf.no_grad():
            for w, g in zip(weights, grads):
                w.set_value((w - 0.1 * g).numpy())
        losses.append(float(loss))
    assert losses[-1] < 0.25 * losses[0]
    # the gradient matches finite differences at the final weights
    (loss, _), grads = step(x, target)
    w0 = weights[0].numpy()

    def loss_of_w0(w_):
        h = np.tanh(x.numpy() @ w_ + weights[1].numpy())
        p = h @ weights[2].numpy() + weights[3].numpy()
        return float(((p - target.numpy()) ** 2).mean())

    np.testing.assert_allclose(grads[0].numpy(), fd_grad(loss_of_w0, w0), rtol=1e-6, atol=1e-9)


# ---- jvp -----------------------------------------------------------------------------------

def test_jvp_matches_finite_differences_and_multiple_outputs():
    def f(a, b):
        return pf.exp(a) * b, (a * b).sum()

    a, b = t64([0.1, -0.3]), t64([2.0, 0.5])
    da, db = t64([1.0, 2.0]), t64([-0.5, 0.25])
    (o1, o2), (t1, t2) = pf.jvp(f, (a, b), (da, db))
    eps = 1e-6

    def f_np(s):
        an, bn = a.numpy() + s * da.numpy(), b.numpy() + s * db.numpy()
        return np.exp(an) * bn, (an * bn).sum()

    fd1 = (f_np(eps)[0] - f_np(-eps)[0]) / (2 * eps)
    fd2 = (f_np(eps)[1] - f_np(-eps)[1]) / (2 * eps)
    np.testing.assert_allclose(t1.numpy(), fd1, rtol=1e-7)
    assert float(t2) == pytest.approx(fd2, rel=1e-7)



def test_jvp_and_jacfwd_of_functions_returning_dicts():
    """Outputs are pytrees: a dict of tensors comes back as a dict, for values and tangents,
    and jacfwd nests its Jacobians in the same dict."""
    x, dx = t64([0.4, -1.2]), t64([1.0, 0.5])
    out, tan = pf.jvp(lambda v: {"s": pf.sin(v), "n": [v * v]}, (x,), (dx,))
    assert set(out) == set(tan) == {"s", "n"}
    np.testing.assert_allclose(tan["s"].numpy(), np.cos(x.numpy()) * dx.numpy(), rtol=1e-13)
    np.testing.assert_allclose(tan["n"][0].numpy(), 2 * x.numpy() * dx.numpy(), rtol=1e-13)
    jac = pf.jacfwd(lambda v: {"s": pf.sin(v)})(x)
    np.testing.assert_allclose(jac["s"].numpy(), np.diag(np.cos(x.numpy())), rtol=1e-13)

# ---- vmap ----------------------------------------------------------------------------------

def test_vmap_equals_stacking_over_rows():
    params = mlp_params()
    xs = t64(np.random.default_rng(2).normal(size=(5, 3)))
    batched = pf.vmap(lambda x: mlp(params, x))(xs).numpy()
    rows = np.stack([mlp(params, xs[i]).numpy() for i in range(5)])
    np.testing.assert_allclose(batched, rows, rtol=1e-12)


def test_vmap_in_axes_out_axes_and_nesting():
    a = t64(np.arange(12.0).reshape(3, 4))
    b = t64(np.arange(4.0))
    # map over columns of a, broadcast b
    out = pf.vmap(lambda col, v: col * v.sum(), in_axes=(1, None), out_axes=1)(a, b)
    np.testing.assert_allclose(out.numpy(), a.numpy() * 6.0)
    # nested: outer over rows, inner over elements -> elementwise
    nested = pf.vmap(pf.vmap(lambda s: s * s + 1.0))(a)
    np.testing.assert_allclose(nested.numpy(), a.numpy() ** 2 + 1.0)
    # per-argument pytree axes
    out2 = pf.vmap(lambda d: d["x"] + d["y"], in_axes=({"x": 0, "y": None},))(
        {"x": a, "y": b})
    np.testing.assert_allclose(out2.numpy(), a.numpy() + b.numpy())


def test_vmap_of_matmul_variants():
    rng = np.random.default_rng(3)
    x, w = t64(rng.normal(size=(4, 2, 3))), t64(rng.normal(size=(4, 3, 5)))
    w0 = t64(rng.normal(size=(3, 5)))
    np.testing.assert_allclose(pf.vmap(pf.matmul)(x, w).numpy(), x.numpy() @ w.numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(pf.vmap(pf.matmul, in_axes=(0, None))(x, w0).numpy(),
                               x.numpy() @ w0.numpy(), rtol=1e-12)
    xt = t64(rng.normal(size=(2, 3)))
    np.testing.assert_allclose(pf.vmap(pf.matmul, in_axes=(None, 0))(xt, w).numpy(),
                               xt.numpy() @ w.numpy(), rtol=1e-12)


def test_vmap_of_indexing_and_reductions():
    a = t64(np.arange(24.0).reshape(2, 3, 4))
    idx = pf.to_tensor([2, 0])
    out = pf.vmap(lambda m: m[1:, idx].sum(axis=0) + pf.max(m, axis=1)[:2])(a)
    ref = np.stack([m[1:, [2, 0]].sum(axis=0) + m.max(axis=1)[:2] for m in a.numpy()])
    np.testing.assert_allclose(out.numpy(), ref)
    sm = pf.vmap(lambda r: pf.nn.functional.softmax(r))(a)
    e = np.exp(a.numpy() - a.numpy().max(-1, keepdims=True))
    np.testing.assert_allclose(sm.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-12)


# ---- compositions --------------------------------------------------------------------------

def test_vmap_of_grad_and_grad_of_vmap():
    f = lambda x: (pf.sin(x) * x).sum()  # noqa: E731
    xs = t64(np.random.default_rng(4).normal(size=(6, 3)))
    per_row = pf.vmap(pf.grad(f))(xs).numpy()
    x = xs.numpy()
    np.testing.assert_allclose(per_row, np.cos(x) * x + np.sin(x), rtol=1e-12)
    total = pf.grad(lambda X: pf.vmap(f)(X).sum())(xs).numpy()
    np.testing.assert_allclose(total, per_row, rtol=1e-12)


def test_jacfwd_jacrev_hessian_agree_with_finite_differences():
    params = mlp_params(sizes=(3, 6, 1))
    f = lambda x: mlp(params, x).sum()  # noqa: E731
    x = t64([0.2, -0.1, 0.4])
    h_fr = pf.jacfwd(pf.jacrev(f))(x).numpy()
    h_rr = pf.jacrev(pf.jacrev(f))(x).numpy()
    h_ff = pf.jacfwd(pf.jacfwd(f))(x).numpy()
    h = pf.hessian(f)(x).numpy()
    g = lambda v: pf.grad(f)(t64(v)).numpy()  # noqa: E731
    fd = np.stack([(g(x.numpy() + e) - g(x.numpy() - e)) / 2e-6
                   for e in np.eye(3) * 1e-6], axis=1)
    for m in (h_fr, h_rr, h_ff, h):
        np.testing.assert_allclose(m, fd, rtol=1e-6, atol=1e-9)


def test_jacobian_shapes_put_output_dims_first():
    f = lambda x: pf.tanh(x).reshape([2, 3])  # noqa: E731
    x = t64(np.linspace(-1, 1, 6))
    assert pf.jacrev(f)(x).shape == [2, 3, 6]
    assert pf.jacfwd(f)(x).shape == [2, 3, 6]
    np.testing.assert_allclose(pf.jacrev(f)(x).numpy(), pf.jacfwd(f)(x).numpy(), rtol=1e-12)


def test_vmap_of_jvp_and_jvp_of_grad():
    f = lambda x: (x ** 3).sum()  # noqa: E731
    x = t64([0.5, -1.0, 2.0])
    # jvp of grad: Hessian-vector product, H = diag(6 x)
    v = t64([1.0, 0.0, 2.0])
    _, hvp = pf.jvp(pf.grad(f), (x,), (v,))
    np.testing.assert_allclose(hvp.numpy(), 6 * x.numpy() * v.numpy())
    # vmap of jvp over several tangents = columns of the Jacobian of grad = the Hessian
    basis = t64(np.eye(3))
    cols = pf.vmap(lambda t: pf.jvp(pf.grad(f), (x,), (t,))[1])(basis)
    np.testing.assert_allclose(cols.numpy(), np.diag(6 * x.numpy()))


def test_grad_of_jvp_reverse_over_forward():
    # g(x) = d/ds f(x + s v) = <grad f(x), v>;  grad g = H v
    f = lambda x: (pf.exp(x) * x).sum()  # noqa: E731
    v = t64([1.0, 2.0])
    g = lambda x: pf.jvp(f, (x,), (v,))[1]  # noqa: E731
    x = t64([0.1, 0.3])
    xn = x.numpy()
    np.testing.assert_allclose(pf.grad(g)(x).numpy(), (np.exp(xn) * (xn + 2)) * v.numpy(),
                               rtol=1e-12)


def test_transforms_of_closures_over_outer_tensors():
    w = t64([2.0, -1.0])
    outer = lambda a: pf.grad(lambda x: (pf.sin(a * x) * w).sum())(t64([0.3, 0.7]))  # noqa
    # d/da of grad_x: d/da [a cos(a x) w] = (cos(a x) - a x sin(a x)) w
    a = 1.5
    x = np.array([0.3, 0.7])
    ref = ((np.cos(a * x) - a * x * np.sin(a * x)) * w.numpy()).sum()
    assert float(pf.grad(lambda a_: outer(a_).sum())(t64(a))) == pytest.approx(ref, rel=1e-12)
    # closure over a tensor the user's tape watches: the result stays differentiable
    wt = t64([2.0, -1.0], stop_gradient=False)
    gx = pf.grad(lambda x: (x * x * wt).sum())(t64([1.0, 3.0]))
    gx.sum().backward()
    np.testing.assert_allclose(wt.grad.numpy(), [2.0, 6.0])


def test_fourth_derivative_through_every_composition():
    f = lambda x: pf.tanh(x) * pf.exp(0.5 * x)  # noqa: E731
    d4 = pf.grad(pf.grad(pf.grad(pf.grad(f))))
    x = 0.3
    # reference: a second difference of the AD second derivative (FD never nested over FD)
    d2 = pf.grad(pf.grad(f))
    h = 1e-3
    fd = (float(d2(t64(x + h))) - 2 * float(d2(t64(x))) + float(d2(t64(x - h)))) / h ** 2
    assert float(d4(t64(x))) == pytest.approx(fd, rel=1e-5)
    batched = pf.vmap(d4)(t64([x, x]))
    np.testing.assert_allclose(batched.numpy(), [float(d4(t64(x)))] * 2, rtol=1e-12)


# ---- bad input -----------------------------------------------------------------------------

def test_vmap_errors_name_the_problem():
    a, b = t64(np.zeros((3, 2))), t64(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        pf.vmap(lambda x, y: x + y[:3])(a, b)
    with pytest.raises(ValueError, match="in_axes has 1 entries"):
        pf.vmap(lambda x, y: x, in_axes=(0,))(a, b)
    with pytest.raises(ValueError, match="out of range"):
        pf.vmap(lambda x: x, in_axes=2)(a)
    with pytest.raises(ValueError, match="structure"):
        pf.vmap(lambda d: d["x"], in_axes=({"x": 0, "y": 0},))({"x": a})


def test_grad_errors_name_the_problem():
    with pytest.raises(TypeError, match="scalar output"):
        pf.grad(lambda x: x * 2)(t64([1.0, 2.0]))
    with pytest.raises(ValueError, match="argnums"):
        pf.grad(lambda x: x.sum(), argnums=3)(t64([1.0]))
    with pytest.raises(TypeError, match="floating point"):
        pf.grad(lambda x: x.sum())(pf.to_tensor([1, 2]))


def test_jacobians_of_empty_inputs_have_empty_shapes():
    """Zero-size dims stay zero-size (pf.reshape reads 0 as "copy this dim"; the Jacobian
    code must not)."""
    x = t64(np.zeros((0, 2)))
    f = lambda v: pf.tanh(v).sum()  # noqa: E731
    assert pf.jacrev(f)(x).shape == [0, 2]
    assert pf.jacfwd(pf.tanh)(x).shape == [0, 2, 0, 2]
    assert pf.jacfwd(pf.jacrev(f))(x).shape == [0, 2, 0, 2]
    assert pf.hessian(f)(x).shape == [0, 2, 0, 2]
