"""pf.jit / pf.to_static: tracing, caching and retracing, closures and parameters, layers,
transforms inside and around jit, a whole training step, random draws, errors."""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import requires_extra
from primflow.transforms.jit import TracerConversionError


def _close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a),
                               np.asarray(b.numpy() if hasattr(b, "numpy") else b),
                               rtol=rtol, atol=atol)


# ---- tracing and the printed program ---------------------------------------------------------

def test_lower_prints_the_optimized_program():
    def f(x, w):
        return pf.tanh(x @ w) * 1.0 + 0.0

    text = pf.jit(f).lower(pf.ones([4, 8]), pf.ones([8, 2])).as_text()
    assert text == (
        "def f(%0: float32[4,8], %1: float32[8,2]):\n"
        "    %2: float32[4,2] = dot_general(%0, %1, contracting=((1,),(0,)), batch=((),()))\n"
        "    %3: float32[4,2] = tanh(%2)\n"
        "    return %3\n")
    lowered = pf.jit(f).lower(pf.ones([4, 8]), pf.ones([8, 2]))
    assert "mul(" in lowered.as_text("traced")
    assert "np.tanh" in lowered.as_text("compiled")


def test_values_and_pytrees_in_and_out():
    @pf.jit
    def f(d, scale, names):
        return {"sum": d["a"] + d["b"][0] * scale, "n": len(names), "none": None}

    a, b = pf.randn([3]), pf.randn([3])
    out = f({"a": a, "b": [b]}, 2.0, ("x", "y"))
    _close(out["sum"], a + b * 2.0)
    assert out["n"] == 2 and out["none"] is None


def test_returning_inputs_and_constants():
    f = pf.jit(lambda x: (x, pf.ones([2]), 3))
    x = pf.randn([2])
    a, b, c = f(x)
    _close(a, x)
    _close(b, np.ones(2))
    assert c == 3


# ---- caching ---------------------------------------------------------------------------------

def test_cache_per_signature_and_retrace_on_a_new_one():
    calls = []

    @pf.jit
    def f(x, y):
        calls.append(1)
        return x * y

    x, y = pf.randn([3]), pf.randn([3])
    for _ in range(3):
        f(x, y)
    assert len(calls) == 1 and f.cache_info() == {"traces": 1, "hits": 2, "entries": 1}
    f(pf.randn([4]), pf.randn([4]))  # new shape
    f(x.astype("float64"), y.astype("float64"))  # new dtype
    assert len(calls) == 3
    f(pf.randn([3]), pf.randn([3]))  # old signature, new values: cached
    assert len(calls) == 3
    x.stop_gradient = False  # grad flags are part of the signature
    f(x, y)
    assert len(calls) == 4


def test_static_arguments_and_python_scalars_are_part_of_the_key():
    calls = []

    def f(x, n, mode="sum"):
        calls.append((n, mode))
        out = x
        for _ in range(n):  # Python control flow on static values is fine
            out = out * 2.0
        return out.sum() if mode == "sum" else out.max()

    jf = pf.jit(f, static_argnums=1, static_argnames="mode")
    x = pf.to_tensor([1.0, 2.0])
    assert float(jf(x, 2)) == 12.0 and float(jf(x, 2)) == 12.0
    assert float(jf(x, 3)) == 24.0
    assert float(jf(x, 3, mode="max")) == 16.0
    assert len(calls) == 3
    g = pf.jit(lambda x, s: x * s)  # Python scalars: static by value
    _close(g(x, 2.0), [2.0, 4.0])
    _close(g(x, 3.0), [3.0, 6.0])
    assert g.cache_info()["traces"] == 2


def test_numpy_arrays_are_accepted_as_tensors():
    f = pf.jit(lambda x: x * 2.0)
    _close(f(np.arange(3.0)), [0.0, 2.0, 4.0])


# ---- closures and parameters -----------------------------------------------------------------

