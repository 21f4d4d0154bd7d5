"""Mixed precision (pf.amp) and low-precision dtypes: values within each dtype's tolerance
of the float64 result, master weights and gradients in float32, loss scaling."""

import numpy as np
import pytest

import primflow as pf
from primflow.testing.opinfo import OP_DB

# per-dtype tolerances (rtol, atol) of a forward value against float64: float16 keeps 11
# significant bits (~5e-4 relative per operation), float32 24
TOL = {"float16": (1e-2, 1e-2), "float32": (1e-5, 1e-6)}


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
    with pytest.raises(NotImplementedError, match="bfloat16"):
        with pf.amp.auto_cast(dtype="bfloat16"):
            pass


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


@pytest.mark.parametrize("dtype", ["float32", "float16"])
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
