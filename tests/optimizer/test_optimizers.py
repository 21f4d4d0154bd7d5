"""pf.optimizer first-order methods: updates against NumPy reimplementations of their
formulas, convergence, Paddle-style API, gradient clipping, in-place safety, state."""

import numpy as np
import pytest

import primflow as pf

RNG = np.random.default_rng(0)
A1, B1 = RNG.uniform(0.5, 2.0, (3, 2)), RNG.standard_normal((3, 2))
A2, B2 = RNG.uniform(0.5, 2.0, (4,)), RNG.standard_normal((4,))
W1_0, W2_0 = RNG.standard_normal((3, 2)), RNG.standard_normal((4,))


def _loss(w1, w2):
    """f(w) = sum(a w^2 / 2 + b w) over both parameters; grad = a w + b."""
    return (0.5 * A1 * w1 ** 2 + B1 * w1).sum() + (0.5 * A2 * w2 ** 2 + B2 * w2).sum()


def _grads(ws):
    return [A1 * ws[0] + B1, A2 * ws[1] + B2]


def _run_pf(make_opt, steps=5):
    w1 = pf.to_tensor(W1_0, stop_gradient=False)
    w2 = pf.to_tensor(W2_0, stop_gradient=False)
    opt = make_opt([w1, w2])
    out = []
    for _ in range(steps):
        _loss(w1, w2).backward()
        opt.step()
        opt.clear_grad()
        out.append([w1.numpy(), w2.numpy()])
    return out


def _run_np(update, steps=5):
    ws = [W1_0.copy(), W2_0.copy()]
    state = [{} for _ in ws]
    out = []
    for t in range(1, steps + 1):
        gs = _grads(ws)
        ws = [update(w, g, s, t) for w, g, s in zip(ws, gs, state)]
        out.append([w.copy() for w in ws])
    return out


def _compare(pf_traj, np_traj, rtol=1e-12):
    for step, (a, b) in enumerate(zip(pf_traj, np_traj)):
        for i in range(2):
            np.testing.assert_allclose(a[i], b[i], rtol=rtol, atol=1e-14,
                                       err_msg=f"step {step + 1}, parameter {i}")


def test_sgd_matches_formula():
    lr, wd = 0.1, 0.05
    _compare(_run_pf(lambda ps: pf.optimizer.SGD(learning_rate=lr, parameters=ps)),
             _run_np(lambda w, g, s, t: w - lr * g))
    _compare(_run_pf(lambda ps: pf.optimizer.SGD(lr, parameters=ps, weight_decay=wd)),
             _run_np(lambda w, g, s, t: w - lr * (g + wd * w)))
    _compare(_run_pf(lambda ps: pf.optimizer.SGD(lr, parameters=ps,
                                                 weight_decay=pf.regularizer.L1Decay(wd))),
             _run_np(lambda w, g, s, t: w - lr * (g + wd * np.sign(w))))


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_formula(nesterov):
    lr, mu = 0.05, 0.8

    def update(w, g, s, t):
        s["v"] = mu * s.get("v", 0.0) + g
        return w - lr * (g + mu * s["v"] if nesterov else s["v"])

    _compare(_run_pf(lambda ps: pf.optimizer.Momentum(learning_rate=lr, momentum=mu,
                                                      parameters=ps, use_nesterov=nesterov)),
             _run_np(update))


def _adam_update(lr, b1, b2, eps, amsgrad=False, decoupled=0.0):
    def update(w, g, s, t):
        w = w * (1 - lr * decoupled)
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        v = s["v"]
        if amsgrad:
            s["vmax"] = v = np.maximum(s.get("vmax", 0.0), v)
        m_hat = s["m"] / (1 - b1 ** t)
        v_hat = v / (1 - b2 ** t)
        return w - lr * m_hat / (np.sqrt(v_hat) + eps)

    return update


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_matches_formula(amsgrad):
    lr, b1, b2, eps = 0.1, 0.8, 0.95, 1e-2  # a large epsilon checks where it enters
    _compare(_run_pf(lambda ps: pf.optimizer.Adam(learning_rate=lr, beta1=b1, beta2=b2,
                                                  epsilon=eps, parameters=ps,
                                                  amsgrad=amsgrad), steps=8),
             _run_np(_adam_update(lr, b1, b2, eps, amsgrad), steps=8))


def test_adam_with_coupled_weight_decay():
    lr, wd = 0.1, 0.3
    adam = _adam_update(lr, 0.9, 0.999, 1e-8)
    _compare(_run_pf(lambda ps: pf.optimizer.Adam(lr, parameters=ps, weight_decay=wd)),
             _run_np(lambda w, g, s, t: adam(w, g + wd * w, s, t)))


