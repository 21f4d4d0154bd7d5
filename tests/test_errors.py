"""DESIGN section 5: bad input gets a clear error of the right type whose message names the
tensors, shapes or dtypes involved and the fix."""

import numpy as np
import pytest

import primflow as pf


def t64(values, requires_grad=True):
    return pf.to_tensor(np.asarray(values, dtype=np.float64), stop_gradient=not requires_grad)


def raises(exc, fn, *needles):
    """Calls fn, checks the exception type and that every needle appears in the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in message: {msg}"
    return msg


# ---- shapes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op", [
    lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b, lambda a, b: a / b,
    lambda a, b: a ** b, lambda a, b: a < b, lambda a, b: pf.maximum(a, b),
    lambda a, b: pf.where(a > 0, a, b),
], ids=["add", "mul", "sub", "div", "pow", "lt", "maximum", "where"])
def test_broadcast_mismatch_names_both_shapes(op):
    a, b = pf.ones([2, 3]), pf.ones([4])
    msg = raises(ValueError, lambda: op(a, b), "[2, 3]", "[4]", "broadcast")
    assert "numpy" not in msg.lower()


def test_broadcast_mismatch_higher_rank():
    raises(ValueError, lambda: pf.ones([2, 1, 3]) * pf.ones([4, 2]), "[2, 1, 3]", "[4, 2]")
    raises(ValueError, lambda: pf.ones([2, 3]).expand([3, 3]), "[2, 3]", "[3, 3]")


@pytest.mark.parametrize("xs,ys", [([2, 3], [4, 5]), ([3], [4]), ([2, 3], [2]),
                                   ([5, 2, 3], [4, 2])])
def test_matmul_mismatch_names_both_shapes(xs, ys):
    raises(ValueError, lambda: pf.ones(xs) @ pf.ones(ys), "matmul", str(xs), str(ys))


def test_matmul_batch_mismatch_names_both_shapes():
    raises(ValueError, lambda: pf.matmul(pf.ones([2, 2, 3]), pf.ones([3, 3, 2])),
           "[2, 2, 3]", "[3, 3, 2]", "batch")
    raises(ValueError, lambda: pf.matmul(pf.ones([]), pf.ones([3])), "1-d")


@pytest.mark.parametrize("shape", [[4], [5, -1], [-1, -1], [2, -3]])
def test_bad_reshape(shape):
    msg = raises(ValueError, lambda: pf.ones([2, 3]).reshape(shape), "reshape")
    assert "[2, 3]" in msg or str(shape) in msg


def test_bad_reshape_names_element_counts():
    raises(ValueError, lambda: pf.ones([2, 3]).reshape([4]), "[2, 3]", "6 elements", "[4]")


def test_concat_and_stack_mismatch():
    raises(ValueError, lambda: pf.concat([pf.ones([2, 3]), pf.ones([2, 2])]), "[2, 3]",
           "[2, 2]")
    raises(ValueError, lambda: pf.stack([pf.ones([2]), pf.ones([3])]), "[2]", "[3]")


# ---- indices and axes -----------------------------------------------------------------------

def test_out_of_range_index():
    x = pf.ones([2, 3])
    raises(IndexError, lambda: x[2], "index 2", "out of range", "size 2", "[2, 3]")
    raises(IndexError, lambda: x[:, -4], "-4", "out of range", "size 3")
    raises(IndexError, lambda: x[[0, 5]], "out of range", "size 2")
    raises(IndexError, lambda: x[0, 0, 0], "too many indices", "[2, 3]")
    raises(IndexError, lambda: pf.index_select(x, pf.to_tensor([3]), axis=1), "out of range")


@pytest.mark.parametrize("call", [
    lambda x: x.sum(axis=2), lambda x: x.mean(axis=[0, 5]), lambda x: x.max(axis=-3),
    lambda x: x.min(axis=2), lambda x: x.argmax(axis=2), lambda x: x.cumsum(axis=2),
    lambda x: x.squeeze(axis=4), lambda x: x.unsqueeze(5), lambda x: x.flatten(0, 5),
    lambda x: pf.concat([x, x], axis=2), lambda x: pf.stack([x, x], axis=4),
    lambda x: pf.split(x, 2, axis=3), lambda x: pf.softmax(x, axis=2), lambda x: x.flip(2),
    lambda x: pf.moveaxis(x, 0, 3), lambda x: pf.norm(x, axis=2),
    lambda x: pf.logsumexp(x, axis=-5),
], ids=["sum", "mean", "max", "min", "argmax", "cumsum", "squeeze", "unsqueeze", "flatten",
        "concat", "stack", "split", "softmax", "flip", "moveaxis", "norm", "logsumexp"])
def test_bad_axis(call):
    msg = raises(ValueError, lambda: call(pf.ones([2, 3])), "out of range")
    assert "axis" in msg and "dims" in msg


def test_bad_transpose_perm():
    x = pf.ones([2, 3, 4])
    for perm in ([0, 1], [0, 0, 1], [3, 0, 1]):
        raises(ValueError, lambda: x.transpose(perm), "perm", str(perm), "[2, 3, 4]")


# ---- dtypes ---------------------------------------------------------------------------------

SUPPORTED = ("bool", "int32", "int64", "float32", "float64")


@pytest.mark.parametrize("make", [
    lambda: pf.to_tensor(np.zeros(2, np.uint32)),
    lambda: pf.to_tensor(np.zeros(2, np.clongdouble)),
    lambda: pf.to_tensor(np.zeros(2, np.uint64)),
    lambda: pf.ones([2], dtype="uint64"),
    lambda: pf.to_tensor([1.0], dtype=np.uint32),
    lambda: pf.ones([2]).astype("uint16"),
], ids=["np-u32", "np-c256", "np-u64", "ones-u64", "to_tensor-u32", "astype-u16"])
def test_unsupported_dtype(make):
    msg = raises(TypeError, make, "unsupported dtype", *SUPPORTED)
    assert any(n in msg for n in ("uint", "complex256", "clongdouble"))


def test_bitwise_operator_on_ints():
    raises(TypeError, lambda: pf.to_tensor([1, 2]) & pf.to_tensor([1, 0]), "&", "int64",
           "logical_and")


# ---- tape -----------------------------------------------------------------------------------

def test_grad_of_non_scalar_without_grad_outputs():
    """The tape follows Paddle: a missing grad_outputs means ones of the output's shape.
    The functional transform pf.grad(f) keeps JAX's error for a non-scalar f."""
    x = t64([1.0, 2.0])
    np.testing.assert_allclose(pf.grad(x * x, x)[0].numpy(), [2.0, 4.0])  # d/dx sum(x^2)
    (x * x * 3.0).backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])
    raises(TypeError, lambda: pf.grad(lambda v: v * 2.0)(t64([1.0, 2.0])), "scalar")


