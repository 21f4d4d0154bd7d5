"""Inverse problems: measurements and their data term, trainable PDE coefficients in the
trainer (they move toward the truth, are checkpointed and resumed)."""

import math

import numpy as np
import pytest

import primflow as pf
from primflow import science
from primflow.science.problems import Measurements, PlateInverse, Poisson2D


def test_measurements_noise_level():
    p = Poisson2D()
    clean = Measurements.from_reference(p, 2000, noise=0.0, seed=1)
    noisy = Measurements.from_reference(p, 2000, noise=0.01, seed=1)
    np.testing.assert_array_equal(clean.points.numpy(), noisy.points.numpy())
    diff = (noisy.values - clean.values).numpy()
    rms = math.sqrt(float((clean.values ** 2).mean()))
    assert 0.009 < diff.std() / rms < 0.011
    assert float(clean.loss(p.reference)) == 0.0
    assert float(noisy.loss(p.reference)) == pytest.approx(1e-4, rel=0.15)


@pytest.mark.parametrize("args, message", [
    (([[0.0, 1.0]], [1.0, 2.0]), "2 measured values for 1 points"),
    (([0.0, 1.0], [1.0, 2.0]), r"\[N, d\]"),
    (([[0.0, 1.0]], [0.0]), "all measured values are zero"),
])
def test_bad_measurements(args, message):
    with pytest.raises(ValueError, match=message):
        Measurements(pf.to_tensor(args[0], dtype="float64"), args[1])


def test_data_term_joins_a_forward_problem():
    p = Poisson2D()
    p.measurements = Measurements.from_reference(p, 20, seed=0)
    s = p.settings(quick=True).replace(adam_steps=3, lbfgs_steps=0)
    result = science.Trainer(p, s, progress=False, log=None).fit()
    assert set(result.history["terms"]) == {"pde", "data"}
    assert result.parameters == {}


def _quick(p, **changes):
    return p.settings(quick=True).replace(**dict(dict(lbfgs_steps=0, adam_steps=40, lr=0.05,
                                                      lr_final=0.02,
                                                      validate_every=20), **changes))


def test_the_coefficient_moves_toward_the_truth():
    p = PlateInverse(guess=2.0, n_measurements=50)
    assert p.parameter_values()["D"] == pytest.approx(2.0)
    result = science.Trainer(p, _quick(p), progress=False, log=None).fit()
    D = result.parameters["D"]
    assert 1.0 <= D < 1.9  # from 2 toward 1 (and not past it) in 40 Adam steps
    assert [s for s, _ in result.history["parameters"]["D"]] == [20, 40]
    assert "D = " in result.message
    # a second fit starts again from the guess
    again = science.Trainer(p, _quick(p), progress=False, log=None).fit()
    assert again.parameters["D"] == pytest.approx(D, rel=1e-9)


def test_the_coefficient_is_checkpointed_and_resumed(tmp_path):
    p = PlateInverse(guess=2.0, n_measurements=50)
    ckpt = tmp_path / "inv.pdparams"
    stop_at = 20
    first = science.Trainer(p, _quick(p), progress=False, log=None, checkpoint=ckpt,
                            checkpoint_every=10,
                            callback=lambda info: info["step"] >= stop_at).fit()
    assert first.status == "stopped"
    resumed = science.Trainer(p, _quick(p), progress=False, log=None, checkpoint=ckpt,
                              resume=True).fit()
    straight = science.Trainer(PlateInverse(guess=2.0, n_measurements=50), _quick(p),
                               progress=False, log=None).fit()
    assert resumed.parameters["D"] == pytest.approx(straight.parameters["D"], rel=1e-9)


def test_plate_inverse_rejects_bad_options():
    with pytest.raises(ValueError, match="guess"):
        PlateInverse(guess=0.0)
    with pytest.raises(ValueError, match="n_measurements"):
        PlateInverse(n_measurements=0)
    with pytest.raises(ValueError, match="noise"):
        PlateInverse(noise=-0.1)
