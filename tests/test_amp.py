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


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the point here
def test_grad_scaler_skips_steps_whose_float16_gradients_overflow_and_halves_the_scale():
    """Paddle's and PyTorch's defaults (scale 2^16, x0.5 after one overflowing step): the
    float16 cotangent 2^16 of ``out.sum()`` overflows (float16 stops at 65504), then the
    weight gradient 2 * 2^15 does; at 2^14 the step runs, and it is the float32 one."""
    pf.seed(0)
    net = pf.nn.Linear(4, 1)
    start = [p.numpy().copy() for p in net.parameters()]
    opt = pf.optimizer.Adam(learning_rate=0.1, parameters=net.parameters())
    scaler = pf.amp.GradScaler()
    assert scaler.get_loss_scaling() == 2.0 ** 16
    x = pf.ones([2, 4])
    scales, overflowed = [], []
    for _ in range(3):
        with pf.amp.auto_cast():
            loss = net(x).sum()
        assert loss.dtype == pf.float16
        scaler.scale(loss).backward()
        overflowed.append(not all(np.isfinite(p.grad.numpy()).all() for p in net.parameters()))
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        scales.append(scaler.get_loss_scaling())
        if len(scales) < 3:  # skipped: no parameter (and no Adam moment) moved
            for p, s in zip(net.parameters(), start):
                np.testing.assert_array_equal(p.numpy(), s)
    assert overflowed == [True, True, False] and scales == [2.0 ** 15, 2.0 ** 14, 2.0 ** 14]
    pf.seed(0)
    ref = pf.nn.Linear(4, 1)
    ref_opt = pf.optimizer.Adam(learning_rate=0.1, parameters=ref.parameters())
    ref(x).sum().backward()
    ref_opt.step()  # Adam's first step: exactly this one, the skipped ones left no trace
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6)


def test_grad_scaler_grows_the_scale_after_a_run_of_finite_steps_and_never_below_one():
    w = pf.create_parameter([2], "float32")
    opt = pf.optimizer.SGD(learning_rate=0.0, parameters=[w])
    scaler = pf.amp.GradScaler(init_loss_scaling=2.0, incr_every_n_steps=3,
                               decr_every_n_nan_or_inf=2)
    seen = []
    for grad in [1.0, 1.0, 1.0, np.inf, 1.0, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf]:
        w.grad = pf.to_tensor([grad, 0.0], dtype="float32") * scaler.get_loss_scaling()
        scaler.step(opt)
        scaler.update()
        seen.append(scaler.get_loss_scaling())
    # x2 after 3 finite steps in a row; x0.5 after 2 overflows in a row (a finite step resets
    # the count); clamped at 1, as Paddle does
    assert seen == [2, 2, 4, 4, 4, 4, 2, 2, 1, 1, 1]
    fixed = pf.amp.GradScaler(init_loss_scaling=8.0, use_dynamic_loss_scaling=False)
    w.grad = pf.to_tensor([np.inf, 0.0], dtype="float32")
    fixed.minimize(opt)
    assert fixed.get_loss_scaling() == 8.0 and not fixed.is_use_dynamic_loss_scaling()


def test_grad_scaler_unscales_once_per_update():
    """``unscale_`` before ``step`` (to clip the true gradients) must not make ``step``
    divide them again; a second ``unscale_`` or ``step`` before ``update`` is an error."""
    w = pf.create_parameter([2], "float32")
    w.set_value(pf.to_tensor([1.0, -2.0]))
    opt = pf.optimizer.SGD(learning_rate=0.5, parameters=[w])
    scaler = pf.amp.GradScaler(init_loss_scaling=64.0)
    scaler.scale((w * w).sum()).backward()
    scaler.unscale_(opt)
    np.testing.assert_allclose(w.grad.numpy(), [2.0, -4.0])  # the true gradient
    with pytest.raises(RuntimeError, match="already called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    np.testing.assert_allclose(w.numpy(), [0.0, 0.0])  # 1 - 0.5*2, -2 + 0.5*4
    with pytest.raises(RuntimeError, match="update"):
        scaler.step(opt)
    scaler.update()
    opt.clear_grad()
    scaler.scale((w + 1.0).sum()).backward()
    scaler.step(opt)  # unscales again after the update
    np.testing.assert_allclose(w.numpy(), [-0.5, -0.5])


def test_grad_scaler_scales_a_float16_loss_in_float32():
    """65504 is float16's largest value: a float16 loss scaled in float16 would be inf."""
    loss = pf.to_tensor(3.0, dtype="float16")
    scaled = pf.amp.GradScaler().scale(loss)
    assert scaled.dtype == pf.float32 and float(scaled) == 3.0 * 2 ** 16
    assert pf.amp.GradScaler(enable=False).scale(loss) is loss


def test_grad_scaler_bad_arguments_and_state_dict():
    for kwargs, match in [({"init_loss_scaling": 0.0}, "init_loss_scaling"),
                          ({"init_loss_scaling": float("inf")}, "init_loss_scaling"),
                          ({"decr_ratio": 1.5}, "decr_ratio"), ({"incr_ratio": 0.5}, "incr_ratio"),
                          ({"incr_every_n_steps": 0}, "incr_every_n_steps"),
                          ({"decr_every_n_nan_or_inf": 1.5}, "decr_every_n_nan_or_inf")]:
        with pytest.raises(ValueError, match=match):
            pf.amp.GradScaler(**kwargs)
    a = pf.amp.GradScaler(init_loss_scaling=32.0, incr_every_n_steps=5)
    w = pf.create_parameter([1], "float32")
    opt = pf.optimizer.SGD(learning_rate=0.1, parameters=[w])
    w.grad = pf.ones([1])
    a.minimize(opt)
    b = pf.amp.GradScaler()
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict() and b.get_loss_scaling() == 32.0
    with pytest.raises(ValueError, match="lacks"):
        b.load_state_dict({"scale": 2.0})


def test_jit_retraces_when_auto_cast_turns_on_or_off():
    """The casts auto_cast inserts are traced into a jitted program, so the program of one
    state must not run in the other (it did: float32 inside auto_cast, float16 outside)."""
    net = pf.nn.Linear(4, 2)
    x = pf.ones([3, 4])
    f = pf.jit(lambda v: net(v))
    assert f(x).dtype == pf.float32
    with pf.amp.auto_cast():
        assert f(x).dtype == pf.float16
        with pf.amp.auto_cast(custom_black_list={"Linear"}):
            assert f(x).dtype == pf.float32
    assert f(x).dtype == pf.float32
    g = pf.jit(lambda v: net(v))
    with pf.amp.auto_cast():
        assert g(x).dtype == pf.float16
    assert g(x).dtype == pf.float32


def test_float16_matrix_products_compute_in_float32():
    """NumPy's float16 matmul has no BLAS; primflow computes float16 products in float32
    and rounds once, eager and jitted, with ``out=`` too."""
    from primflow.backends import blas

    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 300)).astype(np.float16)
    b = rng.standard_normal((300, 8)).astype(np.float16)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    got = blas.matmul(a, b)
    assert got.dtype == np.float16 and np.all(np.abs(got - exact) <= ulp)
    out = np.empty((40, 8), np.float16)
    assert blas.matmul(a, b, out=out) is out and np.array_equal(out, got)
    ta, tb = pf.to_tensor(a), pf.to_tensor(b)
    for product in ((ta @ tb), pf.jit(lambda u, v: u @ v)(ta, tb)):
        assert product.dtype == pf.float16
        assert np.all(np.abs(product.numpy() - exact) <= ulp)


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
