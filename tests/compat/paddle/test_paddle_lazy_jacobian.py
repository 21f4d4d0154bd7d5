"""``paddle.autograd.jacobian(ys, xs, batch_axis=None)`` and ``hessian``: lazy objects
evaluated on indexing, tuple inputs and outputs (nested blocks), ``batch_axis=0``, index
and slice access, arithmetic and comparisons on the lazy objects, and ValueError for an
invalid ``batch_axis``. Oracles: float64 finite differences and closed forms."""

import numpy as np
import pytest

import paddle
from checks import assert_close, numeric_jacobian


def leaf(array, dtype="float64"):
    return paddle.to_tensor(np.asarray(array, dtype=dtype), stop_gradient=False)


def test_jacobian_of_a_matrix_output_flattens_both_sides():
    a = np.random.rand(2, 3)
    x = leaf(a)
    y = paddle.exp(x) * x.sum()
    J = paddle.autograd.jacobian(y, x)
    assert list(J.shape) == [6, 6]
    expected = numeric_jacobian(lambda t: np.exp(t) * t.sum(), a).reshape(6, 6)
    assert_close(J[:], expected)


def test_index_and_slice_access_match_the_dense_matrix():
    a = np.random.rand(4)
    x = leaf(a)
    J = paddle.autograd.jacobian(paddle.sin(x) * x[0], x)
    dense = numeric_jacobian(lambda t: np.sin(t) * t[0], a)
    assert_close(J[2], dense[2])
    assert_close(J[1:3], dense[1:3])
    assert_close(J[:, 0], dense[:, 0])
    assert_close(J[3, 1], dense[3, 1])
    assert_close(J[::2, 1:], dense[::2, 1:])


def test_tuple_outputs_and_inputs_give_nested_blocks():
    a, b = np.random.rand(3), np.random.rand(2)
    x, z = leaf(a), leaf(b)
    y1 = x * z.sum()
    y2 = paddle.exp(z) * x[1]
    J = paddle.autograd.jacobian((y1, y2), (x, z))
    assert len(J) == 2 and len(J[0]) == 2
    assert_close(J[0][0][:], np.eye(3) * b.sum())
    assert_close(J[0][1][:], np.outer(a, np.ones(2)))
    expected_21 = np.zeros((2, 3))
    expected_21[:, 1] = np.exp(b)
    assert_close(J[1][0][:], expected_21)
    assert_close(J[1][1][:], np.diag(np.exp(b)) * a[1])


def test_single_output_tuple_inputs_give_one_block_per_input():
    a, b = np.random.rand(3), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    Jx, Jz = paddle.autograd.jacobian(x * z, (x, z))
    assert_close(Jx[:], np.diag(b))
    assert_close(Jz[:], np.diag(a))


def test_batch_axis_zero_gives_one_jacobian_per_sample():
    a = np.random.rand(5, 3)
    w = np.random.rand(3, 2)
    x = leaf(a)
    y = paddle.tanh(paddle.matmul(x, paddle.to_tensor(w)))
    J = paddle.autograd.jacobian(y, x, batch_axis=0)
    assert list(J.shape) == [5, 2, 3]
    expected = np.stack([numeric_jacobian(lambda r: np.tanh(r @ w), row) for row in a])
    assert_close(J[:], expected)
    assert_close(J[:, 1], expected[:, 1])


@pytest.mark.parametrize("bad_axis", [1, -1, 2])
def test_invalid_batch_axis_raises_value_error(bad_axis):
    x = leaf(np.random.rand(3, 2))
    with pytest.raises(ValueError):
        paddle.autograd.jacobian(x * x, x, batch_axis=bad_axis)
    with pytest.raises(ValueError):
        paddle.autograd.hessian((x * x).sum(axis=1), x, batch_axis=bad_axis)


def test_jacobian_wrt_an_unused_input_is_zero():
    x, z = leaf(np.random.rand(3)), leaf(np.random.rand(2))
    _, Jz = paddle.autograd.jacobian(x * 2.0, (x, z))
    assert_close(Jz[:], np.zeros((3, 2)))


def test_arithmetic_and_comparisons_act_on_the_dense_value():
    a = np.random.rand(3)
    x = leaf(a)
    J = paddle.autograd.jacobian(x * x, x)
    dense = np.diag(2 * a)
    assert_close(J + 1.0, dense + 1.0)
    assert_close(2.0 * J, 2 * dense)
    assert_close(J - J, np.zeros((3, 3)))
    assert_close(J @ J, dense @ dense)
    assert_close(-J, -dense)
    assert_close(J / 2.0, dense / 2)
    assert np.all((J == J).numpy())
    assert np.array_equal((J > 0.0).numpy(), dense > 0.0)


def test_lazy_jacobian_forwards_tensor_attributes():
    x = leaf(np.random.rand(3), dtype="float32")
    J = paddle.autograd.jacobian(x * x, x)
    assert J.dtype == paddle.float32
    assert J.numpy().shape == (3, 3)


def test_hessian_of_scalar_matches_closed_form():
    a = np.random.rand(4)
    x = leaf(a)
    y = (paddle.exp(x) * x).sum()
    H = paddle.autograd.hessian(y, x)
    assert list(H.shape) == [4, 4]
    assert_close(H[:], np.diag(np.exp(a) * (a + 2)))
    assert_close(H[1], np.diag(np.exp(a) * (a + 2))[1])


def test_hessian_with_tuple_inputs_gives_mixed_blocks():
    a, b = np.random.rand(2), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    y = (x * x).sum() * (z * z * z).sum()
    H = paddle.autograd.hessian(y, (x, z))
    sx, sz = (a * a).sum(), (b ** 3).sum()
    assert_close(H[0][0][:], 2 * np.eye(2) * sz)
    assert_close(H[0][1][:], np.outer(2 * a, 3 * b ** 2))
    assert_close(H[1][0][:], np.outer(3 * b ** 2, 2 * a))
    assert_close(H[1][1][:], np.diag(6 * b) * sx)


def test_batched_hessian_of_one_scalar_per_sample():
    a = np.random.rand(3, 2)
    x = leaf(a)
    y = (paddle.sin(x) * x).sum(axis=1)
    H = paddle.autograd.hessian(y, x, batch_axis=0)
    assert list(H.shape) == [3, 2, 2]
    # d2/dx2 (x sin x) = 2 cos x - x sin x, diagonal per sample
    expected = np.stack([np.diag(2 * np.cos(r) - r * np.sin(r)) for r in a])
    assert_close(H[:], expected)


def test_hessian_of_non_scalar_without_batch_axis_raises_value_error():
    x = leaf(np.random.rand(3))
    with pytest.raises(ValueError):
        paddle.autograd.hessian(x * x, x)


def test_jacobian_wrt_a_stop_gradient_tensor_raises():
    x = paddle.to_tensor(np.random.rand(3))
    with pytest.raises(RuntimeError):
        paddle.autograd.jacobian(x * x, x)


def test_jacobian_entries_are_differentiable_for_higher_order():
    a = np.random.rand(3)
    x = leaf(a)
    J = paddle.autograd.jacobian(x * x * x, x)
    trace = (J[:] * paddle.eye(3, dtype="float64")).sum()  # sum of 3 x_i^2
    (g,) = paddle.grad(trace, x)
    assert_close(g, 6 * a)
