"""Dtypes a Paddle user relies on: float32/float64 gradients keep their dtype, ``cast`` and
``astype`` between float widths are differentiable, and the storage dtypes
uint8/int8/int16/float16 round-trip through ``to_tensor``, ``cast`` and ``astype`` with
NumPy's conversion rules (the oracle)."""

import numpy as np
import pytest

import paddle
from checks import assert_close


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "float16"])
def test_to_tensor_with_a_storage_dtype_keeps_values_and_dtype(dtype):
    values = np.array([[0, 1, 7], [100, 3, 12]])
    t = paddle.to_tensor(values, dtype=dtype)
    assert t.dtype == getattr(paddle, dtype)
    assert t.numpy().dtype == np.dtype(dtype)
    np.testing.assert_array_equal(t.numpy(), values.astype(dtype))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "float16"])
def test_cast_and_astype_follow_numpy_conversion(dtype):
    src = np.array([0.0, 1.75, 2.5, 99.9, 126.2], dtype=np.float32)
    x = paddle.to_tensor(src)
    by_cast = paddle.cast(x, dtype)
    by_astype = x.astype(dtype)
    expected = src.astype(dtype)
    for t in (by_cast, by_astype):
        assert t.numpy().dtype == np.dtype(dtype)
        np.testing.assert_array_equal(t.numpy(), expected)


def test_negative_values_truncate_toward_zero_in_signed_integer_cast():
    x = paddle.to_tensor(np.array([-2.7, -0.5, 3.9]))
    np.testing.assert_array_equal(paddle.cast(x, "int8").numpy(), np.array([-2, 0, 3]))
    np.testing.assert_array_equal(paddle.cast(x, paddle.int16).numpy(), np.array([-2, 0, 3]))


def test_integer_tensors_go_back_to_float_exactly():
    x = paddle.to_tensor(np.array([0, 5, 255]), dtype="uint8")
    y = paddle.cast(x, "float32")
    assert y.dtype == paddle.float32
    np.testing.assert_array_equal(y.numpy(), np.array([0.0, 5.0, 255.0], dtype=np.float32))


def test_float16_arithmetic_stays_float16_and_matches_numpy():
    a = np.array([0.5, 1.25, 3.0], dtype=np.float16)
    x = paddle.to_tensor(a)
    y = x * x + x
    assert y.dtype == paddle.float16
    np.testing.assert_allclose(y.numpy().astype(np.float64), (a * a + a).astype(np.float64),
                               rtol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_has_the_dtype_of_its_input(dtype):
    a = np.random.rand(3)
    x = paddle.to_tensor(a.astype(dtype), stop_gradient=False)
    (g,) = paddle.grad((paddle.exp(x) * x).sum(), x)
    assert g.dtype == getattr(paddle, dtype)
    ref = a.astype(dtype).astype(np.float64)
    tol = 1e-6 if dtype == "float32" else 1e-12
    assert_close(g, np.exp(ref) * (ref + 1), rtol=tol, atol=tol)


def test_gradient_through_a_cast_between_float_widths_returns_to_the_input_dtype():
    a = np.random.rand(4)
    x = paddle.to_tensor(a, stop_gradient=False)  # float64
    y = paddle.cast(x, "float32")
    z = (y * y).astype("float64").sum()
    (g,) = paddle.grad(z, x)
    assert g.dtype == paddle.float64
    assert_close(g, 2 * a.astype(np.float32).astype(np.float64), rtol=1e-6)


def test_assign_copies_values_without_sharing_storage():
    a = np.random.rand(3)
    x = paddle.to_tensor(a)
    y = paddle.assign(x)
    np.testing.assert_array_equal(y.numpy(), a)
    y[0] = 100.0
    assert x.numpy()[0] == a[0]


def test_default_float_dtype_of_python_floats_is_float32():
    t = paddle.to_tensor([1.0, 2.0])
    assert t.dtype == paddle.float32
    assert paddle.to_tensor(np.array([1.0])).dtype == paddle.float64
