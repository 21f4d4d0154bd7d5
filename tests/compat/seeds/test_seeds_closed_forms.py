"""The numbers the seed documents state, with deterministic inputs (the examples
themselves draw random ones): f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5) (seeds 001 and
003), tanh's derivatives (seed 000), the Jacobian and Hessian blocks of seed 000's examples.
Paddle code with only the import changed; expected numbers are exact references."""

import numpy as np
import pytest

import primflow as paddle  # the seed code below is Paddle code with this one line changed


def test_simple_function_value_and_gradients_backward():
    x1 = paddle.to_tensor(2.0, dtype="float64", stop_gradient=False)
    x2 = paddle.to_tensor(5.0, dtype="float64", stop_gradient=False)
    y = paddle.log(x1) + x1 * x2 - paddle.sin(x2)
    y.backward()
    assert y.dtype == "float64"
    assert y.item() == pytest.approx(11.652071455223084, rel=1e-15, abs=0)
    assert x1.grad.item() == pytest.approx(5.5, rel=1e-15, abs=0)
    assert x2.grad.item() == pytest.approx(1.7163378145367738, rel=1e-15, abs=0)


def test_simple_function_value_and_gradients_grad():
    x1 = paddle.to_tensor([2.0], dtype="float64", stop_gradient=False)
    x2 = paddle.to_tensor([5.0], dtype="float64", stop_gradient=False)
    y = paddle.log(x1) + x1 * x2 - paddle.sin(x2)
    dx1, dx2 = paddle.grad(y, [x1, x2])
    np.testing.assert_allclose(y.numpy(), [11.652071455223084], rtol=1e-15)
    np.testing.assert_allclose(dx1.numpy(), [5.5], rtol=1e-15)
    np.testing.assert_allclose(dx2.numpy(), [1.7163378145367738], rtol=1e-15)
    assert dx1.shape == [1] and dx2.dtype == "float64"


def test_tanh_higher_derivatives():
    x = paddle.linspace(-3.0, 3.0, 13, dtype="float64")
    x.stop_gradient = False
    y = paddle.tanh(x)
    t = np.tanh(x.numpy())
    closed = [1 - t ** 2, -2 * t * (1 - t ** 2), -2 * (1 - t ** 2) * (1 - 3 * t ** 2)]
    d = y
    for k in range(3):
        (d,) = paddle.grad(d, x, grad_outputs=paddle.ones_like(d), create_graph=True)
        np.testing.assert_allclose(d.numpy(), closed[k], rtol=1e-12, atol=1e-14,
                                   err_msg=f"order {k + 1}")


def test_tanh_higher_derivatives_scalar_float32():
    x = paddle.to_tensor(0.3, stop_gradient=False)  # default float32
    d = paddle.tanh(x)
    t = np.tanh(0.3)
    closed = [1 - t ** 2, -2 * t * (1 - t ** 2), -2 * (1 - t ** 2) * (1 - 3 * t ** 2)]
    for k in range(3):
        (d,) = paddle.grad(d, x, create_graph=True)
        assert d.dtype == "float32"
        assert d.item() == pytest.approx(closed[k], rel=1e-5)


def test_jacobian_of_sum_is_two_identities():
    x1 = paddle.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
    x2 = paddle.to_tensor([4.0, 5.0, 6.0], dtype="float64", stop_gradient=False)
    y = x1 + x2
    J = paddle.autograd.jacobian(y, (x1, x2))
    assert len(J) == 2
    for block in J:
        assert block.shape == [3, 3]
        dense = block[:]
        assert dense.shape == [3, 3]
        np.testing.assert_array_equal(dense.numpy(), np.eye(3))


def test_hessian_of_sums_is_zero_blocks():
    x1 = paddle.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
    x2 = paddle.to_tensor([4.0, 5.0, 6.0, 7.0], dtype="float64", stop_gradient=False)
    y = x1.sum() + x2.sum()
    H = paddle.autograd.hessian(y, (x1, x2))
    shapes = {(0, 0): [3, 3], (0, 1): [3, 4], (1, 0): [4, 3], (1, 1): [4, 4]}
    for (i, j), shape in shapes.items():
        dense = H[i][j][:]
        assert dense.shape == shape, (i, j)
        np.testing.assert_array_equal(dense.numpy(), np.zeros(shape))


def test_grad_of_a_vector_output_without_grad_outputs():
    # paddle.grad(y, x) on a vector y: Paddle seeds with ones, i.e. d sum(y) / dx
    x = paddle.linspace(-1.0, 1.0, 5, dtype="float64")
    x.stop_gradient = False
    y = paddle.tanh(x) * x
    (dy,) = paddle.grad(y, x)
    t = np.tanh(x.numpy())
    np.testing.assert_allclose(dy.numpy(), (1 - t ** 2) * x.numpy() + t, rtol=1e-14)
    y = paddle.sin(x)
    y.backward()  # backward() on a non-scalar: ones as well
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.numpy()), rtol=1e-14)
