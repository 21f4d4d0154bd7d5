"""Fourier neural operators: spectral layers against NumPy's FFT and finite differences,
the models, the data generators against closed forms / convergence, the npz cache, training
and the demos."""

import json

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import import_extra
from primflow.cli import main
from primflow.science.neural_operators import (FNO1D, FNO2D, OperatorSettings, data,
                                               relative_l2_loss, train_operator)


def _f64(layer):
    layer.to(dtype="float64")
    return layer


def _check_against_central_differences(weight, grad, loss, indices, eps=1e-6):
    """``grad`` (of ``loss()`` to ``weight``) at ``indices`` against float64 central
    differences; ``weight`` is restored afterwards."""
    base = weight.numpy().copy()
    try:
        for index in indices:
            bumped = base.copy()
            bumped[index] += eps
            weight.set_value(pf.to_tensor(bumped, dtype="float64"))
            up = loss()
            bumped[index] -= 2 * eps
            weight.set_value(pf.to_tensor(bumped, dtype="float64"))
            down = loss()
            assert grad[index] == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-9)
    finally:
        weight.set_value(pf.to_tensor(base, dtype="float64"))


def test_spectral_conv_1d_matches_numpy_fft():
    pf.seed(0)
    conv = _f64(pf.nn.SpectralConv1D(3, 2, 5))
    x = pf.randn([4, 3, 16]).astype("float64")
    W = conv.weight_real.numpy() + 1j * conv.weight_imag.numpy()
    xh = np.fft.rfft(x.numpy(), axis=-1)[:, :, :5]
    full = np.zeros((4, 2, 9), complex)
    full[:, :, :5] = np.einsum("bck,cok->bok", xh, W)
    np.testing.assert_allclose(conv(x).numpy(), np.fft.irfft(full, n=16, axis=-1), atol=1e-13)


def test_spectral_conv_2d_matches_numpy_fft():
    pf.seed(1)
    conv = _f64(pf.nn.SpectralConv2D(3, 2, 3, 4))
    x = pf.randn([2, 3, 10, 12]).astype("float64")
    W = conv.weight_real.numpy() + 1j * conv.weight_imag.numpy()
    xh = np.fft.rfft2(x.numpy())
    out = np.zeros((2, 2, 10, 7), complex)
    out[:, :, :3, :4] = np.einsum("bcxy,coxy->boxy", xh[:, :, :3, :4], W[:, :, :3])
    out[:, :, -3:, :4] = np.einsum("bcxy,coxy->boxy", xh[:, :, -3:, :4], W[:, :, 3:])
    np.testing.assert_allclose(conv(x).numpy(), np.fft.irfft2(out, s=(10, 12)), atol=1e-13)


def test_spectral_conv_gradients_match_finite_differences():
    pf.seed(2)
    conv = _f64(pf.nn.SpectralConv2D(2, 2, 2, 2))
    x = pf.randn([1, 2, 6, 6]).astype("float64")
    weight = conv.weight_imag
    loss = lambda: float((conv(x) ** 2).sum())
    (conv(x) ** 2).sum().backward()
    grad = weight.grad.numpy()
    _check_against_central_differences(weight, grad, loss,
                                       [(0, 1, 2, 1), (1, 0, 0, 0), (1, 1, 3, 1)])


def test_spectral_conv_bad_input():
    conv = pf.nn.SpectralConv1D(2, 2, 8)
    with pytest.raises(ValueError, match="fewer than 8 Fourier modes"):
        conv(pf.ones([1, 2, 10]))
    with pytest.raises(ValueError, match=r"expects \[N, 2, s\]"):
        conv(pf.ones([1, 3, 16]))
    with pytest.raises(ValueError, match="modes1 must be a positive int"):
        pf.nn.SpectralConv2D(2, 2, 0, 3)


def test_models_are_resolution_independent():
    model = FNO1D(modes=4, width=8)
    assert model(pf.ones([2, 16])).shape == [2, 16]
    assert model(pf.ones([2, 40])).shape == [2, 40]
    model2 = FNO2D(modes1=3, modes2=2, width=4, padding=3)
    assert model2(pf.ones([1, 9, 11])).shape == [1, 9, 11]
    with pytest.raises(ValueError, match=r"\[N, s\]"):
        model(pf.ones([2, 3, 4]))


