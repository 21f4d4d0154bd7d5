"""NumPy kernels of the scientific-numerics primitives: complex parts, FFT and the matrix
decompositions (LAPACK through NumPy, or SciPy when installed).

The dict ``KERNELS`` is merged into the NumPy backend's kernel table.
"""

from __future__ import annotations

import numpy as np

from . import blas

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


# copies, not views: compiled programs plan memory assuming these produce fresh arrays
def _real(z):
    return z.real.copy()


def _imag(z):
    return z.imag.copy()


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


# ---- matrix decompositions -----------------------------------------------------------------

try:
    import scipy.linalg as _scipy_linalg
except ImportError:  # pragma: no cover - exercised only without scipy
    _scipy_linalg = None


def _singular(name, what, how):
    return np.linalg.LinAlgError(f"{name}: {what}; {how}")


def _solve(a, b):
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular("solve", "the matrix is singular (LU found an exact zero pivot)",
                        "check for linearly dependent rows, or use pf.linalg.lstsq / "
                        "pf.linalg.pinv for a least-squares solution") from None


def _each_matrix(fn, *arrays):
    """``fn`` on each matrix of a batch (same leading dims), stacked back."""
    lead = arrays[0].shape[:-2]
    flat = [a.reshape((-1,) + a.shape[-2:]) for a in arrays]
    outs = [fn(*parts) for parts in zip(*flat)]
    if not outs:
        return np.empty(lead + fn(*[np.eye(a.shape[-2], a.shape[-1], dtype=a.dtype)
                                    for a in arrays]).shape, dtype=arrays[0].dtype)
    return np.stack(outs).reshape(lead + outs[0].shape)


def _triangular_solve(a, b, *, lower, transpose, unit_diagonal):
    if _scipy_linalg is not None:
        def one(m, r):
            return _scipy_linalg.solve_triangular(m, r, lower=lower, trans=1 if transpose else 0,
                                                  unit_diagonal=unit_diagonal,
                                                  check_finite=False)

        try:
            return _each_matrix(one, a, b).astype(b.dtype, copy=False)
        except np.linalg.LinAlgError:
            raise _singular("triangular_solve", "the matrix is singular (a zero on the "
                            "diagonal)", "check the triangular factor") from None
    m = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        idx = np.arange(a.shape[-1])
        m = m.copy()
        m[..., idx, idx] = 1
    return _solve(np.swapaxes(m, -1, -2) if transpose else m, b)


def _cholesky(a):
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(
            "cholesky: the matrix is not positive definite; check that it is symmetric with "
            "positive eigenvalues (add a small multiple of the identity for a covariance "
            "matrix)") from None


def _slogdet(a):
    sign, logdet = np.linalg.slogdet(a)
    return np.stack([sign, logdet], axis=-1).astype(a.dtype, copy=False)


def _eigh(a):
    w, v = np.linalg.eigh(a)
    return np.concatenate([v, w[..., None]], axis=-1)


def _lu_one(m):
    if _scipy_linalg is None:  # pragma: no cover
        raise ImportError("pf.linalg.lu needs SciPy's LAPACK getrf (NumPy has no LU): "
                          "pip install 'primflow[fast]' (or pip install scipy)")
    factors, pivots = _scipy_linalg.lu_factor(m, check_finite=False)
    perm = np.arange(m.shape[-1])
    for i, p in enumerate(pivots):  # LAPACK's row swaps, applied in order
        perm[i], perm[p] = perm[p], perm[i]
    return np.concatenate([factors, perm[:, None].astype(m.dtype)], axis=-1)


def _lu(a):
    return _each_matrix(_lu_one, a)


def _lapack(kernel):
    """``kernel`` (a decomposition of the matrices ``a[..., n, n]``, about ``n^3`` work each)
    on the BLAS threads a product of that much work gets (``blas.threads_for_work``)."""
    def run(a, *rest, **params):
        with blas.threads_for_work(a.size * a.shape[-1]):
            return kernel(a, *rest, **params)

    run.__name__ = run.__qualname__ = kernel.__name__
    return run


KERNELS.update({name: _lapack(kernel) for name, kernel in {
    "solve": _solve, "triangular_solve": _triangular_solve, "cholesky": _cholesky,
    "slogdet": _slogdet, "eigh": _eigh, "lu": _lu,
}.items()})


def _lu_pivots(perm):
    """1-based LAPACK row swaps producing the permutation ``perm`` (row i of P a is
    a[perm[i]])."""
    def one(p):
        current = np.arange(p.shape[-1])
        where = np.arange(p.shape[-1])  # where[v]: position of original row v in current
        pivots = np.empty_like(p)
        for i, target in enumerate(p):
            j = where[target]
            pivots[i] = j + 1
            a, b = current[i], current[j]
            current[i], current[j] = b, a
            where[a], where[b] = j, i
        return pivots

    flat = perm.reshape(-1, perm.shape[-1])
    return np.stack([one(p) for p in flat]).reshape(perm.shape) if flat.size else perm.copy()


def _lu_permutation(pivots):
    def one(p):
        perm = np.arange(p.shape[-1], dtype=p.dtype)
        for i, j in enumerate(p - 1):
            perm[i], perm[j] = perm[j], perm[i]
        return perm

    flat = pivots.reshape(-1, pivots.shape[-1])
    return (np.stack([one(p) for p in flat]).reshape(pivots.shape) if flat.size
            else pivots.copy())


def _qr(a):
    q, r = np.linalg.qr(a, mode="reduced")
    return np.concatenate([q, r], axis=-2)


def _svd(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.concatenate([u, s[..., None, :], np.swapaxes(vh, -1, -2)], axis=-2)


KERNELS.update({"lu_pivots": _lu_pivots, "lu_permutation": _lu_permutation,
                "qr": _lapack(_qr), "svd": _lapack(_svd)})
