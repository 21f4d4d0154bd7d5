"""Losses as Paddle 3.x computes them: broadcasting of input and label (with one warning),
dtype promotion between floating operands, class labels checked, and the Layer forms.

Expected numbers marked "PaddlePaddle 3.3.1" were printed by PaddlePaddle 3.3.1 (CPU) for
the same calls; the others are closed forms in NumPy."""

import warnings

import numpy as np
import pytest

import paddle
import paddle.nn.functional as F
from checks import assert_close


def tensor(values, dtype, requires_grad=False):
    return paddle.to_tensor(np.asarray(values), dtype=dtype, stop_gradient=not requires_grad)


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ---- broadcasting and promotion ------------------------------------------------------------

# PaddlePaddle 3.3.1: input float32 [1, 3], label float64 [2, 1] -> a float64 loss over [2, 3]
PADDLE_BROADCAST = {
    "mse_loss": {"mean": 1.65625, "sum": 9.9375,
                 "none": [[0.25, 4.0, 1.0], [0.0625, 1.5625, 3.0625]],
                 "input_grad": [[-0.0833333358168602, -1.0833333730697632, 0.9166666865348816]],
                 "label_grad": [[0.49999999999999994], [-0.24999999999999994]]},
    "l1_loss": {"mean": 1.125, "sum": 6.75,
                "none": [[0.5, 2.0, 1.0], [0.25, 1.25, 1.75]],
                "input_grad": [[0.0, -0.3333333432674408, 0.3333333432674408]],
                "label_grad": [[0.16666666666666666], [-0.16666666666666666]]},
}


@pytest.mark.parametrize("name", sorted(PADDLE_BROADCAST))
def test_regression_losses_broadcast_and_promote_as_paddle(name):
    fn, ref = getattr(F, name), PADDLE_BROADCAST[name]
    for reduction in ("mean", "sum", "none"):
        loss = quiet(fn, tensor([[0.5, -1.0, 2.0]], "float32"),
                     tensor([[1.0], [0.25]], "float64"), reduction=reduction)
        assert loss.dtype == paddle.float64
        assert_close(loss, ref[reduction], rtol=1e-15, atol=0, what=f"{name} {reduction}")
    x = tensor([[0.5, -1.0, 2.0]], "float32", requires_grad=True)
    y = tensor([[1.0], [0.25]], "float64", requires_grad=True)
    quiet(fn, x, y).backward()
    assert x.grad.dtype == paddle.float32 and x.grad.shape == [1, 3]
    assert y.grad.dtype == paddle.float64 and y.grad.shape == [2, 1]
    assert_close(x.grad, ref["input_grad"], rtol=1e-7, atol=0, what=f"{name} input grad")
    assert_close(y.grad, ref["label_grad"], rtol=1e-14, atol=0, what=f"{name} label grad")


def test_loss_of_the_paddle_3_demo_is_4_in_float64():
    # the loss_fn of the Paddle 3.0 document's demo: MSELoss(sum) of a [1] float32 sum of
    # softmax rows against the DataLoader's [1, 1] float64 label; PaddlePaddle 3.3.1: 4.0,
    # float64, shape []
    logits = F.softmax(tensor([[[0.3, -1.2, 2.0, 0.1], [1.0, 1.1, 1.2, 1.3],
                                [-3.0, 0.0, 3.0, 0.5]]], "float32"))
    total = paddle.sum(logits, axis=[1, 2])
    loss = quiet(paddle.nn.MSELoss(reduction="sum"), total, tensor([[1.0]], "float64"))
    assert loss.dtype == paddle.float64 and loss.shape == []
    assert float(loss) == pytest.approx(4.0, abs=1e-6)