def test_pointwise_channel_map_is_the_linear_layer_on_channels():
    """FNO2D's 1x1 convolution runs channels-first (one product per sample, no transposed
    copy); it must equal the Linear layer applied to the channels (an einsum here), and its
    gradients (the jitted training step's) finite differences of the model's loss."""
    from primflow.science.neural_operators.models import _channels_first_linear

    pf.seed(3)
    linear = _f64(pf.nn.Linear(3, 4))
    x = pf.randn([2, 3, 5, 6]).astype("float64")
    want = (np.einsum("ncij,co->noij", x.numpy(), linear.weight.numpy())
            + linear.bias.numpy()[None, :, None, None])
    np.testing.assert_allclose(_channels_first_linear(linear, x).numpy(), want, atol=1e-14)

    model = _f64(FNO2D(modes1=2, modes2=2, width=3, padding=2, projection=4))
    a = pf.randn([2, 7, 7]).astype("float64")
    weight = model.pointwise[1].weight
    loss = lambda: float((model(a) ** 2).sum())
    _, grads = pf.jit(pf.value_and_grad(lambda v: (model(v) ** 2).sum(), None,
                                        [weight]))(a)
    grad = grads[0].numpy()
    _check_against_central_differences(weight, grad, loss, [(0, 0), (1, 2), (2, 1)])


def test_relative_l2_loss():
    t = pf.to_tensor([[3.0, 4.0], [1.0, 0.0]], dtype="float64")
    p = pf.to_tensor([[3.0, 4.5], [1.0, 0.1]], dtype="float64")
    assert float(relative_l2_loss(p, t)) == pytest.approx((0.5 / 5 + 0.1) / 2)


# ---- generators ------------------------------------------------------------------------

def test_grf_1d_statistics():
    u = data.grf_1d(400, 64, seed=0)
    assert np.abs(u.mean(axis=1)).max() < 1e-12  # no mean mode
    # the variance of mode k is proportional to (4 pi^2 k^2 + 25)^-2
    power = (np.abs(np.fft.rfft(u, axis=1)) ** 2).mean(axis=0)
    ratio = power[1] / power[3]
    expected = ((4 * np.pi ** 2 * 9 + 25) / (4 * np.pi ** 2 + 25)) ** 2
    assert ratio == pytest.approx(expected, rel=0.2)
    np.testing.assert_array_equal(u, data.grf_1d(400, 64, seed=0))


def test_burgers_solver_matches_cole_hopf():
    u0 = data.grf_1d(3, 128, seed=4)
    ref = data.burgers_cole_hopf(u0, nu=0.1, t=0.5)
    u = data.burgers_solve(u0, nu=0.1, t=0.5)
    assert np.abs(u - ref).max() < 1e-7 * np.abs(ref).max()
    # and the time error falls as the step shrinks (fourth order)
    e1 = np.abs(data.burgers_solve(u0, 0.1, 0.5, dt=0.01) - ref).max()
    e2 = np.abs(data.burgers_solve(u0, 0.1, 0.5, dt=0.005) - ref).max()
    assert e2 < e1 / 6  # about 2^-3 here: fourth order in dt, with the spatial floor


def test_burgers_rejects_unresolvable_grids():
    with pytest.raises(ValueError, match="cannot resolve"):
        data.burgers_solve(50 * np.sin(2 * np.pi * np.arange(16) / 16), nu=0.01, t=0.1)
    with pytest.raises(ValueError, match="multiple of the resolution"):
        data.burgers_dataset(2, 1, s=48, grid=100, cache_dir=False)


def test_darcy_solver_converges_at_second_order():
    errors = []
    for m in (9, 17, 33):
        x = np.linspace(0, 1, m)
        X, Y = np.meshgrid(x, x, indexing="ij")
        exact = np.sin(np.pi * X) * np.sin(np.pi * Y)
        # a = 1 + x: f = -div(a grad u) = 2 pi^2 a u - pi cos(pi x) sin(pi y)
        a = 1.0 + X
        f = 2 * np.pi ** 2 * a * exact - np.pi * np.cos(np.pi * X) * np.sin(np.pi * Y)
        u = data.darcy_solve(a, f, solver="cg")
        errors.append(np.abs(u - exact).max())
    assert errors[0] / errors[1] == pytest.approx(4, rel=0.15)
    assert errors[1] / errors[2] == pytest.approx(4, rel=0.15)


