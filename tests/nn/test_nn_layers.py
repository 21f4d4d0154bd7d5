"""pf.nn layers: bookkeeping, state dicts, forward passes against NumPy, gradients
against finite differences, layers as pytrees and functional_call."""

import copy
import math

import numpy as np
import pytest

import primflow as pf
from primflow.core.pytree import tree_flatten


class Block(pf.nn.Layer):
    def __init__(self):
        super().__init__()
        self.w = self.create_parameter([3, 2])
        self.b = self.create_parameter([2], is_bias=True)
        self.inner = pf.nn.Linear(2, 2)
        self.register_buffer("running", pf.zeros([2]))
        self.scratch = pf.ones([1])  # a plain tensor attribute: non-persistable buffer

    def forward(self, x):
        return self.inner(x @ self.w + self.b)


# ---- bookkeeping --------------------------------------------------------------------------

def test_attribute_assignment_registers_parameters_sublayers_and_buffers():
    blk = Block()
    assert [n for n, _ in blk.named_parameters()] == ["w", "b", "inner.weight", "inner.bias"]
    assert blk.parameters() == [blk.w, blk.b, blk.inner.weight, blk.inner.bias]
    assert all(isinstance(p, pf.nn.Parameter) and not p.stop_gradient for p in blk.parameters())
    assert blk.sublayers() == [blk.inner]
    assert list(blk.children()) == [blk.inner]
    assert [n for n, _ in blk.named_sublayers()] == ["inner"]
    assert [n for n, _ in blk.named_buffers()] == ["running", "scratch"]
    # state_dict: parameters and persistable buffers only
    assert list(blk.state_dict()) == ["w", "b", "running", "inner.weight", "inner.bias"]
    assert [n for n, _ in blk.named_parameters(prefix="blk")][0] == "blk.w"


def test_parameter_names_are_paddle_style_and_unique():
    a, b = pf.nn.Linear(2, 2), pf.nn.Linear(2, 2)
    assert a.weight.name.endswith(".w_0") and a.bias.name.endswith(".b_0")
    assert a.weight.name.split(".")[0] == a.full_name()
    assert a.weight.name != b.weight.name


