"""The ``fft`` primitive: discrete Fourier transforms over static axes (as ``jax.lax.fft``).

Params: ``kind`` in {"fft", "ifft", "rfft", "irfft"}, ``axes`` (distinct dims; for rfft and
irfft the last one is the halved axis), ``n_last`` (irfft: the real output's length along
the last axis; the input has ``n_last // 2 + 1`` entries there) and ``norm`` (NumPy's
"backward", "ortho" or "forward"). Padding and truncation to other lengths happen in
``primflow.ops.fft``.

Every transform is linear, so the jvp applies it to the tangent and the vjp is its adjoint
under the real inner product ``Re <u, v>`` (the complex gradient convention of
``prims/complex.py``):

* fft/ifft: the adjoint is the inverse transform with the dual norm ("backward" <->
  "forward"), since the unnormalised DFT matrix F has ``F^H = n * F^-1``.
* rfft (real -> half spectrum): ``x_bar = Re(F^H P^T g)`` with P dropping the upper half.
  That is ``n * irfft(w g)`` where ``w`` halves the bins irfft counts twice (all but DC and,
  for even n, Nyquist): irfft's Hermitian extension doubles them back.
* irfft (half spectrum -> real): the adjoint is ``c * rfft(g)`` with the dual norm, where
  ``c`` is 2 on the bins that irfft counts twice and 1 on DC and Nyquist.

Example:
    >>> import primflow as pf
    >>> x = pf.to_tensor([1.0, 2.0, 3.0, 4.0], dtype="float64")
    >>> pf.fft.rfft(x).numpy()
    array([10.+0.j, -2.+2.j, -2.+0.j])
"""

from __future__ import annotations

from ..core import dtypes
from ..core.primitive import Aval, Primitive, PrimitiveError
from . import _batching as bt, creation, elementwise as ew, shape as sh
from . import sharding as sr
from .families import FFT
KINDS = ("fft", "ifft", "rfft", "irfft")
NORMS = ("backward", "ortho", "forward")
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _fft_infer(x, *, kind, axes, n_last, norm):
    if kind not in KINDS:
        raise PrimitiveError(f"fft: kind must be one of {KINDS}, got {kind!r}")
    if norm not in NORMS:
        raise PrimitiveError(f"fft: norm must be one of {NORMS}, got {norm!r}")
    if not axes or len(set(axes)) != len(axes) or any(not 0 <= a < len(x.shape) for a in axes):
        raise PrimitiveError(f"fft: axes {axes} are not distinct dims of a tensor of shape "
                             f"{list(x.shape)}")
    shape = list(x.shape)
    last = axes[-1]
    if kind == "rfft":
        if x.dtype.kind != "f":
            raise PrimitiveError(f"fft: rfft expects a real floating tensor, got {x.dtype.name}")
        shape[last] = x.shape[last] // 2 + 1
        return Aval(shape, dtypes.complex_of(x.dtype))
    if not x.dtype.is_complex:
        raise PrimitiveError(f"fft: {kind} expects a complex tensor, got {x.dtype.name}")
    if kind == "irfft":
        if n_last is None or n_last // 2 + 1 != x.shape[last]:
            raise PrimitiveError(f"fft: irfft to length {n_last} needs {(n_last or 0) // 2 + 1}"
                                 f" input entries along axis {last}, got {x.shape[last]}")
        shape[last] = n_last
        return Aval(shape, dtypes.real_of(x.dtype))
    return Aval(shape, x.dtype)


def _bin_weights(like, axis, n, value):
    """``like``-shaped weights along ``axis`` of a half spectrum of a length-``n`` signal:
    ``value`` on the bins irfft counts twice, 1 on DC and (n even) Nyquist."""
    twice = (n - 1) // 2  # bins 1 .. (n-1)//2
    pieces = [creation.full(shape=(1,), value=1.0, dtype=like.dtype)]
    if twice:
        pieces.append(creation.full(shape=(twice,), value=value, dtype=like.dtype))
    if n % 2 == 0 and n > 0:
        pieces.append(creation.full(shape=(1,), value=1.0, dtype=like.dtype))
    w = sh.concatenate(*pieces, axis=0) if len(pieces) > 1 else pieces[0]
    return sh.broadcast_in_dim(w, shape=tuple(like._shape), broadcast_dimensions=(axis,))


def _fft_vjp(g, out, x, *, kind, axes, n_last, norm):
    dual = _DUAL[norm]
    if kind in ("fft", "ifft"):
        inverse = "ifft" if kind == "fft" else "fft"
        return fft(g, kind=inverse, axes=axes, n_last=None, norm=dual)
    last = axes[-1]
    if kind == "rfft":
        n = x._shape[last]
        halved = ew.mul(g, _bin_weights(g, last, n, 0.5))
        return fft(halved, kind="irfft", axes=axes, n_last=n, norm=dual)
    spectrum = fft(g, kind="rfft", axes=axes, n_last=None, norm=dual)
    return ew.mul(spectrum, _bin_weights(spectrum, last, n_last, 2.0))


fft = Primitive("fft", family=FFT, shard=sr.FFT,
                infer=_fft_infer, linear=True, transpose=(_fft_vjp,), batch=bt.axes_batch,
                doc="discrete Fourier transform (fft, ifft, rfft or irfft) over `axes`")
