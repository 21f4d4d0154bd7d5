"""Seed 004 (函数式和对象式融合编程范式): its MindSpore examples (ms_*.py) run through
``primflow.compat.mindspore`` with only the imports changed, and each row of that module's
mapping table is checked. Oracles: NumPy closed forms and the numbers the document
prints."""

import re

import numpy as np
import pytest

import primflow as pf
import primflow.compat.mindspore as ms
from primflow.compat.mindspore import nn, ops
from seedrun import run_example


def softplus(z):
    return np.logaddexp(0.0, z)


# ---- the document's examples ---------------------------------------------------------------

def test_sample_class():
    g, _ = run_example("ms_sample_class.py")
    assert g["sample"].name == "second"


def test_linear_cell_forward_and_gradient():
    linear = run_example("ms_linear_cell.py")[0]["Linear"](3, 2, True)
    assert [name for name, _ in linear.named_parameters()] == ["weight", "bias"]
    assert linear.weight.shape == [2, 3] and linear.weight.name == "weight"
    np.testing.assert_array_equal(linear.bias.numpy(), [0.0, 0.0])  # 'zeros'
    w = linear.weight.numpy().astype(np.float64)
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    out = linear(ms.Tensor(x, ms.float32))
    np.testing.assert_allclose(out.numpy(), x @ w.T, rtol=1e-6, atol=1e-8)
    grads = ms.grad(lambda t: linear(t).sum(), None, linear.trainable_params())(
        ms.Tensor(x, ms.float32))
    np.testing.assert_allclose(grads[0].numpy(), np.tile(x.sum(axis=0), (2, 1)), rtol=1e-6)
    np.testing.assert_allclose(grads[1].numpy(), [2.0, 2.0])
    # 'normal' is MindSpore's Normal(sigma=0.01)
    big = ms.initializer("normal", [200, 300], ms.float32).numpy()
    assert abs(big.std() - 0.01) < 0.001 and abs(big.mean()) < 0.001


def test_train_one_step_cell_matches_numpy_sgd():
    g, _ = run_example("ms_train_one_step.py", seed=11)
    pf.seed(11)  # the same first draws: Dense(5, 3)'s weight, then its bias
    start = nn.Dense(5, 3)
    w, b = (p.numpy().astype(np.float64) for p in (start.weight, start.bias))
    x, y = g["data"].numpy().astype(np.float64), g["label"].numpy().astype(np.float64)
    losses = []
    for _ in range(3):  # BCE with logits (mean), then SGD with learning rate 0.001
        z = x @ w.T + b
        losses.append(np.mean(softplus(z) - y * z))
        dz = (1.0 / (1.0 + np.exp(-z)) - y) / z.size
        w, b = w - 0.001 * dz.T @ x, b - 0.001 * dz.sum(axis=0)
    np.testing.assert_allclose(g["losses"], losses, rtol=1e-6)
    np.testing.assert_allclose(g["network"].weight.numpy(), w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g["network"].bias.numpy(), b, rtol=1e-5, atol=1e-7)
    assert g["optimizer"].parameters == (g["network"].weight, g["network"].bias)


def test_functional_grad_of_tanh_prints_the_documents_numbers():
    g, printed = run_example("ms_functional_grad.py")
    values = [float(v) for v in re.findall(r"(-?\d+\.\d+)\)", printed)]
    t = np.tanh(2.0)
    exact = [1 - t ** 2, -2 * t * (1 - t ** 2), -2 * (1 - t ** 2) * (1 - 3 * t ** 2)]
    np.testing.assert_allclose(values, [0.070650816, -0.13621868, 0.25265405], rtol=2e-7)
    np.testing.assert_allclose(values, exact, rtol=2e-6)
    assert printed.count("dtype=float32") == 3  # a Python float is a float32 tensor, as there


