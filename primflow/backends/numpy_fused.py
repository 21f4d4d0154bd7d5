"""Fused NumPy kernels for composite ops (softmax, layer_norm, cross_entropy, ...).

A composite is defined by its primitive decomposition (``primflow/ops``); these kernels are
an eager-mode shortcut for the common first-order case: one forward kernel and one
backward kernel per composite, instead of ~10 primitive kernels (and ~10 saved tensors) each
way. ``primflow/ops/_fused.py`` decides when they run; everything else (transforms, higher
derivatives, ``pf.decompose()``) uses the decomposition, which defines the semantics.

``FUSED[name] = (forward, backward)`` with

* ``forward(*values, **params) -> (out, residuals)``: ``values`` are native arrays (``None``
  for an absent optional input such as a layer_norm bias), ``params`` the composite's static
  arguments. ``residuals`` is a tuple of what the backward needs *besides* the inputs: the
  dispatcher hands the inputs back to the backward, so residuals hold only small reductions
  (mean, rstd, logsumexp) or the output itself (softmax), never a copy of an input.
* ``backward(g, residuals, *values, needs, **params) -> tuple``: ``g`` is the cotangent of
  ``out``; ``needs[i]`` says whether input i wants a cotangent. Returns one array (same shape
  and dtype as ``values[i]``) or ``None`` per input.

Kernels never write into their inputs (they may be read-only broadcast views) and never
see 0-d or empty inputs (the dispatcher decomposes those).
"""

from __future__ import annotations

import math

import numpy as np

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _scalar(value, like):
    """A Python number as a 0-d array of ``like``'s dtype (keeps float32 math float32)."""
    return np.asarray(value, dtype=like.dtype)


def _rows(x, axes):
    """``x`` as a 2-d (rows, normalised) array when ``axes`` are the trailing dims."""
    k = math.prod(x.shape[a] for a in axes)
    return x.reshape(-1, k)


