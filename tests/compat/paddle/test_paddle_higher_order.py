"""Double and triple gradients with ``paddle.grad(..., create_graph=True)``: matmul,
sigmoid(matmul + z) with broadcasting, tanh, exp, elementwise mul/div, and the gradient of
a gradient with respect to the seed ``grad_outputs``. Oracles: closed forms in NumPy and
float64 finite differences of the closed-form lower derivative."""

import numpy as np
import pytest

import paddle
from checks import assert_close, numeric_grad, numeric_jacobian, sigmoid


def leaf(array, dtype="float64"):
    return paddle.to_tensor(np.asarray(array, dtype=dtype), stop_gradient=False)


def test_create_graph_gradient_requires_grad_and_plain_gradient_does_not():
    x = leaf(np.random.rand(3))
    (g1,) = paddle.grad((x * x).sum(), x, create_graph=True)
    assert not g1.stop_gradient
    (g2,) = paddle.grad((x * x).sum(), x)
    assert g2.stop_gradient


def test_double_grad_of_matmul_wrt_weight_and_seed():
    a, w = np.random.rand(4, 3), np.random.rand(3, 2)
    v, u = np.random.rand(4, 2), np.random.rand(4, 3)
    x, wt, seed = leaf(a), leaf(w), leaf(v)
    y = paddle.matmul(x, wt)
    (dx,) = paddle.grad(y, x, grad_outputs=seed, create_graph=True)
    assert_close(dx, v @ w.T)
    dw, dseed = paddle.grad(dx, [wt, seed], grad_outputs=paddle.to_tensor(u))
    # sum(u * (v w^T)) is linear in w and in v
    assert_close(dw, u.T @ v)
    assert_close(dseed, u @ w)


def test_double_grad_of_matmul_wrt_the_input_itself_is_unused():
    x, wt = leaf(np.random.rand(2, 3)), leaf(np.random.rand(3, 2))
    (dx,) = paddle.grad(paddle.matmul(x, wt), x, create_graph=True)
    # d(dx)/dx = 0: dx = ones @ w^T does not depend on x
    (ddx,) = paddle.grad(dx, x, allow_unused=True)
    assert ddx is None or np.all(ddx.numpy() == 0)


def _sigmoid_matmul_dx(a, w, b):
    """Closed form of d sum(sigmoid(a @ w + b)) / d a."""
    s = sigmoid(a @ w + b)
    return (s * (1 - s)) @ w.T


def test_double_grad_of_sigmoid_matmul_plus_broadcast_bias():
    a, w, b = np.random.rand(4, 3), np.random.rand(3, 5), np.random.rand(5)
    u = np.random.rand(4, 3)
    x, wt, z = leaf(a), leaf(w), leaf(b)
    out = paddle.nn.functional.sigmoid(paddle.matmul(x, wt) + z)  # z broadcasts over rows
    (dx,) = paddle.grad(out, x, create_graph=True)
    assert_close(dx, _sigmoid_matmul_dx(a, w, b))
    ddx, ddw, ddz = paddle.grad(dx, [x, wt, z], grad_outputs=paddle.to_tensor(u))
    assert_close(ddx, numeric_grad(lambda t: _sigmoid_matmul_dx(t, w, b) * u, a))
    assert_close(ddw, numeric_grad(lambda t: _sigmoid_matmul_dx(a, t, b) * u, w))
    assert_close(ddz, numeric_grad(lambda t: _sigmoid_matmul_dx(a, w, t) * u, b))


def test_triple_grad_of_sigmoid_matmul():
    a, w, b = np.random.rand(3, 2), np.random.rand(2, 4), np.random.rand(4)
    x, wt, z = leaf(a), paddle.to_tensor(w), paddle.to_tensor(b)
    out = paddle.nn.functional.sigmoid(paddle.matmul(x, wt) + z)
    (dx,) = paddle.grad(out, x, create_graph=True)
    (ddx,) = paddle.grad(dx, x, create_graph=True)
    (dddx,) = paddle.grad(ddx, x)

    # oracle 1: finite differences of the closed-form first derivative
    assert_close(ddx, numeric_grad(lambda t: _sigmoid_matmul_dx(t, w, b), a))
    # oracle 2: closed forms, with s1 = s(1-s), s2 = s1(1-2s), s3 = s1(1-6s+6s^2)
    s = sigmoid(a @ w + b)
    s1 = s * (1 - s)
    s2 = s1 * (1 - 2 * s)
    s3 = s1 * (1 - 6 * s + 6 * s ** 2)
    ones_w = np.ones((a.shape[0], w.shape[0])) @ w  # column sums of w, one row per sample
    # dx[i,k] = sum_j s1[i,j] w[k,j]; seeds of ones at every order give these closed forms
    assert_close(ddx, (s2 * ones_w) @ w.T)
    assert_close(dddx, (s3 * ones_w * ones_w) @ w.T)