def test_registered_bprop_replaces_the_primitives_backward():
    x = ms.Tensor(np.array([0.2, 1.1, -2.0]))
    try:
        run_example("ms_bprop_sin.py")  # registers get_bprop_sin for ops.Sin
        assert "Sin" in ms.bprop_getters
        np.testing.assert_allclose(ms.grad(lambda t: ops.Sin()(t).sum())(x).numpy(),
                                   np.cos(x.numpy()), rtol=1e-15)
        # the rule is written in ops, so it differentiates again: d2 sin = -sin
        second = ms.grad(lambda t: ms.grad(lambda s: ops.Sin()(s).sum())(t).sum())(x)
        np.testing.assert_allclose(second.numpy(), -np.sin(x.numpy()), rtol=1e-15)

        # the registry is what runs: another rule gives another gradient
        @ms.bprop_getters.register("Sin")
        def doubled(prim):
            return lambda t, out, dout: (2.0 * dout * ops.cos(t),)

        np.testing.assert_allclose(ms.grad(lambda t: ops.Sin()(t).sum())(x).numpy(),
                                   2 * np.cos(x.numpy()), rtol=1e-15)
    finally:
        ms.bprop_getters.pop("Sin", None)
    np.testing.assert_allclose(ms.grad(lambda t: ops.Sin()(t).sum())(x).numpy(),
                               np.cos(x.numpy()), rtol=1e-15)


def test_registered_bprop_must_return_one_gradient_per_input():
    try:
        ms.bprop_getters.register(ops.Exp)(lambda prim: lambda t, out, dout: dout)
        with pytest.raises(TypeError, match="bprop registered for Exp must return a tuple"):
            ms.grad(lambda t: ops.Exp()(t).sum())(ms.Tensor(np.array([1.0])))
    finally:
        ms.bprop_getters.pop("Exp", None)


def test_net_cos_of_sin_gradient_is_formula_14():
    g, _ = run_example("ms_net_cos_sin.py")
    x = g["x"].numpy()
    np.testing.assert_allclose(g["out"].numpy(), np.cos(np.sin(x)), rtol=1e-15)
    np.testing.assert_allclose(g["dx"].numpy(), -np.sin(np.sin(x)) * np.cos(x), rtol=1e-14)