def test_adamw_matches_formula_and_decay_filter():
    lr, wd = 0.1, 0.3
    _compare(_run_pf(lambda ps: pf.optimizer.AdamW(learning_rate=lr, parameters=ps,
                                                   weight_decay=wd)),
             _run_np(_adam_update(lr, 0.9, 0.999, 1e-8, decoupled=wd)))
    # apply_decay_param_fun: decay only the first parameter
    w1 = pf.to_tensor(W1_0, stop_gradient=False)
    w2 = pf.to_tensor(W2_0, stop_gradient=False)
    w1.name, w2.name = "w1", "w2"
    opt = pf.optimizer.AdamW(lr, parameters=[w1, w2], weight_decay=wd,
                             apply_decay_param_fun=lambda n: n == "w1")
    _loss(w1, w2).backward()
    opt.step()
    with_decay = _adam_update(lr, 0.9, 0.999, 1e-8, decoupled=wd)
    without = _adam_update(lr, 0.9, 0.999, 1e-8)
    g1, g2 = _grads([W1_0, W2_0])
    np.testing.assert_allclose(w1.numpy(), with_decay(W1_0, g1, {}, 1), rtol=1e-12)
    np.testing.assert_allclose(w2.numpy(), without(W2_0, g2, {}, 1), rtol=1e-12)


def _regression(make_opt, steps):
    pf.seed(0)
    x = pf.randn([128, 3])
    w_true = pf.to_tensor([[1.0], [-2.0], [0.5]])
    y = x @ w_true + 0.3
    net = pf.nn.Sequential(pf.nn.Linear(3, 8), pf.nn.Tanh(), pf.nn.Linear(8, 1))
    opt = make_opt(net.parameters())
    first = None
    for _ in range(steps):
        loss = pf.nn.functional.mse_loss(net(x), y)
        first = float(loss) if first is None else first
        loss.backward()
        opt.step()
        opt.clear_grad()
    return first, float(pf.nn.functional.mse_loss(net(x), y))


@pytest.mark.parametrize("make_opt", [
    lambda ps: pf.optimizer.Adam(learning_rate=0.02, parameters=ps),
    lambda ps: pf.optimizer.AdamW(learning_rate=0.02, parameters=ps, weight_decay=1e-4),
    lambda ps: pf.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=ps),
    lambda ps: pf.optimizer.Momentum(learning_rate=0.05, parameters=ps, use_nesterov=True),
], ids=["adam", "adamw", "momentum", "nesterov"])
def test_converges_on_small_regression(make_opt):
    first, last = _regression(make_opt, 300)
    assert first > 1.0 and last < 0.01, (first, last)


def test_parameters_are_required():
    with pytest.raises(ValueError, match="parameters=net.parameters()"):
        pf.optimizer.Adam(learning_rate=1e-3)
    with pytest.raises(ValueError, match="empty parameter list"):
        pf.optimizer.SGD(0.1, parameters=[])
    with pytest.raises(ValueError, match="empty parameter list"):
        pf.optimizer.SGD(0.1, parameters=pf.nn.Tanh().parameters())
    with pytest.raises(TypeError, match="wrap it in a list"):
        pf.optimizer.SGD(0.1, parameters=pf.zeros([2]))
    with pytest.raises(TypeError, match="not a Tensor"):
        pf.optimizer.SGD(0.1, parameters=[np.zeros(2)])
    w = pf.to_tensor([1.0], stop_gradient=False)
    with pytest.raises(ValueError, match="more than once"):
        pf.optimizer.SGD(0.1, parameters=[w, w])
    with pytest.raises(ValueError, match="not a leaf"):
        pf.optimizer.SGD(0.1, parameters=[w * 2])
    with pytest.raises(TypeError, match="learning_rate"):
        pf.optimizer.SGD("fast", parameters=[w])


def test_lr_get_set_and_schedules():
    w = pf.to_tensor([1.0], dtype="float64", stop_gradient=False)
    opt = pf.optimizer.SGD(learning_rate=0.5, parameters=[w])
    assert opt.get_lr() == 0.5
    opt.set_lr(0.25)
    assert opt.get_lr() == 0.25
    sched = pf.optimizer.lr.StepDecay(learning_rate=1.0, step_size=1, gamma=0.5)
    opt = pf.optimizer.SGD(learning_rate=sched, parameters=[w])
    with pytest.raises(RuntimeError, match="set_lr_scheduler"):
        opt.set_lr(0.1)
    values = []
    for _ in range(3):
        before = float(w)
        (w * 1.0).sum().backward()  # gradient 1
        opt.step()
        opt.clear_grad()
        values.append(before - float(w))
        sched.step()
    assert values == pytest.approx([1.0, 0.5, 0.25])