def test_shared_parameters_and_layers_are_listed_once():
    lin = pf.nn.Linear(2, 2)
    net = pf.nn.Sequential(lin, pf.nn.Tanh(), lin)
    assert len(net.parameters()) == 2
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias"]
    assert len(net.sublayers()) == 2
    # state dicts list a shared parameter under every name (Paddle, PyTorch)
    assert list(net.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    p = pf.nn.Parameter(pf.zeros([2]))
    layer = pf.nn.Layer()
    layer.add_parameter("a", p)
    layer.add_parameter("b", p)
    assert layer.parameters() == [p]


def test_add_parameter_add_sublayer_and_errors():
    layer = pf.nn.Layer()
    p = layer.create_parameter([2, 2])
    assert layer.add_parameter("p", p) is p and layer.p is p
    sub = layer.add_sublayer("sub", pf.nn.Tanh())
    assert layer.sub is sub and layer.sublayers() == [sub]
    with pytest.raises(TypeError, match="Parameter"):
        layer.add_parameter("q", pf.zeros([2]))
    with pytest.raises(KeyError, match="'.'"):
        layer.add_parameter("a.b", p)
    with pytest.raises(TypeError, match="Layer"):
        layer.add_sublayer("s", 3)
    with pytest.raises(TypeError, match="must be a Parameter or None"):
        layer.p = pf.zeros([2, 2])
    layer.p = None  # allowed: removes the parameter from the listing
    assert layer.parameters() == []
    with pytest.raises(TypeError, match="must be a Layer or None"):
        layer.sub = 3
    del layer.sub
    assert layer.sublayers() == []

    class NoInit(pf.nn.Layer):
        def __init__(self):
            self.w = pf.nn.Parameter(pf.zeros([1]))

    with pytest.raises(RuntimeError, match="super"):
        NoInit()


def test_create_parameter_dtype_initializer_and_attr():
    pf.set_default_dtype("float64")
    try:
        lin = pf.nn.Linear(2, 2)
    finally:
        pf.set_default_dtype("float32")
    assert lin.weight.dtype == "float64"
    layer = pf.nn.Layer()
    w = layer.create_parameter([2, 3], "float64")  # dtype given positionally (Paddle: attr)
    assert w.dtype == "float64"
    c = layer.create_parameter([4], default_initializer=pf.nn.initializer.Constant(2.5))
    np.testing.assert_array_equal(c.numpy(), [2.5] * 4)
    frozen = layer.create_parameter([2], attr=pf.ParamAttr(name="frozen", trainable=False))
    assert frozen.name == "frozen" and frozen.stop_gradient and not frozen.trainable
    assert layer.create_parameter([2], attr=False) is None
    with pytest.raises(ValueError, match="positive"):
        layer.create_parameter([2, 0])
    top = pf.create_parameter([3], "float64", name="top",
                              default_initializer=pf.nn.initializer.Constant(1.0))
    assert isinstance(top, pf.nn.Parameter) and top.name == "top" and top.dtype == "float64"
    top.trainable = False
    assert top.stop_gradient


def test_train_eval_propagate():
    net = pf.nn.Sequential(pf.nn.Linear(2, 2), pf.nn.Sequential(pf.nn.Dropout(0.5)))
    assert net.eval() is net
    assert all(not layer.training for layer in net.sublayers(include_self=True))
    net.train()
    assert all(layer.training for layer in net.sublayers(include_self=True))


def test_clear_gradients_and_hooks():
    lin = pf.nn.Linear(2, 1)
    lin(pf.ones([3, 2])).sum().backward()
    assert lin.weight.grad is not None
    lin.clear_gradients()
    assert lin.weight.grad is None and lin.bias.grad is None
    calls = []
    h1 = lin.register_forward_pre_hook(lambda layer, inputs: calls.append("pre"))
    h2 = lin.register_forward_post_hook(lambda layer, inputs, out: out * 0)
    out = lin(pf.ones([1, 2]))
    assert calls == ["pre"] and float(out.abs().sum()) == 0.0
    h1.remove(), h2.remove()
    with pf.no_grad():
        lin.bias.set_value(np.ones([1], "float32"))
    assert float(lin(pf.ones([1, 2]) * 0).sum()) == 1.0  # the post hook is gone
    assert calls == ["pre"]  # and so is the pre hook


def test_to_dtype_float_double():
    net = pf.nn.MLP([2, 4, 1])
    x64 = pf.ones([3, 2], dtype="float64")
    net.double()
    assert all(p.dtype == "float64" for p in net.parameters())
    assert net(x64).dtype == "float64"
    net.to("float32")
    assert all(p.dtype == "float32" for p in net.parameters())
    net.to(dtype="float64")
    assert net[0].weight.dtype == "float64"
    assert net[0].create_parameter([2]).dtype == "float64"  # layer dtype follows


def test_deepcopy_is_independent():
    net = pf.nn.MLP([2, 4, 1])
    twin = copy.deepcopy(net)
    assert [n for n, _ in twin.named_parameters()] == [n for n, _ in net.named_parameters()]
    with pf.no_grad():
        twin[0].weight.set_value(np.zeros([2, 4], dtype="float32"))
    assert float(net[0].weight.abs().sum()) > 0
    assert isinstance(twin[0].weight, pf.nn.Parameter) and not twin[0].weight.stop_gradient


def test_repr_is_nested():
    net = pf.nn.Sequential(pf.nn.Linear(2, 3), pf.nn.GELU(approximate=True),
                           pf.nn.Sequential(pf.nn.LayerNorm(3)))
    text = repr(net)
    assert text.splitlines() == [
        "Sequential(",
        "  (0): Linear(in_features=2, out_features=3, dtype=float32)",
        "  (1): GELU(approximate=True)",
        "  (2): Sequential(",
        "    (0): LayerNorm(normalized_shape=[3], epsilon=1e-05)",
        "  )",
        ")",
    ]
    assert repr(pf.nn.Tanh()) == "Tanh()"
    assert repr(pf.nn.Linear(2, 2).weight).startswith("Parameter containing:\nTensor(shape=[2, 2]")


# ---- state dicts ----------------------------------------------------------------------------

def test_state_dict_round_trip_and_names():
    pf.seed(1)
    src = pf.nn.Sequential(pf.nn.Linear(3, 4), pf.nn.Tanh(), pf.nn.Linear(4, 2))
    dst = pf.nn.Sequential(pf.nn.Linear(3, 4), pf.nn.Tanh(), pf.nn.Linear(4, 2))
    sd = src.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert sd["0.weight"] is src[0].weight  # Paddle returns the tensors themselves
    missing, unexpected = dst.set_state_dict(sd)
    assert missing == [] and unexpected == []
    x = pf.randn([5, 3])
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    # arrays work too, and are cast to the parameter dtype
    dst.set_state_dict({k: v.numpy().astype("float64") for k, v in sd.items()})
    assert dst[0].weight.dtype == "float32"
    np.testing.assert_array_equal(dst[0].weight.numpy(), src[0].weight.numpy())


def test_set_state_dict_reports_shape_mismatch_missing_and_unexpected():
    net = pf.nn.Sequential(pf.nn.Linear(3, 4), pf.nn.Linear(4, 2))
    before = net[0].weight.numpy()
    sd = {"0.weight": np.zeros([4, 3], "float32"), "0.bias": np.zeros([4], "float32"),
          "1.weight": np.zeros([4, 2], "float32"), "1.bias": np.zeros([2], "float32")}
    with pytest.raises(ValueError) as err:
        net.set_state_dict(sd)
    assert "'0.weight': expected shape [3, 4], got [4, 3]" in str(err.value)
    np.testing.assert_array_equal(net[0].weight.numpy(), before)  # nothing loaded
    partial = {"0.weight": np.ones([3, 4], "float32"), "extra.w": np.ones([1], "float32")}
    with pytest.warns(UserWarning, match="missing keys"):
        missing, unexpected = net.set_state_dict(partial)
    assert missing == ["0.bias", "1.weight", "1.bias"] and unexpected == ["extra.w"]
    np.testing.assert_array_equal(net[0].weight.numpy(), np.ones([3, 4]))
    with pytest.raises(KeyError, match="missing keys"):
        net.set_state_dict(partial, strict=True)
    with pytest.raises(KeyError, match="unexpected keys"):
        net.load_state_dict({**net.state_dict(), "zzz": pf.ones([1])})


def test_set_state_dict_bumps_version_of_saved_tensors():
    lin = pf.nn.Linear(2, 1)
    loss = (lin(pf.ones([1, 2])) ** 2).sum()
    lin.set_state_dict({k: v.numpy() for k, v in lin.state_dict().items()})
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


# ---- forward passes against NumPy -------------------------------------------------------

def test_linear_forward_matches_numpy_and_paddle_layout():
    pf.seed(3)
    lin = pf.nn.Linear(3, 4)
    assert lin.weight.shape == [3, 4] and lin.bias.shape == [4]
    np.testing.assert_array_equal(lin.bias.numpy(), np.zeros(4))
    with pf.no_grad():
        lin.bias.set_value(np.arange(4, dtype="float32"))
    x = np.random.default_rng(0).standard_normal((5, 3)).astype("float32")
    np.testing.assert_allclose(lin(pf.to_tensor(x)).numpy(),
                               x @ lin.weight.numpy() + lin.bias.numpy(), rtol=1e-6)
    x3 = np.ones((2, 5, 3), "float32")
    assert lin(pf.to_tensor(x3)).shape == [2, 5, 4]
    no_bias = pf.nn.Linear(3, 4, bias_attr=False)
    assert no_bias.bias is None and len(no_bias.parameters()) == 1
    np.testing.assert_allclose(no_bias(pf.to_tensor(x)).numpy(), x @ no_bias.weight.numpy(),
                               rtol=1e-6)


def test_wrong_input_shapes_name_expected_and_got():
    with pytest.raises(ValueError) as err:
        pf.nn.Linear(3, 4)(pf.ones([7, 5]))
    msg = str(err.value)
    assert "in_features=3" in msg and "[..., 3]" in msg and "[7, 5]" in msg
    with pytest.raises(ValueError, match=r"expects input of shape \[\.\.\., 4\], got \[2, 3\]"):
        pf.nn.LayerNorm(4)(pf.ones([2, 3]))
    with pytest.raises(ValueError, match=r"\[2, 3\]"):
        pf.nn.RMSNorm([3, 3])(pf.ones([2, 3]))
    with pytest.raises(ValueError, match="positive int"):
        pf.nn.Linear(0, 3)


@pytest.mark.parametrize("layer, ref", [
    (pf.nn.Tanh(), np.tanh),
    (pf.nn.ReLU(), lambda x: np.maximum(x, 0)),
    (pf.nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (pf.nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (pf.nn.Softplus(), lambda x: np.log1p(np.exp(x))),
    (pf.nn.Softplus(beta=2.0), lambda x: np.log1p(np.exp(2 * x)) / 2),
    (pf.nn.Sin(), np.sin),
    (pf.nn.Identity(), lambda x: x),
    (pf.nn.GELU(), lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    (pf.nn.GELU(approximate=True),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (pf.nn.LeakyReLU(0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    (pf.nn.Softmax(), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
])
def test_activation_layers_match_numpy(layer, ref):
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    np.testing.assert_allclose(layer(pf.to_tensor(x)).numpy(), ref(x), rtol=1e-12, atol=1e-14)


def test_layer_norm_and_rms_norm_match_numpy():
    x = np.random.default_rng(1).standard_normal((4, 3, 5))
    ln = pf.nn.LayerNorm([3, 5])
    with pf.no_grad():
        ln.weight.set_value(np.full((3, 5), 2.0, "float32"))
        ln.bias.set_value(np.full((3, 5), 0.5, "float32"))
    xt = pf.to_tensor(x, dtype="float32")
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(ln(xt).numpy(), (x - mu) / np.sqrt(var + 1e-5) * 2 + 0.5,
                               rtol=1e-4, atol=1e-5)
    assert [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    rms = pf.nn.RMSNorm(5)
    np.testing.assert_allclose(rms(xt).numpy(),
                               x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6),
                               rtol=1e-4, atol=1e-5)
    assert pf.nn.LayerNorm(5, weight_attr=False, bias_attr=False).parameters() == []


def test_dropout_honours_train_and_eval():
    pf.seed(0)
    drop = pf.nn.Dropout(0.25)
    x = pf.ones([200, 50])
    y = drop(x).numpy()
    frac_zero = (y == 0).mean()
    assert abs(frac_zero - 0.25) < 0.02
    np.testing.assert_allclose(y[y != 0], 1 / 0.75, rtol=1e-6)
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())
    down = pf.nn.Dropout(0.25, mode="downscale_in_infer").eval()
    np.testing.assert_allclose(down(x).numpy(), 0.75)
    with pytest.raises(ValueError, match="p must be in"):
        pf.nn.Dropout(1.5)


def test_loss_layers_and_flatten():
    a, b = pf.to_tensor([[1.0, 2.0]]), pf.to_tensor([[0.0, 0.0]])
    assert float(pf.nn.MSELoss()(a, b)) == pytest.approx(2.5)
    assert float(pf.nn.MSELoss(reduction="sum")(a, b)) == pytest.approx(5.0)
    assert float(pf.nn.L1Loss()(a, b)) == pytest.approx(1.5)
    assert pf.nn.Flatten()(pf.ones([2, 3, 4])).shape == [2, 12]
    with pytest.raises(ValueError, match="reduction"):
        pf.nn.MSELoss(reduction="avg")


# ---- containers -----------------------------------------------------------------------------

def test_sequential_indexing_len_iter_append():
    l0, l1, l2 = pf.nn.Linear(2, 3), pf.nn.Tanh(), pf.nn.Linear(3, 1)
    net = pf.nn.Sequential(l0, l1)
    net.append(l2)
    assert len(net) == 3 and list(net) == [l0, l1, l2]
    assert net[0] is l0 and net[-1] is l2
    head = net[:2]
    assert isinstance(head, pf.nn.Sequential) and list(head) == [l0, l1]
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with pytest.raises(IndexError, match="out of range"):
        net[3]
    named = pf.nn.Sequential(("enc", l0), ("act", l1))
    assert named.enc is l0 and named["act"] is l1
    x = pf.ones([4, 2])
    np.testing.assert_array_equal(net(x).numpy(), l2(l1(l0(x))).numpy())
    with pytest.raises(TypeError, match="holds Layers"):
        pf.nn.Sequential(pf.nn.Tanh(), lambda x: x)


def test_layer_list_layer_dict_parameter_list():
    blocks = pf.nn.LayerList([pf.nn.Linear(2, 2) for _ in range(2)])
    blocks.append(pf.nn.Linear(2, 2))
    assert len(blocks) == 3 and len(blocks.parameters()) == 6
    assert [n for n, _ in blocks.named_parameters()][-1] == "2.bias"
    del blocks[0]
    assert len(blocks) == 2 and [n for n, _ in blocks.named_parameters()][0] == "0.weight"
    heads = pf.nn.LayerDict({"u": pf.nn.Linear(2, 1)})
    heads["v"] = pf.nn.Linear(2, 1)
    assert list(heads.keys()) == ["u", "v"] and "v" in heads
    assert [n for n, _ in heads.named_parameters()] == ["u.weight", "u.bias", "v.weight",
                                                        "v.bias"]
    ps = pf.nn.ParameterList([pf.nn.Parameter(pf.zeros([2]))])
    ps.append(pf.nn.Parameter(pf.ones([3])))
    assert len(ps) == 2 and ps[1].shape == [3]
    with pytest.raises(TypeError, match="pf.nn.Parameter"):
        ps.append(pf.zeros([1]))


def test_mlp_helper():
    net = pf.nn.MLP([2, 8, 8, 1], activation="sin")
    kinds = [type(layer).__name__ for layer in net]
    assert kinds == ["Linear", "Sin", "Linear", "Sin", "Linear"]
    assert net(pf.ones([5, 2])).shape == [5, 1]
    assert isinstance(pf.nn.MLP([2, 4, 1], activation=pf.nn.SiLU)[1], pf.nn.SiLU)
    custom = pf.nn.MLP([2, 4, 1], activation=pf.tanh)
    np.testing.assert_allclose(custom(pf.ones([1, 2])).numpy(),
                               custom[2](pf.tanh(custom[0](pf.ones([1, 2])))).numpy())
    gelu = pf.nn.MLP([2, 4, 1], activation=pf.nn.GELU(approximate=True))
    assert gelu[1].approximate
    with pytest.raises(ValueError, match="unknown activation"):
        pf.nn.MLP([2, 4, 1], activation="swoosh")
    with pytest.raises(ValueError, match="at least two"):
        pf.nn.MLP([3])
    ones = pf.nn.MLP([2, 3, 1], weight_init=pf.nn.initializer.Constant(1.0))
    np.testing.assert_array_equal(ones[0].weight.numpy(), np.ones([2, 3]))


# ---- gradients ------------------------------------------------------------------------------

def _mlp64():
    pf.seed(5)
    pf.set_default_dtype("float64")
    try:
        return pf.nn.MLP([2, 3, 3, 1], activation="tanh")
    finally:
        pf.set_default_dtype("float32")


def test_mlp_parameter_gradients_match_finite_differences():
    net = _mlp64()
    x = pf.to_tensor(np.random.default_rng(2).standard_normal((6, 2)))

    def loss_value():
        return float((net(x) ** 2).sum() + pf.sin(net(x)).sum())

    loss = (net(x) ** 2).sum() + pf.sin(net(x)).sum()
    loss.backward()
    eps = 1e-6
    for name, p in net.named_parameters():
        base = p.numpy()
        fd = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            for sign in (1, -1):
                bumped = base.copy()
                bumped[idx] += sign * eps
                with pf.no_grad():
                    p.set_value(bumped)
                fd[idx] += sign * loss_value() / (2 * eps)
        with pf.no_grad():
            p.set_value(base)
        np.testing.assert_allclose(p.grad.numpy(), fd, rtol=1e-6, atol=1e-8, err_msg=name)


def test_functional_call_gradients_match_tape():
    net = _mlp64()
    x = pf.to_tensor(np.random.default_rng(3).standard_normal((4, 2)))
    params = dict(net.named_parameters())

    def loss_fn(ps):
        return (pf.nn.functional_call(net, ps, x) ** 2).mean()

    grads = pf.grad(loss_fn)(params)
    (net(x) ** 2).mean().backward()
    assert sorted(grads) == sorted(params)
    for name, p in params.items():
        np.testing.assert_allclose(grads[name].numpy(), p.grad.numpy(), rtol=1e-12)
    # with other values: the layer itself is unchanged afterwards
    zeros = {k: pf.zeros_like(v) for k, v in params.items()}
    np.testing.assert_array_equal(pf.nn.functional_call(net, zeros, x).numpy(), 0.0)
    assert net["0"].weight is params["0.weight"]
    assert float(net(x).abs().sum()) > 0
    # a list in parameters() order, and partial dicts
    out = pf.nn.functional_call(net, list(zeros.values()), x)
    np.testing.assert_array_equal(out.numpy(), 0.0)
    partial = pf.nn.functional_call(net, {"4.bias": pf.ones([1], dtype="float64")}, x)
    assert partial.shape == [4, 1]
    with pytest.raises(KeyError, match="not a parameter"):
        pf.nn.functional_call(net, {"9.weight": pf.ones([1])}, x)
    with pytest.raises(ValueError, match="has shape"):
        pf.nn.functional_call(net, {"4.bias": pf.ones([2])}, x)


def test_layers_are_pytrees_of_their_parameters():
    net = _mlp64()
    leaves, treedef = tree_flatten(net)
    assert leaves == net.parameters()
    x = pf.to_tensor(np.random.default_rng(4).standard_normal((4, 2)))
    grad_net = pf.grad(lambda n: (n(x) ** 2).sum())(net)
    assert type(grad_net) is pf.nn.MLP and grad_net is not net
    (net(x) ** 2).sum().backward()
    for (name, g), p in zip(grad_net.named_parameters(), net.parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-12, err_msg=name)
    # tree_map over a net and its gradient: an SGD step, functionally
    stepped = pf.tree_map(lambda p, g: p - 0.1 * g, net, grad_net)
    np.testing.assert_allclose(stepped[0].weight.numpy(),
                               net[0].weight.numpy() - 0.1 * net[0].weight.grad.numpy())
    assert isinstance(net[0].weight, pf.nn.Parameter)  # the original is untouched


def test_vmap_over_a_layer_call():
    net = _mlp64()
    x = pf.to_tensor(np.random.default_rng(6).standard_normal((5, 2)))
    per_example = pf.vmap(lambda xi: net(xi.reshape([1, 2])).reshape([]))(x)
    np.testing.assert_allclose(per_example.numpy(), net(x).numpy().ravel(), rtol=1e-12)


def test_dropout_axis_shares_one_decision_along_the_other_axes():
    """Paddle's ``axis``: one keep/drop decision per index along ``axis``, the same for every
    index of the other axes; kept values scaled by 1/(1-p); the drop rate is p."""
    pf.seed(3)
    x = pf.ones([50, 400], dtype="float64")
    y = pf.nn.functional.dropout(x, p=0.3, axis=1).numpy()
    assert (y == y[0]).all()  # whole columns
    assert set(np.unique(y).tolist()) <= {0.0, 1.0 / 0.7}
    assert abs((y[0] == 0).mean() - 0.3) < 0.08
    rows = pf.nn.functional.dropout(x, p=0.3, axis=[0]).numpy()
    assert (rows == rows[:, :1]).all()  # whole rows
    layer = pf.nn.Dropout(0.5, axis=1, mode="downscale_in_infer")
    z = layer(pf.ones([4, 6], dtype="float64")).numpy()
    assert (z == z[0]).all() and set(np.unique(z).tolist()) <= {0.0, 1.0}  # unscaled
    assert (layer.eval()(pf.ones([4, 6], dtype="float64")).numpy() == 0.5).all()
    with pytest.raises(ValueError, match="out of range"):
        pf.nn.functional.dropout(x, p=0.3, axis=2)
