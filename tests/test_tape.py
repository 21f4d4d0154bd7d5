"""Tape semantics: pf.grad, pf.autograd.backward, Tensor.backward, accumulation, no_grad,
graph freeing, retain_graph, create_graph to high order, no_grad_vars."""

import gc
import math
import weakref

import numpy as np
import pytest

import primflow as pf


def t64(values, requires_grad=True):
    return pf.to_tensor(np.asarray(values, dtype=np.float64), stop_gradient=not requires_grad)


def fd_grad(f, x, eps=1e-6):
    """Central finite differences of a scalar numpy function, float64."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


# ---- pf.grad --------------------------------------------------------------------------------

class TestGrad:
    def test_matches_finite_differences(self):
        rng = np.random.default_rng(0)
        a = rng.uniform(0.5, 1.5, size=(3, 4))
        w = rng.normal(size=(4, 2))

        def f_np(v):
            return np.sum(np.tanh(v @ w) ** 2) + np.sum(np.log(v) * np.sin(v))

        x = t64(a)
        y = (pf.tanh(x @ pf.to_tensor(w)) ** 2).sum() + (pf.log(x) * pf.sin(x)).sum()
        np.testing.assert_allclose(y.item(), f_np(a), rtol=1e-12)
        (g,) = pf.grad(y, x)
        np.testing.assert_allclose(g.numpy(), fd_grad(f_np, a), rtol=1e-6, atol=1e-8)
        assert g.dtype == "float64" and g.shape == [3, 4]
        assert g.stop_gradient  # no create_graph: a plain value

    def test_returns_a_list_one_per_input(self):
        x, y = t64([1.0, 2.0]), t64(3.0)
        out = (x * y).sum() + y ** 2
        grads = pf.grad(out, [x, y])
        assert isinstance(grads, list) and len(grads) == 2
        np.testing.assert_allclose(grads[0].numpy(), [3.0, 3.0])
        np.testing.assert_allclose(grads[1].numpy(), 3.0 + 6.0)
        (only,) = pf.grad((x * y).sum(), x)
        np.testing.assert_allclose(only.numpy(), [3.0, 3.0])

    def test_grad_does_not_touch_dot_grad(self):
        x = t64([1.0, 2.0])
        pf.grad((x * x).sum(), x)
        assert x.grad is None

    def test_non_leaf_inputs(self):
        x = t64([1.0, 2.0, 3.0])
        h = x * 3.0
        z = (h * h).sum()
        gh, gx = pf.grad(z, [h, x])
        np.testing.assert_allclose(gh.numpy(), 2 * 3.0 * np.array([1.0, 2.0, 3.0]))
        np.testing.assert_allclose(gx.numpy(), 18.0 * np.array([1.0, 2.0, 3.0]))

    def test_grad_outputs(self):
        x = t64([1.0, 2.0, 3.0])
        y = x * x
        v = pf.to_tensor([1.0, -1.0, 0.5], dtype="float64")
        (g,) = pf.grad(y, x, grad_outputs=v)
        np.testing.assert_allclose(g.numpy(), 2 * np.array([1.0, 2.0, 3.0]) * v.numpy())
        # lists, and None for a scalar output
        y2 = x * x
        s = x.sum()
        (g2,) = pf.grad([y2, s], [x], grad_outputs=[v, None])
        np.testing.assert_allclose(g2.numpy(), g.numpy() + 1.0)

    def test_multiple_outputs_sum(self):
        x = t64([1.0, 2.0])
        (g,) = pf.grad([x.sum(), (x ** 2).sum()], x)
        np.testing.assert_allclose(g.numpy(), [3.0, 5.0])

    def test_output_is_the_input(self):
        x = t64([1.0, 2.0])
        (g,) = pf.grad(x, x, grad_outputs=pf.ones_like(x))
        np.testing.assert_allclose(g.numpy(), [1.0, 1.0])

    def test_allow_unused(self):
        x, u = t64([1.0, 2.0]), t64(5.0)
        gx, gu = pf.grad((x * 2.0).sum(), [x, u], allow_unused=True)
        assert gu is None
        np.testing.assert_allclose(gx.numpy(), [2.0, 2.0])

    def test_no_grad_vars(self):
        x = t64([1.0, 2.0, 3.0])
        h = x * 3.0
        z = (h * x).sum()
        (g,) = pf.grad(z, x, no_grad_vars=[h])  # h treated as a constant
        np.testing.assert_allclose(g.numpy(), [3.0, 6.0, 9.0])
        h2 = x * 3.0
        (g_all,) = pf.grad((h2 * x).sum(), x)
        np.testing.assert_allclose(g_all.numpy(), [6.0, 12.0, 18.0])

    def test_diamond_graph_accumulates(self):
        x = t64(1.5)
        a = pf.sin(x)
        b = a * a + a * 3.0 + pf.exp(a)  # a used three times
        (g,) = pf.grad(b, x)
        s, c = math.sin(1.5), math.cos(1.5)
        np.testing.assert_allclose(g.item(), (2 * s + 3 + math.exp(s)) * c, rtol=1e-12)

    def test_broadcast_gradients_reduce_to_input_shape(self):
        a = t64(np.ones((3, 1)))
        b = t64(np.arange(4.0))
        c = t64(2.0)
        (a * b + c).sum().backward()
        assert a.grad.shape == [3, 1] and b.grad.shape == [4] and c.grad.shape == []
        np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 6.0))
        np.testing.assert_allclose(b.grad.numpy(), np.full(4, 3.0))
        np.testing.assert_allclose(c.grad.numpy(), 12.0)

    def test_dtype_of_gradient_follows_input(self):
        x = pf.to_tensor([1.0, 2.0], stop_gradient=False)  # float32
        (g,) = pf.grad((x.astype("float64") ** 2).sum(), x)
        assert g.dtype == "float32"
        np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


# ---- backward and accumulation --------------------------------------------------------------

class TestBackward:
    def test_tensor_backward_accumulates_over_calls(self):
        x = t64([1.0, 2.0])
        y = (x ** 3).sum()
        y.backward(retain_graph=True)
        np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), [6.0, 24.0])
        x.clear_grad()
        (x * 2.0).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])

    def test_backward_with_seed(self):
        x = t64([1.0, 2.0, 3.0])
        seed = pf.to_tensor([1.0, 0.0, 2.0], dtype="float64")
        (x * x).backward(seed)
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, 12.0])
        x.clear_grad()
        (x * x).backward(grad=seed)  # DESIGN's keyword
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, 12.0])
        x.clear_grad()
        (x * x).backward(grad_tensor=seed)  # Paddle's keyword
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, 12.0])

    def test_autograd_backward(self):
        x = t64([1.0, 2.0])
        y1 = (x * x).sum()
        y2 = x * 2.0
        pf.autograd.backward([y1, y2], [None, pf.to_tensor([1.0, 3.0], dtype="float64")])
        np.testing.assert_allclose(x.grad.numpy(), [2.0 + 2.0, 4.0 + 6.0])
        pf.autograd.backward((x ** 2).sum())
        np.testing.assert_allclose(x.grad.numpy(), [4.0 + 2.0, 10.0 + 4.0])

    def test_backward_reaches_every_leaf(self):
        w = t64(np.array([[1.0, 2.0], [3.0, 4.0]]))
        b = t64([0.5, -0.5])
        x = pf.to_tensor([[1.0, 1.0]], dtype="float64")
        loss = ((x @ w + b) ** 2).sum()
        loss.backward()
        out = np.array([[1.0, 1.0]]) @ w.numpy() + b.numpy()
        np.testing.assert_allclose(w.grad.numpy(), np.array([[1.0], [1.0]]) @ (2 * out))
        np.testing.assert_allclose(b.grad.numpy(), 2 * out[0])
        assert x.grad is None

    def test_intermediate_tensors_get_no_grad(self):
        x = t64([1.0, 2.0])
        h = x * 2.0
        (h * h).sum().backward()
        assert h.grad is None
        np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])


# ---- no_grad --------------------------------------------------------------------------------

class TestNoGrad:
    def test_no_grad_records_nothing(self):
        x = t64([1.0, 2.0])
        with pf.no_grad():
            y = x * 2.0
            assert not pf.is_grad_enabled()
        assert pf.is_grad_enabled()
        assert y.stop_gradient and y.is_leaf and y._node is None
        # Paddle: backward() on a constant does nothing (primflow warns); grad() refuses
        with pytest.warns(UserWarning, match="does not require grad"):
            y.sum().backward()
        with pytest.raises(RuntimeError, match="does not require grad"):
            pf.grad(y.sum(), x)

    def test_no_grad_decorator_and_enable_grad(self):
        x = t64([1.0, 2.0])

        @pf.no_grad()
        def f(v):
            return v * v

        assert f(x).stop_gradient
        with pf.no_grad():
            with pf.enable_grad():
                z = x * x
        assert not z.stop_gradient
        with pf.set_grad_enabled(False):
            assert (x * x).stop_gradient

    def test_no_grad_restores_state_after_exception(self):
        with pytest.raises(ZeroDivisionError):
            with pf.no_grad():
                1 / 0
        assert pf.is_grad_enabled()


# ---- graph memory ---------------------------------------------------------------------------

class TestGraphMemory:
    def test_graph_is_freed_after_backward(self):
        x = t64([1.0, 2.0])
        h = pf.exp(x)
        y = (h * x).sum()
        node = weakref.ref(h._node)
        y.backward()
        n = node()
        assert n is None or (n.freed and n.inputs is None)

    def test_second_backward_raises_with_retain_graph_hint(self):
        x = t64([1.0, 2.0])
        y = (x * x).sum()
        y.backward()
        with pytest.raises(RuntimeError) as e:
            y.backward()
        assert "retain_graph" in str(e.value) and "second time" in str(e.value)
        z = (x * x).sum()
        pf.grad(z, x)
        with pytest.raises(RuntimeError, match="retain_graph"):
            pf.grad(z, x)

    def test_retain_graph_keeps_values(self):
        x = t64([1.0, 2.0])
        h = pf.sin(x)
        y = (h * h).sum()
        (g1,) = pf.grad(y, x, retain_graph=True)
        assert not h._node.freed
        (g2,) = pf.grad(y, x)
        np.testing.assert_allclose(g1.numpy(), g2.numpy())
        assert h._node.freed

    def test_create_graph_retains_by_default(self):
        x = t64(2.0)
        y = x ** 3
        pf.grad(y, x, create_graph=True)
        (g,) = pf.grad(y, x)  # still possible: retain_graph defaults to create_graph
        np.testing.assert_allclose(g.item(), 12.0)

    def test_nodes_are_collected_once_unreferenced(self):
        x = t64([1.0, 2.0])
        y = (pf.exp(x) * 2.0).sum()
        ref = weakref.ref(y._node)
        del y
        gc.collect()
        assert ref() is None


# ---- higher order ---------------------------------------------------------------------------

def _nth_grad(f, x, n):
    out = f(x)
    for _ in range(n):
        (out,) = pf.grad(out, x, create_graph=True)
    return out


class TestHigherOrder:
    x0 = 0.7

    @pytest.mark.parametrize("f,d5", [
        (pf.exp, lambda v: math.exp(v)),
        (pf.sin, lambda v: math.cos(v)),
        (pf.cos, lambda v: -math.sin(v)),
        (lambda x: x ** 6, lambda v: 720.0 * v),
        (lambda x: pf.log(x), lambda v: 24.0 / v ** 5),
        (lambda x: 1.0 / x, lambda v: -120.0 / v ** 6),
    ], ids=["exp", "sin", "cos", "x^6", "log", "1/x"])
    def test_fifth_derivative(self, f, d5):
        x = t64(self.x0)
        np.testing.assert_allclose(_nth_grad(f, x, 5).item(), d5(self.x0), rtol=1e-10)

    def test_derivatives_of_x6_all_orders(self):
        x = t64(self.x0)
        v = self.x0
        expected = [v ** 6, 6 * v ** 5, 30 * v ** 4, 120 * v ** 3, 360 * v ** 2, 720 * v, 720.0]
        out = x ** 6
        for k in range(7):
            np.testing.assert_allclose(out.item(), expected[k], rtol=1e-12)
            if k < 6:
                (out,) = pf.grad(out, x, create_graph=True)
        # the 6th derivative no longer depends on x: a constant, off the graph. As in Paddle,
        # create_graph=True still hands it out with stop_gradient=False
        assert out.is_leaf and not out.stop_gradient
        assert pf.grad(out, x, allow_unused=True) == [None]

    def test_vector_second_order(self):
        x = t64([0.3, -0.4, 1.1])
        y = (pf.sin(x) * x).sum()
        (g,) = pf.grad(y, x, create_graph=True)
        assert not g.stop_gradient
        (h,) = pf.grad(g.sum(), x)
        xv = x.numpy()
        np.testing.assert_allclose(h.numpy(), 2 * np.cos(xv) - xv * np.sin(xv), rtol=1e-12)

    def test_mixed_partials(self):
        x, y = t64(0.5), t64(1.3)
        f = pf.exp(x * y) + x ** 2 * y
        (fx,) = pf.grad(f, x, create_graph=True)
        (fxy,) = pf.grad(fx, y, create_graph=True)
        (fxyy,) = pf.grad(fxy, y)
        xv, yv = 0.5, 1.3
        e = math.exp(xv * yv)
        np.testing.assert_allclose(fxy.item(), e + xv * yv * e + 2 * xv, rtol=1e-12)
        np.testing.assert_allclose(fxyy.item(), 2 * xv * e + xv * xv * yv * e, rtol=1e-12)

    def test_gradient_of_gradient_through_backward(self):
        # Tensor.backward after a create_graph grad: the gradient of |grad f|^2
        x = t64([1.0, 2.0])
        (g,) = pf.grad((x ** 3).sum(), x, create_graph=True)
        (g * g).sum().backward()
        xv = np.array([1.0, 2.0])
        np.testing.assert_allclose(x.grad.numpy(), 2 * (3 * xv ** 2) * 6 * xv)


# ---- Tensor.register_hook / retain_grads / gradient (Paddle) -------------------------------

class TestHooks:
    def test_hook_on_a_computed_tensor_sees_and_replaces_its_gradient(self):
        x = t64([1.0, 2.0])
        y = x * x  # dy/dx = 2x
        seen = []
        y.register_hook(lambda g: seen.append(g.numpy()))
        y.register_hook(lambda g: g * 10.0)  # replaces the gradient flowing on
        (y * 3.0).sum().backward()
        np.testing.assert_allclose(seen[0], [3.0, 3.0])
        np.testing.assert_allclose(x.grad.numpy(), 10.0 * 3.0 * 2.0 * np.array([1.0, 2.0]))

    def test_hook_on_a_leaf_changes_what_accumulates(self):
        x = t64([1.0, -1.0])
        handle = x.register_hook(lambda g: g * 0.5)
        (x * 4.0).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
        (dx,) = pf.grad((x * 4.0).sum(), x)  # grad() honours leaf hooks too
        np.testing.assert_allclose(dx.numpy(), [2.0, 2.0])
        handle.remove()
        x.clear_grad()
        (x * 4.0).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])

    def test_hook_in_a_recorded_backward_is_differentiable(self):
        x = t64([0.5])
        y = pf.sin(x)
        handle = y.register_hook(lambda g: g * y)
        (dx,) = pf.grad(y, x, create_graph=True)
        np.testing.assert_allclose(dx.numpy(), np.sin(0.5) * np.cos(0.5))
        handle.remove()  # (else it would scale the gradient at y in the next pass too)
        (d2x,) = pf.grad(dx, x)  # d/dx of sin(x) cos(x) = cos(2x)
        np.testing.assert_allclose(d2x.numpy(), np.cos(1.0))

    def test_retain_grads_and_gradient(self):
        x = t64([1.0, 2.0])
        y = x * 3.0
        y.retain_grads()
        (y * y).sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), 2 * 3.0 * np.array([1.0, 2.0]))
        np.testing.assert_allclose(x.gradient(), 18.0 * np.array([1.0, 2.0]))
        assert t64([1.0]).gradient() is None

    def test_hook_errors(self):
        x = t64([1.0])
        with pytest.raises(TypeError, match="callable"):
            x.register_hook(3)
        with pytest.raises(RuntimeError, match="does not require grad"):
            t64([1.0], requires_grad=False).register_hook(lambda g: g)
        x.register_hook(lambda g: pf.ones([3], dtype="float64"))
        with pytest.raises(ValueError, match="shape"):
            (x * 2.0).sum().backward()