def test_grad_outputs_shape_mismatch():
    x = t64([1.0, 2.0])
    raises(ValueError, lambda: pf.grad(x * 2.0, x, grad_outputs=pf.ones([3], "float64")),
           "grad_outputs", "[3]", "[2]")
    raises(ValueError, lambda: pf.grad([x * 2.0], x, grad_outputs=[None, None]),
           "2 grad_outputs", "1 outputs")


def test_input_with_stop_gradient():
    x = t64([1.0, 2.0], requires_grad=False)
    w = t64([3.0, 4.0])
    raises(RuntimeError, lambda: pf.grad((x * w).sum(), x), "stop_gradient=True",
           "stop_gradient = False")
    raises(RuntimeError, lambda: pf.grad((x * w).sum(), [w, x]), "input 1")


def test_output_that_does_not_require_grad():
    x = t64([1.0, 2.0], requires_grad=False)
    w = t64([1.0])
    raises(RuntimeError, lambda: pf.grad((x * 2.0).sum(), w), "does not require grad")


def test_unused_input_without_allow_unused():
    x, u = t64([1.0, 2.0]), t64([5.0, 6.0, 7.0])
    raises(ValueError, lambda: pf.grad((x * 2.0).sum(), [x, u]), "input 1", "[3]",
           "not used", "allow_unused=True")  # ValueError as in Paddle


def test_backward_through_freed_graph():
    x = t64([1.0, 2.0])
    y = (pf.exp(x) * x).sum()
    y.backward()
    raises(RuntimeError, y.backward, "second time", "freed", "retain_graph=True")


