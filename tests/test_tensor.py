"""The Tensor API: creation, dtypes and promotion, operators, methods, grad flags, repr."""

import numpy as np
import pytest

import primflow as pf


@pytest.fixture
def default_dtype():
    """Restores the default dtype after a test that changes it."""
    before = pf.get_default_dtype()
    yield
    pf.set_default_dtype(before)


def assert_tensor(t, expected, dtype=None, rtol=1e-6, atol=1e-7):
    expected = np.asarray(expected)
    assert isinstance(t, pf.Tensor)
    assert t.shape == list(expected.shape)
    if dtype is not None:
        assert t.dtype == dtype, (t.dtype, dtype)
    np.testing.assert_allclose(t.numpy(), expected, rtol=rtol, atol=atol)


# ---- creation -------------------------------------------------------------------------------

class TestCreation:
    def test_to_tensor_infers_dtypes(self):
        assert pf.to_tensor([1.0, 2.0]).dtype == "float32"
        assert pf.to_tensor([1, 2]).dtype == "int64"
        assert pf.to_tensor([True, False]).dtype == "bool"
        assert pf.to_tensor(2.5).shape == []
        assert pf.to_tensor(np.zeros(3, np.float64)).dtype == "float64"
        assert pf.to_tensor(np.zeros(3, np.int32)).dtype == "int32"
        assert pf.to_tensor([1, 2], dtype="float64").dtype == pf.float64
        assert pf.to_tensor([1.5], dtype=pf.int32).numpy().tolist() == [1]

    def test_to_tensor_copies_and_defaults_to_stop_gradient(self):
        a = np.array([1.0, 2.0])
        t = pf.to_tensor(a)
        a[0] = 100.0
        assert t.numpy().tolist() == [1.0, 2.0]
        assert t.stop_gradient is True and t.requires_grad is False
        u = pf.to_tensor(t, stop_gradient=False)
        assert u.stop_gradient is False and u.is_leaf
        assert pf.tensor([1.0]).numpy().tolist() == [1.0]

    def test_numpy_returns_a_copy(self):
        t = pf.to_tensor([1.0, 2.0])
        arr = t.numpy()
        arr[0] = 7.0
        assert t.numpy()[0] == 1.0

    def test_constant_fills(self):
        assert_tensor(pf.zeros([2, 3]), np.zeros((2, 3)), "float32")
        assert_tensor(pf.ones([4]), np.ones(4), "float32")
        assert_tensor(pf.ones((2,), dtype="int32"), np.ones(2), "int32")
        assert_tensor(pf.zeros([2], dtype="float64"), np.zeros(2), "float64")
        assert_tensor(pf.full([2, 2], 3.5), np.full((2, 2), 3.5), "float32")
        assert_tensor(pf.full([3], 7), np.full(3, 7), "int64")
        assert_tensor(pf.full([3], True), np.full(3, True), "bool")
        assert_tensor(pf.full([2], 1.0, dtype="float64"), np.ones(2), "float64")
        assert pf.zeros([0, 3]).shape == [0, 3]

    def test_arange(self):
        assert_tensor(pf.arange(5), np.arange(5), "int64")
        assert_tensor(pf.arange(2, 11, 3), np.arange(2, 11, 3), "int64")
        assert_tensor(pf.arange(5, 0, -2), np.arange(5, 0, -2), "int64")
        assert_tensor(pf.arange(1, 2, 0.25), np.arange(1, 2, 0.25), "float32")
        assert_tensor(pf.arange(0.0, 1.0, 0.1, dtype="float64"), np.arange(0.0, 1.0, 0.1),
                      "float64", rtol=1e-12)
        assert pf.arange(3, 3).shape == [0]
        with pytest.raises(ValueError, match="step"):
            pf.arange(0, 3, 0)

    def test_linspace(self):
        assert_tensor(pf.linspace(-1, 1, 5), np.linspace(-1, 1, 5), "float32")
        out = pf.linspace(0.0, 1.0, 7, dtype="float64")
        assert_tensor(out, np.linspace(0.0, 1.0, 7), "float64", rtol=1e-15)
        assert out.numpy()[-1] == 1.0  # the end point is exact
        assert_tensor(pf.linspace(2.0, 3.0, 1), [2.0])

    def test_eye(self):
        assert_tensor(pf.eye(3), np.eye(3), "float32")
        assert_tensor(pf.eye(2, 4, dtype="float64"), np.eye(2, 4), "float64")

    def test_like_functions(self):
        x = pf.to_tensor([[1, 2, 3]], dtype="int32")
        assert_tensor(pf.zeros_like(x), np.zeros((1, 3)), "int32")
        assert_tensor(pf.ones_like(x), np.ones((1, 3)), "int32")
        assert_tensor(pf.full_like(x, 4), np.full((1, 3), 4), "int32")
        assert_tensor(pf.ones_like(x, dtype="float64"), np.ones((1, 3)), "float64")
        assert_tensor(pf.full_like(pf.ones([2]), 2.5), [2.5, 2.5], "float32")
        # like-functions never take part in the graph
        y = pf.ones([2], dtype="float64")
        y.stop_gradient = False
        assert pf.zeros_like(y).stop_gradient

    def test_rand_and_randn(self):
        pf.seed(1)
        u = pf.rand([2000])
        assert u.shape == [2000] and u.dtype == "float32"
        un = u.numpy()
        assert un.min() >= 0.0 and un.max() < 1.0
        assert abs(un.mean() - 0.5) < 0.05
        z = pf.randn([4000], dtype="float64").numpy()
        assert z.dtype == np.float64
        assert abs(z.mean()) < 0.1 and abs(z.std() - 1.0) < 0.1
        assert pf.rand([2, 3]).shape == [2, 3]

    def test_uniform_and_normal(self):
        pf.seed(2)
        u = pf.uniform([3000], min=2.0, max=5.0).numpy()
        assert u.min() >= 2.0 and u.max() < 5.0 and abs(u.mean() - 3.5) < 0.1
        d = pf.uniform([4], dtype="float64")
        assert d.dtype == "float64" and np.all(np.abs(d.numpy()) <= 1.0)
        n = pf.normal(3.0, 0.5, [4000]).numpy()
        assert abs(n.mean() - 3.0) < 0.05 and abs(n.std() - 0.5) < 0.05
        assert pf.normal(shape=[2, 2]).shape == [2, 2]

    def test_normal_with_tensor_mean(self):
        mean = pf.to_tensor([0.0, 100.0, -100.0], dtype="float64")
        out = pf.normal(mean, 1e-3)
        assert out.shape == [3] and out.dtype == "float64"
        np.testing.assert_allclose(out.numpy(), mean.numpy(), atol=0.01)

    def test_seed_reproducibility(self):
        pf.seed(123)
        a = [pf.rand([5]).numpy(), pf.randn([3]).numpy(), pf.uniform([2]).numpy(),
             pf.normal(shape=[2]).numpy()]
        pf.seed(123)
        b = [pf.rand([5]).numpy(), pf.randn([3]).numpy(), pf.uniform([2]).numpy(),
             pf.normal(shape=[2]).numpy()]
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        # consecutive draws differ, and a different seed gives different values
        assert not np.array_equal(pf.rand([5]).numpy(), pf.rand([5]).numpy())
        pf.seed(124)
        assert not np.array_equal(pf.rand([5]).numpy(), a[0])

    def test_bad_seed(self):
        with pytest.raises(ValueError, match="seed"):
            pf.seed(-1)


