"""The aliasing rule (ops/manipulation.py, Paddle's): view-like ops return a new Tensor
that shares data with its input, also when nothing changes; other ops share nothing.
``pf.reshape(x, x.shape)`` and ``flatten`` of a 1-d tensor returned ``x``
itself, so an in-place write into the result changed ``x`` while a reshape to a new shape
did not."""

import numpy as np
import pytest

import primflow as pf

VIEW_OPS = {  # Paddle: "the output Tensor will share data with origin Tensor"
    "reshape_same": lambda x: pf.reshape(x, x.shape),
    "reshape_new": lambda x: pf.reshape(x, [-1]),
    "view_same": lambda x: x.view(x.shape),
    "flatten": lambda x: pf.flatten(x),
    "flatten_method": lambda x: x.flatten(),
    "squeeze_nothing": lambda x: pf.squeeze(x),
    "squeeze_axis": lambda x: pf.squeeze(pf.unsqueeze(x, 0), 0),
    "unsqueeze": lambda x: pf.unsqueeze(x, 0),
    "transpose_identity": lambda x: pf.transpose(x, list(range(x.ndim))),
    "transpose_reversed": lambda x: pf.transpose(x, list(range(x.ndim))[::-1]),
    "t": lambda x: pf.t(x),
    "T": lambda x: x.T,
    "moveaxis": lambda x: pf.moveaxis(x, 0, -1),
    "view_of_a_view": lambda x: pf.reshape(pf.transpose(x, list(range(x.ndim))[::-1]), [-1]),
}

COPY_OPS = {  # new tensors that share nothing
    "expand_same": lambda x: pf.expand(x, x.shape),
    "broadcast_to_same": lambda x: x.broadcast_to(x.shape),
    "flip_nothing": lambda x: pf.flip(x, []),
    "tile_once": lambda x: pf.tile(x, [1]),
    "concat_one": lambda x: pf.concat([x]),
    "split_one": lambda x: pf.split(x, 1)[0],
    "chunk_one": lambda x: pf.chunk(x, 1)[0],
    "astype_same": lambda x: x.astype(x.dtype),
    "cast_same": lambda x: pf.cast(x, x.dtype),
    "assign": lambda x: pf.assign(x),
    "clone": lambda x: x.clone(),
}


def _x(shape):
    return pf.to_tensor(np.arange(np.prod(shape), dtype="float64").reshape(shape))


@pytest.mark.parametrize("shape", [[3], [2, 3]])
@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_view_like_ops_share_data_with_their_input(name, shape):
    x = _x(shape)
    y = VIEW_OPS[name](x)
    assert y is not x
    expected_y = VIEW_OPS[name](pf.to_tensor(x.numpy())).numpy()  # an unrelated reference
    y.fill_(-7.0)  # in place, on the view: the input follows
    np.testing.assert_array_equal(x.numpy(), np.full(shape, -7.0))
    x.set_value(pf.to_tensor(np.arange(np.prod(shape), dtype="float64").reshape(shape)))
    np.testing.assert_array_equal(y.numpy(), expected_y)  # and back
    x[0] = 100.0
    np.testing.assert_array_equal(y.numpy(), VIEW_OPS[name](pf.to_tensor(x.numpy())).numpy())


@pytest.mark.parametrize("shape", [[3], [2, 3]])
@pytest.mark.parametrize("name", sorted(COPY_OPS))
def test_other_ops_share_nothing(name, shape):
    x = _x(shape)
    before = x.numpy()
    y = COPY_OPS[name](x)
    assert y is not x
    y.fill_(-7.0)
    np.testing.assert_array_equal(x.numpy(), before)
    y2 = COPY_OPS[name](x)
    x.zero_()
    assert float(y2.abs().sum()) == float(np.abs(before).sum())


def test_writes_through_a_view_bump_versions_of_saved_tensors():
    x = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    a = x * 1.0
    loss = (a * a).sum()  # saves a
    view = pf.reshape(a, [2, 1])
    with pf.no_grad():
        view[0] = 5.0  # changes a through its view
    assert float(a[0]) == 5.0
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


def test_views_made_inside_transforms_are_not_tracked():
    def f(x):
        y = pf.reshape(x, [-1])
        y[0] = 0.0  # functional inside the transform: x keeps its value
        return (x * y).sum()

    x = pf.to_tensor([2.0, 3.0], dtype="float64")
    assert float(pf.jit(f)(x)) == float(f(pf.to_tensor([2.0, 3.0], dtype="float64")))


def test_view_like_results_stay_in_the_graph():
    x = pf.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
    for name, op in sorted({**VIEW_OPS, **COPY_OPS}.items()):
        y = op(x)
        (g,) = pf.grad((y * y).sum(), x)
        np.testing.assert_allclose(g.numpy(), [2.0, 4.0, 6.0], err_msg=name)


def test_assign_into_an_output_and_cast():
    x = pf.to_tensor([1.0, 2.0], dtype="float64", stop_gradient=False)
    out = pf.zeros([2], dtype="float32")
    assert pf.assign(x * 3.0, out) is out
    assert out.dtype == "float32" and out._version == 1
    np.testing.assert_allclose(out.numpy(), [3.0, 6.0])
    (g,) = pf.grad(out.sum(), x)  # the copy stays in the graph
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(pf.assign(np.array([[1, 2]])).numpy(), [[1, 2]])
    with pytest.raises(ValueError, match="shape"):
        pf.assign(pf.ones([3]), out)
    with pytest.raises(TypeError, match="Tensor"):
        pf.cast([1.0], "float32")
    (gc,) = pf.grad(pf.cast(x, "float32").sum() * 2.0, x)
    assert gc.dtype == "float64"
    np.testing.assert_allclose(gc.numpy(), [2.0, 2.0])


def test_a_chain_of_views_keeps_no_intermediate_alive():
    import gc
    import weakref

    x = pf.to_tensor(np.arange(6.0).reshape(2, 3))
    y = x
    refs = []
    for _ in range(50):  # e.g. a loop that reshapes its state every step
        y = pf.transpose(pf.reshape(y, [3, 2]), [1, 0])
        refs.append(weakref.ref(y))
    gc.collect()
    assert sum(r() is not None for r in refs) == 1  # only the last view
    y[0, 0] = -1.0
    assert float(x.numpy().min()) == -1.0
    x.zero_()
    assert float(y.abs().sum()) == 0.0
