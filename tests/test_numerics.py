"""Complex numbers and FFT beyond the OpInfo table: dtype promotion, the gradient
convention, real-only ops refusing complex input, and the exact adjoint of rfft/irfft."""

import numpy as np
import pytest

import primflow as pf


# ---- complex dtypes ------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,expected", [
    ("complex64", "float64", "complex128"), ("complex64", "float32", "complex64"),
    ("int32", "complex64", "complex128"), ("bool", "complex64", "complex64"),
    ("complex128", "complex64", "complex128"), ("int64", "complex128", "complex128"),
])
def test_promotion_follows_numpy(a, b, expected):
    x, y = pf.ones([2], dtype=a), pf.ones([2], dtype=b)
    assert (x + y).dtype == expected
    assert np.result_type(np.dtype(a), np.dtype(b)) == np.dtype(expected)


def test_python_scalars_are_weak():
    assert (pf.ones([2], dtype="complex64") * 2.0).dtype == "complex64"
    assert (pf.ones([2], dtype="float32") * 1j).dtype == "complex64"
    assert (pf.ones([2], dtype="float64") + 1j).dtype == "complex128"
    assert (pf.ones([2], dtype="int64") * 1j).dtype == "complex64"  # default float32
    assert pf.to_tensor([1 + 2j]).dtype == "complex64"
    assert pf.to_tensor(np.array([1 + 2j])).dtype == "complex128"
    assert pf.is_complex(pf.to_tensor([1j])) and not pf.is_complex(pf.ones([1]))
    with pytest.raises(TypeError, match="float32 or float64"):
        pf.set_default_dtype("complex64")


def test_cast_to_real_keeps_the_real_part():
    z = pf.to_tensor([1 + 2j, -3 - 4j], dtype="complex128")
    with pytest.warns(pf.ComplexWarning):  # as NumPy's ComplexWarning
        np.testing.assert_array_equal(z.astype("float64").numpy(), [1.0, -3.0])
    np.testing.assert_array_equal(pf.abs(z).numpy(), [np.sqrt(5), 5.0])
    assert pf.isfinite(z).numpy().all()


@pytest.mark.parametrize("op", [
    lambda z: pf.maximum(z, z), lambda z: pf.floor(z), lambda z: z < z, lambda z: z >= 1.0,
    lambda z: pf.max(z), lambda z: pf.argmax(z), lambda z: pf.sign(z),
    lambda z: pf.nn.functional.relu(z), lambda z: pf.atan2(z, z),
], ids=["maximum", "floor", "lt", "ge", "max", "argmax", "sign", "relu", "atan2"])
def test_real_only_ops_refuse_complex(op):
    z = pf.to_tensor([1 + 2j, 3 - 1j], dtype="complex64")
    with pytest.raises((TypeError, pf.PrimitiveError), match="complex") as info:
        op(z)
    assert "complex64" in str(info.value)
    with pytest.raises((TypeError, pf.PrimitiveError), match="not defined for complex"):
        pf.jit(op)(z)


# ---- the gradient convention ---------------------------------------------------------------

def _loss(z):
    # a real loss of a complex vector mixing holomorphic and non-holomorphic parts
    w = pf.to_tensor([0.5 - 1j, 2 + 0.3j, -1 + 1j], dtype="complex128")
    return (pf.real(w * pf.exp(z) / (z + 3.0)) + pf.abs(pf.sin(z)) ** 2).sum()