# ---- dtypes and promotion -------------------------------------------------------------------

def _t(values, dtype):
    return pf.to_tensor(np.asarray(values), dtype=dtype)


class TestDtypes:
    @pytest.mark.parametrize("a", ["bool", "int32", "int64", "float32", "float64"])
    @pytest.mark.parametrize("b", ["bool", "int32", "int64", "float32", "float64"])
    def test_tensor_tensor_promotion_matches_numpy(self, a, b):
        x, y = _t([1, 0], a), _t([1, 1], b)
        out = x * y
        expected = np.result_type(np.dtype(a), np.dtype(b))
        assert out.dtype == expected.name, (a, b, out.dtype)
        np.testing.assert_array_equal(
            out.numpy(), np.asarray([1, 0], dtype=a) * np.asarray([1, 1], dtype=b))

    def test_python_scalars_are_weak(self):
        f32 = pf.to_tensor([1.0, 2.0])
        assert (f32 * 2.0).dtype == "float32"
        assert (2.0 * f32).dtype == "float32"
        assert (f32 + 1).dtype == "float32"
        f64 = pf.to_tensor([1.0], dtype="float64")
        assert (f64 * 2.0).dtype == "float64"
        i32 = pf.to_tensor([1, 2], dtype="int32")
        assert (i32 + 1).dtype == "int32"
        assert_tensor(i32 + 1.5, [2.5, 3.5], pf.get_default_dtype())
        i64 = pf.to_tensor([1, 2])
        assert (i64 * 3).dtype == "int64"
        assert (i64 + 1.5).dtype == "float32"
        b = pf.to_tensor([True, False])
        assert (b + 1).dtype == "int64"
        assert (b * 1.5).dtype == "float32"

    def test_int_plus_float_follows_default_dtype(self, default_dtype):
        pf.set_default_dtype("float64")
        assert (pf.to_tensor([1, 2]) + 1.5).dtype == "float64"
        assert (pf.to_tensor([1, 2]) / 2).dtype == "float64"

    def test_true_division_of_ints_is_float(self):
        out = pf.to_tensor([1, 2]) / pf.to_tensor([2, 4])
        assert_tensor(out, [0.5, 0.5], "float32")

    def test_default_dtype(self, default_dtype):
        assert pf.get_default_dtype() == "float32"
        pf.set_default_dtype("float64")
        assert pf.get_default_dtype() == "float64"
        assert pf.to_tensor([1.0]).dtype == "float64"
        assert pf.ones([2]).dtype == "float64"
        assert pf.rand([2]).dtype == "float64"
        assert pf.arange(0.0, 1.0, 0.5).dtype == "float64"
        assert pf.linspace(0, 1, 3).dtype == "float64"
        assert pf.to_tensor([1]).dtype == "int64"  # ints are unaffected
        assert pf.sin(pf.to_tensor([1])).dtype == "float64"
        pf.set_default_dtype(pf.float32)
        assert pf.ones([2]).dtype == "float32"

    def test_default_dtype_must_be_floating(self, default_dtype):
        with pytest.raises(TypeError, match="float"):
            pf.set_default_dtype("int32")
        assert pf.get_default_dtype() == "float32"

    def test_dtype_objects_compare_to_names_and_numpy(self):
        assert pf.float32 == "float32" and pf.float64 == np.float64
        assert pf.int64 == np.dtype("int64") and pf.bool == "bool"
        assert pf.float32 != pf.float64
        assert pf.float32.is_floating and pf.int32.is_integer and pf.bool_.is_bool

    def test_astype(self):
        x = pf.to_tensor([1.7, -2.2, 0.0])
        assert_tensor(x.astype("int32"), np.array([1.7, -2.2, 0.0]).astype(np.int32), "int32")
        assert_tensor(x.astype("bool"), [True, True, False], "bool")
        assert_tensor(x.astype(pf.float64), [1.7, -2.2, 0.0], "float64", rtol=1e-6)
        assert x.astype("float32") is x or x.astype("float32").dtype == "float32"

    @pytest.mark.parametrize("bad", ["uint16", np.uint32, "complex256", "uint64"])
    def test_unsupported_dtype_argument(self, bad):
        with pytest.raises(TypeError) as e:
            pf.zeros([2], dtype=bad)
        for name in ("bool", "int32", "int64", "float32", "float64"):
            assert name in str(e.value)

    @pytest.mark.parametrize("data", [np.zeros(2, np.uint32), np.zeros(2, np.clongdouble),
                                      np.zeros(2, np.uint64), np.zeros(2, np.uint16)])
    def test_unsupported_dtype_data(self, data):
        with pytest.raises(TypeError) as e:
            pf.to_tensor(data)
        msg = str(e.value)
        assert "unsupported dtype" in msg
        for name in ("bool", "int32", "int64", "float32", "float64"):
            assert name in msg


