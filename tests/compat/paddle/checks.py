"""Independent oracles for the Paddle compat suite: float64 central differences of NumPy
functions and a closeness assertion that reads tensors, lazy matrices and arrays alike.

Nothing here uses primflow's autodiff: the derivatives the tests compare against are
either written out in closed form in the test or computed by ``numeric_jacobian`` below.
"""

import numpy as np


def as_array(value):
    """A float64 NumPy array from a Tensor, a lazy Jacobian/Hessian, a number or an array."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value, dtype=np.float64)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, what="value"):
    """Shapes must agree exactly and values within the tolerances."""
    actual, expected = as_array(actual), as_array(expected)
    assert actual.shape == expected.shape, (
        f"{what}: shape {actual.shape} != expected {expected.shape}")
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def numeric_jacobian(fn, x, eps=1e-6):
    """d fn(x) / d x by float64 central differences, shape ``fn(x).shape + x.shape``.

    ``fn`` maps a float64 array to an array (NumPy only, no primflow)."""
    x = np.asarray(x, dtype=np.float64)
    y0 = np.asarray(fn(x), dtype=np.float64)
    jac = np.zeros(y0.shape + x.shape)
    flat = x.reshape(-1)
    for i in range(flat.size):
        step = np.zeros_like(flat)
        step[i] = eps
        up = np.asarray(fn((flat + step).reshape(x.shape)), dtype=np.float64)
        down = np.asarray(fn((flat - step).reshape(x.shape)), dtype=np.float64)
        jac[(...,) + np.unravel_index(i, x.shape)] = (up - down) / (2 * eps)
    return jac


def numeric_grad(fn, x, eps=1e-6):
    """Gradient of a scalar NumPy function by float64 central differences."""
    return numeric_jacobian(lambda a: np.sum(fn(a)), x, eps)


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))