def _dot16(spec, a, b):
    """``einsum(spec, a, b)``, in float32 for 16-bit floats (einsum has no bfloat16 loop, and
    a float16 sum would keep 11 bits), rounded once to their dtype."""
    if a.dtype.name in ("float16", "bfloat16"):
        return np.einsum(spec, a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.einsum(spec, a, b)


def _row_dot(a, b):
    """Per-row dot product of two 2-d arrays, shape (rows, 1)."""
    return _dot16("ij,ij->i", a, b)[:, None]


def _col_dot(a, b):
    """Per-column dot product of two 2-d arrays (sum over rows of a * b), shape (cols,)."""
    return _dot16("ij,ij->j", a, b)


def _sigmoid(x):
    """``1 / (1 + exp(-x))`` in a fresh array. Accurate to a few ulp everywhere: where
    ``exp(-x)`` overflows (x < -88 in float32, -709 in float64) the result is 0 instead of a
    value below the smallest normal number, so the overflow is expected and not reported."""
    s = np.negative(x)
    with np.errstate(over="ignore"):
        np.exp(s, out=s)
    np.add(s, _scalar(1, s), out=s)
    np.reciprocal(s, out=s)
    return s


# ---- softmax family --------------------------------------------------------------------------

def _softmax_fwd(x, *, axes):
    y = np.subtract(x, np.max(x, axis=axes, keepdims=True))
    np.exp(y, out=y)
    np.divide(y, np.sum(y, axis=axes, keepdims=True), out=y)
    return y, (y,)  # the output alone: dx = y * (g - sum(g * y))


def _softmax_bwd(g, residuals, x, *, needs, axes):
    (y,) = residuals
    if axes == (y.ndim - 1,):  # the usual case: a row dot product, no temporary
        s = _row_dot(g.reshape(-1, y.shape[-1]), y.reshape(-1, y.shape[-1]))
        s = s.reshape(y.shape[:-1] + (1,))
        dx = np.subtract(g, s)
    else:
        dx = np.multiply(g, y)
        s = np.sum(dx, axis=axes, keepdims=True)
        np.subtract(g, s, out=dx)
    np.multiply(dx, y, out=dx)
    return (dx,)


def _log_softmax_fwd(x, *, axes):
    s = np.subtract(x, np.max(x, axis=axes, keepdims=True))
    lse = np.log(np.sum(np.exp(s), axis=axes, keepdims=True))
    np.subtract(s, lse, out=s)
    return s, (s,)  # the output alone: dx = g - exp(out) * sum(g)


def _log_softmax_bwd(g, residuals, x, *, needs, axes):
    (out,) = residuals
    dx = np.exp(out)
    np.multiply(dx, np.sum(g, axis=axes, keepdims=True), out=dx)
    np.subtract(g, dx, out=dx)
    return (dx,)


def _logsumexp_fwd(x, *, axes, keepdim):
    m = np.max(x, axis=axes, keepdims=True)
    # an infinite maximum shifts by 0 (as the decomposition): all -inf gives log(0) = -inf,
    # the intended result, so that division by zero is not reported
    m[~np.isfinite(m)] = 0
    e = np.subtract(x, m)
    np.exp(e, out=e)
    with np.errstate(divide="ignore"):
        lse = np.add(m, np.log(np.sum(e, axis=axes, keepdims=True)))
    out = lse if keepdim else lse.reshape([d for i, d in enumerate(x.shape) if i not in axes])
    return out, (lse,)  # lse with the reduced dims kept (size 1)


def _logsumexp_bwd(g, residuals, x, *, needs, axes, keepdim):
    (lse,) = residuals
    dx = np.subtract(x, lse)
    np.exp(dx, out=dx)  # softmax(x)
    np.multiply(dx, np.reshape(g, lse.shape), out=dx)
    return (dx,)


# ---- normalisation ---------------------------------------------------------------------------

def _layer_norm_fwd(x, weight, bias, *, axes, epsilon):
    x2 = _rows(x, axes)
    k = x2.shape[1]
    mu = np.sum(x2, axis=1, keepdims=True)
    np.divide(mu, _scalar(k, mu), out=mu)
    y = np.subtract(x2, mu)
    var = _row_dot(y, y)
    np.divide(var, _scalar(k, var), out=var)
    np.add(var, _scalar(epsilon, var), out=var)
    rstd = np.sqrt(var, out=var)
    np.reciprocal(rstd, out=rstd)
    np.multiply(y, rstd, out=y)
    if weight is not None:
        np.multiply(y, weight.reshape(k), out=y)
    if bias is not None:
        np.add(y, bias.reshape(k), out=y)
    return y.reshape(x.shape), (mu, rstd)  # (rows, 1) each


def _layer_norm_bwd(g, residuals, x, weight, bias, *, needs, axes, epsilon):
    # dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),  gw = g * weight
    # (two input-sized buffers: xhat and the result; fresh arrays cost page faults)
    mu, rstd = residuals
    x2 = _rows(x, axes)
    g2 = g.reshape(x2.shape)
    k = x2.shape[1]
    xhat = np.subtract(x2, mu)
    np.multiply(xhat, rstd, out=xhat)
    dx = dw = db = None
    if needs[1]:
        dw = _col_dot(g2, xhat).reshape(weight.shape)
    if needs[2]:
        db = np.sum(g2, axis=0).reshape(bias.shape)
    if needs[0]:
        gw = g2 if weight is None else np.multiply(g2, weight.reshape(k))
        mean_g = np.sum(gw, axis=1, keepdims=True)
        np.divide(mean_g, _scalar(k, mean_g), out=mean_g)
        mean_gx = _row_dot(gw, xhat)
        np.divide(mean_gx, _scalar(k, mean_gx), out=mean_gx)
        np.multiply(xhat, mean_gx, out=xhat)
        np.add(xhat, mean_g, out=xhat)
        dx = xhat if weight is None else gw  # write into a buffer of our own
        np.subtract(gw, xhat, out=dx)
        np.multiply(dx, rstd, out=dx)
        dx = dx.reshape(x.shape)
    return dx, dw, db


def _rms_norm_fwd(x, weight, *, axes, epsilon):
    x2 = _rows(x, axes)
    k = x2.shape[1]
    ms = _row_dot(x2, x2)
    np.divide(ms, _scalar(k, ms), out=ms)
    np.add(ms, _scalar(epsilon, ms), out=ms)
    rstd = np.sqrt(ms, out=ms)
    np.reciprocal(rstd, out=rstd)
    y = np.multiply(x2, rstd)
    if weight is not None:
        np.multiply(y, weight.reshape(k), out=y)
    return y.reshape(x.shape), (rstd,)


def _rms_norm_bwd(g, residuals, x, weight, *, needs, axes, epsilon):
    # dx = rstd * (gw - xr * mean(gw * xr)),  xr = x * rstd,  gw = g * weight
    (rstd,) = residuals
    x2 = _rows(x, axes)
    g2 = g.reshape(x2.shape)
    k = x2.shape[1]
    xr = np.multiply(x2, rstd)
    dx = dw = None
    if needs[1]:
        dw = _col_dot(g2, xr).reshape(weight.shape)
    if needs[0]:
        gw = g2 if weight is None else np.multiply(g2, weight.reshape(k))
        c = _row_dot(gw, xr)
        np.divide(c, _scalar(k, c), out=c)
        np.multiply(xr, c, out=xr)
        dx = xr if weight is None else gw  # write into a buffer of our own
        np.subtract(gw, xr, out=dx)
        np.multiply(dx, rstd, out=dx)
        dx = dx.reshape(x.shape)
    return dx, dw


# ---- activations -----------------------------------------------------------------------------

# gelu's tanh form only: the erf form's fused pair won < 1.3x over its decomposition (bench
# W7 in-process A/B, erf being by far the dearest part either way), so it has no fast path.
def _gelu_tanh_fwd(x, *, approximate):
    # 0.5 x (1 + tanh(c (x + a x^3))): cheap enough to recompute
    t = np.multiply(x, x)
    np.multiply(t, _scalar(_GELU_A, t), out=t)
    np.add(t, _scalar(1.0, t), out=t)
    np.multiply(t, x, out=t)
    np.multiply(t, _scalar(_GELU_C, t), out=t)
    np.tanh(t, out=t)
    np.add(t, _scalar(1.0, t), out=t)
    np.multiply(t, x, out=t)
    np.multiply(t, _scalar(0.5, t), out=t)
    return t, ()


def _gelu_tanh_bwd(g, residuals, x, *, needs, approximate):
    # d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2),  t = tanh(c (x + a x^3))
    x2 = np.multiply(x, x)
    t = np.multiply(x2, _scalar(_GELU_A, x2))
    np.add(t, _scalar(1.0, t), out=t)
    np.multiply(t, x, out=t)
    np.multiply(t, _scalar(_GELU_C, t), out=t)
    np.tanh(t, out=t)
    np.multiply(x2, _scalar(3.0 * _GELU_A, x2), out=x2)
    np.add(x2, _scalar(1.0, x2), out=x2)
    np.multiply(x2, x, out=x2)
    np.multiply(x2, _scalar(0.5 * _GELU_C, x2), out=x2)  # 0.5 c x (1 + 3 a x^2)
    d = np.multiply(t, t)
    np.subtract(_scalar(1.0, d), d, out=d)
    np.multiply(d, x2, out=d)
    np.multiply(t, _scalar(0.5, t), out=t)
    np.add(d, t, out=d)
    np.add(d, _scalar(0.5, d), out=d)
    np.multiply(d, g, out=d)
    return (d,)


def _silu_fwd(x):
    s = _sigmoid(x)
    np.multiply(s, x, out=s)
    return s, ()


def _silu_bwd(g, residuals, x, *, needs):
    # d/dx = s (1 + x (1 - s))
    s = _sigmoid(x)
    d = np.subtract(_scalar(1.0, s), s)
    np.multiply(d, x, out=d)
    np.add(d, _scalar(1.0, d), out=d)
    np.multiply(d, s, out=d)
    np.multiply(d, g, out=d)
    return (d,)


def _softplus_fwd(x, *, beta):
    z = x if beta == 1.0 else np.multiply(x, _scalar(beta, x))
    out = np.abs(z)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    np.add(out, np.maximum(z, _scalar(0, z)), out=out)
    if beta != 1.0:
        np.divide(out, _scalar(beta, out), out=out)
    return out, ()


def _softplus_bwd(g, residuals, x, *, needs, beta):
    z = x if beta == 1.0 else np.multiply(x, _scalar(beta, x))
    d = _sigmoid(z)
    np.multiply(d, g, out=d)
    return (d,)


# ---- losses ----------------------------------------------------------------------------------

def _reduce(loss, reduction):
    if reduction == "mean":
        total = np.sum(loss, dtype=loss.dtype)
        return np.divide(total, _scalar(loss.size, total))
    if reduction == "sum":
        return np.sum(loss, dtype=loss.dtype)
    return loss


def _mse_loss_fwd(x, label, *, reduction):
    d = np.subtract(x, label)
    np.multiply(d, d, out=d)
    return _reduce(d, reduction), ()


def _mse_loss_bwd(g, residuals, x, label, *, needs, reduction):
    d = np.subtract(x, label)
    scale = 2.0 / d.size if reduction == "mean" else 2.0
    np.multiply(d, np.multiply(g, _scalar(scale, d)), out=d)  # g broadcasts for mean/sum
    return d, (np.negative(d) if needs[1] else None)


def _cross_entropy_fwd(x, label, *, axis, ignore_index, reduction, label_smoothing):
    # integer labels along the last axis; labels outside [0, C) select nothing (loss 0) and
    # those equal to ignore_index also leave the mean's denominator, as in the decomposition
    x2 = x.reshape(-1, x.shape[-1])
    lab = label.reshape(-1)
    rows = np.arange(x2.shape[0])
    m = np.max(x2, axis=1, keepdims=True)
    e = np.subtract(x2, m)
    np.exp(e, out=e)
    log_s = np.log(np.sum(e, axis=1, keepdims=True))
    del e
    inside = (lab >= 0) & (lab < x2.shape[1])
    idx = np.where(inside, lab, 0)
    picked = (x2[rows, idx] - m[:, 0]) - log_s[:, 0]  # log p of the label
    picked = np.where(inside, picked, _scalar(0, picked))
    valid = (lab != ignore_index).astype(x.dtype)
    loss = np.multiply(np.negative(picked), valid)
    count = np.sum(valid, dtype=x.dtype)
    if reduction == "mean":
        out = np.divide(np.sum(loss, dtype=x.dtype), count)
    elif reduction == "sum":
        out = np.sum(loss, dtype=x.dtype)
    else:
        out = loss.reshape(label.shape)
    np.add(m, log_s, out=m)  # logsumexp per row
    return out, (m, count)


def _cross_entropy_bwd(g, residuals, x, label, *, needs, axis, ignore_index, reduction,
                       label_smoothing):
    lse, count = residuals
    x2 = x.reshape(-1, x.shape[-1])
    lab = label.reshape(-1)
    rows = np.arange(x2.shape[0])
    inside = (lab >= 0) & (lab < x2.shape[1])
    dx = np.subtract(x2, lse)
    np.exp(dx, out=dx)  # softmax
    dx[rows[inside], lab[inside]] -= _scalar(1, dx)
    w = (lab != ignore_index).astype(x.dtype)
    if reduction == "mean":
        np.multiply(w, np.divide(g, count), out=w)
    elif reduction == "sum":
        np.multiply(w, g, out=w)
    else:
        np.multiply(w, np.reshape(g, w.shape), out=w)
    np.multiply(dx, w[:, None], out=dx)
    return dx.reshape(x.shape), None


FUSED = {
    "softmax": (_softmax_fwd, _softmax_bwd),
    "log_softmax": (_log_softmax_fwd, _log_softmax_bwd),
    "logsumexp": (_logsumexp_fwd, _logsumexp_bwd),
    "layer_norm": (_layer_norm_fwd, _layer_norm_bwd),
    "rms_norm": (_rms_norm_fwd, _rms_norm_bwd),
    "gelu_tanh": (_gelu_tanh_fwd, _gelu_tanh_bwd),
    "silu": (_silu_fwd, _silu_bwd),
    "softplus": (_softplus_fwd, _softplus_bwd),
    "mse_loss": (_mse_loss_fwd, _mse_loss_bwd),
    "cross_entropy": (_cross_entropy_fwd, _cross_entropy_bwd),
}
