"""``paddle.autograd.PyLayer`` and ``PyLayerContext`` as Paddle documents them: custom
forward/backward, saved tensors, several inputs and outputs, tensors passed by keyword and
inside lists, non-tensor outputs, the context flags, PyLayer inside a double-grad chain and
the errors for a backward that returns the wrong number of gradients."""

import numpy as np
import pytest

import paddle
from paddle.autograd import PyLayer, PyLayerContext
from checks import assert_close


def leaf(array, dtype="float64"):
    return paddle.to_tensor(np.asarray(array, dtype=dtype), stop_gradient=False)


class Cube(PyLayer):
    """x^3 with its derivative written in paddle ops, so it can be differentiated again."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensor()
        return 3.0 * x * x * dy


class ScaledProduct(PyLayer):
    """(x * z * scale, x + z): two tensor inputs, a number argument, two outputs."""

    @staticmethod
    def forward(ctx, x, z, scale):
        ctx.save_for_backward(x, z)
        ctx.scale = scale
        return x * z * scale, x + z

    @staticmethod
    def backward(ctx, d_prod, d_sum):
        x, z = ctx.saved_tensor()
        return d_prod * z * ctx.scale + d_sum, d_prod * x * ctx.scale + d_sum


def test_forward_value_and_backward_gradient():
    a = np.random.rand(4)
    x = leaf(a)
    y = Cube.apply(x)
    assert_close(y, a ** 3)
    assert not y.stop_gradient
    y.sum().backward()
    assert_close(x.grad, 3 * a ** 2)


def test_paddle_grad_through_pylayer_with_a_seed():
    a, seed = np.random.rand(2, 3), np.random.rand(2, 3)
    x = leaf(a)
    (gx,) = paddle.grad(Cube.apply(paddle.exp(x)), x, grad_outputs=paddle.to_tensor(seed))
    assert_close(gx, seed * 3 * np.exp(a) ** 3)


def test_two_inputs_two_outputs_and_a_non_tensor_argument():
    a, b = np.random.rand(3), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    prod, total = ScaledProduct.apply(x, z, 2.5)
    assert_close(prod, a * b * 2.5)
    assert_close(total, a + b)
    (prod * 2.0 + total * total).sum().backward()
    assert_close(x.grad, 2.0 * b * 2.5 + 2 * (a + b))
    assert_close(z.grad, 2.0 * a * 2.5 + 2 * (a + b))


def test_tensors_passed_by_keyword_receive_gradients():
    a, b = np.random.rand(3), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    prod, _ = ScaledProduct.apply(x, z=z, scale=1.0)
    assert not prod.stop_gradient
    prod.sum().backward()
    assert_close(x.grad, b)
    assert_close(z.grad, a)


def test_tensors_inside_a_list_receive_gradients():
    class WeightedSum(PyLayer):
        @staticmethod
        def forward(ctx, tensors, weights):
            ctx.weights = weights
            return sum(t * w for t, w in zip(tensors, weights))

        @staticmethod
        def backward(ctx, dy):
            return tuple(dy * w for w in ctx.weights)

    a, b = np.random.rand(3), np.random.rand(3)
    x, z = leaf(a), leaf(b)
    y = WeightedSum.apply([x, z], [2.0, -3.0])
    assert_close(y, 2 * a - 3 * b)
    y.sum().backward()
    assert_close(x.grad, np.full(3, 2.0))
    assert_close(z.grad, np.full(3, -3.0))


def test_forward_may_return_non_tensor_items_that_pass_through():
    class WithInfo(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 4.0, 7, "tag", None

        @staticmethod
        def backward(ctx, dy):
            return dy * 4.0

    a = np.random.rand(2)
    x = leaf(a)
    y, number, text, nothing = WithInfo.apply(x)
    assert (number, text, nothing) == (7, "tag", None)
    y.sum().backward()
    assert_close(x.grad, np.full(2, 4.0))


def test_backward_receives_one_gradient_per_tensor_output_in_order():
    received = []

    class Split(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0, "skip", x * 2.0

        @staticmethod
        def backward(ctx, d_first, d_second):
            received.append((d_first.numpy().copy(), d_second.numpy().copy()))
            return d_first + 2.0 * d_second

    x = leaf(np.random.rand(3))
    first, _, second = Split.apply(x)
    s1, s2 = np.random.rand(3), np.random.rand(3)
    (gx,) = paddle.grad([first, second], x,
                        grad_outputs=[paddle.to_tensor(s1), paddle.to_tensor(s2)])
    assert_close(gx, s1 + 2 * s2)
    total_first = sum(r[0] for r in received)
    total_second = sum(r[1] for r in received)
    assert_close(total_first, s1)
    assert_close(total_second, s2)


def test_mark_non_differentiable_output_has_stop_gradient_and_zero_gradient():
    seen = []

    class ValueAndIndex(PyLayer):
        @staticmethod
        def forward(ctx, x):
            index = paddle.to_tensor(np.argsort(x.numpy()).astype("float64"))
            ctx.mark_non_differentiable(index)
            return x * 2.0, index

        @staticmethod
        def backward(ctx, dy, d_index):
            seen.append(d_index)
            return dy * 2.0

    x = leaf(np.random.rand(4))
    y, index = ValueAndIndex.apply(x)
    assert index.stop_gradient and not y.stop_gradient
    y.sum().backward()
    assert_close(x.grad, np.full(4, 2.0))
    assert all(d is None or np.all(d.numpy() == 0) for d in seen)


@pytest.mark.parametrize("materialize", [True, False])
def test_set_materialize_grads_controls_zeros_or_none_for_unused_outputs(materialize):
    seen = []

    class Two(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, d_two, d_three):
            seen.append(d_three)
            return d_two * 2.0

    a = np.random.rand(3)
    x = leaf(a)
    two, _ = Two.apply(x)
    two.sum().backward()  # the second output is not used
    assert_close(x.grad, np.full(3, 2.0))
    assert len(seen) == 1
    if materialize:
        assert seen[0] is not None
        assert_close(seen[0], np.zeros(3))
    else:
        assert seen[0] is None


def test_mark_not_inplace_lets_forward_return_its_input():
    class MaybeIdentity(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_not_inplace(x)
            return x

        @staticmethod
        def backward(ctx, dy):
            return dy * 5.0  # a recognisable gradient

    a = np.random.rand(3)
    x = leaf(a)
    y = MaybeIdentity.apply(x)
    assert_close(y, a)
    (y * y).sum().backward()
    assert_close(x.grad, 5.0 * 2 * a)


def test_returning_a_leaf_input_unchanged_without_mark_not_inplace_is_an_error():
    class Identity(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, dy):
            return dy

    with pytest.raises(ValueError):
        Identity.apply(leaf(np.random.rand(3)))


def test_pylayer_in_a_double_grad_chain():
    a = np.random.rand(3)
    x = leaf(a)
    y = Cube.apply(paddle.sin(x))
    (dx,) = paddle.grad(y, x, create_graph=True)  # 3 sin^2 cos
    s, c = np.sin(a), np.cos(a)
    assert_close(dx, 3 * s ** 2 * c)
    (ddx,) = paddle.grad(dx, x)
    assert_close(ddx, 6 * s * c ** 2 - 3 * s ** 3)


def test_backward_returning_too_many_gradients_raises():
    class TooMany(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, dy):
            return dy * 2.0, dy

    y = TooMany.apply(leaf(np.random.rand(2)))
    with pytest.raises(ValueError):
        y.sum().backward()


def test_backward_returning_too_few_gradients_raises():
    class TooFew(PyLayer):
        @staticmethod
        def forward(ctx, x, z):
            return x * z

        @staticmethod
        def backward(ctx, dy):
            return dy

    y = TooFew.apply(leaf(np.random.rand(2)), leaf(np.random.rand(2)))
    with pytest.raises(ValueError):
        y.sum().backward()


def test_backward_may_return_none_for_an_input():
    class OnlyFirst(PyLayer):
        @staticmethod
        def forward(ctx, x, z):
            return x + z

        @staticmethod
        def backward(ctx, dy):
            return dy, None

    x, z = leaf(np.random.rand(2)), leaf(np.random.rand(2))
    OnlyFirst.apply(x, z).sum().backward()
    assert_close(x.grad, np.ones(2))
    assert z.grad is None or np.all(z.grad.numpy() == 0)


def test_inputs_without_gradient_give_an_output_without_gradient():
    y = Cube.apply(paddle.to_tensor(np.random.rand(3)))
    assert y.stop_gradient


def test_forward_returning_no_tensor_is_an_error():
    class NoTensor(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return 3

        @staticmethod
        def backward(ctx, dy):
            return dy

    with pytest.raises(ValueError):
        NoTensor.apply(leaf(np.ones(2)))


def test_context_keeps_saved_tensors_and_attributes():
    ctx = PyLayerContext()
    t1, t2 = paddle.ones([2]), paddle.zeros([3])
    ctx.save_for_backward(t1, t2)
    saved = ctx.saved_tensor()
    assert len(saved) == 2 and saved[0] is t1 and saved[1] is t2
    ctx.anything = 3
    assert ctx.anything == 3