def test_gradient_is_dL_dx_plus_i_dL_dy():
    """PyTorch's convention: grad = dL/dRe + i dL/dIm, checked by finite differences."""
    z0 = np.array([0.3 + 0.2j, -0.5 + 1.0j, 1.1 - 0.4j])
    z = pf.to_tensor(z0, stop_gradient=False)
    _loss(z).backward()
    eps = 1e-6
    expected = np.zeros(3, dtype=complex)
    for k in range(3):
        for direction, unit in ((1.0, 1.0), (1j, 1j)):
            e = np.zeros(3, dtype=complex)
            e[k] = direction
            up = float(_loss(pf.to_tensor(z0 + eps * e)).numpy())
            down = float(_loss(pf.to_tensor(z0 - eps * e)).numpy())
            expected[k] += unit * (up - down) / (2 * eps)
    np.testing.assert_allclose(z.grad.numpy(), expected, rtol=1e-7, atol=1e-8)
    # steepest ascent: a small step along the gradient increases the loss the most
    step = z0 + 1e-4 * z.grad.numpy()
    assert float(_loss(pf.to_tensor(step)).numpy()) > float(_loss(pf.to_tensor(z0)).numpy())


def test_functional_grad_and_jit_agree_with_the_tape():
    z0 = pf.to_tensor(np.array([0.3 + 0.2j, -0.5 + 1.0j, 1.1 - 0.4j]))
    z = z0.detach()
    z.stop_gradient = False
    _loss(z).backward()
    np.testing.assert_allclose(pf.grad(_loss)(z0).numpy(), z.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(pf.jit(pf.grad(_loss))(z0).numpy(), z.grad.numpy(),
                               rtol=1e-12)


# ---- FFT adjoints --------------------------------------------------------------------------

@pytest.mark.parametrize("n", [6, 7])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_rfft_and_irfft_vjps_are_exact_transposes(n, norm):
    """The vjp of rfft (real -> half spectrum) is the transpose of its real matrix (real
    and imaginary rows stacked); likewise irfft. Built column by column from NumPy."""
    rng = np.random.default_rng(n)
    m = n // 2 + 1
    # real matrix of x -> [Re rfft(x), Im rfft(x)]
    cols = [np.fft.rfft(e, norm=norm) for e in np.eye(n)]
    a = np.concatenate([np.real(cols).T, np.imag(cols).T])  # [2m, n]
    g = rng.standard_normal(m) + 1j * rng.standard_normal(m)
    x = pf.to_tensor(rng.standard_normal(n))
    _, vjp = pf.vjp(lambda x: pf.fft.rfft(x, norm=norm), x)
    (x_bar,) = vjp(pf.to_tensor(g))
    np.testing.assert_allclose(x_bar.numpy(), a.T @ np.concatenate([g.real, g.imag]),
                               atol=1e-12)
    # irfft: C^m -> R^n as a real map of [Re h, Im h]
    b = np.stack([np.fft.irfft(e, n=n, norm=norm) for e in np.eye(m)] +
                 [np.fft.irfft(1j * e, n=n, norm=norm) for e in np.eye(m)], axis=1)
    h = pf.to_tensor(g)
    u = rng.standard_normal(n)
    _, vjp = pf.vjp(lambda h: pf.fft.irfft(h, n=n, norm=norm), h)
    (h_bar,) = vjp(pf.to_tensor(u))
    expected = b.T @ u
    np.testing.assert_allclose(h_bar.numpy(), expected[:m] + 1j * expected[m:], atol=1e-12)


def test_fft_keeps_single_precision_and_checks_input():
    x = pf.randn([4, 8])
    assert pf.fft.rfft2(x).dtype == "complex64"
    assert pf.fft.irfft2(pf.fft.rfft2(x), s=[4, 8]).dtype == "float32"
    np.testing.assert_allclose(pf.fft.irfft2(pf.fft.rfft2(x), s=[4, 8]).numpy(), x.numpy(),
                               atol=1e-5)
    with pytest.raises(TypeError, match="rfft expects a real tensor"):
        pf.fft.rfft(pf.to_tensor([1j]))
    with pytest.raises(ValueError, match="norm must be one of"):
        pf.fft.fft(x, norm="sideways")
    with pytest.raises(ValueError, match="axis 5 is out of range"):
        pf.fft.fft(x, axis=5)