def test_a_shape_difference_warns_once_per_pair_of_shapes():
    x, y = tensor([1.0, 2.0, 3.0], "float32"), tensor([[1.0], [2.0], [3.0], [4.0]], "float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            F.l1_loss(x, y)
            paddle.nn.L1Loss()(x, y)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "[3]" in messages[0] and "[4, 1]" in messages[0] and "[4, 3]" in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.l1_loss(x, x)  # equal shapes: no warning


def test_shapes_that_do_not_broadcast_raise_naming_both():
    with pytest.raises(ValueError, match=r"\[2, 3\] and \[4\]"):
        F.mse_loss(tensor(np.zeros((2, 3)), "float32"), tensor(np.zeros(4), "float32"))


def test_float32_program_stays_float32_and_float16_with_float32_is_float32():
    for fn in (F.mse_loss, F.l1_loss, F.smooth_l1_loss):
        loss = fn(tensor([1.0, 2.5], "float32"), tensor([0.0, 1.0], "float32"))
        assert loss.dtype == paddle.float32
        loss = fn(tensor([1.0, 2.5], "float32"), paddle.to_tensor([0, 1]))  # int label
        assert loss.dtype == paddle.float32
    # PaddlePaddle 3.3.1: mse_loss(float16 [1, 2.5], float32 [0, 1]) -> float32 1.625
    loss = F.mse_loss(tensor([1.0, 2.5], "float16"), tensor([0.0, 1.0], "float32"))
    assert loss.dtype == paddle.float32 and float(loss) == 1.625


def test_cross_entropy_promotes_a_float64_class_weight():
    # PaddlePaddle 3.3.1: float64 3.5045969486236572 and [7.0091938972, 3.0058286190]; it
    # takes the log-softmax in float32 first, primflow in float64 after promoting the logits
    # (hence rtol 1e-7 against Paddle, and a float64 NumPy oracle to 1e-14)
    values = np.array([[0.5, -2.0, 1.0], [0.1, 0.2, 0.3]], dtype=np.float32)
    logits, weight = tensor(values, "float32"), tensor([1.0, 2.0, 3.0], "float64")
    logp = values.astype(np.float64) - np.log(np.exp(values.astype(np.float64)).sum(1))[:, None]
    loss = F.cross_entropy(logits[:1], paddle.to_tensor([1]), weight=weight)
    assert loss.dtype == paddle.float64
    assert float(loss) == pytest.approx(3.5045969486236572, rel=1e-7)
    assert float(loss) == pytest.approx(-logp[0, 1], rel=1e-14)
    loss = F.cross_entropy(logits, paddle.to_tensor([1, 2]), weight=weight, reduction="none")
    assert_close(loss, [7.0091938972473145, 3.005828619003296], rtol=1e-7, atol=0)
    assert_close(loss, [-2 * logp[0, 1], -3 * logp[1, 2]], rtol=1e-14, atol=0)


def test_soft_label_cross_entropy_promotes_the_label():
    logits = np.array([[0.5, -2.0, 1.0]])
    target = np.array([[0.2, 0.3, 0.5]])
    loss = F.cross_entropy(tensor(logits, "float32"), tensor(target, "float64"),
                           soft_label=True)
    logp = logits - np.log(np.exp(logits).sum())
    assert loss.dtype == paddle.float64
    assert float(loss) == pytest.approx(-(target * logp).sum(), rel=1e-7)


# ---- smooth L1, NLL and their layers -------------------------------------------------------

def test_smooth_l1_loss_values_and_gradient_as_paddle():
    x = tensor([0.5, -2.0, 1.0], "float32")
    zeros = tensor([0.0, 0.0, 0.0], "float32")
    # PaddlePaddle 3.3.1
    assert_close(F.smooth_l1_loss(x, zeros, reduction="none"), [0.125, 1.5, 0.5], rtol=0,
                 atol=0)
    assert_close(F.smooth_l1_loss(x, zeros, reduction="none", delta=2.0), [0.125, 2.0, 0.5],
                 rtol=0, atol=0)
    mixed = F.smooth_l1_loss(x, tensor([0.0, 0.5, -0.25], "float64"))
    assert mixed.dtype == paddle.float64
    assert float(mixed) == pytest.approx(0.9583333333333334, rel=1e-15)
    x = tensor([0.5, -2.0, 1.0, 0.2], "float32", requires_grad=True)
    loss = F.smooth_l1_loss(x, tensor([0.0, 0.5, -0.25, 0.1], "float32"), reduction="sum",
                            delta=0.8)
    loss.backward()
    assert float(loss) == pytest.approx(2.490000009536743, rel=1e-7)
    assert_close(x.grad, [0.5, -0.800000011920929, 0.800000011920929, 0.10000000149011612],
                 rtol=1e-7, atol=0)


def test_nll_loss_with_weight_and_ignore_index_as_paddle():
    x = tensor([[0.5, -2.0, 1.0], [1.0, 2.0, 3.0], [0.0, 0.0, -1.0]], "float32",
               requires_grad=True)
    loss = F.nll_loss(x, paddle.to_tensor([2, -100, 0]), weight=tensor([0.5, 2.0, 3.0],
                                                                      "float32"))
    loss.backward()
    # PaddlePaddle 3.3.1: -0.8571428656578064 and this gradient
    assert float(loss) == pytest.approx(-0.8571428656578064, rel=1e-7)
    assert_close(x.grad, [[0.0, 0.0, -0.8571428656578064], [0.0, 0.0, 0.0],
                          [-0.1428571492433548, 0.0, 0.0]], rtol=1e-6, atol=0)
    x = tensor([[0.5, -2.0, 1.0], [1.0, 2.0, 3.0]], "float32")
    assert float(F.nll_loss(x, paddle.to_tensor([-100, 1]))) == -2.0
    assert_close(F.nll_loss(x, paddle.to_tensor([0, 1]), reduction="none"), [-0.5, -2.0],
                 rtol=0, atol=0)


def test_nll_loss_over_extra_dims_matches_numpy():
    rng = np.random.default_rng(0)
    logp = rng.normal(size=(2, 3, 4))
    label = np.array([[0, 2, 1, 1], [2, 2, 0, 1]])
    loss = F.nll_loss(tensor(logp, "float64"), paddle.to_tensor(label), reduction="none")
    expected = -np.take_along_axis(logp, label[:, None, :], axis=1)[:, 0, :]
    assert_close(loss, expected, rtol=1e-15, atol=0)


def test_loss_layers_as_paddle():
    # PaddlePaddle 3.3.1
    loss = quiet(paddle.nn.L1Loss(reduction="none"), tensor([1.0, 2.0], "float32"),
                 tensor([[0.5], [3.0]], "float64"))
    assert loss.dtype == paddle.float64 and loss.shape == [2, 2]
    assert_close(loss, [[0.5, 1.5], [2.0, 1.0]], rtol=0, atol=0)
    loss = paddle.nn.SmoothL1Loss(delta=0.5)(tensor([1.0, 2.0], "float32"),
                                             tensor([0.75, 3.0], "float32"))
    assert loss.dtype == paddle.float32 and float(loss) == 0.203125
    loss = paddle.nn.NLLLoss(reduction="sum")(tensor([[-1.0, -2.0], [-0.5, -0.1]], "float32"),
                                              paddle.to_tensor([1, 0]))
    assert float(loss) == 2.5


# ---- bad labels and shapes -----------------------------------------------------------------

@pytest.mark.parametrize("label", [5, 3, -1])
def test_class_label_outside_the_classes_raises(label):
    logits = tensor([[0.5, -2.0, 1.0], [0.1, 0.2, 0.3]], "float32")
    labels = paddle.to_tensor([0, label])
    with pytest.raises(IndexError, match=rf"cross_entropy: label value\(s\) \[{label}\] "
                                         rf"outside \[0, 3\)"):
        F.cross_entropy(logits, labels)
    with pytest.raises(IndexError, match=r"nll_loss: label value\(s\)"):
        F.nll_loss(F.log_softmax(logits), labels)
    with pytest.raises(IndexError, match="outside"):
        paddle.nn.CrossEntropyLoss()(logits, labels)


def test_ignore_index_outside_the_classes_is_allowed():
    logits = tensor([[0.5, -2.0, 1.0], [0.1, 0.2, 0.3]], "float32")
    kept = F.cross_entropy(logits[1:], paddle.to_tensor([2]))
    both = F.cross_entropy(logits, paddle.to_tensor([-1, 2]), ignore_index=-1)
    assert float(both) == pytest.approx(float(kept), rel=1e-7)


def test_binary_cross_entropy_with_logits_needs_equal_shapes():
    with pytest.raises(ValueError, match=r"logit shape \[1, 2\] and label shape \[2, 1\]"):
        F.binary_cross_entropy_with_logits(tensor([[0.5, -2.0]], "float32"),
                                           tensor([[0.0], [1.0]], "float32"))
    loss = F.binary_cross_entropy_with_logits(tensor([0.5, -2.0], "float32"),
                                              tensor([0.0, 1.0], "float64"))
    x, y = np.array([0.5, -2.0]), np.array([0.0, 1.0])
    assert loss.dtype == paddle.float64
    assert float(loss) == pytest.approx(np.mean(np.logaddexp(0, x) - y * x), rel=1e-7)
