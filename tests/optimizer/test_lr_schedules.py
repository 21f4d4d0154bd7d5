"""pf.optimizer.lr: the learning-rate sequences of each schedule, and state dicts."""

import math

import pytest

import primflow as pf

lr = pf.optimizer.lr


def _sequence(sched, n):
    out = []
    for _ in range(n):
        out.append(sched())
        sched.step()
    return out


def test_step_decay():
    assert _sequence(lr.StepDecay(1.0, step_size=3, gamma=0.5), 7) == \
        pytest.approx([1, 1, 1, 0.5, 0.5, 0.5, 0.25])
    with pytest.raises(ValueError, match="step_size"):
        lr.StepDecay(1.0, step_size=0)


def test_multistep_and_piecewise():
    assert _sequence(lr.MultiStepDecay(1.0, milestones=[2, 4], gamma=0.1), 5) == \
        pytest.approx([1, 1, 0.1, 0.1, 0.01])
    assert _sequence(lr.PiecewiseDecay(boundaries=[2, 3], values=[1.0, 0.5, 0.1]), 4) == \
        pytest.approx([1.0, 1.0, 0.5, 0.1])
    with pytest.raises(ValueError, match="len\\(boundaries\\) \\+ 1"):
        lr.PiecewiseDecay(boundaries=[2], values=[1.0])


def test_exponential_decay():
    assert _sequence(lr.ExponentialDecay(2.0, gamma=0.9), 4) == \
        pytest.approx([2.0 * 0.9 ** k for k in range(4)])


def test_cosine_annealing():
    sched = lr.CosineAnnealingDecay(1.0, T_max=4, eta_min=0.1)
    expected = [0.1 + 0.9 * (1 + math.cos(math.pi * k / 4)) / 2 for k in range(5)]
    assert _sequence(sched, 5) == pytest.approx(expected)
    assert expected[-1] == pytest.approx(0.1)


def test_polynomial_and_lambda():
    assert _sequence(lr.PolynomialDecay(1.0, decay_steps=4, end_lr=0.0, power=2.0), 6) == \
        pytest.approx([1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0])
    assert _sequence(lr.LambdaDecay(0.5, lambda e: 1.0 / (e + 1)), 3) == \
        pytest.approx([0.5, 0.25, 0.5 / 3])


def test_linear_warmup_of_a_float_and_of_a_schedule():
    assert _sequence(lr.LinearWarmup(0.5, warmup_steps=4, start_lr=0.0, end_lr=0.4), 6) == \
        pytest.approx([0.0, 0.1, 0.2, 0.3, 0.5, 0.5])
    inner = lr.StepDecay(1.0, step_size=2, gamma=0.5)
    warm = lr.LinearWarmup(inner, warmup_steps=2, start_lr=0.0, end_lr=1.0)
    assert _sequence(warm, 7) == pytest.approx([0.0, 0.5, 1.0, 1.0, 0.5, 0.5, 0.25])


def test_reduce_on_plateau():
    sched = lr.ReduceOnPlateau(1.0, factor=0.5, patience=2, cooldown=1)
    seen = []
    for metric in [5.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.0]:
        sched.step(metric)
        seen.append(sched())
    # three non-improvements exceed patience 2 (step 5); the cooldown step after it does
    # not count, so steps 7-8 are only two bad ones, and step 9 improves
    assert seen == pytest.approx([1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5])
    sched.step(3.0), sched.step(3.0), sched.step(3.0)
    assert sched() == pytest.approx(0.25)


def test_state_dict_round_trip_and_use_in_an_optimizer():
    a = lr.LinearWarmup(lr.CosineAnnealingDecay(1.0, T_max=10), warmup_steps=3, start_lr=0.0,
                        end_lr=1.0)
    _sequence(a, 6)
    b = lr.LinearWarmup(lr.CosineAnnealingDecay(1.0, T_max=10), warmup_steps=3, start_lr=0.0,
                        end_lr=1.0)
    b.set_state_dict(a.state_dict())
    assert _sequence(b, 4) == pytest.approx(_sequence(a, 4))
    with pytest.raises(KeyError, match="last_epoch"):
        b.set_state_dict({})
    w = pf.to_tensor([0.0], stop_gradient=False)
    sched = lr.ExponentialDecay(0.1, gamma=0.5)
    opt = pf.optimizer.Adam(learning_rate=sched, parameters=[w])
    assert opt.get_lr() == pytest.approx(0.1)
    sched.step()
    assert opt.get_lr() == pytest.approx(0.05)
