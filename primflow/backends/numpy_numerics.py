"""NumPy kernels of the scientific-numerics primitives: complex parts, FFT and the matrix
decompositions (LAPACK through NumPy, or SciPy when installed).

The dict ``KERNELS`` is merged into the NumPy backend's kernel table.
"""

from __future__ import annotations

import numpy as np

try:  # scipy.fft keeps float32 in float32 and is pocketfft's C++ successor
    import scipy.fft as _fft_module
except ImportError:  # pragma: no cover - exercised only without scipy
    _fft_module = np.fft

# ---- complex numbers -----------------------------------------------------------------------


def _complex(re, im):
    out = np.empty(re.shape, dtype=np.result_type(re.dtype, np.complex64))
    out.real = re
    out.imag = im
    return out


def _real(z):
    return z.real


def _imag(z):
    return z.imag


# ---- FFT -----------------------------------------------------------------------------------

def _fft(x, *, kind, axes, n_last, norm):
    if kind == "fft":
        out = _fft_module.fftn(x, axes=axes, norm=norm)
    elif kind == "ifft":
        out = _fft_module.ifftn(x, axes=axes, norm=norm)
    elif kind == "rfft":
        out = _fft_module.rfftn(x, axes=axes, norm=norm)
        return out.astype(np.result_type(x.dtype, np.complex64), copy=False)
    else:
        s = [x.shape[a] for a in axes[:-1]] + [n_last]
        out = _fft_module.irfftn(x, s=s, axes=axes, norm=norm)
        return out.astype(x.real.dtype, copy=False)
    return out.astype(x.dtype, copy=False)


KERNELS = {
    "complex": _complex, "real": _real, "imag": _imag, "conj": np.conjugate,
    "fft": _fft,
}
