"""Mixed precision (pf.amp) and low-precision dtypes: values within each dtype's tolerance
of the float64 result, master weights and gradients in float32, loss scaling."""

import math

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import requires_extra
from primflow.testing.opinfo import OP_DB

# per-dtype tolerances (rtol, atol) of a forward value against float64: float16 keeps 11
# significant bits (~5e-4 relative per operation), float32 24, bfloat16 8 (~4e-3 relative
# per rounding; it computes in float32 and rounds once per operation)
TOL = {"float16": (1e-2, 1e-2), "float32": (1e-5, 1e-6), "bfloat16": (4e-2, 4e-2)}

# bfloat16 on the NumPy backend needs the optional ml_dtypes package
needs_ml_dtypes = requires_extra("bfloat16")


def _mlp():
    pf.seed(0)
    return pf.nn.Sequential(pf.nn.Linear(4, 16), pf.nn.Tanh(), pf.nn.LayerNorm(16),
                            pf.nn.Linear(16, 1))


def test_auto_cast_runs_white_list_low_and_black_list_in_float32():
    net = _mlp()
    x, y = pf.randn([32, 4]), pf.randn([32, 1])
    reference = net(x).numpy()
    with pf.amp.auto_cast():
        assert pf.amp.is_auto_cast_enabled()
        assert net[0](x).dtype == pf.float16  # a matrix product: low precision
        assert net[2](net[0](x)).dtype == pf.float32  # a normalisation: float32
        out = net(x)
        loss = pf.nn.MSELoss()(out, y)
    assert not pf.amp.is_auto_cast_enabled()
    assert out.dtype == pf.float16 and loss.dtype == pf.float32
    np.testing.assert_allclose(out.numpy().astype(np.float64), reference, *TOL["float16"])
    loss.backward()
    w = net[0].weight
    assert w.dtype == pf.float32 and w.grad.dtype == pf.float32  # master weights
    # the gradient agrees with the float32 one within float16's accuracy
    net2 = _mlp()
    pf.nn.MSELoss()(net2(x), y).backward()
    np.testing.assert_allclose(w.grad.numpy(), net2[0].weight.grad.numpy(), rtol=5e-2,
                               atol=5e-3)


def test_auto_cast_lists_and_bad_arguments():
    with pf.amp.auto_cast(custom_black_list={"Linear"}):
        assert pf.nn.Linear(2, 2)(pf.ones([1, 2])).dtype == pf.float32
    with pf.amp.auto_cast(enable=False):
        assert pf.nn.Linear(2, 2)(pf.ones([1, 2])).dtype == pf.float32
    with pytest.raises(ValueError, match="level"):
        with pf.amp.auto_cast(level="O3"):
            pass
    with pytest.raises(ValueError, match="float16"):
        with pf.amp.auto_cast(dtype="int8"):
            pass


@needs_ml_dtypes
def test_auto_cast_bfloat16():
    net = _mlp()
    x, y = pf.randn([32, 4]), pf.randn([32, 1])
    reference = net(x).numpy()
    with pf.amp.auto_cast(dtype="bfloat16"):
        assert net[0](x).dtype == pf.bfloat16
        out = net(x)
        loss = pf.nn.MSELoss()(out, y)
    assert out.dtype == pf.bfloat16 and loss.dtype == pf.float32
    np.testing.assert_allclose(out.numpy().astype(np.float64), reference, *TOL["bfloat16"])
    loss.backward()
    w = net[0].weight
    assert w.dtype == pf.float32 and w.grad.dtype == pf.float32  # master weights
    net2 = _mlp()
    pf.nn.MSELoss()(net2(x), y).backward()
    np.testing.assert_allclose(w.grad.numpy(), net2[0].weight.grad.numpy(), rtol=0.2,
                               atol=3e-2)


