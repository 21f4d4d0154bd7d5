"""``paddle.incubate.autograd``: ``vjp(func, xs, v=None) -> (ys, xs_grad)``,
``jvp(func, xs, v=None) -> (ys, ys_dot)`` and the lazy ``Jacobian(func, xs, is_batched)``
and ``Hessian``, in Paddle's signatures. Oracles: float64 finite differences and closed
forms."""

import numpy as np
import pytest

import paddle
import paddle.incubate.autograd as iag
from checks import assert_close, numeric_jacobian


def np_f(a, b):
    """The NumPy twin of ``pd_f`` (the oracle side)."""
    return np.tanh(a @ b) * a.sum()


def pd_f(x, z):
    return paddle.tanh(paddle.matmul(x, z)) * x.sum()


def joint_jacobian(a, b):
    """d np_f / d (a, b), flattened and joined as Paddle's Jacobian lays it out."""
    ja = numeric_jacobian(lambda t: np_f(t, b), a).reshape(-1, a.size)
    jb = numeric_jacobian(lambda t: np_f(a, t), b).reshape(-1, b.size)
    return np.concatenate([ja, jb], axis=1)


def test_vjp_single_input_default_v_is_ones():
    a = np.random.rand(3, 3)
    ys, g = iag.vjp(paddle.exp, paddle.to_tensor(a))
    assert_close(ys, np.exp(a))
    assert_close(g, np.exp(a))


def test_vjp_with_two_inputs_and_given_v():
    a, b = np.random.rand(2, 3), np.random.rand(3, 2)
    v = np.random.rand(2, 2)
    ys, (ga, gb) = iag.vjp(pd_f, [paddle.to_tensor(a), paddle.to_tensor(b)],
                           paddle.to_tensor(v))
    assert_close(ys, np_f(a, b))
    jac = joint_jacobian(a, b)
    assert_close(ga, (v.reshape(-1) @ jac[:, :a.size]).reshape(a.shape))
    assert_close(gb, (v.reshape(-1) @ jac[:, a.size:]).reshape(b.shape))


def test_vjp_of_function_with_two_outputs():
    a = np.random.rand(3)
    v1, v2 = np.random.rand(3), np.random.rand(3)
    ys, g = iag.vjp(lambda x: (x * x, paddle.sin(x)), paddle.to_tensor(a),
                    [paddle.to_tensor(v1), paddle.to_tensor(v2)])
    assert len(ys) == 2
    assert_close(g, 2 * a * v1 + np.cos(a) * v2)


def test_vjp_does_not_change_the_inputs_stop_gradient():
    x = paddle.to_tensor(np.random.rand(3))
    iag.vjp(lambda t: t * t, x)
    assert x.stop_gradient and x.grad is None


def test_vjp_with_v_of_wrong_shape_raises():
    with pytest.raises(RuntimeError):
        iag.vjp(lambda t: t * t, paddle.to_tensor(np.ones(3)), paddle.to_tensor(np.ones(4)))


def test_jvp_single_input_default_v_is_ones():
    a = np.random.rand(4)
    ys, t = iag.jvp(lambda x: paddle.sin(x) * x.sum(), paddle.to_tensor(a))
    jac = numeric_jacobian(lambda v: np.sin(v) * v.sum(), a)
    assert_close(ys, np.sin(a) * a.sum())
    assert_close(t, jac @ np.ones(4))


def test_jvp_with_two_inputs_and_given_tangents():
    a, b = np.random.rand(2, 3), np.random.rand(3, 2)
    ta, tb = np.random.rand(2, 3), np.random.rand(3, 2)
    ys, ys_dot = iag.jvp(pd_f, [paddle.to_tensor(a), paddle.to_tensor(b)],
                         [paddle.to_tensor(ta), paddle.to_tensor(tb)])
    expected = joint_jacobian(a, b) @ np.concatenate([ta.reshape(-1), tb.reshape(-1)])
    assert_close(ys, np_f(a, b))
    assert_close(ys_dot, expected.reshape(2, 2))


