"""MindSpore call shapes on primflow's own functions (the rows of primflow.compat.mindspore's
table that are primflow functions), and DESIGN.md section 4's API examples run as written
(Paddle-style code with only the import changed). Expected values are closed forms."""

import numpy as np
import pytest

import primflow as pf


def t64(values, stop_gradient=False):
    return pf.to_tensor(values, dtype="float64", stop_gradient=stop_gradient)


# ---- MindSpore rows -------------------------------------------------------------------------

def test_mindspore_ops_grad():
    # ops.grad(fn, grad_position=(0, 1))(x, y)  ->  pf.grad(fn, grad_position=(0, 1))
    x, y = t64([1.0, 2.0]), t64([3.0, -1.0])
    fn = lambda a, b: (a * a * b).sum()  # noqa: E731
    gx, gy = pf.grad(fn, grad_position=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), 2 * x.numpy() * y.numpy())
    np.testing.assert_allclose(gy.numpy(), x.numpy() ** 2)
    # weights: ops.grad(fn, None, weights) -> pf.grad(fn, grad_position=None, weights=...)
    w = t64([0.5])
    (gw,) = pf.grad(lambda a: (a * w).sum(), grad_position=None, weights=[w])(x)
    np.testing.assert_allclose(gw.numpy(), [3.0])


def test_mindspore_ops_value_and_grad():
    # ops.value_and_grad(fn, grad_position, weights, has_aux) keeps its positional shape
    net = pf.nn.Linear(2, 1)
    x = pf.to_tensor([[1.0, 2.0]])
    loss_fn = lambda inp: (net(inp) ** 2).sum()  # noqa: E731
    value, (g_weight, g_bias) = pf.value_and_grad(loss_fn, None, net.parameters(), False)(x)
    out = float(net(x).sum())
    assert float(value) == pytest.approx(out ** 2, rel=1e-6)
    np.testing.assert_allclose(g_weight.numpy(), 2 * out * x.numpy().T, rtol=1e-6)
    np.testing.assert_allclose(g_bias.numpy(), [2 * out], rtol=1e-6)


def test_mindspore_ops_jvp():
    # ops.jvp(fn, inputs, v) -> pf.jvp(fn, primals, tangents): (output, J v)
    x, v = t64([0.3, 1.2]), t64([1.0, -2.0])
    out, tangent = pf.jvp(pf.sin, (x,), (v,))
    np.testing.assert_allclose(out.numpy(), np.sin(x.numpy()))
    np.testing.assert_allclose(tangent.numpy(), np.cos(x.numpy()) * v.numpy())


def test_mindspore_ops_vjp():
    # ops.vjp(fn, *inputs) -> pf.vjp(fn, *primals): (output, vjp_fn); vjp_fn(v) is a tuple
    x, y = t64([0.3, 1.2]), t64([2.0, 3.0])
    out, vjp_fn = pf.vjp(lambda a, b: a * b, x, y)
    gx, gy = vjp_fn(pf.ones_like(out))
    np.testing.assert_allclose(gx.numpy(), y.numpy())
    np.testing.assert_allclose(gy.numpy(), x.numpy())


def test_mindspore_vmap():
    # ops.vmap(fn, in_axes, out_axes) -> pf.vmap(fn, in_axes, out_axes)
    a = t64(np.arange(6.0).reshape(2, 3))
    b = t64([1.0, 2.0, 3.0])
    out = pf.vmap(lambda row, w: (row * w).sum(), in_axes=(0, None), out_axes=0)(a, b)
    np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy())


def test_mindspore_jit():
    # @mindspore.jit -> @pf.jit
    @pf.jit
    def f(x):
        return pf.tanh(x) * 2.0

    x = t64([0.1, -0.7])
    np.testing.assert_allclose(f(x).numpy(), 2 * np.tanh(x.numpy()))
    np.testing.assert_allclose(f(x).numpy(), 2 * np.tanh(x.numpy()))  # the cached program


