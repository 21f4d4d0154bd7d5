"""Indexing with NumPy semantics: x[key] forward and gradient, x[key] = v, in-place checks."""

import numpy as np
import pytest

import primflow as pf

A = np.arange(60.0).reshape(3, 4, 5) / 10.0
MASK = A > 2.5

# Every key is tried on the same array in NumPy and primflow.
KEYS = [
    1, -1, (0, 2), (-1, -2, -3),
    slice(None), slice(1, None), slice(None, None, -1), slice(None, None, 2),
    (slice(None), slice(3, 0, -1)), (Ellipsis, slice(None, None, -2)),
    (slice(None, None, -2), slice(None), slice(4, None, -3)), (slice(5, 1, 1),),
    (slice(-10, 10),), (0, slice(1, 3), 4), (1, slice(None, None, -1)),
    None, (None, 0), (slice(None), None, 1), (Ellipsis, None), (Ellipsis,), (1, Ellipsis, 2),
    (None, Ellipsis, None),
    [2, 0], ([0, 0, 2],), (slice(None), [3, 1]), (slice(None), [[0, 1], [3, 3]]),
    ([0, 2], slice(None), [1, 4]),               # non-adjacent advanced: dims go first
    (slice(None), [0, 2], [1, 4]),               # adjacent advanced: dims stay in place
    ([[0], [2]], [1, 3]),                        # broadcast index arrays
    (1, [0, 2], [1, 3]),                         # int + arrays: all advanced, adjacent
    ([0, 2], 1, [1, 3]),                         # int between arrays: non-adjacent
    (slice(None, None, -1), [0, 2], slice(None, None, -3)),
    (Ellipsis, [4, 0]), ([-1, -3],), (np.array([1, 0]),),
    MASK, A > 100, MASK[:, :, 0], (1, MASK[0]), (slice(None), MASK[0, :, 0]),
    np.array([True, False, True]),
]


def _key_id(key):
    text = repr(key)
    return text if len(text) < 40 else text[:37] + "..."


@pytest.mark.parametrize("key", KEYS, ids=_key_id)
def test_getitem_matches_numpy(key):
    x = pf.to_tensor(A, dtype="float64")
    out = x[key]
    expected = A[key]
    assert out.shape == list(expected.shape)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("key", KEYS, ids=_key_id)
def test_getitem_gradient_is_scatter_of_ones(key):
    x = pf.to_tensor(A, dtype="float64", stop_gradient=False)
    out = x[key]
    # weights make repeated indices and positions distinguishable
    w = np.arange(1.0, out.size + 1.0).reshape(out.shape)
    (g,) = pf.grad((out * pf.to_tensor(w)).sum(), x)
    expected = np.zeros_like(A)
    np.add.at(expected, key, w)
    np.testing.assert_allclose(g.numpy(), expected)
    # plain ones: the numpy scatter of ones
    (g1,) = pf.grad(x[key].sum(), x)
    ones = np.zeros_like(A)
    np.add.at(ones, key, 1.0)
    np.testing.assert_array_equal(g1.numpy(), ones)


def test_index_with_tensors():
    x = pf.to_tensor(A)
    idx = pf.to_tensor([2, 0, 2])
    np.testing.assert_array_equal(x[idx].numpy(), A[[2, 0, 2]])
    np.testing.assert_array_equal(x[:, pf.to_tensor([1, 3], dtype="int32")].numpy(),
                                  A[:, [1, 3]])
    m = x > 2.5
    np.testing.assert_array_equal(x[m].numpy(), A[MASK])
    np.testing.assert_array_equal(x[1, pf.to_tensor(2)].numpy(), A[1, 2])


def test_getitem_of_int_and_bool_tensors():
    i = pf.arange(12).reshape([3, 4])
    np.testing.assert_array_equal(i[1:, [0, 3]].numpy(), np.arange(12).reshape(3, 4)[1:, [0, 3]])
    assert i[0, 0].dtype == "int64"
    b = pf.to_tensor([True, False, True])
    np.testing.assert_array_equal(b[::-1].numpy(), [True, False, True])


def test_second_order_through_indexing():
    x = pf.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
    y = (x[[0, 2, 2]] ** 3).sum()
    (g,) = pf.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), [3.0, 0.0, 54.0])
    (h,) = pf.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [6.0, 0.0, 36.0])


@pytest.mark.parametrize("key", [5, -4, (0, 4), (slice(None), 9)], ids=_key_id)
def test_int_out_of_range(key):
    x = pf.zeros([3, 4])
    with pytest.raises(IndexError) as e:
        x[key]
    assert "out of range" in str(e.value)


@pytest.mark.parametrize("key", [[0, 3], ([0, 1], [4, 0]), [-4]], ids=_key_id)
def test_array_index_out_of_range(key):
    with pytest.raises(IndexError, match="out of range"):
        pf.zeros([3, 4])[key]


def test_bad_keys():
    x = pf.zeros([3, 4])
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="integer or bool"):
        x[pf.to_tensor([0.0, 1.0])]
    with pytest.raises(IndexError):
        x["a"]
    with pytest.raises(IndexError, match="ellipsis"):
        x[..., 0, ...]


# ---- setitem --------------------------------------------------------------------------------

SET_CASES = [
    (1, 7.0), ((0, 2), -1.0), (slice(None, None, 2), 3.0), ((slice(None), 1), [1.0, 2.0]),
    (Ellipsis, 0.5), ([0, 2], np.arange(8.0).reshape(4, 2)[None, :, :].repeat(2, 0)),
    ((slice(None), [3, 0]), 9.0), (MASK[:, :, 0], -5.0), ((1, slice(None, None, -1)), 4.0),
    ((1, 2), [[8.0]]),  # value with an extra leading size-1 dim, as NumPy allows
]