# ---- broadcasting and operators -------------------------------------------------------------

class TestOperators:
    a = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]])
    b = np.array([2.0, 0.5, -3.0])

    def tensors(self):
        return pf.to_tensor(self.a, dtype="float64"), pf.to_tensor(self.b, dtype="float64")

    def test_arithmetic_with_broadcasting(self):
        x, y = self.tensors()
        a, b = self.a, self.b
        assert_tensor(x + y, a + b, "float64")
        assert_tensor(x - y, a - b)
        assert_tensor(y - x, b - a)
        assert_tensor(x * y, a * b)
        assert_tensor(x / y, a / b)
        assert_tensor(y / x, b / a)
        assert_tensor(x ** 2, a ** 2)
        assert_tensor(pf.abs(x) ** y, np.abs(a) ** b)
        assert_tensor(-x, -a)
        assert_tensor(+x, a)
        assert_tensor(abs(x), np.abs(a))
        assert_tensor(pf.to_tensor(np.ones((4, 1))) + pf.to_tensor(np.arange(3.0)),
                      np.ones((4, 1)) + np.arange(3.0))

    def test_scalar_operands_both_sides(self):
        x, _ = self.tensors()
        a = self.a
        assert_tensor(x + 1.0, a + 1.0)
        assert_tensor(1.0 + x, 1.0 + a)
        assert_tensor(3.0 - x, 3.0 - a)
        assert_tensor(2 * x, 2 * a)
        assert_tensor(1.0 / x, 1.0 / a)
        assert_tensor(2.0 ** x, 2.0 ** a)
        assert_tensor(x ** 3, a ** 3)
        assert_tensor(pf.abs(x) ** 0.5, np.abs(a) ** 0.5)
        assert_tensor(x + [1.0, 2.0, 3.0], a + [1.0, 2.0, 3.0])

    def test_integer_floor_division_and_mod(self):
        i = pf.to_tensor([-7, -1, 0, 5, 9])
        n = np.array([-7, -1, 0, 5, 9])
        assert_tensor(i // 3, n // 3, "int64")
        assert_tensor(i % 3, n % 3, "int64")
        f = pf.to_tensor([-7.5, 2.25])
        assert_tensor(f % 2.0, np.array([-7.5, 2.25]) % 2.0)

    def test_matmul(self):
        rng = np.random.default_rng(0)
        a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
        x, y = pf.to_tensor(a), pf.to_tensor(b)
        assert_tensor(x @ y, a @ b, "float64", rtol=1e-12)
        assert (x.astype("float32") @ y.astype("float32")).dtype == "float32"
        v = rng.normal(size=3)
        assert_tensor(x @ pf.to_tensor(v), a @ v, rtol=1e-5, atol=1e-6)
        assert_tensor(pf.to_tensor(v) @ y, v @ b, rtol=1e-5, atol=1e-6)
        assert_tensor(pf.to_tensor(v) @ pf.to_tensor(v), v @ v, rtol=1e-5)
        batch = rng.normal(size=(5, 2, 3))
        assert_tensor(pf.to_tensor(batch) @ y, batch @ b, rtol=1e-5, atol=1e-6)
        bb = rng.normal(size=(5, 3, 4))
        assert_tensor(pf.matmul(pf.to_tensor(batch), pf.to_tensor(bb)), batch @ bb,
                      rtol=1e-5, atol=1e-6)
        assert_tensor(pf.matmul(x, pf.to_tensor(a), transpose_y=True), a @ a.T,
                      rtol=1e-5, atol=1e-6)

    def test_comparisons(self):
        x, y = self.tensors()
        a, b = self.a, self.b
        for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
            out = getattr(x, op)(y)
            assert out.dtype == "bool"
            np.testing.assert_array_equal(out.numpy(), getattr(a, op)(b))
        np.testing.assert_array_equal((x > 0.5).numpy(), a > 0.5)
        np.testing.assert_array_equal((0.5 < x).numpy(), 0.5 < a)
        np.testing.assert_array_equal((x == 3.0).numpy(), a == 3.0)

    def test_logical_operators(self):
        p = pf.to_tensor([True, True, False, False])
        q = pf.to_tensor([True, False, True, False])
        np.testing.assert_array_equal((p & q).numpy(), [True, False, False, False])
        np.testing.assert_array_equal((p | q).numpy(), [True, True, True, False])
        np.testing.assert_array_equal((~p).numpy(), [False, False, True, True])
        np.testing.assert_array_equal((p & True).numpy(), [True, True, False, False])
        np.testing.assert_array_equal((False | q).numpy(), [True, False, True, False])
        x, _ = self.tensors()
        np.testing.assert_array_equal(((x > 0) & (x < 3.5)).numpy(),
                                      (self.a > 0) & (self.a < 3.5))

    def test_bitwise_operators_on_numbers_are_refused(self):
        # NumPy would give bitwise results; primflow has no bitwise primitive and refuses
        # rather than silently answering logically
        i = pf.to_tensor([1, 2])
        with pytest.raises(TypeError, match="bool"):
            i & pf.to_tensor([3, 1])
        with pytest.raises(TypeError, match="logical_not"):
            ~i
        with pytest.raises(TypeError, match="float32"):
            pf.to_tensor([1.0]) | pf.to_tensor([True])

    def test_where_and_maximum(self):
        x, y = self.tensors()
        assert_tensor(pf.where(x > 1.0, x, y), np.where(self.a > 1.0, self.a, self.b))
        assert_tensor(pf.maximum(x, y), np.maximum(self.a, self.b))
        assert_tensor(pf.minimum(x, 0.0), np.minimum(self.a, 0.0))


# ---- methods --------------------------------------------------------------------------------

class TestMethods:
    a = np.arange(1.0, 25.0).reshape(2, 3, 4) / 7.0

    def x(self):
        return pf.to_tensor(self.a, dtype="float64")

    def test_metadata(self):
        x = self.x()
        assert x.shape == [2, 3, 4] and isinstance(x.shape, list)
        assert x.ndim == 3 and x.dim() == 3
        assert x.size == 24 and x.numel() == 24 and pf.numel(x) == 24
        assert len(x) == 2
        assert pf.is_tensor(x) and not pf.is_tensor(self.a)

    def test_reductions(self):
        x, a = self.x(), self.a
        assert_tensor(x.sum(), a.sum(), rtol=1e-12)
        assert_tensor(x.sum(axis=1), a.sum(axis=1), rtol=1e-12)
        assert_tensor(x.sum(axis=[0, 2]), a.sum(axis=(0, 2)), rtol=1e-12)
        assert_tensor(x.sum(axis=-1, keepdim=True), a.sum(axis=-1, keepdims=True), rtol=1e-12)
        assert_tensor(x.mean(), a.mean(), rtol=1e-12)
        assert_tensor(x.mean(axis=0), a.mean(axis=0), rtol=1e-12)
        assert_tensor(x.max(), a.max())
        assert_tensor(x.max(axis=2), a.max(axis=2))
        assert_tensor(x.min(axis=(0, 1), keepdim=True), a.min(axis=(0, 1), keepdims=True))
        assert_tensor(pf.sum(x, axis=0), a.sum(axis=0), rtol=1e-12)
        assert_tensor(x.prod(axis=1), a.prod(axis=1), rtol=1e-12)
        assert_tensor(x.var(axis=1), a.var(axis=1, ddof=1), rtol=1e-12)
        assert_tensor(x.std(), a.std(ddof=1), rtol=1e-12)
        assert_tensor(x.argmax(axis=1), a.argmax(axis=1), "int64")
        assert_tensor(x.norm(), np.linalg.norm(a), rtol=1e-12)
        assert_tensor(x.cumsum(axis=2), a.cumsum(axis=2), rtol=1e-12)
        assert_tensor(x.logsumexp(axis=1), np.log(np.exp(a).sum(axis=1)), rtol=1e-12)
        assert pf.to_tensor([True, True, False]).sum().dtype == "int64"

    def test_shape_methods(self):
        x, a = self.x(), self.a
        assert_tensor(x.reshape([4, 6]), a.reshape(4, 6))
        assert_tensor(x.reshape([-1, 2]), a.reshape(-1, 2))
        assert_tensor(x.reshape([0, -1]), a.reshape(2, -1))  # Paddle: 0 copies the dim
        assert_tensor(x.transpose([2, 0, 1]), a.transpose(2, 0, 1))
        assert_tensor(x.T, a.T)
        assert_tensor(x[0].T, a[0].T)
        assert_tensor(x.flatten(), a.flatten())
        assert_tensor(x.unsqueeze(1), a[:, None])
        assert_tensor(x.unsqueeze(1).squeeze(), a)
        assert_tensor(x[:, :1].squeeze(1), a[:, 0])
        assert_tensor(x.flip(1), a[:, ::-1])
        assert_tensor(pf.concat([x, x], axis=2), np.concatenate([a, a], axis=2))
        assert_tensor(pf.stack([x, x], axis=1), np.stack([a, a], axis=1))
        parts = x.split([1, 2], axis=1)
        assert [p.shape for p in parts] == [[2, 1, 4], [2, 2, 4]]
        assert_tensor(parts[1], a[:, 1:])
        assert_tensor(x.expand([5, 2, 3, 4]), np.broadcast_to(a, (5, 2, 3, 4)))
        assert_tensor(x.tile([1, 2, 1]), np.tile(a, (1, 2, 1)))

    def test_elementwise_methods(self):
        x, a = self.x(), self.a
        assert_tensor(x.exp(), np.exp(a), rtol=1e-12)
        assert_tensor(x.log(), np.log(a), rtol=1e-12)
        assert_tensor(x.tanh(), np.tanh(a), rtol=1e-12)
        assert_tensor(x.sin(), np.sin(a), rtol=1e-12)
        assert_tensor(x.cos(), np.cos(a), rtol=1e-12)
        assert_tensor(x.sqrt(), np.sqrt(a), rtol=1e-12)
        assert_tensor(x.rsqrt(), 1 / np.sqrt(a), rtol=1e-12)
        assert_tensor(x.square(), a ** 2, rtol=1e-12)
        assert_tensor(x.sigmoid(), 1 / (1 + np.exp(-a)), rtol=1e-12)
        assert_tensor(x.clip(0.5, 2.0), np.clip(a, 0.5, 2.0))
        assert_tensor(x.abs(), np.abs(a))
        assert_tensor(x.pow(3), a ** 3, rtol=1e-12)
        assert_tensor(x.floor(), np.floor(a))
        assert_tensor(x.round(), np.round(a))

    def test_clone_is_a_copy_in_the_graph(self):
        x = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
        c = x.clone()
        assert c is not x and not c.is_leaf
        assert_tensor(c, [1.0, 2.0], "float64")
        (c * 3.0).sum().backward()
        assert_tensor(x.grad, [3.0, 3.0])
        # changing the clone in place leaves the original alone
        src = pf.to_tensor([1.0, 2.0])
        e = src.clone()
        e[1] = 9.0
        assert src.numpy().tolist() == [1.0, 2.0] and e.numpy().tolist() == [1.0, 9.0]

    def test_iteration_and_set_value(self):
        x = pf.to_tensor([[1, 2], [3, 4]])
        assert [r.tolist() for r in x] == [[1, 2], [3, 4]]
        v = pf.zeros([2])
        before = v._version
        v.set_value(np.array([5.0, 6.0]))
        assert v.numpy().tolist() == [5.0, 6.0] and v.dtype == "float32"
        assert v._version == before + 1
        with pytest.raises(ValueError, match="shape"):
            v.set_value(np.ones(3))

    def test_item_and_conversions(self):
        assert pf.to_tensor(2.5).item() == 2.5
        assert isinstance(pf.to_tensor([[3]]).item(), int)
        assert pf.to_tensor([True]).item() is True
        assert float(pf.to_tensor([1.5])) == 1.5
        assert int(pf.to_tensor(7)) == 7
        assert pf.to_tensor([[1, 2]]).tolist() == [[1, 2]]
        np.testing.assert_array_equal(np.asarray(pf.to_tensor([1.0, 2.0])), [1.0, 2.0])
        with pytest.raises(ValueError, match="one element"):
            pf.to_tensor([1.0, 2.0]).item()
        with pytest.raises(ValueError, match="ambiguous"):
            bool(pf.to_tensor([1.0, 2.0]) > 0)


# ---- gradient flags -------------------------------------------------------------------------

class TestGradFlags:
    def test_stop_gradient_and_requires_grad_are_opposites(self):
        x = pf.ones([2])
        assert x.stop_gradient and not x.requires_grad
        x.stop_gradient = False
        assert x.requires_grad
        x.requires_grad = False
        assert x.stop_gradient
        assert x.requires_grad_() is x and x.requires_grad

    def test_results_of_ops_follow_inputs(self):
        x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        c = pf.to_tensor([3.0, 4.0])
        assert (x * c).stop_gradient is False
        assert (c * c).stop_gradient is True
        assert (x > 1.0).stop_gradient is True  # bool results never carry gradients
        assert x.argmax().stop_gradient is True
        assert x.is_leaf and not (x * c).is_leaf

    def test_grad_backward_detach(self):
        x = pf.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
        assert x.grad is None
        (x * x).sum().backward()
        assert_tensor(x.grad, [2.0, 4.0, 6.0], "float64")
        x.clear_grad()
        assert x.grad is None
        d = x.detach()
        assert d.stop_gradient and d.is_leaf
        assert_tensor(d, x.numpy())
        z = (x * d).sum()
        z.backward()
        assert_tensor(x.grad, [1.0, 2.0, 3.0])  # d is a constant
        assert pf.detach(x).stop_gradient

    def test_grad_is_none_for_constants(self):
        x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        c = pf.to_tensor([3.0, 4.0])
        (x * c).sum().backward()
        assert c.grad is None
        assert_tensor(x.grad, [3.0, 4.0])


# ---- repr -----------------------------------------------------------------------------------

class TestRepr:
    def test_repr_shows_shape_dtype_values(self):
        r = repr(pf.to_tensor([[1.0, 2.5], [3.0, 4.0]], dtype="float64"))
        assert "shape=[2, 2]" in r and "float64" in r
        assert "2.5" in r and "4." in r
        assert "stop_gradient" not in r
        assert str(pf.to_tensor([1, 2])) == repr(pf.to_tensor([1, 2]))

    def test_repr_mentions_stop_gradient_false(self):
        r = repr(pf.to_tensor([1.0, 2.0], stop_gradient=False))
        assert "stop_gradient=False" in r and "shape=[2]" in r and "float32" in r

    def test_repr_of_scalar_and_bool(self):
        r = repr(pf.to_tensor(1.5))
        assert "shape=[]" in r and "1.5" in r
        rb = repr(pf.to_tensor([True, False]))
        assert "bool" in rb and "True" in rb and "False" in rb


# ---- storage dtypes for Paddle code ----------------------------------------------

@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "float16"])
def test_small_storage_dtypes(name, tmp_path):
    data = np.array([[1, 2], [3, 4]], dtype=name)
    x = pf.to_tensor(data)
    pf.save({"x": x}, tmp_path / "x.pdparams")
    back = pf.load(tmp_path / "x.pdparams")["x"]
    assert back.dtype == name
    np.testing.assert_array_equal(back.numpy(), data)
    assert x.dtype == name and x.dtype is getattr(pf, name)
    np.testing.assert_array_equal(x.numpy(), data)
    assert pf.zeros([2], dtype=name).numpy().dtype == np.dtype(name)
    y = pf.cast(pf.to_tensor([1.0, 2.5], dtype="float64"), name)
    assert y.dtype == name and y.numpy().dtype == np.dtype(name)
    back = pf.cast(y, "float32")
    np.testing.assert_array_equal(back.numpy(), np.array([1.0, 2.5]).astype(name))
    # promotion follows NumPy
    for other in ("int32", "float32", "float64", "int8"):
        z = x + pf.ones([2, 2], dtype=other)
        assert z.dtype == np.result_type(np.dtype(name), np.dtype(other)).name, (name, other)


def test_float16_is_differentiable():
    x = pf.to_tensor([1.0, 2.0], dtype="float16", stop_gradient=False)
    (g,) = pf.grad((x * x).sum(), x)
    assert g.dtype == "float16"
    np.testing.assert_array_equal(g.numpy(), np.array([2.0, 4.0], np.float16))
