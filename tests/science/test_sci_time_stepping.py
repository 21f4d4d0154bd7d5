"""The RK4 time stepper in pf.scan and the neural ODE trained through it: values against
the unrolled loop and a closed form, gradients (under pf.jit) against the unrolled loop's
and float64 finite differences."""

import numpy as np
import pytest

import primflow as pf
from primflow.science.time_stepping import (NeuralODE, mlp_field, odeint_rk4, rk4_step,
                                            unrolled_rk4)


@pytest.fixture(autouse=True)
def _float64():
    before = pf.get_default_dtype()
    pf.set_default_dtype("float64")
    yield
    pf.set_default_dtype(before)


def test_rk4_matches_closed_form_and_unrolled_loop():
    rate = pf.to_tensor(0.7)
    y, saved = odeint_rk4(lambda y, k: -k * y, pf.to_tensor([1.0, 2.0]), 0.05, 40, rate,
                          save_every=10)
    np.testing.assert_allclose(y.numpy(), np.exp(-0.7 * 2.0) * np.array([1.0, 2.0]),
                               rtol=1e-7)
    np.testing.assert_allclose(saved.numpy()[-1], y.numpy())
    unrolled = unrolled_rk4(lambda y, k: -k * y, pf.to_tensor([1.0, 2.0]), 0.05, 40, rate)
    np.testing.assert_allclose(y.numpy(), unrolled.numpy(), rtol=1e-13)
    with pytest.raises(ValueError, match="multiple"):
        odeint_rk4(lambda y, k: y, pf.ones([1]), 0.1, 10, None, save_every=3)


def test_neural_ode_gradient_matches_unrolled_and_finite_differences():
    model = NeuralODE(2, hidden=6, dt=0.05, n_steps=20, save_every=5, seed=1)
    y0 = pf.to_tensor([[1.0, 0.0], [0.3, -0.5]])
    observed = odeint_rk4(lambda y, p: pf.matmul(y, pf.to_tensor([[-0.1, -1.0],
                                                                 [1.0, -0.1]])),
                          y0, 0.05, 20, None, save_every=5)[1]
    params = [p.detach() for p in model.params]
    grad_jit = pf.jit(pf.grad(model.loss))(params, y0, observed)

    def unrolled_loss(params):
        y, states = y0, []
        for _ in range(4):
            for _ in range(5):
                y = rk4_step(mlp_field, y, 0.05, params)
            states.append(y)
        diff = pf.stack(states) - observed
        return (diff * diff).mean()

    grad_unrolled = pf.grad(unrolled_loss)(params)
    for a, b in zip(grad_jit, grad_unrolled):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-13)
    # finite differences along a random direction of every parameter
    rng = np.random.default_rng(0)
    directions = [rng.standard_normal(p.shape) for p in params]
    eps = 1e-6

    def loss_at(s):
        moved = [pf.to_tensor(p.numpy() + s * d) for p, d in zip(params, directions)]
        return float(model.loss(moved, y0, observed))

    fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
    analytic = sum(float((g.numpy() * d).sum()) for g, d in zip(grad_jit, directions))
    np.testing.assert_allclose(analytic, fd, rtol=1e-6)


def test_neural_ode_training_reduces_the_loss():
    y0 = pf.to_tensor(np.random.default_rng(0).uniform(-1, 1, (8, 2)))
    observed = odeint_rk4(lambda y, p: pf.matmul(y, pf.to_tensor([[-0.1, -1.0],
                                                                 [1.0, -0.1]])),
                          y0, 0.05, 40, None, save_every=10)[1]
    model = NeuralODE(2, hidden=16, dt=0.05, n_steps=40, save_every=10, seed=0)
    history = model.fit(y0, observed, steps=15, learning_rate=2e-2)
    assert history[-1] < 0.5 * history[0]
    assert model._step.cache_info()["traces"] == 1  # one compiled step, reused
