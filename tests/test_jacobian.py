"""Paddle-style lazy pf.autograd.jacobian / hessian: shapes, laziness, blocks, batching and
values against float64 finite differences and closed forms."""

import importlib

import numpy as np
import pytest

import primflow as pf

# the module (the package re-exports a function of the same name)
jac_mod = importlib.import_module("primflow.transforms.paddle_jacobian")

RNG = np.random.default_rng(7)
W = RNG.normal(size=(3, 4))


def t64(a, requires_grad=True):
    return pf.to_tensor(np.asarray(a, dtype=np.float64), stop_gradient=not requires_grad)


def f_np(x):
    """R^3 -> R^4 test function (numpy reference)."""
    return np.tanh(x @ W) + np.sin(x).sum() * np.arange(1.0, 5.0)


def f_pf(x):
    return pf.tanh(x @ pf.to_tensor(W)) + pf.sin(x).sum() * pf.to_tensor(np.arange(1.0, 5.0))


def fd_jacobian(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        e = e.reshape(x.shape)
        cols.append(((f(x + e) - f(x - e)) / (2 * eps)).ravel())
    return np.stack(cols, axis=-1)


@pytest.fixture
def count_passes(monkeypatch):
    """Counts the backward passes the Jacobian engine runs (one per row)."""
    calls = []
    real = jac_mod.grad

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(jac_mod, "grad", counting)
    return calls


class TestJacobian:
    x0 = np.array([0.3, -0.2, 0.5])

    def test_dense_values(self):
        x = t64(self.x0)
        J = pf.autograd.jacobian(f_pf(x), x)
        assert J.shape == [4, 3]
        dense = J[:]
        assert isinstance(dense, pf.Tensor) and dense.shape == [4, 3]
        np.testing.assert_allclose(dense.numpy(), fd_jacobian(f_np, self.x0), rtol=1e-6,
                                   atol=1e-9)

    def test_lazy_rows(self, count_passes):
        x = t64(self.x0)
        J = pf.autograd.jacobian(f_pf(x), x)
        assert count_passes == []  # nothing computed until indexed
        ref = fd_jacobian(f_np, self.x0)
        row = J[2]
        assert row.shape == [3]
        np.testing.assert_allclose(row.numpy(), ref[2], rtol=1e-6, atol=1e-9)
        assert len(count_passes) == 1  # only row 2
        assert sorted(J._engine.rows) == [2]
        J[2]
        J[-2]  # the same row, cached
        assert len(count_passes) == 1
        np.testing.assert_allclose(J[1, 2].numpy(), ref[1, 2], rtol=1e-6)
        assert len(count_passes) == 2
        np.testing.assert_allclose(J[0:2].numpy(), ref[0:2], rtol=1e-6, atol=1e-9)
        assert len(count_passes) == 3  # row 0 is new, row 1 cached
        np.testing.assert_allclose(J[:].numpy(), ref, rtol=1e-6, atol=1e-9)
        assert len(count_passes) == 4  # only row 3 was missing
        np.testing.assert_allclose(J[:, 1].numpy(), ref[:, 1], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(J[::-2].numpy(), ref[::-2], rtol=1e-6, atol=1e-9)
        assert len(count_passes) == 4

    def test_rows_are_shared_between_input_blocks(self, count_passes):
        x1, x2 = t64([1.0, 2.0]), t64([3.0, 4.0, 5.0])
        y = pf.stack([x1.sum() * x2.sum(), (x1 ** 2).sum()])
        J1, J2 = pf.autograd.jacobian(y, (x1, x2))
        J1[0]
        J2[0]
        assert len(count_passes) == 1  # one backward pass serves both inputs
        np.testing.assert_allclose(J1[:].numpy(), [[12.0, 12.0], [2.0, 4.0]])
        np.testing.assert_allclose(J2[:].numpy(), [[3.0, 3.0, 3.0], [0.0, 0.0, 0.0]])

    def test_tuple_inputs_and_outputs_give_nested_blocks(self):
        x1, x2 = t64([1.0, 2.0, 3.0]), t64([4.0, 5.0])
        y1 = x1 * x1
        y2 = pf.stack([x1.sum() * x2[0], x2[1] ** 3])
        J = pf.autograd.jacobian((y1, y2), (x1, x2))
        assert len(J) == 2 and len(J[0]) == 2
        assert J[0][0].shape == [3, 3] and J[0][1].shape == [3, 2]
        assert J[1][0].shape == [2, 3] and J[1][1].shape == [2, 2]
        np.testing.assert_allclose(J[0][0][:].numpy(), np.diag([2.0, 4.0, 6.0]))
        np.testing.assert_allclose(J[0][1][:].numpy(), np.zeros((3, 2)))
        np.testing.assert_allclose(J[1][0][:].numpy(), [[4.0, 4.0, 4.0], [0.0, 0.0, 0.0]])
        np.testing.assert_allclose(J[1][1][:].numpy(), [[6.0, 0.0], [0.0, 75.0]])
        # one output, tuple inputs: a flat tuple; tuple outputs, one input: a flat tuple
        Jx = pf.autograd.jacobian(x1 * 2.0, (x1, x2))
        assert len(Jx) == 2 and Jx[1].shape == [3, 2]
        Jy = pf.autograd.jacobian((x1 * 2.0, x2 * 3.0), x2)
        assert len(Jy) == 2 and Jy[0].shape == [3, 2]
        np.testing.assert_allclose(Jy[1][:].numpy(), 3.0 * np.eye(2))

    def test_scalar_and_multidim_shapes(self):
        x = t64([1.0, 2.0, 3.0])
        s = t64(2.0)
        J = pf.autograd.jacobian((x * x).sum(), x)
        assert J.shape == [3]
        np.testing.assert_allclose(J[:].numpy(), [2.0, 4.0, 6.0])
        Js = pf.autograd.jacobian(x * s, s)
        assert Js.shape == [3] and Js[:].shape == [3]
        np.testing.assert_allclose(Js[:].numpy(), [1.0, 2.0, 3.0])
        Jss = pf.autograd.jacobian(s * s, s)
        assert Jss.shape == [] and Jss[()].shape == []
        np.testing.assert_allclose(Jss[()].numpy(), 4.0)
        with pytest.raises(IndexError, match=r"J\[\(\)\]"):  # NumPy and Paddle refuse it
            Jss[:]
        m = t64(np.arange(6.0).reshape(2, 3))
        Jm = pf.autograd.jacobian(m * 2.0, m)  # multi-dim tensors are flattened
        assert Jm.shape == [6, 6]
        np.testing.assert_allclose(Jm[:].numpy(), 2.0 * np.eye(6))

    def test_unrelated_output_gives_zeros(self):
        x, u = t64([1.0, 2.0]), t64([3.0, 4.0, 5.0])
        J = pf.autograd.jacobian(x * 2.0, u)
        np.testing.assert_array_equal(J[:].numpy(), np.zeros((2, 3)))

    def test_jacobian_is_differentiable(self):
        x = t64([0.5, 1.5])
        J = pf.autograd.jacobian(x ** 3, x)
        (g,) = pf.grad(J[:].sum(), x)  # d/dx sum(diag(3 x^2)) = 6 x
        np.testing.assert_allclose(g.numpy(), 6.0 * np.array([0.5, 1.5]))

    def test_batched(self):
        B = 5
        xb = RNG.normal(size=(B, 3))
        x = t64(xb)
        y = pf.tanh(x @ pf.to_tensor(W)) * x.sum(axis=1, keepdim=True)
        J = pf.autograd.jacobian(y, x, batch_axis=0)
        assert J.shape == [B, 4, 3]
        dense = J[:]
        assert dense.shape == [B, 4, 3]
        for b in range(B):
            ref = fd_jacobian(lambda v: np.tanh(v @ W) * v.sum(), xb[b])
            np.testing.assert_allclose(dense.numpy()[b], ref, rtol=1e-6, atol=1e-9)
        assert J[:, 2].shape == [B, 3]
        np.testing.assert_allclose(J[:, 2].numpy(), dense.numpy()[:, 2])
        np.testing.assert_allclose(J[1].numpy(), dense.numpy()[1])

    def test_batched_shape_mismatch(self):
        x = t64(np.ones((4, 2)))
        with pytest.raises(ValueError, match="batch"):
            pf.autograd.jacobian(x[:3] * 2.0, x, batch_axis=0)

    def test_input_must_require_grad(self):
        x = t64([1.0, 2.0], requires_grad=False)
        with pytest.raises(RuntimeError, match="stop_gradient"):
            pf.autograd.jacobian(x * 2.0, x)


class TestHessian:
    def test_values_against_closed_form(self):
        a = np.array([0.4, -0.3, 0.9])
        x = t64(a)
        y = (pf.sin(x) * x).sum() + x[0] * x[1] * x[2]
        H = pf.autograd.hessian(y, x)
        assert H.shape == [3, 3]
        ref = np.diag(2 * np.cos(a) - a * np.sin(a))
        ref += np.array([[0, a[2], a[1]], [a[2], 0, a[0]], [a[1], a[0], 0]])
        np.testing.assert_allclose(H[:].numpy(), ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(H[1].numpy(), ref[1], rtol=1e-12, atol=1e-14)

    def test_values_against_finite_differences(self):
        a = np.array([0.2, 0.7, -0.5, 1.1])
        A = RNG.normal(size=(4, 4))

        def g_np(v):  # gradient of f(v) = log(1 + (A v)^2).sum() + exp(v).prod()
            u = A @ v
            return A.T @ (2 * u / (1 + u ** 2)) + np.exp(v).prod() * np.ones(4)

        x = t64(a)
        u = pf.to_tensor(A) @ x
        y = pf.log(1.0 + u * u).sum() + pf.exp(x).prod()
        H = pf.autograd.hessian(y, x)[:]
        np.testing.assert_allclose(H.numpy(), fd_jacobian(g_np, a), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(H.numpy(), H.numpy().T, rtol=1e-12)

    def test_tuple_inputs_give_blocks(self):
        a1, a2 = np.array([0.5, 1.0, 1.5]), np.array([2.0, -1.0])
        x1, x2 = t64(a1), t64(a2)
        y = (x1 ** 3).sum() + (x1[:2] * x2).sum() + (x2 ** 2).sum() * x1[2]
        H = pf.autograd.hessian(y, (x1, x2))
        assert H[0][0].shape == [3, 3] and H[0][1].shape == [3, 2]
        assert H[1][0].shape == [2, 3] and H[1][1].shape == [2, 2]
        np.testing.assert_allclose(H[0][0][:].numpy(), np.diag(6 * a1))
        h01 = np.array([[1.0, 0.0], [0.0, 1.0], 2 * a2])
        np.testing.assert_allclose(H[0][1][:].numpy(), h01)
        np.testing.assert_allclose(H[1][0][:].numpy(), h01.T)
        np.testing.assert_allclose(H[1][1][:].numpy(), 2 * a1[2] * np.eye(2))

    def test_batched(self):
        B = 4
        xb = RNG.normal(size=(B, 3))
        x = t64(xb)
        y = (x ** 3).sum(axis=1) + x[:, 0] * x[:, 1]
        H = pf.autograd.hessian(y, x, batch_axis=0)
        assert H.shape == [B, 3, 3]
        dense = H[:].numpy()
        assert dense.shape == (B, 3, 3)
        for b in range(B):
            ref = np.diag(6 * xb[b])
            ref[0, 1] = ref[1, 0] = 1.0
            np.testing.assert_allclose(dense[b], ref, rtol=1e-12)
        # [B, 1] outputs are accepted too
        H1 = pf.autograd.hessian((x ** 2).sum(axis=1, keepdim=True), x, batch_axis=0)
        np.testing.assert_allclose(H1[:].numpy(), np.broadcast_to(2 * np.eye(3), (B, 3, 3)))

    def test_needs_a_scalar(self):
        x = t64([1.0, 2.0])
        with pytest.raises(ValueError, match="scalar"):
            pf.autograd.hessian(x * x, x)

    def test_linear_function_has_zero_hessian(self):
        x = t64([1.0, 2.0])
        H = pf.autograd.hessian((x * 3.0).sum(), x)
        np.testing.assert_array_equal(H[:].numpy(), np.zeros((2, 2)))


# ---- Paddle's lazy objects: arithmetic, comparisons, attributes; pf.incubate.autograd -------

def test_lazy_jacobian_and_hessian_act_as_their_dense_value():
    x = t64([1.0, 2.0])
    H = pf.autograd.hessian((x ** 3).sum(), x)  # diag(6x)
    dense = np.diag([6.0, 12.0])
    np.testing.assert_allclose((H + 1.0).numpy(), dense + 1.0)
    np.testing.assert_allclose((2.0 * H).numpy(), 2.0 * dense)
    np.testing.assert_allclose((H @ H).numpy(), dense @ dense)
    np.testing.assert_allclose((-H).numpy(), -dense)
    np.testing.assert_array_equal((H > 7.0).numpy(), dense > 7.0)
    np.testing.assert_array_equal((H == H).numpy(), np.ones((2, 2), bool))
    assert H.dtype == "float64" and not H.stop_gradient and H.shape == [2, 2]
    np.testing.assert_allclose(np.asarray(H), dense)
    with pytest.raises(IndexError, match=r"'\.\.\.'"):
        H[..., 0]


def test_incubate_autograd_against_closed_forms():
    inc = pf.incubate.autograd
    x = t64([0.5, -1.0], requires_grad=False)
    y = t64([2.0, 3.0], requires_grad=False)
    f = lambda a, b: pf.sin(a) * b  # noqa: E731
    out, (ga, gb) = inc.vjp(f, [x, y], [pf.ones_like(x)])
    np.testing.assert_allclose(ga.numpy(), np.cos(x.numpy()) * y.numpy())
    np.testing.assert_allclose(gb.numpy(), np.sin(x.numpy()))
    _, tangent = inc.jvp(f, [x, y], [pf.ones_like(x), pf.zeros_like(y)])
    np.testing.assert_allclose(tangent.numpy(), np.cos(x.numpy()) * y.numpy())
    J = inc.Jacobian(f, [x, y])  # [M, N1 + N2]
    np.testing.assert_allclose(J[:].numpy(), np.hstack([np.diag(np.cos(x.numpy()) * y.numpy()),
                                                        np.diag(np.sin(x.numpy()))]))
    H = inc.Hessian(lambda a: (a ** 4).sum(), x)
    np.testing.assert_allclose(H[:].numpy(), np.diag(12 * x.numpy() ** 2))
    Hb = inc.Hessian(lambda a: (a ** 3).sum(axis=1), t64([[1.0, 2.0], [3.0, 4.0]]),
                     is_batched=True)
    np.testing.assert_allclose(Hb[:].numpy(), [np.diag([6.0, 12.0]), np.diag([18.0, 24.0])])
    with pytest.raises(RuntimeError, match="shapes"):
        inc.vjp(f, [x, y], [pf.ones([3])])
    with pytest.raises(RuntimeError, match="one value"):
        inc.Hessian(lambda a: a * a, x)