def test_param_groups_and_param_attr_learning_rate():
    a = pf.to_tensor([1.0], dtype="float64", stop_gradient=False)
    b = pf.to_tensor([1.0], dtype="float64", stop_gradient=False)
    opt = pf.optimizer.SGD(learning_rate=0.1, parameters=[
        {"params": [a]}, {"params": [b], "learning_rate": 0.5, "weight_decay": 1.0}])
    (a + b).sum().backward()
    opt.step()
    assert float(a) == pytest.approx(1 - 0.1)
    assert float(b) == pytest.approx(1 - 0.05 * (1 + 1.0))
    lin = pf.nn.Linear(2, 1, weight_attr=pf.ParamAttr(learning_rate=0.0))
    w0 = lin.weight.numpy()
    opt = pf.optimizer.Adam(0.1, parameters=lin.parameters())
    lin(pf.ones([3, 2])).sum().backward()
    opt.step()
    np.testing.assert_array_equal(lin.weight.numpy(), w0)  # frozen by its own lr scale
    assert float(lin.bias.abs().sum()) > 0


def test_updates_are_in_place_unrecorded_and_protected_by_versions():
    w = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    opt = pf.optimizer.SGD(0.1, parameters=[w])
    (w * w).sum().backward()
    pending = (w * w).sum()  # saved w for its backward
    version = w._version
    opt.step()
    assert w._version == version + 1
    assert w.is_leaf and not w.stop_gradient and w._node is None
    np.testing.assert_allclose(w.numpy(), [0.8, 1.6], rtol=1e-6)
    with pytest.raises(RuntimeError, match="modified in place"):
        pending.backward()
    opt.clear_grad()
    assert w.grad is None
    opt.step()  # no gradient: nothing happens
    np.testing.assert_allclose(w.numpy(), [0.8, 1.6], rtol=1e-6)


def test_minimize_computes_gradients_and_steps():
    def make():
        w = pf.to_tensor([1.0, -2.0], dtype="float64", stop_gradient=False)
        return w, pf.optimizer.Adam(0.1, parameters=[w])

    w1, opt1 = make()
    opt1.minimize((w1 ** 2).sum())
    w2, opt2 = make()
    (w2 ** 2).sum().backward()
    opt2.step()
    np.testing.assert_array_equal(w1.numpy(), w2.numpy())
    # Paddle's pattern: backward first, then minimize uses the existing gradients
    w3, opt3 = make()
    loss = (w3 ** 2).sum()
    loss.backward()
    opt3.minimize(loss)
    np.testing.assert_array_equal(w3.numpy(), w2.numpy())
    # the same with the graph retained: minimize must not backpropagate a second time
    w4, opt4 = make()
    loss = (w4 ** 2).sum()
    loss.backward(retain_graph=True)
    opt4.minimize(loss)
    np.testing.assert_array_equal(w4.grad.numpy(), [2.0, -4.0])
    np.testing.assert_array_equal(w4.numpy(), w2.numpy())
    with pytest.raises(RuntimeError, match="nothing to minimize"):
        opt3.minimize(pf.to_tensor(1.0))


def test_clip_grad_by_global_norm_matches_numpy():
    w1 = pf.to_tensor(W1_0, stop_gradient=False)
    w2 = pf.to_tensor(W2_0, stop_gradient=False)
    clip = pf.nn.ClipGradByGlobalNorm(clip_norm=0.5)
    opt = pf.optimizer.SGD(learning_rate=1.0, parameters=[w1, w2], grad_clip=clip)
    _loss(w1, w2).backward()
    opt.step()
    g1, g2 = _grads([W1_0, W2_0])
    norm = np.sqrt((g1 ** 2).sum() + (g2 ** 2).sum())
    assert norm > 0.5
    np.testing.assert_allclose(w1.numpy(), W1_0 - g1 * 0.5 / norm, rtol=1e-12)
    np.testing.assert_allclose(w2.numpy(), W2_0 - g2 * 0.5 / norm, rtol=1e-12)
    # below the threshold nothing changes; need_clip=False exempts a parameter
    big = pf.nn.ClipGradByGlobalNorm(1e6)
    pairs = [(w1, pf.to_tensor(g1)), (w2, pf.to_tensor(g2))]
    np.testing.assert_array_equal(big(pairs)[0][1].numpy(), g1)
    p = pf.nn.Parameter(pf.to_tensor(g2), need_clip=False)
    out = clip([(w1, pf.to_tensor(g1)), (p, pf.to_tensor(g2))])
    np.testing.assert_array_equal(out[1][1].numpy(), g2)
    np.testing.assert_allclose(np.linalg.norm(out[0][1].numpy()), 0.5, rtol=1e-12)


