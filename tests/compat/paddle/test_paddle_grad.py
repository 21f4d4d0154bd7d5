"""``paddle.grad`` and ``Tensor.backward`` as Paddle documents them, run on primflow through
the ``paddle`` alias. Each derivative is compared with a closed form or float64 finite
differences (see ``checks.py``)."""

import numpy as np
import pytest

import paddle
from checks import assert_close, numeric_grad, numeric_jacobian


def leaf(array, dtype="float64"):
    """A tensor that requires grad (Paddle: stop_gradient=False)."""
    return paddle.to_tensor(np.asarray(array, dtype=dtype), stop_gradient=False)


# ---- paddle.grad: arguments --------------------------------------------------------------

def test_grad_of_tensor_output_returns_list_with_one_gradient_per_input():
    a = np.random.rand(3, 4)
    x = leaf(a)
    y = (x * x * x).sum()
    grads = paddle.grad(y, x)
    assert isinstance(grads, list) and len(grads) == 1
    assert_close(grads[0], 3 * a ** 2)


def test_grad_with_lists_of_outputs_and_inputs_sums_over_outputs():
    a, b = np.random.rand(3), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    y1 = (x * z).sum()
    y2 = (paddle.exp(x) + z * z).sum()
    gx, gz = paddle.grad([y1, y2], [x, z])
    assert_close(gx, b + np.exp(a))
    assert_close(gz, a + 2 * b)


def test_grad_without_grad_outputs_seeds_ones_for_a_non_scalar_output():
    a = np.random.rand(2, 3)
    x = leaf(a)
    y = paddle.sin(x) * 2.0  # a [2, 3] output, no grad_outputs: Paddle seeds ones
    (gx,) = paddle.grad(y, x)
    assert_close(gx, 2 * np.cos(a))


def test_grad_with_given_grad_outputs_is_a_vector_jacobian_product():
    a, w = np.random.rand(4, 3), np.random.rand(3, 2)
    seed = np.random.rand(4, 2)
    x = leaf(a)
    y = paddle.matmul(x, paddle.to_tensor(w))
    (gx,) = paddle.grad(y, x, grad_outputs=paddle.to_tensor(seed))
    assert_close(gx, seed @ w.T)


def test_grad_outputs_list_may_mix_tensors_and_none():
    a = np.random.rand(3)
    seed = np.random.rand(3)
    x = leaf(a)
    y1, y2 = x * 2.0, x * x
    (gx,) = paddle.grad([y1, y2], x, grad_outputs=[paddle.to_tensor(seed), None])
    assert_close(gx, 2 * seed + 2 * a)  # None counts as ones


def test_grad_wrt_an_intermediate_tensor():
    a = np.random.rand(3)
    x = leaf(a)
    h = paddle.exp(x)
    y = (h * h).sum()
    gh, gx = paddle.grad(y, [h, x])
    assert_close(gh, 2 * np.exp(a))
    assert_close(gx, 2 * np.exp(2 * a))


def test_grad_does_not_touch_dot_grad_of_the_inputs():
    x = leaf(np.random.rand(3))
    paddle.grad((x * x).sum(), x)
    assert x.grad is None


def test_retain_graph_allows_a_second_pass_and_without_it_the_graph_is_freed():
    a = np.random.rand(3)
    x = leaf(a)
    y = (paddle.tanh(x) * x).sum()
    (g1,) = paddle.grad(y, x, retain_graph=True)
    (g2,) = paddle.grad(y, x)
    expected = numeric_grad(lambda v: np.tanh(v) * v, a)
    assert_close(g1, expected)
    assert_close(g2, expected)
    with pytest.raises(RuntimeError):
        paddle.grad(y, x)


def test_unused_input_raises_value_error_unless_allow_unused_gives_none():
    x = leaf(np.random.rand(3))
    z = leaf(np.random.rand(3))
    y = (x * 3.0).sum()
    with pytest.raises(ValueError):
        paddle.grad(y, [x, z], retain_graph=True)
    gx, gz = paddle.grad(y, [x, z], allow_unused=True)
    assert gz is None
    assert_close(gx, np.full(3, 3.0))


def test_no_grad_vars_treats_a_tensor_as_constant():
    a = np.random.rand(3)
    x = leaf(a)
    h = x * x  # blocked: the path through h is cut
    y = (h * x).sum()  # d/dx = h (direct path only) = a^2
    (gx,) = paddle.grad(y, x, no_grad_vars=h)
    assert_close(gx, a ** 2)
    (full,) = paddle.grad((x * x * x).sum(), x)
    assert_close(full, 3 * a ** 2)


def test_grad_of_function_with_broadcasting_matches_finite_differences():
    a, b = np.random.rand(4, 3), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    y = (paddle.exp(x) / (z + 2.0)).sum()
    gx, gz = paddle.grad(y, [x, z])
    assert_close(gx, numeric_grad(lambda v: np.exp(v) / (b + 2.0), a))
    assert_close(gz, numeric_grad(lambda v: np.exp(a) / (v + 2.0), b))


@pytest.mark.parametrize("bad_outputs", [3.0, [np.ones(2)], "y"])
def test_non_tensor_outputs_raise_an_assertion_compatible_type_error(bad_outputs):
    x = leaf(np.ones(2))
    with pytest.raises(AssertionError):
        paddle.grad(bad_outputs, x)
    with pytest.raises(TypeError):
        paddle.grad(bad_outputs, x)


def test_non_tensor_inputs_raise_an_assertion_compatible_error():
    x = leaf(np.ones(2))
    y = (x * x).sum()
    with pytest.raises(AssertionError):
        paddle.grad(y, [x, 1.0], retain_graph=True)