@pytest.mark.parametrize("key,value", SET_CASES, ids=lambda v: _key_id(v)[:20])
def test_setitem_forward_matches_numpy(key, value):
    ref = np.arange(24.0).reshape(3, 4, 2)
    x = pf.to_tensor(ref)
    v = pf.to_tensor(np.asarray(value)) if isinstance(value, (list, np.ndarray)) else value
    x[key] = v
    expected = ref.copy()
    expected[key] = np.asarray(value)
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x.dtype == "float64"


def test_setitem_casts_value_and_bumps_version():
    x = pf.zeros([3], dtype="int64")
    before = x._version
    x[1] = pf.to_tensor(2.7)
    assert x.dtype == "int64" and x.numpy().tolist() == [0, 2, 0]
    assert x._version == before + 1


def test_setitem_gradients_reach_x_and_value():
    x = pf.to_tensor([1.0, 2.0, 3.0, 4.0], dtype="float64", stop_gradient=False)
    v = pf.to_tensor([10.0, 20.0], dtype="float64", stop_gradient=False)
    y = x * 2.0  # non-leaf
    y[[1, 3]] = v
    np.testing.assert_array_equal(y.numpy(), [2.0, 10.0, 6.0, 20.0])
    loss = (y * y).sum()
    gx, gv = pf.grad(loss, [x, v])
    # d/dx: 2 * y * 2 at untouched positions, 0 where overwritten
    np.testing.assert_allclose(gx.numpy(), [8.0, 0.0, 24.0, 0.0])
    np.testing.assert_allclose(gv.numpy(), [20.0, 40.0])


def test_setitem_broadcast_value_gradient_sums():
    x = pf.to_tensor(np.ones((2, 3)), stop_gradient=False)
    v = pf.to_tensor(5.0, dtype="float64", stop_gradient=False)
    y = x * 1.0
    y[:, 1:] = v
    (gv,) = pf.grad((y * pf.to_tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum(), v)
    assert gv.shape == []
    np.testing.assert_allclose(gv.numpy(), 2.0 + 3.0 + 5.0 + 6.0)


def test_setitem_into_constant_with_grad_value():
    x = pf.zeros([3], dtype="float64")
    v = pf.to_tensor(2.0, dtype="float64", stop_gradient=False)
    x[0] = v * v
    assert not x.stop_gradient
    (gv,) = pf.grad(x.sum(), v)
    np.testing.assert_allclose(gv.numpy(), 4.0)


def test_setitem_on_leaf_requiring_grad_raises():
    x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    with pytest.raises(RuntimeError) as e:
        x[0] = 3.0
    assert "leaf" in str(e.value) and "no_grad" in str(e.value)
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1.0)
    with pf.no_grad():  # the optimizer pattern is allowed
        x[0] = 3.0
        x.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), [4.0, 3.0])
    assert x.requires_grad and x.is_leaf


def test_inplace_method_on_nonleaf_keeps_gradient():
    x = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    y = x * 3.0
    y.add_(1.0)
    y.multiply_(pf.to_tensor([2.0, 5.0], dtype="float64"))
    np.testing.assert_allclose(y.numpy(), [8.0, 35.0])
    (g,) = pf.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), [6.0, 15.0])


@pytest.mark.parametrize("modify", [
    lambda y: y.__setitem__(0, 1.0),
    lambda y: y.add_(1.0),
    lambda y: y.zero_(),
], ids=["setitem", "add_", "zero_"])
def test_modifying_a_saved_tensor_raises(modify):
    x = pf.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
    y = x * 2.0
    z = y * y  # saves y for its backward
    modify(y)
    with pytest.raises(RuntimeError) as e:
        z.sum().backward()
    msg = str(e.value)
    assert "in place" in msg and "version" in msg


def test_modifying_a_clone_leaves_the_graph_alone():
    x = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    w = x.exp()
    z = w * w  # saves w
    w2 = w.clone()
    w2[0] = 0.0  # changes the clone, not w
    np.testing.assert_allclose(w.numpy(), np.exp([1.0, 2.0]))
    (g,) = pf.grad(z.sum() + w2.sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * np.exp([2.0, 4.0]) + [0.0, np.exp(2.0)])


def test_time_stepping_writes_into_a_buffer():
    # y[i] = f(y[i - 1]): the reads are slices (linear, value-free), so writing later is
    # legal; only tensors whose values a backward rule reads are version-checked
    x = pf.to_tensor([1.5, 0.0, 0.0, 0.0], dtype="float64", stop_gradient=False)
    y = x * 1.0
    for i in range(1, 4):
        y[i] = y[i - 1] * 2.0 + 1.0
    np.testing.assert_allclose(y.numpy(), [1.5, 4.0, 9.0, 19.0])
    (g,) = pf.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), [1.0 + 2.0 + 4.0 + 8.0, 0.0, 0.0, 0.0])


def test_value_free_consumers_allow_later_writes():
    x = pf.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
    y = x * 2.0
    a = y[[0, 1]] + y.sum() + y.reshape([3, 1]).T.sum()  # gather, reduce, reshape, add
    y[2] = 0.0
    (g,) = pf.grad(a.sum(), x)
    np.testing.assert_allclose(g.numpy(), [2.0 + 4.0 + 4.0, 2.0 + 4.0 + 4.0, 4.0 + 4.0])
    # but a consumer that reads the values (mul) still refuses
    y2 = x * 2.0
    b = y2 * x
    y2[0] = 0.0
    with pytest.raises(RuntimeError, match="in place"):
        pf.grad(b.sum(), x)
