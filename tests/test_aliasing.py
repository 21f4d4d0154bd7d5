"""The aliasing rule (ops/manipulation.py): every public view-like op returns a new Tensor,
never its input, and an in-place write into the result never changes the input (issue 20:
``pf.reshape(x, x.shape)`` and ``flatten`` of a 1-d tensor returned ``x`` itself, so a
write into the result changed ``x`` while a reshape to a new shape did not)."""

import numpy as np
import pytest

import primflow as pf

VIEW_OPS = {
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
    "t": lambda x: pf.t(x) if x.ndim <= 2 else pf.transpose(x, [0, 1]),
    "T": lambda x: x.T,
    "moveaxis_identity": lambda x: pf.moveaxis(x, 0, 0),
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
    "detach": lambda x: x.detach(),
}


@pytest.mark.parametrize("shape", [[3], [2, 3]])
@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_view_like_ops_never_alias_their_input(name, shape):
    x = pf.to_tensor(np.arange(np.prod(shape), dtype="float64").reshape(shape))
    before = x.numpy()
    y = VIEW_OPS[name](x)
    assert y is not x, f"{name} returned its input"
    y.fill_(-7.0)  # in place, on the result
    np.testing.assert_array_equal(x.numpy(), before)
    y2 = VIEW_OPS[name](x)
    x.zero_()  # in place, on the input: an earlier result keeps its values
    assert float(y2.sum()) != 0.0 or float(before.sum()) == 0.0


def test_view_like_results_stay_in_the_graph():
    x = pf.to_tensor([1.0, 2.0, 3.0], dtype="float64", stop_gradient=False)
    for name, op in sorted(VIEW_OPS.items()):
        y = op(x)
        if name == "detach":
            assert y.stop_gradient
            continue
        (g,) = pf.grad((y * y).sum(), x)
        np.testing.assert_allclose(g.numpy(), [2.0, 4.0, 6.0], err_msg=name)