@needs_ml_dtypes
def test_bfloat16_storage_gradients_jit_and_checkpoints(tmp_path):
    """Stored in 16 bits, computed in float32: sums and matrix products accumulate in float32
    (a bfloat16 accumulator would stall at 256 adding ones), then round once."""
    ones = pf.ones([1000], dtype="bfloat16")
    assert ones.sum().dtype == pf.bfloat16 and float(ones.sum()) == 1000.0
    m = pf.ones([4, 1000], dtype=pf.bfloat16)
    assert (m @ m.T).dtype == pf.bfloat16 and float((m @ m.T)[0, 0]) == 1000.0
    x0 = np.array([0.5, 1.5, -2.0])
    x = pf.to_tensor(x0, dtype="bfloat16", stop_gradient=False)
    (pf.tanh(x) * x).sum().backward()
    assert x.grad.dtype == pf.bfloat16
    xb = x0.astype(np.float64)  # the values are exact in bfloat16
    expected = np.tanh(xb) + xb / np.cosh(xb) ** 2
    np.testing.assert_allclose(x.grad.numpy().astype(np.float64), expected, rtol=2e-2)
    jitted = pf.jit(pf.grad(lambda a: (pf.erf(a) * a).sum() + (ones[:3] * a).sum()))
    g = jitted(x)
    assert g.dtype == pf.bfloat16
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(g.numpy().astype(np.float64),
                               erf(xb) + xb * 2 / np.sqrt(np.pi) * np.exp(-xb ** 2) + 1,
                               rtol=2e-2)
    assert (x + pf.ones([3], dtype="float16")).dtype == pf.float32  # neither holds the other
    assert (x * 2.0).dtype == pf.bfloat16 and (x + pf.ones([3], dtype="int8")).dtype == pf.bfloat16
    pf.save({"x": x}, str(tmp_path / "bf16.pdparams"))
    back = pf.load(str(tmp_path / "bf16.pdparams"))["x"]
    assert back.dtype == pf.bfloat16
    np.testing.assert_array_equal(back.numpy().astype(np.float64), x.numpy().astype(np.float64))


def test_bfloat16_without_ml_dtypes_names_the_extra(monkeypatch):
    import sys

    from primflow.backends import numpy_backend
    from primflow.core import dtypes

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes fails
    with pytest.raises(TypeError, match=r"primflow\[bfloat16\]"):
        numpy_backend._NativeDtypes()[dtypes.bfloat16]


def test_grad_scaler_skips_overflowing_steps_and_adapts_the_scale():
    w = pf.create_parameter([2], "float32")
    start = w.numpy().copy()
    opt = pf.optimizer.SGD(learning_rate=0.1, parameters=[w])
    scaler = pf.amp.GradScaler(init_loss_scaling=4.0, incr_every_n_steps=2)
    scaler.scale((w * w).sum()).backward()
    scaler.minimize(opt, None)
    np.testing.assert_allclose(w.numpy(), start - 0.1 * 2 * start, rtol=1e-6)  # unscaled
    opt.clear_grad()
    w.grad = pf.to_tensor([np.inf, 1.0])  # an overflowed gradient: no step, scale halves
    before = w.numpy().copy()
    scaler.minimize(opt, None)
    np.testing.assert_array_equal(w.numpy(), before)
    assert scaler.get_loss_scaling() == 2.0


# ---- OpInfo values per dtype: float32 and float16 against float64 ----------------------------

_UNARY = [info for info in OP_DB if info.kind == "diff" and info.name in {
    "exp", "log", "sin", "cos", "tanh", "sqrt", "abs", "neg", "add", "mul", "sub", "div",
    "sigmoid", "relu", "silu", "softplus", "sum", "mean", "softmax", "matmul"}]


@pytest.mark.parametrize("dtype", ["float32", "float16",
                                   pytest.param("bfloat16", marks=needs_ml_dtypes)])
@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in _UNARY])
def test_opinfo_values_per_dtype(info, dtype):
    rtol, atol = TOL[dtype]
    for sample in info.samples()[:2]:
        args = [pf.to_tensor(a, dtype=dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                else a for a in sample.args]
        with pf.no_grad():
            out = info.op(*args, **sample.kwargs)
        expected = info.ref(*[np.asarray(a.numpy(), np.float64) if isinstance(a, pf.Tensor)
                              else a for a in args], **sample.kwargs)
        if expected is None:
            continue
        assert out.dtype == getattr(pf, dtype), f"{info.name}: {out.dtype} for {dtype}"
        np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=rtol,
                                   atol=atol * max(1.0, float(np.abs(expected).max())))
