"""High-dimensional PDEs: the ball sampler, the exact solution's source against autodiff,
the stochastic Laplacian (directions, unbiasedness), the variance-reduced residual, and a
short training run."""

import math

import numpy as np
import pytest

import primflow as pf
from primflow import science
from primflow.science.geometry import Ball
from primflow.science.problems import HighDimPDE, Model
from primflow.science.problems.highdim import step_cost
from primflow.transforms.differential import random_directions


def test_ball_samples_are_uniform_in_volume():
    d = 3
    X = Ball(dim=d).sample_interior(4000, seed=1, dtype="float64").numpy()
    r = np.linalg.norm(X, axis=1)
    assert r.max() <= 1.0
    # P(r < 1/2) = 2^-d; direction uniform: the mean is near 0
    assert abs(np.mean(r < 0.5) - 0.5 ** d) < 0.02
    assert np.abs(X.mean(axis=0)).max() < 0.05
    Xb, N = Ball([1.0, 2.0], 2.0).sample_boundary(10, seed=0, dtype="float64", normals=True)
    assert np.allclose(np.linalg.norm(Xb.numpy() - [1.0, 2.0], axis=1), 2.0)
    assert np.allclose(N.numpy(), (Xb.numpy() - [1.0, 2.0]) / 2.0)


def test_ball_rejects_bad_sizes():
    with pytest.raises(ValueError, match="radius"):
        Ball(dim=3, radius=0.0)
    with pytest.raises(ValueError, match="center or a dim"):
        Ball()


@pytest.mark.parametrize("equation", ["poisson", "allen-cahn"])
def test_source_matches_autodiff(equation):
    p = HighDimPDE(dim=5, equation=equation, n_test=8)
    X = p.geometry.sample_interior(7, seed=3, dtype="float64")
    lap = pf.autograd.laplacian(p.reference, X, method="nested")  # independent of the closed form
    u = p.reference(X)
    expected = -lap if equation == "poisson" else lap + u - u ** 3
    np.testing.assert_allclose(p.source(X).numpy(), expected.numpy(), rtol=1e-10, atol=1e-10)


def test_variance_reduced_residual_equals_the_direct_one():
    """For a Model the residual splits the bump off by the product rule; with an exact
    Laplacian both routes agree."""
    p = HighDimPDE(dim=6, method="collapsed", n_test=8)
    pf.seed(0)
    net = science.networks.make_mlp(6, 1, 8, 2)
    model = p.model(net)
    assert isinstance(model, Model)
    X = p.geometry.sample_interior(5, seed=2, dtype="float64")
    g = p.source(X)
    split, = p.residuals(model, X, g, [None])
    direct, = p.residuals(lambda Y: model(Y), X, g, [None])
    np.testing.assert_allclose(split.numpy(), direct.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_stochastic_laplacian_is_unbiased(kind):
    X = pf.to_tensor([[0.3, -0.2, 0.5, 0.1]], dtype="float64")
    f = lambda Y: pf.sin(Y[:, 0:1] * Y[:, 1:2]) + (Y ** 3).sum(axis=1, keepdim=True)
    exact = float(pf.autograd.laplacian(f, X, method="nested"))
    est = float(pf.autograd.laplacian(f, X, method="stochastic", samples=4000, seed=5,
                                      directions=kind))
    assert abs(est - exact) < 0.05 * abs(exact)
    # a [samples, N, d] tensor of directions works too, and is deterministic
    V = random_directions(64, X, kind, seed=1)
    a = pf.autograd.laplacian(f, X, method="stochastic", directions=V)
    b = pf.autograd.laplacian(f, X, method="stochastic", directions=V)
    assert float(a) == float(b)


def test_rademacher_is_exact_for_a_diagonal_hessian():
    X = pf.to_tensor([[0.3, -0.2, 0.5]], dtype="float64")
    f = lambda Y: (pf.sin(Y) + Y ** 4).sum(axis=1, keepdim=True)  # no cross terms
    exact = float(pf.autograd.laplacian(f, X))
    est = float(pf.autograd.laplacian(f, X, method="stochastic", samples=1, seed=0,
                                      directions="rademacher"))
    assert est == pytest.approx(exact, rel=1e-12)


def test_bad_directions_are_named():
    X = pf.zeros([2, 3], dtype="float64")
    f = lambda Y: (Y * Y).sum(axis=1)
    with pytest.raises(ValueError, match="directions must be one of"):
        pf.autograd.laplacian(f, X, method="stochastic", directions="uniform")
    with pytest.raises(ValueError, match=r"\[samples, N, d\]"):
        pf.autograd.laplacian(f, X, method="stochastic", directions=pf.zeros([4, 3]))


@pytest.mark.parametrize("options, message", [
    ({"dim": 1}, "dim must be an int >= 2"),
    ({"dim": 0}, "dim must be an int >= 2"),
    ({"equation": "heat"}, "unknown equation"),
    ({"samples": 0}, "samples must be"),
])
def test_bad_problem_options(options, message):
    with pytest.raises(ValueError, match=message):
        HighDimPDE(**options)


def test_short_training_reduces_the_error():
    p = HighDimPDE(dim=8, samples=4, n_test=256)
    s = p.settings(quick=True).replace(hidden=16, depth=2, adam_steps=150, lr=1e-2,
                                       validate_every=150)
    net0 = science.Trainer(p, s.replace(adam_steps=1), progress=False, log=None).fit()
    result = science.Trainer(p, s, progress=False, log=None).fit()
    assert result.status == "ok"
    assert result.error < 0.5 * net0.error


def test_default_layer_rates_only_where_they_were_tuned():
    """The per-layer Adam rates (and the decay to 1e-5) were tuned at d = 100 and hurt at
    d = 1,000 (module docstring): above d = 100 the default is one rate, decayed to 1e-4."""
    tuned, wide = HighDimPDE(dim=100, n_test=8).settings(), HighDimPDE(dim=101, n_test=8).settings()
    assert (tuned.input_lr_scale, tuned.output_lr_scale, tuned.lr_final) == (3.0, 0.1, 1e-5)
    assert (wide.input_lr_scale, wide.output_lr_scale, wide.lr_final) == (1.0, 1.0, 1e-4)
    assert (wide.hidden, wide.adam_steps) == (tuned.hidden, tuned.adam_steps)


def test_step_cost_is_positive():
    assert step_cost(3, "stochastic", samples=2, points=4, hidden=4, depth=1, repeats=1) > 0
    assert step_cost(3, "collapsed", points=4, hidden=4, depth=1, repeats=1) > 0


def test_lbfgs_phase_on_its_own_fixed_set():
    """``lbfgs_points`` gives L-BFGS a fixed set (points and directions) of its own size."""
    p = HighDimPDE(dim=4, samples=2, n_test=64)
    sizes = []
    sample = p.sample

    def spy(n, *args, **kwargs):
        sizes.append(n)
        return sample(n, *args, **kwargs)

    p.sample = spy
    s = p.settings(quick=True).replace(hidden=8, depth=1, n_interior=16, adam_steps=3,
                                       lbfgs_steps=4, lbfgs_chunk=2, lbfgs_points=40)
    result = science.Trainer(p, s, progress=False, log=None).fit()
    assert result.status == "ok" and result.steps["lbfgs"] == 4
    assert sizes == [16, 16, 16, 40]
    losses = [v for _, v in result.history["loss"]]
    assert losses[-1] <= losses[-2]  # L-BFGS on a fixed objective does not go up