def test_closed_over_tensors_are_inputs_read_at_every_call():
    w = pf.to_tensor([1.0, 2.0])
    p = pf.to_tensor([1.0, 1.0], stop_gradient=False)
    f = pf.jit(lambda x: x * w + p * 2.0)
    x = pf.ones([2])
    _close(f(x), [3.0, 4.0])
    w.set_value(np.array([10.0, 20.0], dtype=np.float32))
    with pf.no_grad():
        p.set_value(np.array([0.0, 0.0], dtype=np.float32))
    _close(f(x), [10.0, 20.0])
    assert f.cache_info()["traces"] == 1


def test_computations_on_parameters_are_recorded_not_baked_in():
    w = pf.to_tensor([[1.0, 2.0]], stop_gradient=False)
    f = pf.jit(lambda x: x * pf.exp(w.T).sum())  # exp(w) involves no traced input
    x = pf.ones([1])
    _close(f(x), [np.exp(1.0) + np.exp(2.0)])
    with pf.no_grad():
        w.set_value(np.zeros((1, 2), dtype=np.float32))
    _close(f(x), [2.0])
    assert "exp" in f.lower(x).as_text()


def test_replaced_parameters_of_a_layer_argument_are_seen():
    # a layer passed as an argument (or to_static) is read slot by slot at every call;
    # a closure captures tensor objects, so replacing an attribute needs an argument
    layer = pf.to_static(pf.nn.Linear(3, 2))
    x = pf.ones([1, 3])
    assert layer(x).shape == [1, 2]
    layer.weight = pf.create_parameter([3, 4], "float32")
    layer.bias = pf.create_parameter([4], "float32")
    assert layer(x).shape == [1, 4]
    _close(layer(x), x @ layer.weight + layer.bias)
    assert layer.forward.jitted.cache_info()["traces"] == 2


def test_layers_as_arguments_and_to_static():
    pf.seed(1)
    net = pf.nn.Sequential(pf.nn.Linear(3, 8), pf.nn.Tanh(), pf.nn.Linear(8, 2))
    x = pf.randn([5, 3])
    expected = net(x)
    _close(pf.jit(lambda m, x: m(x))(net, x), expected)
    static = pf.to_static(net)
    assert static is net
    _close(static(x), expected)
    assert "dot_general" in net.forward.lower(x).as_text()


