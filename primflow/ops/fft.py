"""Discrete Fourier transforms with NumPy's and Paddle's names (``pf.fft.fft``, ``rfft2``,
``irfftn``, ``fftfreq``, ``fftshift``, ...), over the one ``fft`` primitive.

``norm`` is "backward" (default: no scaling forward, 1/n inverse), "ortho" (1/sqrt(n) both
ways) or "forward" (1/n forward). Every transform is differentiable to any order; gradients
of complex values follow PyTorch's convention (``primflow/prims/complex.py``).

Example:
    >>> import primflow as pf
    >>> x = pf.to_tensor([0.0, 1.0, 0.0, -1.0], dtype="float64", stop_gradient=False)
    >>> pf.fft.rfft(x).numpy()
    array([0.+0.j, 0.-2.j, 0.+0.j])
    >>> (pf.abs(pf.fft.rfft(x)) ** 2).sum().backward()
    >>> x.grad.numpy()
    array([ 0.,  4.,  0., -4.])
"""

from __future__ import annotations

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from .helpers import as_tensor, cast, full, int_arg, int_list

_NORMS = ("backward", "ortho", "forward")
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _norm(norm, name):
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be one of {_NORMS} (or None), got {norm!r}")
    return norm


def _complex_input(x):
    x = as_tensor(x)
    if x.dtype.is_complex:
        return x
    real = x.dtype if x.dtype.is_floating else dtypes.default_float()
    return cast(x, dtypes.complex_of(real))


def _real_input(x, name):
    x = as_tensor(x)
    if x.dtype.is_complex:
        raise TypeError(f"{name} expects a real tensor, got {x.dtype.name}{x.shape}; use "
                        f"pf.fft.fft/fftn for complex input")
    return x if x.dtype.is_floating else cast(x, dtypes.default_float())


def _axes(x, axes, s, name):
    """Normalised transform axes: all dims (or the last len(s)) by default. ``axes`` may be
    one int (the ``axis`` of the 1-d transforms)."""
    ndim = x.ndim
    if axes is None:
        axes = tuple(range(ndim - (len(s) if s is not None else ndim), ndim))
    else:
        one = not isinstance(axes, (list, tuple))
        axes = tuple(int_list(axes, f"{name}: {'axis' if one else 'axes'}"))
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{name}: axis {a} is out of range for a tensor of shape "
                             f"{x.shape}")
        out.append(a % ndim)
    if len(set(out)) != len(out) or not out:
        raise ValueError(f"{name}: axes {tuple(axes)} must be distinct and non-empty")
    if s is not None and len(s) != len(out):
        raise ValueError(f"{name}: s={tuple(s)} and axes={tuple(axes)} differ in length")
    return tuple(out)


def _check_points(x, axes, s, name):
    """A transform over an empty axis has no points (NumPy's own error, wrapped, said
    "invalid number of data points"); ``s`` (or ``n``) zero-pads it."""
    for a in axes:
        if x._shape[a] == 0 and s is None:
            raise ValueError(f"{name}: axis {a} of the input (shape {x.shape}) is empty: a "
                             f"transform needs at least one point; pass n (or s) to zero-pad")


def _resize(x, axis, n, name):
    """``x`` cut or zero-padded to length ``n`` along ``axis`` (NumPy's ``n=``/``s=``)."""
    if n < 1:
        raise ValueError(f"{name}: transform length {n} must be >= 1")
    size = x._shape[axis]
    if n == size:
        return x
    if n < size:
        limit = list(x._shape)
        limit[axis] = n
        return prims.slice(x, start=(0,) * x.ndim, limit=tuple(limit),
                           strides=(1,) * x.ndim)
    config = tuple((0, n - size if d == axis else 0, 0) for d in range(x.ndim))
    return prims.pad(x, full((), 0, x.dtype), config=config)


def _c2c(x, s, axes, norm, kind, name):
    x, s = _complex_input(x), _lengths(s, name)
    axes = _axes(x, axes, s, name)
    _check_points(x, axes, s, name)
    if s is not None:
        for a, n in zip(axes, s):
            x = _resize(x, a, n, name)
    return prims.fft(x, kind=kind, axes=axes, n_last=None, norm=_norm(norm, name))


def _r2c(x, s, axes, norm, name):
    x, s = _real_input(x, name), _lengths(s, name)
    axes = _axes(x, axes, s, name)
    _check_points(x, axes, s, name)
    if s is not None:
        for a, n in zip(axes, s):
            x = _resize(x, a, n, name)
    return prims.fft(x, kind="rfft", axes=axes, n_last=None, norm=_norm(norm, name))