def test_jvp_and_vjp_agree_on_the_inner_product():
    a = np.random.rand(3, 2)
    u, w = np.random.rand(3, 2), np.random.rand(3, 2)

    def func(x):
        return paddle.exp(x) * paddle.tanh(x).sum()

    _, j_u = iag.jvp(func, paddle.to_tensor(a), paddle.to_tensor(u))
    _, wt_j = iag.vjp(func, paddle.to_tensor(a), paddle.to_tensor(w))
    assert_close(np.sum(w * j_u.numpy()), np.sum(wt_j.numpy() * u))


def test_jacobian_of_two_inputs_is_joined_along_columns():
    a, b = np.random.rand(2, 3), np.random.rand(3, 2)
    J = iag.Jacobian(pd_f, [paddle.to_tensor(a), paddle.to_tensor(b)])
    assert list(J.shape) == [4, a.size + b.size]
    dense = joint_jacobian(a, b)
    assert_close(J[:], dense)
    assert_close(J[1], dense[1])
    assert_close(J[:, 2], dense[:, 2])
    assert_close(J[1:3, 4:], dense[1:3, 4:])


def test_jacobian_of_two_outputs_is_joined_along_rows():
    a = np.random.rand(3)
    J = iag.Jacobian(lambda x: (x * x, paddle.exp(x).sum()), paddle.to_tensor(a))
    assert list(J.shape) == [4, 3]
    assert_close(J[:], np.vstack([np.diag(2 * a), np.exp(a)[None, :]]))


def test_batched_jacobian_has_a_leading_batch_dim():
    a = np.random.rand(5, 3)
    w = np.random.rand(3, 2)
    J = iag.Jacobian(lambda x: paddle.tanh(paddle.matmul(x, paddle.to_tensor(w))),
                     paddle.to_tensor(a), is_batched=True)
    assert list(J.shape) == [5, 2, 3]
    expected = np.stack([numeric_jacobian(lambda r: np.tanh(r @ w), row) for row in a])
    assert_close(J[:], expected)
    assert_close(J[2], expected[2])


def test_batched_jacobian_with_mismatched_batch_raises():
    with pytest.raises(ValueError):
        iag.Jacobian(lambda x: x.sum(), paddle.to_tensor(np.ones((3, 2))), is_batched=True)


def test_hessian_of_scalar_function_of_two_inputs():
    a, b = np.random.rand(3), np.random.rand(2)

    def func(x, z):
        return (paddle.exp(x).sum() * (z * z).sum())

    H = iag.Hessian(func, [paddle.to_tensor(a), paddle.to_tensor(b)])
    assert list(H.shape) == [5, 5]
    ea, sb = np.exp(a), (b * b).sum()
    expected = np.zeros((5, 5))
    expected[:3, :3] = np.diag(ea) * sb
    expected[:3, 3:] = np.outer(ea, 2 * b)
    expected[3:, :3] = expected[:3, 3:].T
    expected[3:, 3:] = 2 * np.eye(2) * ea.sum()
    assert_close(H[:], expected)
    assert_close(H[:], np.asarray(H[:]).T)  # symmetric


def test_batched_hessian():
    a = np.random.rand(4, 2)
    H = iag.Hessian(lambda x: (x ** 3).sum(axis=1, keepdim=True), paddle.to_tensor(a),
                    is_batched=True)
    assert list(H.shape) == [4, 2, 2]
    expected = np.stack([np.diag(6 * row) for row in a])
    assert_close(H[:], expected)


def test_hessian_of_non_scalar_function_raises():
    H_args = (lambda x: x * x, paddle.to_tensor(np.ones(3)))
    with pytest.raises(RuntimeError):
        iag.Hessian(*H_args)[:]


def test_functional_forms_reject_non_tensor_inputs():
    with pytest.raises(TypeError):
        iag.vjp(lambda t: t, [1.0, 2.0])
    with pytest.raises(TypeError):
        iag.Jacobian(lambda t: t, np.ones(3))