def test_wrong_number_of_grad_outputs_raises_an_assertion_compatible_error():
    x = leaf(np.ones(2))
    y1, y2 = x * 2.0, x * 3.0
    with pytest.raises(AssertionError):
        paddle.grad([y1, y2], x, grad_outputs=[paddle.ones([2], dtype="float64")])


def test_grad_wrt_a_tensor_with_stop_gradient_raises():
    x = paddle.to_tensor(np.ones(2))  # stop_gradient=True by default in Paddle
    assert x.stop_gradient
    with pytest.raises(RuntimeError):
        paddle.grad((x * x).sum(), x)


# ---- Tensor.backward ----------------------------------------------------------------------

def test_backward_accumulates_into_grad_and_clear_grad_resets_it():
    a = np.random.rand(3)
    x = leaf(a)
    (x * x).sum().backward()
    assert_close(x.grad, 2 * a)
    (paddle.sin(x)).sum().backward()
    assert_close(x.grad, 2 * a + np.cos(a))  # accumulated, not overwritten
    x.clear_grad()
    assert x.grad is None or np.all(x.grad.numpy() == 0)
    (x * 5.0).sum().backward()
    assert_close(x.grad, np.full(3, 5.0))


def test_backward_on_non_scalar_uses_ones_and_accepts_a_seed():
    a = np.random.rand(2, 2)
    x = leaf(a)
    (x * x).backward()
    assert_close(x.grad, 2 * a)
    x.clear_grad()
    seed = np.random.rand(2, 2)
    (x * x).backward(paddle.to_tensor(seed))
    assert_close(x.grad, 2 * a * seed)


def test_backward_retain_graph_twice_doubles_the_gradient():
    a = np.random.rand(3)
    x = leaf(a)
    y = (x * x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, 2 * 3 * a ** 2)


def test_non_leaf_grad_is_kept_only_with_retain_grads():
    a = np.random.rand(3)
    x = leaf(a)
    h = x * 2.0
    k = x * 3.0
    h.retain_grads()
    (h * h + k).sum().backward()
    assert_close(h.grad, 2 * (2 * a))
    assert k.grad is None
    assert_close(x.grad, 8 * a + 3.0)


def test_register_hook_on_a_non_leaf_replaces_the_gradient_flowing_back():
    a = np.random.rand(3)
    x = leaf(a)
    h = x * x
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    h.register_hook(lambda g: g * 10.0)
    h.sum().backward()
    assert_close(seen[0], np.ones(3))
    assert_close(x.grad, 10 * 2 * a)


def test_register_hook_on_a_leaf_changes_its_grad_and_remove_undoes_it():
    a = np.random.rand(3)
    x = leaf(a)
    handle = x.register_hook(lambda g: g * 0.5)
    (x * x).sum().backward()
    assert_close(x.grad, a)
    handle.remove()
    x.clear_grad()
    (x * x).sum().backward()
    assert_close(x.grad, 2 * a)


def test_hook_also_applies_to_paddle_grad():
    a = np.random.rand(3)
    x = leaf(a)
    h = paddle.exp(x)
    h.register_hook(lambda g: g * 0.0 + 1.0)  # pretend the output gradient is ones
    y = (h * h).sum()
    (gx,) = paddle.grad(y, x)
    assert_close(gx, np.exp(a))


def test_stop_gradient_propagates_through_operations():
    x = leaf(np.random.rand(3))
    c = paddle.to_tensor(np.random.rand(3))
    assert not (x * c).stop_gradient
    assert (c * c).stop_gradient
    d = x.detach()
    assert d.stop_gradient and not x.stop_gradient
    y = (x * x + d * x).sum()  # d is a constant here
    (gx,) = paddle.grad(y, x)
    assert_close(gx, 2 * x.numpy() + d.numpy())


def test_setting_stop_gradient_on_an_input_excludes_it_from_backward():
    a, b = np.random.rand(3), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    z.stop_gradient = True
    (x * z).sum().backward()
    assert_close(x.grad, b)
    assert z.grad is None


def test_no_grad_context_and_decorator_record_nothing():
    x = leaf(np.random.rand(3))
    with paddle.no_grad():
        y = x * x
    assert y.stop_gradient

    @paddle.no_grad()
    def square(t):
        return t * t

    assert square(x).stop_gradient
    assert not (x * x).stop_gradient  # recording is back on afterwards


def test_backward_through_matmul_matches_closed_form():
    a, w = np.random.rand(5, 3), np.random.rand(3, 4)
    x, wt = leaf(a), leaf(w)
    out = paddle.matmul(x, wt)
    out.backward(paddle.to_tensor(np.ones((5, 4))))
    assert_close(x.grad, np.ones((5, 4)) @ w.T)
    assert_close(wt.grad, a.T @ np.ones((5, 4)))


def test_float32_gradient_matches_float64_finite_differences():
    a = np.random.rand(3, 2).astype(np.float32)
    x = leaf(a, dtype="float32")
    y = (paddle.tanh(x) * paddle.exp(x)).sum()
    (gx,) = paddle.grad(y, x)
    assert gx.dtype == paddle.float32
    assert_close(gx, numeric_grad(lambda v: np.tanh(v) * np.exp(v), a.astype(np.float64)),
                 rtol=1e-5, atol=1e-5)


def test_jacobian_rows_by_repeated_grad_match_finite_differences():
    a = np.random.rand(3)
    x = leaf(a)
    y = paddle.sin(x) * x.sum()
    rows = []
    for i in range(3):
        seed = np.zeros(3)
        seed[i] = 1.0
        rows.append(paddle.grad(y, x, grad_outputs=paddle.to_tensor(seed),
                                retain_graph=True)[0].numpy())
    assert_close(np.stack(rows), numeric_jacobian(lambda v: np.sin(v) * v.sum(), a))