def test_to_static_layer_trains_like_eager_and_sees_updates():
    pf.seed(2)
    eager = pf.nn.Sequential(pf.nn.Linear(2, 16), pf.nn.Tanh(), pf.nn.Linear(16, 1))
    static = pf.nn.Sequential(pf.nn.Linear(2, 16), pf.nn.Tanh(), pf.nn.Linear(16, 1))
    static.set_state_dict(eager.state_dict())
    pf.to_static(static)
    x, y = pf.randn([16, 2]), pf.randn([16, 1])
    opts = [pf.optimizer.Adam(learning_rate=0.01, parameters=n.parameters())
            for n in (eager, static)]
    for _ in range(4):
        losses = []
        for net, opt in zip((eager, static), opts):
            loss = ((net(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
        assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert static.forward.jitted.cache_info()["traces"] == 1


def test_train_and_eval_modes_retrace():
    net = pf.to_static(pf.nn.Sequential(pf.nn.Linear(4, 4), pf.nn.Dropout(0.5)))
    x = pf.ones([64, 4])
    net.eval()
    _close(net(x), net(x))
    net.train()
    a, b = net(x).numpy(), net(x).numpy()
    assert (a == 0).any() and not np.array_equal(a, b)  # fresh draws on every call
    assert net.forward.jitted.cache_info()["traces"] == 2


def test_decorating_a_method():
    class Model(pf.nn.Layer):
        def __init__(self):
            super().__init__()
            self.w = self.create_parameter([3], "float32")

        @pf.jit
        def forward(self, x):
            return x * self.w

    m = Model()
    x = pf.randn([3])
    _close(m(x), x * m.w)


# ---- transforms inside and around jit --------------------------------------------------------

def test_tape_grad_inside_jit_first_and_second_order():
    def f(x):
        y = (pf.sin(x) * x ** 2).sum()
        (g,) = pf.grad(y, x, create_graph=True)
        (h,) = pf.grad(g.sum(), x)
        return y, g, h

    x = pf.to_tensor([0.3, -1.2, 2.0], dtype="float64", stop_gradient=False)
    for got, want in zip(pf.jit(f)(x), f(x)):
        _close(got, want, rtol=1e-12, atol=1e-12)


def test_functional_transforms_inside_jit():
    x = pf.to_tensor([[0.5, 1.0], [1.5, -2.0]], dtype="float64")

    def f(x):
        per_row = pf.vmap(pf.grad(lambda r: (pf.tanh(r) ** 2).sum()))(x)
        _, tangent = pf.jvp(lambda z: pf.exp(z) * z, (x,), (pf.ones_like(x),))
        hess = pf.hessian(lambda z: (z ** 3).sum())(x[0])
        return per_row, tangent, hess

    for got, want in zip(pf.jit(f)(x), f(x)):
        _close(got, want, rtol=1e-12, atol=1e-12)


def test_transforms_around_jit():
    f = pf.jit(lambda x: pf.sin(x) * x)
    x = pf.to_tensor([0.1, 0.7, 1.3], dtype="float64")
    def eager(x):
        return pf.sin(x) * x
    _close(pf.vmap(f)(pf.stack([x, 2 * x])), pf.vmap(eager)(pf.stack([x, 2 * x])))
    _close(pf.jvp(f, (x,), (pf.ones_like(x),))[1], pf.jvp(eager, (x,), (pf.ones_like(x),))[1])
    _close(pf.grad(lambda z: f(z).sum())(x), pf.grad(lambda z: eager(z).sum())(x))
    _close(pf.hessian(lambda z: f(z).sum())(x), pf.hessian(lambda z: eager(z).sum())(x))
    _close(pf.jit(lambda z: f(z) * 2.0)(x), eager(x) * 2.0)  # jit of jit inlines


def test_backward_through_a_jitted_function_reaches_parameters():
    w = pf.to_tensor([0.5, -0.25], dtype="float64", stop_gradient=False)
    f = pf.jit(lambda x: (pf.tanh(x * w) ** 2).sum())
    x = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    f(x).backward()
    gx, gw = x.grad.numpy(), w.grad.numpy()
    x.clear_grad()
    w.clear_grad()
    (pf.tanh(x * w) ** 2).sum().backward()
    _close(gx, x.grad, rtol=1e-12)
    _close(gw, w.grad, rtol=1e-12)
    # third order through the jitted function's tape node
    (g,) = pf.grad(f(x), x, create_graph=True)
    (h,) = pf.grad(g.sum(), x, create_graph=True)
    (t,) = pf.grad(h.sum(), x)
    (g2,) = pf.grad((pf.tanh(x * w) ** 2).sum(), x, create_graph=True)
    (h2,) = pf.grad(g2.sum(), x, create_graph=True)
    (t2,) = pf.grad(h2.sum(), x)
    _close(t, t2, rtol=1e-10)


# ---- a whole training step as one program ----------------------------------------------------

def _adam_step(model, params, state, x, y, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    m, v, t = state

    def loss_of(ps):
        return ((pf.nn.functional_call(model, ps, x) - y) ** 2).mean()

    loss, grads = pf.value_and_grad(loss_of)(params)
    t = t + 1.0
    new_p, new_m, new_v = {}, {}, {}
    for k in params:
        g = grads[k]
        new_m[k] = m[k] * b1 + g * (1.0 - b1)
        new_v[k] = v[k] * b2 + g * g * (1.0 - b2)
        m_hat = new_m[k] / (1.0 - b1 ** t)
        v_hat = new_v[k] / (1.0 - b2 ** t)
        new_p[k] = params[k] - m_hat / (pf.sqrt(v_hat) + eps) * lr
    return loss, new_p, (new_m, new_v, t)


def test_training_step_compiled_as_one_program_matches_the_optimizer():
    pf.seed(3)
    net = pf.nn.Sequential(pf.nn.Linear(2, 16), pf.nn.Tanh(), pf.nn.Linear(16, 1))
    ref = pf.nn.Sequential(pf.nn.Linear(2, 16), pf.nn.Tanh(), pf.nn.Linear(16, 1))
    ref.set_state_dict(net.state_dict())
    opt = pf.optimizer.Adam(learning_rate=0.01, parameters=ref.parameters())
    x, y = pf.randn([32, 2]), pf.randn([32, 1])
    params = {k: p.detach() for k, p in net.named_parameters()}
    state = ({k: pf.zeros_like(p) for k, p in params.items()},
             {k: pf.zeros_like(p) for k, p in params.items()}, pf.to_tensor(0.0))
    step = pf.jit(_adam_step, static_argnums=0)
    for _ in range(5):
        loss, params, state = step(net, params, state, x, y)
        ref_loss = ((ref(x) - y) ** 2).mean()
        ref_loss.backward()
        opt.step()
        opt.clear_grad()
        assert float(loss) == pytest.approx(float(ref_loss), rel=1e-5)
    for k, p in ref.named_parameters():
        _close(params[k], p, rtol=1e-4, atol=1e-6)
    assert step.cache_info()["traces"] == 1
    program = step.lower(net, params, state, x, y).program
    prims = {op.prim for op in program.ops}
    assert {"dot_general", "tanh", "sqrt", "div"} <= prims  # forward, backward and update


# ---- random draws ----------------------------------------------------------------------------

def test_random_draws_are_fresh_per_call_and_follow_the_seed():
    f = pf.jit(lambda x: x + pf.randn([4]))
    x = pf.zeros([4])
    pf.seed(5)
    a, b = f(x).numpy(), f(x).numpy()
    assert not np.array_equal(a, b)
    pf.seed(5)
    expected = [(x + pf.randn([4])).numpy() for _ in range(2)]
    pf.seed(5)
    got = [f(x).numpy() for _ in range(2)]
    np.testing.assert_array_equal(got, expected)


# ---- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    lambda x: x * 2 if x.sum() > 0 else x,
    lambda x: x * float(x.sum()),
    lambda x: x * x.sum().item(),
    lambda x: x * x.numpy().sum(),
    lambda x: x[int(x.max())],
])
def test_python_control_flow_on_traced_values_is_a_clear_error(body):
    # full_graph: without it, pf.jit breaks the graph here (tests/test_control_flow_convert.py)
    with pytest.raises(TracerConversionError, match=r"pf\.where.*static_argnums"):
        pf.jit(body, full_graph=True)(pf.ones([3]))


def test_backward_inside_jit_is_refused_with_the_fix():
    w = pf.to_tensor([1.0], stop_gradient=False)

    def step(x):
        (x * w).sum().backward()
        return x

    with pytest.raises(RuntimeError, match=r"pf\.grad\(loss, params\)"):
        pf.jit(step)(pf.ones([1]))
    assert w.grad is None  # the traced gradient did not leak into the parameter


def test_escaped_tracers_and_bad_arguments():
    leak = []
    f = pf.jit(lambda x: leak.append(x * 2) or x)
    f(pf.ones([2]))
    with pytest.raises(Exception, match="escaped from a finished trace"):
        (leak[0] + 1.0).numpy()
    with pytest.raises(TypeError, match="static_argnums"):
        pf.jit(lambda x, opts: x)(pf.ones([1]), bytearray(b"unhashable"))
    with pytest.raises(ValueError, match="static_argnums"):
        pf.jit(lambda x: x, static_argnums=3)(pf.ones([1]))
    with pytest.raises(TypeError, match="callable"):
        pf.jit(3)
    with pytest.raises(ValueError, match="broadcast"):
        pf.jit(lambda a, b: a + b)(pf.ones([2]), pf.ones([3]))


# ---- the optional numba backend --------------------------------------------------------------

@requires_extra("jit")
def test_numba_kernels_match_numpy(tmp_path, monkeypatch):
    monkeypatch.setattr(pf.config, "cache_dir", str(tmp_path))

    def f(a, b, m):
        x = a * b + 1.0
        u = x.T @ a  # reads the group's value before the group ends: kernels are scheduled
        y = pf.where(m, x * (1.0 - x * x), pf.sqrt(pf.abs(x)))
        return y, (y * y).sum(axis=1), pf.maximum(x, b).max(axis=0), (x - b).min(), u

    rng = np.random.default_rng(0)
    a, b = (pf.to_tensor(rng.standard_normal((64, 32)), dtype="float64") for _ in range(2))
    m = pf.to_tensor(rng.random((64, 32)) < 0.5)
    jitted = pf.jit(f, backend="numba")
    for got, want in zip(jitted(a, b, m), f(a, b, m)):
        _close(got, want, rtol=1e-10, atol=1e-12)
    exe = jitted.lower(a, b, m).compile()
    assert exe.kernels and exe.backend == "numba"
    assert list(tmp_path.rglob("k_*.py"))  # kernels are files, cached on disk by numba


# every dot_general form the NumPy code generator lowers specially (one GEMM over reshaped
# operands, transposed reads, the outer product as a broadcast multiply), against eager
@pytest.mark.parametrize("xs, ys, contracting", [
    ((4, 5, 6), (6, 3), ((2,), (0,))),        # [..., k] @ [k, n]
    ((4, 5, 6), (3, 6), ((2,), (1,))),        # [..., k] @ [n, k].T
    ((4, 5, 6), (4, 5, 3), ((0, 1), (0, 1))),  # X^T Y over two leading dims
    ((6, 5), (6, 3), ((0,), (0,))),           # x.T @ y
    ((5, 6), (3, 6), ((1,), (1,))),           # x @ y.T
    ((4, 6), (6, 2, 3), ((1,), (0,))),        # [m, k] @ [k, n1, n2]
    ((4,), (5, 3), ((), ())),                 # outer product
    ((2, 3), (4,), ((), ())),
    ((6,), (6,), ((0,), (0,))),               # full contraction to a scalar
    ((3, 4, 2), (2, 4, 5), ((1,), (1,))),     # a middle dim: the backend kernel
])
def test_dot_general_lowerings_match_eager(xs, ys, contracting):
    from primflow import prims

    rng = np.random.default_rng(0)
    x = pf.to_tensor(rng.standard_normal(xs))
    y = pf.to_tensor(rng.standard_normal(ys))

    def f(a, b):  # a consumer after the product, so its result lands in a planned buffer
        return pf.tanh(prims.dot_general(a, b, contracting=contracting, batch=((), ()))) * 2.0

    want = f(x, y).numpy()
    for backend in ("numpy", "interpret"):
        got = pf.jit(f, backend=backend)(x, y).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert got.shape == want.shape


def test_seed_inside_a_jitted_function_replays_even_from_the_same_state():
    # the generator already at (seed 7, no draws) when tracing: pf.seed(7) inside must still
    # count as a reseed (every call draws the key of seed 7), not as one ordinary draw
    def f(x):
        pf.seed(7)
        return x + pf.rand([3], "float64")

    x = pf.zeros([3], "float64")
    pf.seed(7)
    jitted = pf.jit(f)
    first = jitted(x).numpy()
    pf.seed(99)
    _ = pf.rand([5])  # move the generator elsewhere: the jitted call must not care
    np.testing.assert_array_equal(jitted(x).numpy(), first)
    np.testing.assert_array_equal(f(x).numpy(), first)