def test_mindspore_nn_cell():
    # class Net(nn.Cell): construct(...)  ->  class Net(pf.nn.Layer): forward(...);
    # net.trainable_params() -> net.parameters()
    class Net(pf.nn.Layer):
        def __init__(self):
            super().__init__()
            self.dense = pf.nn.Linear(3, 2)

        def forward(self, x):
            return pf.nn.functional.relu(self.dense(x))

    net = Net()
    x = pf.rand([4, 3])
    w, b = net.dense.weight.numpy(), net.dense.bias.numpy()
    np.testing.assert_allclose(net(x).numpy(), np.maximum(x.numpy() @ w + b, 0), rtol=1e-6)
    assert len(net.parameters()) == 2


# ---- DESIGN.md section 4, as written ---------------------------------------------------------

def test_design_api_tensors_and_tape():
    x = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    assert x.shape == [2] and x.dtype == "float64" and x.ndim == 1 and x.requires_grad
    y = (x * x).sum()
    y.backward(grad=None, retain_graph=False)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    x.clear_grad()
    # the seed's paddle.grad(y, x) on a vector: missing grad_outputs means ones (Paddle)
    (g,) = pf.grad(pf.sin(x), x, grad_outputs=None, retain_graph=None, create_graph=False,
                   allow_unused=False)
    np.testing.assert_allclose(g.numpy(), np.cos([1.0, 2.0]))
    pf.autograd.backward([pf.tanh(x)], grad_tensors=None)
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh([1.0, 2.0]) ** 2)
    J = pf.autograd.jacobian(x * x, x, batch_axis=None)
    np.testing.assert_allclose(J[:].numpy(), np.diag([2.0, 4.0]))
    H = pf.autograd.hessian((x ** 3).sum(), x, batch_axis=None)
    np.testing.assert_allclose(H[:].numpy(), np.diag([6.0, 12.0]))
    with pf.no_grad():
        assert (x * 2).stop_gradient


def test_design_api_functional_transforms():
    assert float(pf.grad(lambda t: t * t, argnums=0, has_aux=False)(3.0)) == 6.0
    x = t64([1.0, 2.0])
    v, g = pf.value_and_grad(lambda t: (t ** 3).sum())(x)
    assert float(v) == 9.0
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])
    np.testing.assert_allclose(pf.jacfwd(lambda t: t * t)(x).numpy(), np.diag([2.0, 4.0]))
    np.testing.assert_allclose(pf.jacrev(lambda t: t * t)(x).numpy(), np.diag([2.0, 4.0]))
    np.testing.assert_allclose(pf.hessian(lambda t: (t ** 3).sum())(x).numpy(),
                               np.diag([6.0, 12.0]))
    y0, (y1,) = pf.jet(pf.sin, (x,), ([pf.ones_like(x)],))
    np.testing.assert_allclose(y1.numpy(), np.cos([1.0, 2.0]))
    np.testing.assert_allclose(pf.to_static(lambda t: t * 2)(x).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(pf.checkpoint(pf.sin)(x).numpy(), np.sin([1.0, 2.0]))


def test_design_api_layers_and_training():
    class MyNet(pf.nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = self.create_parameter(shape=(2, 2), dtype="float32", is_bias=False)

        def forward(self, x):
            return pf.matmul(x, self.weight)

    net = MyNet()
    assert [n for n, _ in net.named_parameters()] == ["weight"]
    opt = pf.optimizer.Adam(learning_rate=1e-3, parameters=net.parameters())
    before = net.weight.numpy()
    loss = net(pf.ones([1, 2])).sum()
    loss.backward()
    opt.step()
    opt.clear_grad()
    assert np.all(net.weight.numpy() < before)  # d loss / d w = 1 everywhere: all decrease
    w = pf.to_tensor([0.0, 0.0, 0.0], dtype="float64", stop_gradient=False)
    lbfgs = pf.optimizer.LBFGS(learning_rate=1.0, max_iter=20, line_search_fn="strong_wolfe",
                               parameters=[w])

    def closure():
        lbfgs.clear_grad()
        loss = ((w - pf.to_tensor([1.0, -2.0, 3.0], dtype="float64")) ** 2).sum()
        loss.backward()
        return loss

    lbfgs.step(closure)
    np.testing.assert_allclose(w.numpy(), [1.0, -2.0, 3.0], atol=1e-8)