def test_saved_tensor_modified_in_place():
    x = t64([1.0, 2.0, 3.0])
    y = x * 2.0
    z = y * y
    y[0] = 1.0
    raises(RuntimeError, lambda: z.sum().backward(), "modified in place", "version", "mul",
           "[3]")
    x2 = t64([1.0, 2.0])
    y2 = pf.exp(x2)  # exp saves its output... and the tape checks its input's version
    z2 = y2 * 3.0
    y2.add_(1.0)
    raises(RuntimeError, lambda: pf.grad(z2.sum(), x2), "in place", "version")


def test_set_value_after_use_is_detected():
    # the optimizer pattern done wrong: overwrite a parameter, then backward the old loss
    p = t64([1.0, 2.0])
    z = (p * p).sum()
    p.set_value(np.array([5.0, 6.0]))
    raises(RuntimeError, z.backward, "modified in place", "version 0 -> 1")


def test_in_place_on_leaf_requiring_grad():
    x = t64([1.0, 2.0])
    raises(RuntimeError, lambda: x.__setitem__(0, 5.0), "leaf", "requires grad", "no_grad")
    raises(RuntimeError, lambda: x.zero_(), "leaf", "no_grad")


# ---- non-differentiable primitives ----------------------------------------------------------

NON_DIFF = [("round", pf.round), ("floor", pf.floor), ("sign", pf.sign), ("ceil", pf.ceil)]


@pytest.mark.parametrize("name,op", NON_DIFF, ids=[n for n, _ in NON_DIFF])
def test_non_differentiable_primitive_on_path(name, op):
    x = t64([0.4, 1.6, -2.3])
    y = (op(x) * x).sum()
    msg = raises(pf.NonDifferentiableError, lambda: pf.grad(y, x), name,
                 "not differentiable", "detach")
    assert f"{name}(x.detach())" in msg
    assert issubclass(pf.NonDifferentiableError, RuntimeError)
    y2 = (op(x) * x).sum()
    raises(pf.NonDifferentiableError, y2.backward, name)
    raises(pf.NonDifferentiableError, lambda: pf.jvp(op, (x,), (pf.ones_like(x),)), name,
           "forward mode")


@pytest.mark.parametrize("name,op", NON_DIFF, ids=[n for n, _ in NON_DIFF])
def test_detaching_avoids_non_differentiable_error(name, op):
    a = np.array([0.4, 1.6, -2.3])
    x = t64(a)
    y = (op(x.detach()) * x).sum()  # the step function's value used as a constant
    (g,) = pf.grad(y, x)
    np.testing.assert_allclose(g.numpy(), getattr(np, name)(a))
    # the forward values still work where no derivative is asked for
    np.testing.assert_array_equal(op(x).numpy(), getattr(np, name)(a))


def test_non_differentiable_off_the_differentiated_path_is_fine():
    x, w = t64([0.4, 1.6]), t64([2.0, 3.0])
    y = (pf.floor(w) * x).sum()  # floor(w) is on the path to w, not to x
    (g,) = pf.grad(y, x)
    np.testing.assert_allclose(g.numpy(), [2.0, 3.0])


# ---- other ----------------------------------------------------------------------------------

def test_item_of_multi_element_tensor():
    raises(ValueError, lambda: pf.ones([2]).item(), "one element", "[2]")


def test_backend_failures_are_wrapped():
    # a kernel failure names the primitive and its inputs instead of a raw backend traceback
    msg = raises(pf.PrimitiveError, lambda: pf.erf(pf.to_tensor([1j])), "'erf'",
                 "complex64[1]")
    assert "not defined for complex" in msg
    # (integers to negative powers are refused by pow itself, before any kernel runs)
    msg = raises(ValueError, lambda: pf.to_tensor([1, 2]) ** -1, "pow", "negative")
    assert "primitive" not in msg


def test_jacobian_and_hessian_argument_errors():
    x = t64([1.0, 2.0])
    raises(ValueError, lambda: pf.autograd.hessian(x * x, x), "scalar", "[2]")
    raises(ValueError, lambda: pf.autograd.jacobian(x * x, x, batch_axis=1), "batch_axis")
    raises(TypeError, lambda: pf.autograd.jacobian(x * x, [1.0]), "xs")
