"""custom_vjp, custom_jvp, PyLayer and checkpoint: honoured by the tape and by every
transform, differentiable again, with clear errors for malformed rules."""

import math

import numpy as np
import pytest

import primflow as pf
from primflow.core.primitive import CustomRule


def t64(a, **kw):
    return pf.to_tensor(np.asarray(a, dtype=np.float64), **kw)


# ---- custom_vjp ----------------------------------------------------------------------------

def make_sin_with_rule(scale=1.0):
    @pf.custom_vjp
    def f(x):
        return pf.sin(x)

    # scale != 1 makes the rule observably different from the true derivative
    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * pf.cos(x) * scale,))
    return f


def test_custom_vjp_is_used_by_tape_and_transforms():
    f = make_sin_with_rule(scale=2.0)
    x = t64([0.3, 0.7])
    expected = 2.0 * np.cos(x.numpy())
    xt = t64(x.numpy(), stop_gradient=False)
    f(xt).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), expected)
    np.testing.assert_allclose(pf.grad(lambda v: f(v).sum())(x).numpy(), expected)
    _, vjp_fn = pf.vjp(f, x)
    np.testing.assert_allclose(vjp_fn(pf.ones_like(x))[0].numpy(), expected)
    np.testing.assert_allclose(pf.vmap(pf.grad(lambda v: f(v)))(x).numpy(), expected)
    np.testing.assert_allclose(pf.jacrev(f)(x).numpy(), np.diag(expected))


def test_custom_vjp_rule_in_primflow_ops_is_differentiable_again():
    f = make_sin_with_rule()
    x = t64(0.7)
    assert float(pf.grad(pf.grad(f))(x)) == pytest.approx(-math.sin(0.7), rel=1e-12)
    h = pf.hessian(lambda v: f(v).sum())(t64([0.1, 0.7])).numpy()
    np.testing.assert_allclose(h, np.diag(-np.sin([0.1, 0.7])), atol=1e-14)


def test_custom_vjp_nondiff_argnums_and_multiple_outputs():
    @pf.custom_vjp
    def scaled_pair(k, x):
        return x * k, pf.exp(x)

    def fwd(k, x):
        return scaled_pair(k, x), (x,)

    def bwd(k, res, cts):
        (x,), (g1, g2) = res, cts
        return (g1 * k + g2 * pf.exp(x),)

    scaled_pair = pf.custom_vjp(scaled_pair.fun, nondiff_argnums=(0,))
    scaled_pair.defvjp(fwd, bwd)
    x = t64([0.5, -0.2], stop_gradient=False)
    a, b = scaled_pair(3.0, x)
    (a.sum() + 2.0 * b.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3.0 + 2.0 * np.exp(x.numpy()))


def test_custom_vjp_bad_rules_name_the_rule():
    @pf.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))  # one cotangent, two inputs
    x, y = t64(1.0, stop_gradient=False), t64(2.0, stop_gradient=False)
    with pytest.raises(ValueError, match=r"custom_vjp\(f\).*structure"):
        f(x, y).backward()

    @pf.custom_vjp
    def h(x):
        return x * 2

    h.defvjp(lambda x: (x * 2, None), lambda res, g: (pf.ones([3]),))
    with pytest.raises(ValueError, match="shape"):
        h(t64([1.0, 2.0], stop_gradient=False)).sum().backward()

    @pf.custom_vjp
    def not_tensor(x):
        return x

    not_tensor.defvjp(lambda x: ("text", None), lambda res, g: (g,))
    with pytest.raises(TypeError, match="not a tensor"):
        not_tensor(t64(1.0, stop_gradient=False))

    @pf.custom_vjp
    def no_rule(x):
        return x

    with pytest.raises(TypeError, match="defvjp"):
        no_rule(t64(1.0))


# ---- custom_jvp ----------------------------------------------------------------------------

def make_softplus():
    @pf.custom_jvp
    def softplus(x):
        return pf.log1p(pf.exp(x))

    @softplus.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t * pf.sigmoid(x)

    return softplus


def test_custom_jvp_forward_and_reverse():
    sp = make_softplus()
    # the rule (sigmoid) is used, not the derivative of the log1p(exp) formula
    big = t64(100.0)
    assert float(pf.grad(sp)(big)) == 1.0
    assert float(pf.jvp(sp, (big,), (t64(1.0),))[1]) == 1.0
    x = t64([0.3, -1.2])
    s = 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(pf.grad(lambda v: sp(v).sum())(x).numpy(), s, rtol=1e-12)
    # second derivative through the rule (written in primflow ops): sigmoid'
    np.testing.assert_allclose(pf.vmap(pf.grad(pf.grad(sp)))(x).numpy(), s * (1 - s),
                               rtol=1e-12)
    np.testing.assert_allclose(pf.jacfwd(sp)(x).numpy(), np.diag(s), rtol=1e-12)


