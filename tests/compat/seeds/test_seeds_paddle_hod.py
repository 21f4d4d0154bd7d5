"""Seed 000 (高阶自动微分功能支持科学计算): its four examples run as files of this folder
(hod_*.py) and every number they print or state is checked against NumPy closed forms."""

import numpy as np
import pytest

import primflow as paddle
from seedrun import run_example


def tanh_derivatives(x):
    """d/dx, d2/dx2, d3/dx3 of tanh at x (closed forms)."""
    t = np.tanh(x)
    return [1 - t ** 2, -2 * t * (1 - t ** 2), -2 * (1 - t ** 2) * (1 - 3 * t ** 2)]


# ---- 四、开始使用: MyNet, a loss made of a second derivative, an Adam step ---------------------

def mynet_second_derivative(x, w, b):
    """d/dx sum(d/dx sum(tanh(x w + b))) in NumPy (the example's grad2)."""
    t = np.tanh(x @ w + b)
    column = w.sum(axis=0)  # d sum(g1) / d (1 - t^2) picks W's column sums
    return (-2 * t * (1 - t ** 2) * column) @ w.T


def initial_parameters(g, seed):
    """MyNet's parameters before the example's Adam step (drawn again from ``seed``)."""
    paddle.seed(seed)  # the same draws again: x, then MyNet's initial parameters
    paddle.randn(shape=(2, 2), dtype=paddle.float32)
    start = g["MyNet"]()
    return (p.numpy().astype(np.float64) for p in (start.weight, start.bias))


def test_mynet_second_derivative():
    g, _ = run_example("hod_mynet.py", seed=2024)
    x = g["x"].numpy().astype(np.float64)
    w, b = initial_parameters(g, 2024)  # the Adam step has moved the net's own since
    t = np.tanh(x @ w + b)
    (grad1,), (grad2,) = g["grad1"], g["grad2"]
    np.testing.assert_allclose(grad1.numpy(), (1 - t ** 2) @ w.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad2.numpy(), mynet_second_derivative(x, w, b), rtol=1e-4,
                               atol=1e-6)
    assert not grad2.stop_gradient  # create_graph=True: the loss can reach the weights


def test_mynet_norm_of_the_gradient_list_trains_the_weights():
    # the document passes grad2, the list paddle.grad returns, to paddle.norm: the loss must
    # stay a function of the weights, so loss.backward() gives them its gradient (float64
    # central differences of the NumPy loss ||grad2||_2 here) and the Adam step moves them
    g, _ = run_example("hod_mynet.py", seed=2024)
    net = g["net"]
    paddle.seed(2024)  # the same draws again: x, then MyNet's initial parameters
    x0 = paddle.randn(shape=(2, 2), dtype=paddle.float32).numpy().astype(np.float64)
    start = g["MyNet"]()
    w0, b0 = (p.numpy().astype(np.float64) for p in (start.weight, start.bias))
    np.testing.assert_array_equal(g["x"].numpy(), x0.astype(np.float32))

    def loss(w, b):
        return np.linalg.norm(mynet_second_derivative(x0, w, b))

    assert float(g["loss"]) == pytest.approx(loss(w0, b0), rel=1e-4)
    assert net.weight.grad is not None and net.bias.grad is not None
    eps = 1e-6
    for name, value, other in [("weight", w0, b0), ("bias", b0, w0)]:
        expected = np.zeros_like(value)
        for i in np.ndindex(*value.shape):
            step = np.zeros_like(value)
            step[i] = eps
            args = ((value + step, other), (value - step, other)) if name == "weight" else (
                (other, value + step), (other, value - step))
            expected[i] = (loss(*args[0]) - loss(*args[1])) / (2 * eps)
        np.testing.assert_allclose(getattr(net, name).grad.numpy(), expected, rtol=1e-3,
                                   atol=1e-5, err_msg=name)
    assert not np.allclose(net.weight.numpy(), w0)  # the Adam step moved the weights


def test_mynet_lines_left_out_are_refused_as_in_paddle():
    # opt = paddle.optimizer.Adam(0.01): no parameters (Paddle 3.3.1 raises AttributeError
    # "parameters argument given to the Optimizer should not be None in dygraph mode")
    with pytest.raises(ValueError, match="parameters"):
        paddle.optimizer.Adam(0.01)
    # opt.update(loss): Adam has no update method in Paddle or primflow
    opt = paddle.optimizer.Adam(parameters=[paddle.create_parameter([2], "float32")])
    assert not hasattr(opt, "update")


# ---- 4.1: tanh's derivatives by paddle.grad ------------------------------------------------

def test_tanh_derivatives_at_the_drawn_points():
    g, printed = run_example("hod_tanh.py")
    x = g["x"].numpy().astype(np.float64)
    for got, expected in zip((g["grad1"], g["grad2"], g["grad3"]), tanh_derivatives(x)):
        (value,) = got
        assert value.shape == [2] and value.dtype == paddle.float32
        np.testing.assert_allclose(value.numpy(), expected, rtol=2e-6, atol=1e-6)
    assert printed.count("Tensor(shape=[2]") == 3


def test_tanh_derivatives_print_the_documents_numbers_at_one(monkeypatch):
    # the document prints [0.41997433] [-0.6397] [0.6216267]: tanh's derivatives at x = 1
    monkeypatch.setattr(paddle, "rand", lambda shape, *a, **k: paddle.ones(shape))
    g, _ = run_example("hod_tanh.py")
    printed = [0.41997433, -0.6397, 0.6216267]
    for got, number, exact in zip((g["grad1"], g["grad2"], g["grad3"]), printed,
                                  tanh_derivatives(1.0)):
        np.testing.assert_allclose(got[0].numpy(), [exact, exact], rtol=1e-6)
        np.testing.assert_allclose(got[0].numpy(), [number, number], rtol=5e-5)


# ---- 4.1: paddle.autograd.jacobian and hessian ---------------------------------------------

def test_jacobian_example_shapes_and_values():
    g, printed = run_example("hod_jacobian.py")
    assert printed.split() == ["[3,", "3]", "[3,", "3]"]  # the document's # [3, 3] twice
    np.testing.assert_array_equal(g["J_y_x1"].numpy(), np.eye(3))
    np.testing.assert_array_equal(g["J_y_x2"].numpy(), np.eye(3))


def test_hessian_example_shapes_and_values():
    g, printed = run_example("hod_hessian.py")
    assert printed.splitlines() == ["[3, 3]", "[3, 4]", "[4, 3]", "[4, 4]"]
    for name, shape in [("H_y_x1_x1", (3, 3)), ("H_y_x1_x2", (3, 4)), ("H_y_x2_x1", (4, 3)),
                        ("H_y_x2_x2", (4, 4))]:
        np.testing.assert_array_equal(g[name].numpy(), np.zeros(shape))
