"""Mixed-precision training reaches the float32 result: ``pf.amp.auto_cast`` float16 (with a
``GradScaler``) and bfloat16 against float32, same seed and steps, on an MLP classifier and
on the plate PINN (4th-order derivatives through the float16 network, collapsed Taylor mode,
eager and ``pf.jit``).

The tolerances are what was measured (seeds 0-3) with a margin; ``pf.amp``'s docstring
records them, and the longer runs behind its error floors."""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.science import Trainer
from primflow.science.problems import Plate
from primflow.testing.extras import requires_extra

AMP_DTYPES = ["float16", pytest.param("bfloat16", marks=requires_extra("bfloat16"))]


# ---- an MLP classifier ---------------------------------------------------------------------

def _spirals(n, seed, classes=3):
    """``classes`` interleaved noisy spirals of ``n`` points each in the plane."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.1, 1.0, n)
        t = c * 2 * np.pi / classes + 4.0 * r + rng.normal(0.0, 0.15, n)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n, c))
    return (pf.to_tensor(np.concatenate(xs), dtype="float32"),
            pf.to_tensor(np.concatenate(ys), dtype="int64"))


def _train_classifier(amp, steps=120, seed=0):
    x, y = _spirals(100, seed)
    x_test, y_test = _spirals(100, seed + 100)
    pf.seed(seed)
    net = pf.nn.Sequential(pf.nn.Linear(2, 32), pf.nn.ReLU(), pf.nn.Linear(32, 32),
                           pf.nn.ReLU(), pf.nn.Linear(32, 3))
    opt = pf.optimizer.Adam(learning_rate=1e-2, parameters=net.parameters())
    scaler = pf.amp.GradScaler(enable=amp == "float16")
    loss_fn = pf.nn.CrossEntropyLoss()
    for _ in range(steps):
        with pf.amp.auto_cast(enable=amp is not None, dtype=amp or "float16"):
            logits = net(x)
            loss = loss_fn(logits, y)
        assert logits.dtype == getattr(pf, amp or "float32") and loss.dtype == pf.float32
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
    with pf.no_grad():
        accuracy = float((net(x_test).argmax(axis=1) == y_test).astype("float32").mean())
    return accuracy, float(loss), [p.numpy() for p in net.parameters()]


@pytest.mark.parametrize("amp", AMP_DTYPES)
def test_mixed_precision_classifier_reaches_the_float32_accuracy(amp):
    """Measured (seeds 0-3, 120 steps): test accuracy 1.0 in all three dtypes; final loss
    (about 4e-3) within 1.9% (float16) and 1.2% (bfloat16) of float32's."""
    acc32, loss32, weights32 = _train_classifier(None)
    acc, loss, weights = _train_classifier(amp)
    assert acc32 >= 0.95, acc32  # the float32 run itself learned the spirals
    assert acc >= acc32 - 0.02, (acc, acc32)
    assert loss == pytest.approx(loss32, rel=0.05)
    assert all(w.dtype == np.float32 for w in weights)  # float32 master weights
    assert any(not np.array_equal(a, b) for a, b in zip(weights, weights32))  # really mixed


# ---- the plate PINN ------------------------------------------------------------------------

def _train_plate(amp, jit, seed=0):
    problem = Plate(dtype="float32")
    settings = problem.settings(quick=True).replace(
        adam_steps=80, lbfgs_steps=0, n_interior=64, n_boundary=16, validate_every=80,
        amp=amp)
    return Trainer(problem, settings, progress=False, log=None, jit=jit, seed=seed).fit()


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("amp", AMP_DTYPES)
def test_mixed_precision_plate_pinn_reaches_the_float32_error(amp, jit):
    """The biharmonic's Taylor passes run through the float16/bfloat16 layers. Measured
    (seeds 0-3, 80 Adam steps, 64 points, jit): relative L2 error within 0.14% (float16) and
    0.8% (bfloat16) of the float32 run's (4.5e-2 to 1.0e-1)."""
    reference = _train_plate(None, jit)
    mixed = _train_plate(amp, jit)
    assert reference.status == mixed.status == "ok"
    assert mixed.error == pytest.approx(reference.error, rel=0.01 if amp == "float16" else 0.03)
    assert mixed.error != reference.error  # the run was mixed, not float32 again
    assert all(p.dtype == pf.float32 for p in mixed.net.parameters())


def test_trainer_rejects_an_unknown_amp_dtype():
    problem = Plate(dtype="float32")
    with pytest.raises(ValueError, match="settings.amp must be None, 'float16' or 'bfloat16'"):
        Trainer(problem, problem.settings(quick=True).replace(amp="float8"), progress=False)


def test_collapsed_taylor_mode_through_a_float16_layer_compiles():
    """The collapsed Taylor pass sums its top coefficients over the directions with weights
    of the points' dtype; under auto_cast the network's coefficients are float16, and the
    jitted biharmonic failed (dot_general: float32 and float16 differ)."""
    pf.seed(0)
    net = pf.nn.Sequential(pf.nn.Linear(2, 8), pf.nn.Tanh(), pf.nn.Linear(8, 1))
    X = pf.rand([16, 2], dtype="float32")

    def bih(points):
        return pf.autograd.biharmonic(lambda p: net(p).astype("float32"), points)

    with pf.amp.auto_cast():
        eager, jitted = bih(X), pf.jit(bih)(X)
    exact = bih(X)  # float32
    for got in (eager, jitted):
        assert got.dtype == pf.float32
        np.testing.assert_allclose(got.numpy(), exact.numpy(), rtol=2e-2,
                                   atol=2e-2 * float(abs(exact).max()))