# ---- PyLayer -------------------------------------------------------------------------------

class Cube(pf.autograd.PyLayer):
    @staticmethod
    def forward(ctx, x, scale=1.0):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x ** 3 * scale

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensor()
        return 3 * x ** 2 * dy * ctx.scale


def test_pylayer_first_and_second_order():
    x = t64(2.0, stop_gradient=False)
    y = Cube.apply(x, scale=2.0)
    assert float(y) == 16.0
    (d1,) = pf.grad(y, x, create_graph=True)
    (d2,) = pf.grad(d1, x)
    assert float(d1) == 24.0 and float(d2) == 24.0


def test_pylayer_wrong_gradient_count():
    class Bad(pf.autograd.PyLayer):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g  # needs two

    x, y = t64(1.0, stop_gradient=False), t64(2.0, stop_gradient=False)
    with pytest.raises(ValueError, match=r"PyLayer\(Bad\).*2 tensor inputs"):
        Bad.apply(x, y).backward()


# ---- checkpoint ----------------------------------------------------------------------------

def deep_mlp(depth=8, width=32, seed=0):
    rng = np.random.default_rng(seed)
    return [(t64(rng.normal(size=(width, width)) / math.sqrt(width), stop_gradient=False),
             t64(rng.normal(size=(width,)) * 0.1, stop_gradient=False)) for _ in range(depth)]


def layer(x, w, b):
    return pf.tanh(x @ w + b)


def saved_bytes(y):
    """Bytes of distinct arrays the recorded graph of ``y`` keeps for its backward."""
    arrays, seen, stack = {}, set(), [y._node]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for t in node.inputs or ():
            arrays[id(t._value)] = t._value.nbytes
        if node.out_value is not None:
            arrays[id(node.out_value)] = node.out_value.nbytes
        stack.extend(e for e in node.edges if e is not None and not isinstance(e, pf.Tensor))
    return sum(arrays.values())


def test_checkpoint_gradients_match_and_memory_drops():
    params = deep_mlp()
    x = t64(np.random.default_rng(1).normal(size=(256, 32)))

    def forward(use_checkpoint):
        h = x
        for w, b in params:
            h = pf.checkpoint(layer)(h, w, b) if use_checkpoint else layer(h, w, b)
        return (h ** 2).mean()

    plain = forward(False)
    grads_plain = pf.grad(plain, [p for wb in params for p in wb], retain_graph=True)
    ck = forward(True)
    grads_ck = pf.grad(ck, [p for wb in params for p in wb], retain_graph=True)
    for a, b in zip(grads_plain, grads_ck):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-15)
    ratio = saved_bytes(plain) / saved_bytes(ck)
    assert ratio >= 3.0, f"checkpointing saved only {ratio:.2f}x"
    # the checkpointed graph is made of custom nodes, one per layer
    kinds = set()
    stack, seen = [ck._node], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        kinds.add(type(node.prim).__name__)
        stack.extend(e for e in node.edges if e is not None and not isinstance(e, pf.Tensor))
    assert "CustomRule" in kinds


def test_checkpoint_closed_over_parameters_nested_and_higher_order():
    w = t64([1.5, -0.5], stop_gradient=False)
    inner = pf.checkpoint(lambda v: pf.sin(v * w))
    outer = pf.checkpoint(lambda v: inner(v) * v)
    x = t64([0.4, 0.9], stop_gradient=False)
    y = outer(x).sum()
    gx, gw = pf.grad(y, [x, w], create_graph=True)
    xn, wn = x.numpy(), w.numpy()
    np.testing.assert_allclose(gx.numpy(), np.cos(xn * wn) * wn * xn + np.sin(xn * wn))
    np.testing.assert_allclose(gw.numpy(), np.cos(xn * wn) * xn * xn)
    (gxx,) = pf.grad(gx.sum(), x)
    expected = (-np.sin(xn * wn) * wn ** 2 * xn + 2 * np.cos(xn * wn) * wn)
    np.testing.assert_allclose(gxx.numpy(), expected, rtol=1e-12)


def test_checkpoint_under_vmap_and_functional_grad():
    f = pf.checkpoint(lambda v: (pf.exp(v) * v).sum())
    xs = t64([[0.1, 0.2], [0.3, -0.4]])
    got = pf.vmap(pf.grad(f))(xs).numpy()
    np.testing.assert_allclose(got, np.exp(xs.numpy()) * (xs.numpy() + 1), rtol=1e-12)


def test_checkpoint_rejects_side_effects_on_inputs():
    def bad(v):
        v[0] = 0.0
        return v * 2

    x = t64([1.0, 2.0]) * 1.0  # a non-leaf that needs no grad: setitem is allowed on it
    x.stop_gradient = False
    with pytest.raises(RuntimeError, match="side effects|in place"):
        pf.checkpoint(bad)(x)