def _c2r(x, s, axes, norm, name):
    x, s = _complex_input(x), _lengths(s, name)
    axes = _axes(x, axes, s, name)
    last = axes[-1]
    if s is None:
        n_last = 2 * (x._shape[last] - 1)
        if n_last < 1:
            raise ValueError(f"{name}: cannot infer the output length from "
                             f"{x._shape[last]} input entries; pass n (or s)")
    else:
        for a, n in zip(axes[:-1], s[:-1]):
            x = _resize(x, a, n, name)
        n_last = s[-1]
        if n_last < 1:
            raise ValueError(f"{name}: transform length {n_last} must be >= 1")
    x = _resize(x, last, n_last // 2 + 1, name)
    return prims.fft(x, kind="irfft", axes=axes, n_last=n_last, norm=_norm(norm, name))


def _lengths(s, name):
    """The ``s=`` argument of the n-d transforms as a tuple of ints (None stays)."""
    return None if s is None else tuple(int_list(s, f"{name}: s"))


def _one(n, name):
    """The ``n=`` argument of the 1-d transforms as the ``s`` of one axis."""
    return None if n is None else (int_arg(n, f"{name}: n"),)


# ---- one dimension -------------------------------------------------------------------------

def fft(x, n=None, axis=-1, norm="backward", name=None) -> Tensor:
    """1-d discrete Fourier transform along ``axis`` (``n``: cut or zero-pad to n first).

    Example:
        >>> import primflow as pf
        >>> pf.fft.fft(pf.to_tensor([1.0, 0.0])).numpy()
        array([1.+0.j, 1.+0.j], dtype=complex64)
    """
    return _c2c(x, _one(n, "fft"), axis, norm, "fft", "fft")


def ifft(x, n=None, axis=-1, norm="backward", name=None) -> Tensor:
    """Inverse of ``fft``.

    Example:
        >>> import primflow as pf
        >>> pf.fft.ifft(pf.to_tensor([1.0, 1.0])).numpy()
        array([1.+0.j, 0.+0.j], dtype=complex64)
    """
    return _c2c(x, _one(n, "ifft"), axis, norm, "ifft", "ifft")


def rfft(x, n=None, axis=-1, norm="backward", name=None) -> Tensor:
    """Fourier transform of a real signal: the ``n // 2 + 1`` non-negative frequencies.

    Example:
        >>> import primflow as pf
        >>> pf.fft.rfft(pf.to_tensor([1.0, 2.0, 3.0])).shape
        [2]
    """
    return _r2c(x, _one(n, "rfft"), axis, norm, "rfft")


def irfft(x, n=None, axis=-1, norm="backward", name=None) -> Tensor:
    """Inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0, 3.0], dtype="float64")
        >>> pf.fft.irfft(pf.fft.rfft(x), n=3).numpy()
        array([1., 2., 3.])
    """
    return _c2r(x, _one(n, "irfft"), axis, norm, "irfft")


def hfft(x, n=None, axis=-1, norm="backward", name=None) -> Tensor:
    """Transform of a Hermitian-symmetric signal given by its first half: a real spectrum
    (``irfft(conj(x))`` with the forward scaling, as NumPy).

    Example:
        >>> import primflow as pf
        >>> pf.fft.hfft(pf.to_tensor([1.0, 0.0]), n=2).numpy()
        array([1., 1.], dtype=float32)
    """
    return _c2r(prims.conj(_complex_input(x)), _one(n, "hfft"), axis,
                _DUAL[_norm(norm, "hfft")], "hfft")


def ihfft(x, n=None, axis=-1, norm="backward", name=None) -> Tensor:
    """Inverse of ``hfft``: ``conj(rfft(x))`` with the inverse scaling.

    Example:
        >>> import primflow as pf
        >>> pf.fft.ihfft(pf.to_tensor([1.0, 1.0])).numpy()
        array([1.-0.j, 0.-0.j], dtype=complex64)
    """
    return prims.conj(_r2c(x, _one(n, "ihfft"), axis, _DUAL[_norm(norm, "ihfft")], "ihfft"))


# ---- two and n dimensions ------------------------------------------------------------------

def fft2(x, s=None, axes=(-2, -1), norm="backward", name=None) -> Tensor:
    """2-d Fourier transform over ``axes``. Example: ``pf.fft.fft2(pf.ones([4, 4]))``."""
    return _c2c(x, s, axes, norm, "fft", "fft2")


def ifft2(x, s=None, axes=(-2, -1), norm="backward", name=None) -> Tensor:
    """Inverse of ``fft2``. Example: ``pf.fft.ifft2(pf.fft.fft2(pf.ones([4, 4])))``."""
    return _c2c(x, s, axes, norm, "ifft", "ifft2")


def rfft2(x, s=None, axes=(-2, -1), norm="backward", name=None) -> Tensor:
    """2-d transform of a real signal (the last axis halved).

    Example:
        >>> import primflow as pf
        >>> pf.fft.rfft2(pf.ones([4, 6])).shape
        [4, 4]
    """
    return _r2c(x, s, axes, norm, "rfft2")


def irfft2(x, s=None, axes=(-2, -1), norm="backward", name=None) -> Tensor:
    """Inverse of ``rfft2``. Example: ``pf.fft.irfft2(pf.fft.rfft2(x), s=x.shape)``."""
    return _c2r(x, s, axes, norm, "irfft2")


def fftn(x, s=None, axes=None, norm="backward", name=None) -> Tensor:
    """n-d Fourier transform (all axes, or the last ``len(s)``).

    Example:
        >>> import primflow as pf
        >>> pf.fft.fftn(pf.ones([2, 2])).numpy().real
        array([[4., 0.],
               [0., 0.]], dtype=float32)
    """
    return _c2c(x, s, axes, norm, "fft", "fftn")


def ifftn(x, s=None, axes=None, norm="backward", name=None) -> Tensor:
    """Inverse of ``fftn``. Example: ``pf.fft.ifftn(pf.fft.fftn(x))``."""
    return _c2c(x, s, axes, norm, "ifft", "ifftn")


def rfftn(x, s=None, axes=None, norm="backward", name=None) -> Tensor:
    """n-d transform of a real signal (the last axis halved). Example:
    ``pf.fft.rfftn(pf.ones([2, 4])).shape`` is [2, 3]."""
    return _r2c(x, s, axes, norm, "rfftn")


def irfftn(x, s=None, axes=None, norm="backward", name=None) -> Tensor:
    """Inverse of ``rfftn``. Example: ``pf.fft.irfftn(pf.fft.rfftn(x), s=x.shape)``."""
    return _c2r(x, s, axes, norm, "irfftn")


# ---- frequencies and shifts ----------------------------------------------------------------

def fftfreq(n, d=1.0, dtype=None, name=None) -> Tensor:
    """Sample frequencies of ``fft`` for ``n`` samples spaced ``d`` apart.

    Example:
        >>> import primflow as pf
        >>> pf.fft.fftfreq(4, d=0.5).numpy()
        array([ 0. ,  0.5, -1. , -0.5], dtype=float32)
    """
    n, d = _frequency_args(n, d, "fftfreq")
    values = [k / (n * d) for k in list(range((n - 1) // 2 + 1)) + list(range(-(n // 2), 0))]
    return as_tensor(values, dtype=dtype or dtypes.default_float())


def rfftfreq(n, d=1.0, dtype=None, name=None) -> Tensor:
    """Sample frequencies of ``rfft``: ``0, 1, ..., n // 2`` over ``n * d``.

    Example:
        >>> import primflow as pf
        >>> pf.fft.rfftfreq(4).numpy()
        array([0.  , 0.25, 0.5 ], dtype=float32)
    """
    n, d = _frequency_args(n, d, "rfftfreq")
    return as_tensor([k / (n * d) for k in range(n // 2 + 1)],
                     dtype=dtype or dtypes.default_float())


def _frequency_args(n, d, name):
    n = int_arg(n, f"{name}: n", minimum=0)
    if isinstance(d, bool) or not isinstance(d, (int, float)) or not d or d != d:
        raise ValueError(f"{name}: d (the sample spacing) must be a nonzero number, got {d!r}")
    return n, d


def _roll(x, shift, axis):
    size = x._shape[axis]
    shift %= max(size, 1)
    if shift == 0:
        return x
    nd = x.ndim

    def part(lo, hi):
        start, limit = [0] * nd, list(x._shape)
        start[axis], limit[axis] = lo, hi
        return prims.slice(x, start=tuple(start), limit=tuple(limit), strides=(1,) * nd)

    return prims.concatenate(part(size - shift, size), part(0, size - shift), axis=axis)


def _shift(x, axes, sign, name):
    x = as_tensor(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    for a in _axes(x, axes, None, name) if x.ndim else ():
        x = _roll(x, sign * (x._shape[a] // 2), a)
    return x


def fftshift(x, axes=None, name=None) -> Tensor:
    """Moves the zero frequency to the centre (a roll by n // 2 along ``axes``).

    Example:
        >>> import primflow as pf
        >>> pf.fft.fftshift(pf.fft.fftfreq(4)).numpy()
        array([-0.5 , -0.25,  0.  ,  0.25], dtype=float32)
    """
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x, axes=None, name=None) -> Tensor:
    """Inverse of ``fftshift``. Example: ``pf.fft.ifftshift(pf.fft.fftshift(x))`` is x."""
    return _shift(x, axes, -1, "ifftshift")
