"""Seed 002 (飞桨框架 3.0 新特性): the two RMSNorm layers of 5.1 (p3_rmsnorm_*.py) against
NumPy, and the demo of 九、开始使用 (p3_demo.py) on one and two processes: it prints
``loss 4.0`` for each of its ten batches, as PaddlePaddle 3.3.1 does (the softmax rows of
each [3, 4] sample sum to 3 and the label is 1). The MlpModel example of 4.2 is
test_seeds_distributed.py's."""

import pathlib
import re
import sys

import numpy as np
import pytest

import primflow as paddle
from seedrun import HERE, run_example

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "distributed"))
from mpi_helpers import check, run_mpi  # noqa: E402


def np_rms_norm(x, w, eps=1e-6):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def np_rms_norm_grad(x, w, g, eps=1e-6):
    """d <rms_norm(x) w, g> / dx over the last axis (closed form)."""
    r = 1.0 / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)
    gw = g * w
    return r * gw - x * r ** 3 * (gw * x).mean(-1, keepdims=True)


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(5)
    return rng.normal(size=(2, 3, 768)), rng.normal(size=(2, 3, 768)), rng.normal(size=768)


def test_rms_norm_written_with_tensor_ops_matches_numpy(sample):
    x_np, g_np, w_np = sample
    layer = run_example("p3_rmsnorm_composite.py")[0]["RMSNorm"]()
    assert layer.weight.shape == [768] and layer.weight.dtype == paddle.float32
    np.testing.assert_array_equal(layer.weight.numpy(), np.ones(768))  # Constant(1.0)
    layer.weight.set_value(paddle.to_tensor(w_np, dtype="float32"))
    x = paddle.to_tensor(x_np, dtype="float32", stop_gradient=False)
    out = layer(x)
    w32 = w_np.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(out.numpy(), np_rms_norm(x_np.astype(np.float32), w32),
                               rtol=2e-5, atol=2e-6)
    (out * paddle.to_tensor(g_np, dtype="float32")).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np_rms_norm_grad(x_np, w32, g_np),
                               rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(layer.weight.grad.numpy(),
                               (g_np * np_rms_norm(x_np, 1.0)).sum(axis=(0, 1)), rtol=1e-3,
                               atol=1e-4)


def test_fused_rms_norm_layer_matches_the_composite_one(sample):
    x_np, g_np, w_np = sample
    fused = run_example("p3_rmsnorm_fused.py")[0]["RMSNorm"]()
    composite = run_example("p3_rmsnorm_composite.py")[0]["RMSNorm"]()
    for layer in (fused, composite):  # float32 parameters (paddle.get_default_dtype())
        layer.weight.set_value(paddle.to_tensor(w_np, dtype="float32"))
    w_np = w_np.astype(np.float32).astype(np.float64)
    xs = [paddle.to_tensor(x_np, dtype="float64", stop_gradient=False) for _ in range(2)]
    out, residual_out = fused(xs[0])  # Paddle's fused_rms_norm returns (out, residual_out)
    assert residual_out.shape == [0]
    np.testing.assert_allclose(out.numpy(), composite(xs[1]).numpy(), rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), np_rms_norm(x_np, w_np), rtol=1e-12)
    for x, y in zip(xs, (out, composite(xs[1]))):
        (y * paddle.to_tensor(g_np)).sum().backward()
    np.testing.assert_allclose(xs[0].grad.numpy(), np_rms_norm_grad(x_np, w_np, g_np),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("ranks", [1, 2])
def test_demo_prints_loss_4_for_every_batch(ranks):
    printed = check(run_mpi(ranks, str(HERE / "p3_demo.py"), timeout=120))
    losses = [float(v) for v in re.findall(r"local=array\(([-+0-9.e]+)\)", printed)]
    assert len(losses) == 10 * ranks, printed  # ten batches, printed by every rank
    np.testing.assert_allclose(losses, 4.0, rtol=0, atol=1e-5)
    # Paddle's dtype: the float32 logits and the DataLoader's float64 label promote
    assert printed.count("dtype=float64") == 10 * ranks
    assert printed.count("shape=[]") == 10 * ranks