def test_custom_nodes_are_custom_rules():
    f = make_sin_with_rule()
    y = f(t64([0.1], stop_gradient=False))
    assert isinstance(y._node.prim, CustomRule) and "custom_vjp" in y._node.prim.name


# ---- PyLayer: tensors by keyword and in lists, PyLayerContext flags -------------

class _ScaledSum(pf.autograd.PyLayer):
    """out = w * sum(xs); backward: d/dxs[i] = w * g, d/dw = sum(xs) * g."""

    @staticmethod
    def forward(ctx, xs, w=None):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        ctx.save_for_backward(total, w)
        ctx.n_xs = len(xs)
        return total * w

    @staticmethod
    def backward(ctx, g):
        total, w = ctx.saved_tensor()
        return tuple([g * w] * ctx.n_xs) + (g * total,)


def test_pylayer_sees_tensors_passed_by_keyword_and_in_lists():
    a = t64([1.0, 2.0], stop_gradient=False)
    b = t64([3.0, -1.0], stop_gradient=False)
    w = t64([0.5, 2.0], stop_gradient=False)
    out = _ScaledSum.apply([a, b], w=w)
    assert not out.stop_gradient  # it used to come out detached
    out.sum().backward()
    # closed form of d sum(w * (a + b)): w for a and b, a + b for w
    np.testing.assert_allclose(a.grad.numpy(), [0.5, 2.0])
    np.testing.assert_allclose(b.grad.numpy(), [0.5, 2.0])
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 1.0])
    c = t64([2.0], stop_gradient=False)

    class Square(pf.autograd.PyLayer):
        @staticmethod
        def forward(ctx, x=None):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensor()
            return 2.0 * x * g

    (dc,) = pf.grad(Square.apply(x=c), c)
    assert float(dc) == 4.0


def test_pylayer_context_flags():
    class TwoOut(pf.autograd.PyLayer):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.mark_not_inplace(x)
            ctx.set_materialize_grads(materialize)
            a, b = x * 2.0, x * 3.0
            ctx.mark_non_differentiable(a)
            return x, a, b, "label", 7

        @staticmethod
        def backward(ctx, g_x, g_a, g_b):
            seen.append((g_x, g_a, g_b))
            total = g_b * 3.0
            return total if g_x is None else total + g_x

    for materialize in (True, False):
        seen = []
        x = t64([1.0], stop_gradient=False)
        same, a, b, label, number = TwoOut.apply(x, materialize)
        assert same is not x and a.stop_gradient and not b.stop_gradient
        assert (label, number) == ("label", 7)
        b.sum().backward()
        assert float(x.grad) == 3.0
        g_x, g_a, _ = seen[0]
        if materialize:
            assert float(g_x) == 0.0 and float(g_a) == 0.0
        else:
            assert g_x is None and g_a is None


def test_pylayer_output_returned_in_place_bumps_the_version():
    class Identity(pf.autograd.PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    leaf = t64([1.0], stop_gradient=False)
    with pytest.raises(ValueError, match="mark_not_inplace"):
        Identity.apply(leaf)
    y = leaf * 2.0
    saved_y = y * y  # saves y at version 0
    assert Identity.apply(y) is y
    with pytest.raises(RuntimeError, match="modified in place"):
        saved_y.backward()


# ---- no reference cycles: a result is freed when dropped, not by the garbage collector ------

def test_recorded_results_are_freed_without_the_garbage_collector():
    """The rules recorded for a result hold no reference to it (a result -> node -> rule ->
    result cycle kept every call's arrays alive until a collection: W1's jitted nested
    grads ran with tens of megabytes of dead results in memory)."""
    import gc
    import weakref

    def halve_grad(v):
        return v

    halve = pf.custom_vjp(halve_grad)
    halve.defvjp(lambda v: (v, None), lambda res, g: (g * 0.5,))
    jitted = pf.jit(lambda v: pf.tanh(v) * 2.0)
    x = t64(np.linspace(-1.0, 1.0, 8), stop_gradient=False)
    jitted(x)  # compiled before collection is switched off
    calls = {"jit": lambda: jitted(x), "custom_vjp": lambda: halve(x * 1.0),
             "PyLayer": lambda: Cube.apply(x)}
    gc.collect()
    gc.disable()
    try:
        for name, call in calls.items():
            out = call()
            assert not out.stop_gradient, name
            array, tensor = weakref.ref(out._value), weakref.ref(out)
            del out
            assert tensor() is None and array() is None, f"{name}: result kept alive"
    finally:
        gc.enable()
    # the rules still work without the results
    (g,) = pf.grad(jitted(x).sum() + halve(x).sum() + Cube.apply(x).sum(), x)
    expected = 2.0 / np.cosh(np.linspace(-1.0, 1.0, 8)) ** 2 + 0.5 + 3 * np.linspace(
        -1.0, 1.0, 8) ** 2
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)
