"""``pf.incubate.nn.functional.fused_rms_norm`` (Paddle's signature): values against a NumPy
reference and PaddlePaddle 3.3.1's numbers, first and second derivatives against float64
central differences of the NumPy reference, and the argument errors."""

import numpy as np
import pytest

import primflow as pf

fused_rms_norm = pf.incubate.nn.functional.fused_rms_norm


def np_fused_rms_norm(x, w, norm_bias=None, eps=1e-6, begin=1, bias=None, residual=None):
    h = x if residual is None else x + (0 if bias is None else bias) + residual
    axes = tuple(range(begin, x.ndim))
    shape = x.shape[begin:]
    out = h / np.sqrt((h ** 2).mean(axis=axes, keepdims=True) + eps) * w.reshape(shape)
    return out if norm_bias is None else out + norm_bias.reshape(shape)


def central_grad(fn, x, eps=1e-6):
    """d sum(fn(x) * probe) / dx by float64 central differences (``fn`` returns that sum)."""
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        g[i] = (fn(x + step) - fn(x - step)) / (2 * eps)
    return g


def t64(a, requires_grad=True):
    return pf.to_tensor(a, dtype="float64", stop_gradient=not requires_grad)


RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 3, 4))
W = RNG.normal(size=(4,))


def test_values_match_paddle_3_3_1():
    rng = np.random.default_rng(0)  # the inputs PaddlePaddle 3.3.1 printed these outputs for
    xa, wa = rng.normal(size=(2, 3, 4)), rng.normal(size=(4,))
    out, residual_out = fused_rms_norm(pf.to_tensor(xa, dtype="float32"),
                                       pf.to_tensor(wa, dtype="float32"), None, 1e-6, 2)
    paddle_out = [0.33702337741851807, -0.036847665905952454, -1.412712574005127,
                  -0.2868692874908447, -0.5574315786361694, 0.039155080914497375]
    np.testing.assert_allclose(out.numpy().ravel()[:6], paddle_out, rtol=1e-6)
    assert out.dtype == pf.float32 and out.shape == [2, 3, 4]
    assert residual_out.shape == [0]  # Paddle returns an empty residual_out without residual


@pytest.mark.parametrize("begin", [1, 2, -1])
def test_values_match_numpy_for_each_begin_norm_axis(begin):
    size = int(np.prod(X.shape[begin:]))
    w, nb = RNG.normal(size=(size,)), RNG.normal(size=(size,))
    out, _ = fused_rms_norm(t64(X), t64(w), t64(nb), 1e-5, begin)
    b = begin % X.ndim
    np.testing.assert_allclose(out.numpy(), np_fused_rms_norm(X, w, nb, 1e-5, b), rtol=1e-13)


def test_residual_and_bias_are_added_first_and_returned():
    r, bias, nb = RNG.normal(size=X.shape), RNG.normal(size=(4,)), RNG.normal(size=(4,))
    out, residual_out = fused_rms_norm(t64(X), t64(W), t64(nb), 1e-6, 2, bias=t64(bias),
                                       residual=t64(r))
    np.testing.assert_allclose(out.numpy(),
                               np_fused_rms_norm(X, W, nb, 1e-6, 2, bias=bias, residual=r),
                               rtol=1e-13)
    np.testing.assert_allclose(residual_out.numpy(), X + bias + r, rtol=1e-15)


def test_gradients_of_every_input_match_central_differences():
    r, bias, nb = RNG.normal(size=X.shape), RNG.normal(size=(4,)), RNG.normal(size=(4,))
    probe = RNG.normal(size=X.shape)
    arrays = {"x": X, "w": W, "nb": nb, "bias": bias, "r": r}

    def loss_np(name, value):
        a = dict(arrays, **{name: value})
        return (np_fused_rms_norm(a["x"], a["w"], a["nb"], 1e-6, 2, bias=a["bias"],
                                  residual=a["r"]) * probe).sum()

    tensors = {k: t64(v) for k, v in arrays.items()}
    out, _ = fused_rms_norm(tensors["x"], tensors["w"], tensors["nb"], 1e-6, 2,
                            bias=tensors["bias"], residual=tensors["r"])
    (out * t64(probe, requires_grad=False)).sum().backward()
    for name, value in arrays.items():
        expected = central_grad(lambda v, n=name: loss_np(n, v), value)
        np.testing.assert_allclose(tensors[name].grad.numpy(), expected, rtol=1e-7, atol=1e-8,
                                   err_msg=name)


def test_second_derivative_matches_central_differences_of_the_gradient():
    # d/dx <d out/dx^T probe, u>: differentiate the first-order gradient again
    probe, u = RNG.normal(size=X.shape), RNG.normal(size=X.shape)
    x = t64(X)
    out, _ = fused_rms_norm(x, t64(W, requires_grad=False), None, 1e-6, 2)
    (g,) = pf.grad((out * t64(probe, False)).sum(), x, create_graph=True)
    (gg,) = pf.grad((g * t64(u, False)).sum(), x)

    def first_grad_dot_u(xv):
        return (central_grad(lambda v: (np_fused_rms_norm(v, W, None, 1e-6, 2) * probe).sum(),
                             xv, eps=1e-5) * u).sum()

    np.testing.assert_allclose(gg.numpy(), central_grad(first_grad_dot_u, X, eps=1e-4),
                               rtol=1e-4, atol=1e-6)


def test_argument_errors_name_the_problem():
    x = t64(X, requires_grad=False)
    with pytest.raises(ValueError, match=r"begin_norm_axis must be in \[-3, 3\).*got 3"):
        fused_rms_norm(x, t64(W), None, 1e-6, 3)
    with pytest.raises(ValueError, match=r"norm_weight must be a vector of 12 values"):
        fused_rms_norm(x, t64(W), None, 1e-6, 1)
    with pytest.raises(ValueError, match="bias is fused only together with residual"):
        fused_rms_norm(x, t64(W), None, 1e-6, 2, bias=t64(W))
    with pytest.raises(ValueError, match="quantised output"):
        fused_rms_norm(x, t64(W), None, 1e-6, 2, quant_scale=0.5)
