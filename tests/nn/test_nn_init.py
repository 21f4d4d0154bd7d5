"""pf.nn.initializer: statistics, Xavier/Kaiming bounds from fan-in/fan-out, seeding."""

import math

import numpy as np
import pytest

import primflow as pf
from primflow.nn import initializer as I  # noqa: N812

SHAPE = [400, 600]  # 240k draws: sample mean/std within ~1% of the truth


def _draw(init, shape=SHAPE, dtype="float64"):
    pf.seed(0)
    return init.generate(shape, dtype).numpy()


def test_fans_follow_paddle_layout():
    assert I.compute_fans([]) == (1, 1)
    assert I.compute_fans([7]) == (7, 7)
    assert I.compute_fans([3, 5]) == (3, 5)  # Linear weight [in, out]
    assert I.compute_fans([16, 8, 3, 3]) == (8 * 9, 16 * 9)  # conv [out_ch, in_ch, k, k]


def test_constant_and_assign():
    np.testing.assert_array_equal(_draw(I.Constant(0.3), [2, 2]), np.full([2, 2], 0.3))
    v = _draw(I.Assign(np.arange(4.0).reshape(2, 2)), [2, 2])
    np.testing.assert_array_equal(v, [[0, 1], [2, 3]])
    with pytest.raises(ValueError, match="shape"):
        I.Assign([1.0, 2.0]).generate([3])
    assert I.Constant(2).generate([2], "int64").numpy().tolist() == [2, 2]


def test_uniform_and_normal_statistics():
    u = _draw(I.Uniform(-2.0, 4.0))
    assert u.min() >= -2.0 and u.max() < 4.0
    assert abs(u.mean() - 1.0) < 0.02 and abs(u.std() - 6 / math.sqrt(12)) < 0.01
    n = _draw(I.Normal(mean=1.5, std=0.5))
    assert abs(n.mean() - 1.5) < 0.005 and abs(n.std() - 0.5) < 0.005


def test_truncated_normal_bounds_and_std():
    t = _draw(I.TruncatedNormal(mean=0.0, std=1.0))
    assert t.min() >= -2.0 and t.max() <= 2.0
    # std of a standard normal truncated to [-2, 2]
    phi2 = math.exp(-2.0) / math.sqrt(2 * math.pi)
    z = math.erf(2 / math.sqrt(2))
    expected = math.sqrt(1 - 2 * 2 * phi2 / z)
    assert abs(t.std() - expected) < 0.01 and abs(t.mean()) < 0.01
    narrow = _draw(I.TruncatedNormal(mean=0.0, std=2.0, a=-0.5, b=1.0), [1000])
    assert narrow.min() >= -0.5 and narrow.max() <= 1.0


@pytest.mark.parametrize("shape", [[300, 500], [64, 32, 3, 3]])
def test_xavier_uniform_and_normal(shape):
    fan_in, fan_out = I.compute_fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    u = _draw(I.XavierUniform(), shape)
    assert np.abs(u).max() <= limit and np.abs(u).max() > 0.99 * limit
    assert abs(u.std() - limit / math.sqrt(3)) < 0.01 * limit
    n = _draw(I.XavierNormal(), shape)
    assert abs(n.std() - math.sqrt(2.0 / (fan_in + fan_out))) < 0.01 * n.std()
    g = _draw(I.XavierUniform(gain=2.0, fan_in=10, fan_out=20), [100, 100])
    assert np.abs(g).max() <= 2.0 * math.sqrt(6.0 / 30)


@pytest.mark.parametrize("shape", [[300, 500], [64, 32, 3, 3]])
def test_kaiming_uniform_and_normal(shape):
    fan_in = I.compute_fans(shape)[0]
    limit = math.sqrt(2.0) * math.sqrt(3.0 / fan_in)  # relu gain sqrt(2)
    u = _draw(I.KaimingUniform(), shape)
    assert np.abs(u).max() <= limit and np.abs(u).max() > 0.99 * limit
    n = _draw(I.KaimingNormal(), shape)
    assert abs(n.std() - math.sqrt(2.0 / fan_in)) < 0.01 * n.std()
    lin = _draw(I.KaimingNormal(nonlinearity="linear", fan_in=25), [500, 500])
    assert abs(lin.std() - 0.2) < 0.002
    leaky = _draw(I.KaimingUniform(negative_slope=0.2, nonlinearity="leaky_relu"), shape)
    assert np.abs(leaky).max() <= math.sqrt(2 / 1.04) * math.sqrt(3.0 / fan_in)


def test_calculate_gain():
    assert I.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert I.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert I.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert I.calculate_gain("sigmoid") == 1.0
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        I.calculate_gain("wiggle")


def test_seeding_reproduces_and_advances():
    pf.seed(42)
    a = pf.nn.Linear(10, 10).weight.numpy()
    b = pf.nn.Linear(10, 10).weight.numpy()
    pf.seed(42)
    a2 = pf.nn.Linear(10, 10).weight.numpy()
    np.testing.assert_array_equal(a, a2)
    assert not np.array_equal(a, b)


def test_linear_default_init_is_xavier_uniform_and_zero_bias():
    pf.seed(0)
    lin = pf.nn.Linear(200, 300)
    w = lin.weight.numpy()
    limit = math.sqrt(6.0 / 500)
    assert np.abs(w).max() <= limit and abs(w.std() - limit / math.sqrt(3)) < 0.02 * limit
    np.testing.assert_array_equal(lin.bias.numpy(), 0.0)


def test_calling_an_initializer_overwrites_in_place():
    lin = pf.nn.Linear(3, 3)
    version = lin.weight._version
    out = I.Constant(0.5)(lin.weight)
    assert out is lin.weight and lin.weight._version == version + 1
    np.testing.assert_array_equal(lin.weight.numpy(), 0.5)
    assert lin.weight.dtype == "float32" and not lin.weight.stop_gradient
    with pytest.raises(TypeError, match="floating dtype"):
        I.Normal().generate([2], "int64")
