"""The eager dispatch's shortcuts give what the general path gives: a float scalar operand
(weak typing), primitives called without parameters, and node hooks registered only after
backward passes have already run without any."""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int32", "bool"])
@pytest.mark.parametrize("scalar", [1.5, 2, True])
def test_a_python_scalar_operand_keeps_weak_typing(dtype, scalar):
    a = np.array([1, 0, 1]).astype(dtype)
    x = pf.to_tensor(a)
    for got, want in ((x * scalar, a * scalar), (scalar * x, scalar * a),
                      (x + scalar, a + scalar)):
        np.testing.assert_allclose(got.numpy(), want)
        if isinstance(scalar, float) and dtype in ("int32", "bool"):
            assert got.dtype == pf.get_default_dtype()  # an int tensor meets a float: float
        elif isinstance(scalar, int) and not isinstance(scalar, bool) and dtype == "bool":
            assert got.dtype == pf.int64
        else:
            assert got.dtype.name == dtype


def test_gradients_through_parameterless_and_parameterised_primitives():
    x = pf.to_tensor(np.array([0.3, -1.2, 2.0]), stop_gradient=False)
    y = (pf.sin(x) * 1.0001 + 0.1).sum() + (x ** 3).sum() + x.sum(axis=0)
    y.backward()
    a = x.numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(a) * 1.0001 + 3 * a ** 2 + 1, rtol=1e-12)


def test_a_node_hook_registered_after_hookless_backward_passes_runs():
    x = pf.to_tensor(np.array([1.0, 2.0]), stop_gradient=False)
    for _ in range(3):  # passes with no hook anywhere
        (pf.sin(x) * 2.0).sum().backward()
        x.clear_grad()
    seen = []
    h = pf.sin(x)
    h.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10.0)
    (h * 2.0).sum().backward()
    np.testing.assert_allclose(seen[0], [2.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), 20.0 * np.cos([1.0, 2.0]), rtol=1e-12)