def test_double_grad_used_in_backward_accumulates_into_leaf_grad():
    a = np.random.rand(3)
    x = leaf(a)
    (dx,) = paddle.grad((x ** 3).sum(), x, create_graph=True)  # 3 x^2
    (dx * dx).sum().backward()  # d/dx sum(9 x^4) = 36 x^3
    assert_close(x.grad, 36 * a ** 3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_triple_grad_of_tanh(dtype):
    a = np.random.uniform(-1.5, 1.5, size=5)
    x = leaf(a, dtype)
    (d1,) = paddle.grad(paddle.tanh(x), x, create_graph=True)
    (d2,) = paddle.grad(d1, x, create_graph=True)
    (d3,) = paddle.grad(d2, x)
    t = np.tanh(a.astype(dtype).astype(np.float64))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    assert_close(d1, 1 - t ** 2, **tol)
    assert_close(d2, -2 * t * (1 - t ** 2), **tol)
    assert_close(d3, (6 * t ** 2 - 2) * (1 - t ** 2), **tol)


def test_triple_grad_of_exp_with_seeds():
    a = np.random.rand(2, 3)
    s1, s2, s3 = (np.random.rand(2, 3) for _ in range(3))
    x = leaf(a)
    (d1,) = paddle.grad(paddle.exp(x), x, grad_outputs=paddle.to_tensor(s1), create_graph=True)
    (d2,) = paddle.grad(d1, x, grad_outputs=paddle.to_tensor(s2), create_graph=True)
    (d3,) = paddle.grad(d2, x, grad_outputs=paddle.to_tensor(s3))
    assert_close(d1, s1 * np.exp(a))
    assert_close(d2, s2 * s1 * np.exp(a))
    assert_close(d3, s3 * s2 * s1 * np.exp(a))


def test_mixed_second_and_third_grads_of_elementwise_division():
    a, b = np.random.rand(4) + 0.5, np.random.rand(4) + 0.5
    x, z = leaf(a), leaf(b)
    y = x / z
    dx, dz = paddle.grad(y, [x, z], create_graph=True)
    assert_close(dx, 1 / b)
    assert_close(dz, -a / b ** 2)
    dzdx, dzdz = paddle.grad(dz, [x, z], create_graph=True)
    assert_close(dzdx, -1 / b ** 2)
    assert_close(dzdz, 2 * a / b ** 3)
    (dzzz,) = paddle.grad(dzdz, z)
    assert_close(dzzz, -6 * a / b ** 4)


def test_double_grad_of_elementwise_product_with_broadcasting():
    a, b = np.random.rand(3, 4), np.random.rand(4)
    x, z = leaf(a), leaf(b)
    y = x * x * z  # z broadcasts over rows
    (dx,) = paddle.grad(y, x, create_graph=True)
    assert_close(dx, 2 * a * b)
    ddx, ddz = paddle.grad(dx, [x, z])
    assert_close(ddx, np.broadcast_to(2 * b, a.shape))
    assert_close(ddz, (2 * a).sum(axis=0))


def test_gradient_of_gradient_wrt_the_seed_is_the_jacobian_transpose_product():
    a = np.random.rand(3)
    seed_value, u = np.random.rand(3), np.random.rand(3)
    x, seed = leaf(a), leaf(seed_value)
    y = paddle.sin(x) * x.sum()
    (vjp,) = paddle.grad(y, x, grad_outputs=seed, create_graph=True)
    jac = numeric_jacobian(lambda v: np.sin(v) * v.sum(), a)
    assert_close(vjp, seed_value @ jac)
    (dseed,) = paddle.grad(vjp, seed, grad_outputs=paddle.to_tensor(u))
    assert_close(dseed, jac @ u)  # d(seed^T J u)/d seed = J u


def test_hessian_vector_product_by_double_grad():
    a, v = np.random.rand(4), np.random.rand(4)
    x = leaf(a)
    y = (paddle.exp(x) * x.sum()).sum()
    (g,) = paddle.grad(y, x, create_graph=True)
    (hv,) = paddle.grad((g * paddle.to_tensor(v)).sum(), x)
    hess = np.diag(np.exp(a) * a.sum()) + np.exp(a)[:, None] + np.exp(a)[None, :]
    assert_close(hv, hess @ v)


def test_create_graph_false_gradient_cannot_be_differentiated_again():
    x = leaf(np.random.rand(3))
    (g,) = paddle.grad((x ** 3).sum(), x)
    assert g.stop_gradient
    with pytest.raises(RuntimeError):
        paddle.grad(g.sum(), x)


# ---- which inputs a later backward() reaches --------------------------------------------------
# paddle.grad(create_graph=True) returns the gradients of several leaves as the outputs of
# one gradient node that has all those leaves as inputs (Paddle's grad nodes); so a
# backward() from one of them reaches the other leaves too, and a leaf with no real
# contribution gets zeros, not None (PaddlePaddle 3.3.1 does the same in these cases).

def test_backward_from_one_gradient_of_a_node_gives_its_other_inputs_zeros():
    xa, ya, seed_a = np.random.rand(3, 3), np.random.rand(3, 3), np.random.rand(3, 3)
    x, y, seed = leaf(xa, "float32"), leaf(ya, "float32"), leaf(seed_a, "float32")
    out = paddle.matmul(x, y)
    gx, gy = paddle.grad([out], [x, y], [seed], retain_graph=True, create_graph=True)
    assert_close(gx, seed_a @ ya.T)
    assert_close(gy, xa.T @ seed_a)
    (zero,) = paddle.grad([gx], [x], retain_graph=True)  # no ValueError: x is reached
    assert_close(zero, np.zeros((3, 3)), rtol=0, atol=0)
    gx.backward()  # d sum(seed y^T) / d (x, y, seed)
    assert x.grad is not None and x.grad.dtype == paddle.float32
    assert_close(x.grad, np.zeros((3, 3)), rtol=0, atol=0)
    assert_close(y.grad, np.tile(seed_a.sum(axis=0), (3, 1)))
    assert_close(seed.grad, np.tile(ya.sum(axis=0), (3, 1)))


def test_backward_from_a_single_gradient_leaves_unreached_inputs_none():
    # only x asked for: x does not enter dy/dx = W^T, so x.grad and b.grad stay None, as in
    # PaddlePaddle 3.3.1
    wa = np.random.rand(2, 2)
    x, w, b = leaf(np.random.rand(1, 2)), leaf(wa), leaf(np.random.rand(2))
    (gx,) = paddle.grad(paddle.matmul(x, w) + b, x, create_graph=True)
    gx.sum().backward()
    assert x.grad is None and b.grad is None
    assert_close(w.grad, np.ones((2, 2)))


def test_triple_grad_reaches_only_what_the_third_derivative_reads():
    # d/dx of <gx, u> + <gy, v> is seed v^T: its backward reaches the seed and v only
    xa, ya = np.random.rand(3, 3), np.random.rand(3, 3)
    sa, ua, va = np.random.rand(3, 3), np.random.rand(3, 3), np.random.rand(3, 3)
    x, y = leaf(xa, "float32"), leaf(ya, "float32")
    seed, u, v = leaf(sa, "float32"), leaf(ua, "float32"), leaf(va, "float32")
    gx, gy = paddle.grad([paddle.matmul(x, y)], [x, y], [seed], create_graph=True)
    ddx, ddy, dseed = paddle.grad([gx, gy], [x, y, seed], [u, v], create_graph=True)
    assert_close(ddx, sa @ va.T)
    assert_close(ddy, ua.T @ sa)
    assert_close(dseed, ua @ ya + xa @ va)
    ddx.backward()
    assert x.grad is None and y.grad is None and u.grad is None
    assert_close(seed.grad, np.tile(va.sum(axis=0), (3, 1)))
    assert_close(v.grad, np.tile(sa.sum(axis=0), (3, 1)))


def test_create_graph_gradients_of_several_leaves_keep_their_graph_under_no_grad():
    xa, ya = np.random.rand(2), np.random.rand(2)
    x, y = leaf(xa), leaf(ya)
    loss = (x * x * y).sum()
    with paddle.no_grad():  # create_graph records the backward pass all the same
        gx, gy = paddle.grad(loss, [x, y], create_graph=True)
    assert not gx.stop_gradient
    (hxx,) = paddle.grad(gx.sum(), [x])
    assert_close(hxx, 2 * ya)