def np_classifier(params, x, labels):
    """Loss and gradients of the completed Net (tanh hidden layer) with cross-entropy."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1.T + b1)
    z = h @ w2.T + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(labels)
    loss = -np.log(p[np.arange(n), labels]).mean()
    dz = p.copy()
    dz[np.arange(n), labels] -= 1
    dz /= n
    dh = dz @ w2 * (1 - h ** 2)
    return loss, z, [dh.T @ x, dh.sum(0), dz.T @ h, dz.sum(0)]


def test_fused_training_loop_gradients_and_progress():
    g, _ = run_example("ms_fused_training.py", seed=3)
    pf.seed(3)
    first = [p.numpy().astype(np.float64) for p in g["Net"]().trainable_params()]
    inputs, targets = next(g["dataset"]())
    x, labels = inputs.numpy().astype(np.float64), targets.numpy()
    now = [p.numpy().astype(np.float64) for p in g["net"].trainable_params()]
    (loss, logits), grads = g["grad_fn"](inputs, targets)  # value_and_grad, has_aux=True
    expected_loss, expected_logits, expected_grads = np_classifier(now, x, labels)
    assert float(loss) == pytest.approx(expected_loss, rel=1e-5)
    np.testing.assert_allclose(logits.numpy(), expected_logits, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, expected_grads):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-6)
    # five Adam steps of lr 0.05 lower the loss from its value at the initial weights
    assert float(g["loss"][0]) < np_classifier(first, x, labels)[0] - 0.02


# ---- the mapping table, row by row ---------------------------------------------------------

def test_grad_positions_weights_and_aux():
    x, y = ms.Tensor(np.array([1.0, 2.0])), ms.Tensor(np.array([3.0, -1.0]))
    fn = lambda a, b: (a * a * b).sum()  # noqa: E731
    gx, gy = ms.grad(fn, grad_position=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), [6.0, -4.0])
    np.testing.assert_allclose(gy.numpy(), [1.0, 4.0])
    gradient, aux = ms.grad(lambda a: ((a * a).sum(), a + 1, a * 2), has_aux=True)(x)
    np.testing.assert_allclose(gradient.numpy(), [2.0, 4.0])
    assert len(aux) == 2 and aux[1].numpy().tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match="return_ids"):
        ms.grad(fn, return_ids=True)


def test_value_and_grad_with_several_aux_outputs():
    x = ms.Tensor(np.array([1.0, -3.0]))
    (value, first, second), g = ms.value_and_grad(
        lambda a: ((a ** 3).sum(), a * 2, a.sum()), has_aux=True)(x)
    assert float(value) == -26.0 and float(second) == -2.0
    np.testing.assert_allclose(first.numpy(), [2.0, -6.0])
    np.testing.assert_allclose(g.numpy(), [3.0, 27.0])
    with pytest.raises(TypeError, match="has_aux=True"):
        ms.value_and_grad(lambda a: a.sum(), has_aux=True)(x)


def test_jvp_vjp_vmap_and_jit():
    x, v = ms.Tensor(np.array([0.3, 1.2])), ms.Tensor(np.array([1.0, -2.0]))
    out, tangent = ms.jvp(ops.sin, x, v)  # single tensors for the tuples
    np.testing.assert_allclose(out.numpy(), np.sin([0.3, 1.2]))
    np.testing.assert_allclose(tangent.numpy(), np.cos([0.3, 1.2]) * [1.0, -2.0])
    out, tangent, aux = ms.jvp(lambda a: (a * a, a.sum()), (x,), (v,), has_aux=True)
    np.testing.assert_allclose(tangent.numpy(), 2 * np.array([0.3, 1.2]) * [1.0, -2.0])
    assert float(aux) == pytest.approx(1.5)
    out, vjp_fn = ms.vjp(lambda a, b: a * b, x, v)
    ga, gb = vjp_fn(pf.ones_like(out))
    np.testing.assert_allclose(ga.numpy(), [1.0, -2.0])
    np.testing.assert_allclose(gb.numpy(), [0.3, 1.2])
    rows = ms.Tensor(np.arange(6.0).reshape(2, 3))
    w = ms.Tensor(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(ms.vmap(lambda r, c: (r * c).sum(), in_axes=(0, None))(rows, w)
                               .numpy(), np.arange(6.0).reshape(2, 3) @ [1.0, 2.0, 3.0])

    @ms.jit
    def plain(a):
        return ops.tanh(a) * 2

    @ms.jit(jit_level="O1")
    def with_options(a):
        return ops.exp(a)

    np.testing.assert_allclose(plain(x).numpy(), 2 * np.tanh([0.3, 1.2]), rtol=1e-15)
    np.testing.assert_allclose(with_options(x).numpy(), np.exp([0.3, 1.2]), rtol=1e-15)


def test_tensor_and_parameter_transpose_swap_two_axes():
    t = ms.Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert t.transpose(0, 2).shape == [4, 3, 2]
    assert t.transpose(-1, 0).shape == [4, 3, 2]
    np.testing.assert_array_equal(t.transpose(0, 2).numpy(), np.swapaxes(t.numpy(), 0, 2))
    assert t.transpose((1, 0, 2)).shape == [3, 2, 4]  # one tuple: a permutation
    assert t.transpose().shape == [4, 3, 2]
    with pytest.raises(ValueError, match="dim 3 is out of range"):
        t.transpose(0, 3)
    p = ms.Parameter(pf.zeros([3, 2]), "p", requires_grad=False)
    assert p.transpose(0, 1).shape == [2, 3] and not p.trainable and p.name == "p"
    assert pf.ones([2, 3]).transpose([1, 0]).shape == [3, 2]  # primflow's own Tensor: perm


def test_initializer_names_numbers_and_errors():
    assert ms.initializer("ones", [2, 2], ms.float64).dtype == pf.float64
    np.testing.assert_array_equal(ms.initializer(0.5, 3).numpy(), [0.5, 0.5, 0.5])
    bound = np.sqrt(6.0 / 300)  # he_uniform: fan_in is the second dim ([out, in])
    values = ms.initializer("he_uniform", [200, 300]).numpy()
    assert values.max() <= bound and values.min() >= -bound and values.max() > 0.9 * bound
    with pytest.raises(ValueError, match="unknown name 'gaussian'"):
        ms.initializer("gaussian", [2])
    with pytest.raises(ValueError, match="shape is required"):
        ms.initializer("zeros")


def test_cell_dense_losses_and_with_loss_cell():
    pf.seed(1)
    dense = nn.Dense(4, 2, activation="relu")
    w, b = dense.weight.numpy(), dense.bias.numpy()
    assert w.shape == (2, 4) and np.abs(w).max() <= 0.5 and np.abs(b).max() <= 0.5
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    np.testing.assert_allclose(dense(ms.Tensor(x, ms.float32)).numpy(),
                               np.maximum(x @ w.T + b, 0), rtol=1e-6, atol=1e-7)
    assert dense.trainable_params() == [dense.weight, dense.bias]
    logits = np.array([[1.0, -1.0, 0.5], [0.2, 0.3, -0.4]])
    labels = np.array([2, 0])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    loss = nn.CrossEntropyLoss()(ms.Tensor(logits), ms.Tensor(labels))
    assert float(loss) == pytest.approx(-logp[[0, 1], labels].mean(), rel=1e-14)
    soft = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    loss = nn.CrossEntropyLoss(reduction="sum")(ms.Tensor(logits), ms.Tensor(soft))
    assert float(loss) == pytest.approx(-(soft * logp).sum(), rel=1e-14)
    with_loss = nn.WithLossCell(nn.Dense(3, 1), nn.MSELoss())
    pred = with_loss.backbone_network(ms.Tensor(logits))
    assert float(with_loss(ms.Tensor(logits), ms.Tensor(np.zeros((2, 1))))) == pytest.approx(
        float((pred * pred).mean()), rel=1e-6)

    class NoConstruct(nn.Cell):
        pass

    with pytest.raises(TypeError, match="without a construct method"):
        NoConstruct()(ms.Tensor(logits))


@pytest.mark.parametrize("make, update", [
    (lambda ps: nn.SGD(ps, 0.1), lambda p, g, v: (p - 0.1 * g, v)),
    (lambda ps: nn.SGD(ps, 0.1, momentum=0.9), lambda p, g, v: (p - 0.1 * (0.9 * v + g),
                                                                  0.9 * v + g)),
    (lambda ps: nn.Momentum(ps, 0.1, 0.5), lambda p, g, v: (p - 0.1 * (0.5 * v + g),
                                                           0.5 * v + g)),
], ids=["sgd", "sgd-momentum", "momentum"])
def test_optimizers_take_params_first_and_apply_given_gradients(make, update):
    p = ms.Parameter(ms.Tensor(np.array([1.0, -2.0])), "p")
    optimizer = make([p])
    assert optimizer.parameters == (p,)
    expected, velocity = np.array([1.0, -2.0]), np.zeros(2)
    for g in ([0.5, 1.0], [-1.0, 2.0]):
        optimizer((ms.Tensor(np.array(g)),))
        expected, velocity = update(expected, np.array(g), velocity)
        np.testing.assert_allclose(p.numpy(), expected, rtol=1e-14)
    assert p.grad is None  # the parameter's own gradient is left as it was


def test_adam_step_and_gradient_count_error():
    p = ms.Parameter(ms.Tensor(np.array([1.0, -2.0])), "p")
    adam = nn.Adam([p], learning_rate=0.01)
    adam((ms.Tensor(np.array([0.5, -4.0])),))
    # Adam's first step moves each coordinate by the learning rate against the gradient
    np.testing.assert_allclose(p.numpy(), [0.99, -1.99], rtol=1e-6)
    with pytest.raises(ValueError, match="got 2 gradients for 1 parameters"):
        adam((ms.Tensor(np.zeros(2)), ms.Tensor(np.zeros(2))))
    with pytest.raises(ValueError, match="params is empty"):
        nn.SGD([], 0.1)


def test_primitives_dtypes_and_seed():
    x = ms.Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(ops.MatMul(transpose_b=True)(x, x).numpy(),
                               x.numpy() @ x.numpy().T)
    np.testing.assert_allclose(ops.transpose(x, (1, 0)).numpy(), x.numpy().T)
    assert float(ops.reduce_sum(x)) == 10.0
    np.testing.assert_allclose(ops.reduce_mean(x, 1, keep_dims=True).numpy(), [[1.5], [3.5]])
    assert (ms.float16, ms.float32, ms.float64, ms.int32, ms.int64, ms.bool_) == (
        pf.float16, pf.float32, pf.float64, pf.int32, pf.int64, pf.bool_)
    ms.set_seed(5)
    a = pf.randn([3]).numpy()
    ms.set_seed(5)
    np.testing.assert_array_equal(pf.randn([3]).numpy(), a)