def test_clip_by_norm_value_and_functional_helpers():
    g = pf.to_tensor([3.0, 4.0], dtype="float64")
    p = pf.to_tensor([0.0, 0.0], dtype="float64", stop_gradient=False)
    np.testing.assert_allclose(pf.nn.ClipGradByNorm(1.0)([(p, g)])[0][1].numpy(), [0.6, 0.8])
    np.testing.assert_allclose(pf.nn.ClipGradByValue(3.5)([(p, g)])[0][1].numpy(), [3.0, 3.5])
    q = pf.to_tensor([1.0, 1.0], dtype="float64", stop_gradient=False)
    p.grad, q.grad = g, pf.to_tensor([0.0, 12.0], dtype="float64")
    total = pf.nn.utils.clip_grad_norm_([p, q], max_norm=1.3)
    assert float(total) == pytest.approx(13.0)
    norm_after = np.sqrt((p.grad.numpy() ** 2).sum() + (q.grad.numpy() ** 2).sum())
    assert norm_after == pytest.approx(1.3, rel=1e-6)
    p.grad = pf.to_tensor([-5.0, 0.5], dtype="float64")
    pf.nn.utils.clip_grad_value_(p, 1.0)
    np.testing.assert_array_equal(p.grad.numpy(), [-1.0, 0.5])
    lin = pf.nn.Linear(2, 3)
    vec = pf.nn.utils.parameters_to_vector(lin.parameters())
    pf.nn.utils.vector_to_parameters(vec * 2, lin.parameters())
    np.testing.assert_allclose(pf.nn.utils.parameters_to_vector(lin.parameters()).numpy(),
                               vec.numpy() * 2)


def _train(net, opt, x, y, steps):
    for _ in range(steps):
        loss = pf.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()


@pytest.mark.parametrize("make_opt", [
    lambda ps, s: pf.optimizer.Adam(learning_rate=s, parameters=ps, amsgrad=True),
    lambda ps, s: pf.optimizer.AdamW(learning_rate=s, parameters=ps),
    lambda ps, s: pf.optimizer.Momentum(learning_rate=s, parameters=ps, use_nesterov=True),
], ids=["adam", "adamw", "momentum"])
def test_state_dict_resume_is_exact(make_opt):
    pf.seed(1)
    x, y = pf.randn([16, 2]), pf.randn([16, 1])

    def fresh():
        pf.seed(7)
        net = pf.nn.MLP([2, 6, 1])
        sched = pf.optimizer.lr.ExponentialDecay(0.05, gamma=0.9)
        return net, make_opt(net.parameters(), sched), sched

    net_a, opt_a, sched_a = fresh()
    for _ in range(6):
        _train(net_a, opt_a, x, y, 1)
        sched_a.step()
    net_b, opt_b, sched_b = fresh()
    for _ in range(3):
        _train(net_b, opt_b, x, y, 1)
        sched_b.step()
    model_state, opt_state = net_b.state_dict(), opt_b.state_dict()
    net_c, opt_c, sched_c = fresh()
    net_c.set_state_dict(model_state)
    opt_c.set_state_dict(opt_state)
    assert sched_c.last_epoch == 3 and opt_c.get_lr() == opt_b.get_lr()
    for _ in range(3):
        _train(net_c, opt_c, x, y, 1)
        sched_c.step()
    for (name, pa), pc in zip(net_a.named_parameters(), net_c.parameters()):
        np.testing.assert_array_equal(pa.numpy(), pc.numpy(), err_msg=name)


def test_set_state_dict_checks_shapes():
    w = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    opt = pf.optimizer.Adam(0.1, parameters=[w])
    (w * w).sum().backward()
    opt.step()
    state = opt.state_dict()
    assert state["state"]["0"]["step"] == 1 and state["state"]["0"]["moment1"].shape == [2]
    other = pf.optimizer.Adam(0.1, parameters=[pf.to_tensor([1.0, 2.0, 3.0],
                                                            stop_gradient=False)])
    with pytest.raises(ValueError, match=r"shapes \[\[2\]\]"):
        other.set_state_dict(state)
    with pytest.raises(ValueError, match="saved by Adam"):
        pf.optimizer.SGD(0.1, parameters=[w]).set_state_dict(state)
    with pytest.raises(ValueError, match="'state' entry"):
        opt.set_state_dict({"moment1": 3})


def test_numpy_operands_on_the_left_keep_the_graph():
    # `A1 * w` in the losses above: NumPy must defer to Tensor.__rmul__ (Tensor sets
    # __array_ufunc__ = None) instead of converting w and silently dropping its graph
    w = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    for y in (np.array([3.0, 4.0]) * w, np.float64(3.0) * w, np.array([1.0, 1.0]) + w):
        assert isinstance(y, pf.Tensor) and not y.stop_gradient
    (g,) = pf.grad((np.array([3.0, 4.0]) * w).sum(), w)
    np.testing.assert_array_equal(g.numpy(), [3.0, 4.0])