def test_darcy_solvers_agree_and_data_is_thresholded():
    import_extra("fast", "scipy")
    a = np.where(data.grf_2d(1, 17, seed=3)[0] >= 0, 12.0, 3.0)
    np.testing.assert_allclose(data.darcy_solve(a, solver="sparse"),
                               data.darcy_solve(a, solver="cg"), atol=1e-11)
    x, y, xt, yt = data.darcy_dataset(2, 1, s=9, cache_dir=False)
    assert set(np.unique(x)) <= {3.0, 12.0} and x.shape == (2, 9, 9)
    assert np.all(y[:, 0, :] == 0) and np.all(y > -1e-15)


def test_darcy_bad_resolution():
    with pytest.raises(ValueError, match="s <= 421"):
        data.darcy_dataset(1, 1, s=600, cache_dir=False)
    with pytest.raises(ValueError, match="s must be an int >= 5"):
        data.darcy_dataset(1, 1, s=3, cache_dir=False)
    with pytest.raises(ValueError, match="positive everywhere"):
        data.darcy_solve(np.zeros((5, 5)))


# ---- the cache -------------------------------------------------------------------------

def test_cache_loads_regenerates_and_never_unpickles(tmp_path):
    calls, lines = [], []

    def generate():
        calls.append(1)
        return {"x": np.arange(6.0).reshape(2, 3)}

    meta = {"problem": "toy", "n": 2}
    shapes = {"x": (2, 3)}
    first = data.load_or_generate(meta, generate, shapes, tmp_path, lines.append)
    second = data.load_or_generate(meta, generate, shapes, tmp_path, lines.append)
    assert len(calls) == 1 and np.array_equal(first["x"], second["x"])
    (path,) = list(tmp_path.glob("*.npz"))
    path.write_bytes(b"not a zip file")  # corrupt
    third = data.load_or_generate(meta, generate, shapes, tmp_path, lines.append)
    assert len(calls) == 2 and np.array_equal(third["x"], first["x"])
    assert any("unusable" in line and "cannot be read" in line for line in lines)
    np.savez(path, meta=np.array("x"), x=np.array([object()], dtype=object))  # a pickle
    data.load_or_generate(meta, generate, shapes, tmp_path, lines.append)
    assert len(calls) == 3
    data.load_or_generate(dict(meta, n=3), lambda: {"x": np.ones((2, 3))}, shapes, tmp_path,
                          lines.append)  # other parameters: another file
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_burgers_dataset_is_cached_and_seeded(tmp_path):
    a = data.burgers_dataset(3, 2, s=32, cache_dir=tmp_path, log=lambda line: None)
    b = data.burgers_dataset(3, 2, s=32, cache_dir=tmp_path, log=lambda line: None)
    c = data.burgers_dataset(3, 2, s=32, seed=1, cache_dir=False)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not np.array_equal(a[0], c[0])


# ---- training and the demos ------------------------------------------------------------

def test_training_reduces_the_test_error():
    x, y, xt, yt = data.burgers_dataset(40, 10, s=32, grid=256, cache_dir=False)
    pf.seed(0)
    model = FNO1D(modes=6, width=12)
    untrained = train_operator(model, (x, y, xt, yt), OperatorSettings(epochs=0),
                               progress=False).test_error
    pf.seed(0)
    result = train_operator(FNO1D(modes=6, width=12), (x, y, xt, yt),
                            OperatorSettings(epochs=8, batch_size=10, lr=3e-3),
                            progress=False)
    assert result.test_error < 0.5 * untrained
    assert len(result.history["train"]) == 8


def test_fno_demo_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["demo", "fno-burgers", "--quick", "--epochs", "2", "--no-plots",
                 "--no-progress", "--out", str(out), "--data-dir", str(tmp_path / "data")]) == 0
    text = capsys.readouterr().out
    assert "test relative L2 error" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sizes"]["epochs"] == 2 and summary["test_relative_l2"] > 0


@pytest.mark.parametrize("argv, message", [
    (["demo", "fno-darcy", "--dim", "3"], "--dim does not apply"),
    (["demo", "fno-burgers", "--steps", "3"], "--steps does not apply"),
    (["demo", "heat", "--epochs", "3"], "--epochs does not apply"),
    (["demo", "fno-burgers", "--quick", "--full"], "exclude each other"),
    (["demo", "fno-darcy", "--resolution", "1000"], "s <= 421"),
    (["demo", "fno-burgers", "--epochs", "0"], "--epochs must be positive"),
])
def test_fno_demo_bad_options(argv, message, tmp_path, capsys):
    assert main(argv + ["--out", str(tmp_path), "--data-dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
