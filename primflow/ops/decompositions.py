"""``pf.linalg``: solves, decompositions, determinants, norms and matrix functions with
Paddle's names, batched over leading dims (broadcast between operands).

The decompositions are primitives (``primflow/prims/decompositions.py``) whose rules are
written in primitives, so every function here differentiates to any order; the others
(inv, det, pinv, matrix_exp, norms, cond, ...) are composites of them.

Example (a Gaussian log-likelihood term through a Cholesky factor):
    >>> import primflow as pf
    >>> a = pf.to_tensor([[4.0, 2.0], [2.0, 3.0]], dtype="float64", stop_gradient=False)
    >>> b = pf.to_tensor([[1.0], [2.0]], dtype="float64")
    >>> l = pf.linalg.cholesky(a)
    >>> quad = (b * pf.linalg.cholesky_solve(b, l)).sum()
    >>> round(float(quad), 12)
    1.375
    >>> (g,) = pf.grad(quad, [a])
    >>> g.numpy().round(12)  # -a^-1 b b^T a^-1
    array([[-0.015625,  0.09375 ],
           [ 0.09375 , -0.5625  ]])
"""

from __future__ import annotations

import math as _math

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from ..core.trace import Tracer
from .helpers import as_tensor, broadcast_shapes, broadcast_to, cast, full, int_arg, int_list
from . import math as em
from . import reduction
from .manipulation import moveaxis, squeeze, stack


# ---- argument checks -----------------------------------------------------------------------

def _matrix(x, name, square=True):
    """``x`` as a real floating tensor of matrices, or a clear error."""
    x = as_tensor(x)
    d = x.dtype
    if d.is_complex:
        raise TypeError(f"{name}: complex matrices are not supported yet (got {d.name}"
                        f"{x.shape}); pass a real float32 or float64 tensor")
    if not d.is_floating:
        raise TypeError(f"{name}: expects a floating-point matrix, got {d.name}{x.shape}; "
                        f"convert first, e.g. x.astype('float64')")
    if d.name == "float16":  # LAPACK has no half precision (bfloat16 runs in float32)
        raise TypeError(f"{name}: float16 matrices are not supported (LAPACK computes in "
                        f"float32 or float64); convert first, e.g. x.astype('float32')")
    if x.ndim < 2:
        raise ValueError(f"{name}: expects a matrix (at least 2 dims), got shape {x.shape}")
    if square and x._shape[-1] != x._shape[-2]:
        raise ValueError(f"{name}: expects square matrices in the last two dims, got shape "
                         f"{x.shape}")
    return x


def _broadcast_batch(a, b, name):
    """``a`` and ``b`` broadcast to their common batch dims (all but the last two)."""
    try:
        batch = broadcast_shapes(a._shape[:-2], b._shape[:-2])
    except ValueError:
        raise ValueError(f"{name}: the batch dims of shapes {a.shape} and {b.shape} do not "
                         f"broadcast") from None
    return (broadcast_to(a, batch + a._shape[-2:]), broadcast_to(b, batch + b._shape[-2:]))


def _pair(a, b, name):
    """Matrices ``a`` [..., n, n] and ``b`` [..., n, k] with broadcast batch dims and one
    dtype."""
    if b.dtype is not a.dtype:
        if not b.dtype.is_floating or b.dtype.is_complex:
            raise TypeError(f"{name}: the right-hand side must be a real floating tensor, got "
                            f"{b.dtype.name}{b.shape}")
        d = dtypes.promote_types(a.dtype, b.dtype)
        a, b = cast(a, d), cast(b, d)
    if b._shape[-2] != a._shape[-1]:
        raise ValueError(f"{name}: shapes {a.shape} and {b.shape} do not match: the matrix "
                         f"has {a._shape[-1]} columns, the right-hand side {b._shape[-2]} rows")
    return _broadcast_batch(a, b, name)


def _rhs(y, name):
    y = as_tensor(y)
    if y.ndim == 0:
        raise ValueError(f"{name}: the right-hand side must have at least 1 dim")
    if y.ndim == 1:
        return prims.reshape(y, shape=tuple(y._shape) + (1,)), True
    return y, False


def _mT(x):  # noqa: N802
    nd = x.ndim
    return prims.transpose(x, perm=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _eye_like(a, cols=None):
    n = a._shape[-2]
    shape = tuple(a._shape[:-2]) + (n, n if cols is None else cols)
    nd = len(shape)
    rows = prims.iota(shape=shape, dtype=dtypes.int64, dimension=nd - 2)
    columns = prims.iota(shape=shape, dtype=dtypes.int64, dimension=nd - 1)
    return prims.convert_element_type(prims.eq(rows, columns), dtype=a.dtype)


def _mm(a, b):
    nd = a.ndim
    batch = tuple(range(nd - 2))
    return prims.dot_general(a, b, contracting=((nd - 1,), (nd - 2,)), batch=(batch, batch))


def _column_slice(x, start, stop):
    nd = x.ndim
    return prims.slice(x, start=(0,) * (nd - 1) + (start,),
                       limit=tuple(x._shape[:-1]) + (stop,), strides=(1,) * nd)


def _row_slice(x, start, stop):
    nd = x.ndim
    return prims.slice(x, start=(0,) * (nd - 2) + (start, 0),
                       limit=tuple(x._shape[:-2]) + (stop, x._shape[-1]), strides=(1,) * nd)


def _last(x, k):
    """``x[..., k]`` of a packed output."""
    return prims.reshape(_column_slice(x, k, k + 1), shape=tuple(x._shape[:-1]))


# ---- solves --------------------------------------------------------------------------------

def solve(x, y, left=True, name=None) -> Tensor:
    """The solution ``out`` of ``x @ out = y`` (``out @ x = y`` when ``left=False``); a 1-d
    ``y`` is one vector. Singular matrices raise an error in eager mode.

    Example:
        >>> import primflow as pf
        >>> a = pf.to_tensor([[2.0, 0.0], [0.0, 4.0]])
        >>> pf.linalg.solve(a, pf.to_tensor([2.0, 2.0])).numpy()
        array([1. , 0.5], dtype=float32)
    """
    a = _matrix(x, "solve")
    if not left:
        return _mT(solve(_mT(a), _mT(_matrix(y, "solve", square=False))))
    b, vector = _rhs(y, "solve")
    a, b = _pair(a, b, "solve")
    out = prims.solve(a, b)
    return prims.reshape(out, shape=tuple(out._shape[:-1])) if vector else out


def inv(x, name=None) -> Tensor:
    """Matrix inverse (a solve against the identity; singular matrices raise).

    Example:
        >>> import primflow as pf
        >>> pf.linalg.inv(pf.to_tensor([[2.0, 0.0], [0.0, 4.0]])).numpy()
        array([[0.5 , 0.  ],
               [0.  , 0.25]], dtype=float32)
    """
    a = _matrix(x, "inv")
    return prims.solve(a, _eye_like(a))


def cholesky(x, upper=False, name=None) -> Tensor:
    """Cholesky factor of symmetric positive-definite matrices: lower ``L`` with
    ``x = L @ L^T`` (or upper ``U = L^T`` with ``x = U^T @ U``). Reads the lower triangle.

    Example:
        >>> import primflow as pf
        >>> pf.linalg.cholesky(pf.to_tensor([[4.0, 2.0], [2.0, 2.0]])).numpy()
        array([[2., 0.],
               [1., 1.]], dtype=float32)
    """
    factor = prims.cholesky(_matrix(x, "cholesky"))
    return _mT(factor) if upper else factor


def triangular_solve(x, y, upper=True, transpose=False, unitriangular=False,
                     name=None) -> Tensor:
    """Solves ``op(x) @ out = y`` for triangular ``x`` (``op``: transpose when asked); the
    other triangle of ``x`` is not read, nor its diagonal when ``unitriangular``.

    Example:
        >>> import primflow as pf
        >>> u = pf.to_tensor([[2.0, 1.0], [0.0, 1.0]])
        >>> pf.linalg.triangular_solve(u, pf.to_tensor([[3.0], [1.0]])).numpy()
        array([[1.],
               [1.]], dtype=float32)
    """
    a = _matrix(x, "triangular_solve")
    b, vector = _rhs(y, "triangular_solve")
    a, b = _pair(a, b, "triangular_solve")
    out = prims.triangular_solve(a, b, lower=not upper, transpose=bool(transpose),
                                 unit_diagonal=bool(unitriangular))
    return prims.reshape(out, shape=tuple(out._shape[:-1])) if vector else out


def cholesky_solve(x, y, upper=False, name=None) -> Tensor:
    """Solves ``A @ out = x`` given the Cholesky factor ``y`` of ``A`` (Paddle's order).

    Example:
        >>> import primflow as pf
        >>> l = pf.linalg.cholesky(pf.to_tensor([[4.0, 2.0], [2.0, 2.0]]))
        >>> pf.linalg.cholesky_solve(pf.to_tensor([[6.0], [4.0]]), l).numpy()
        array([[1.],
               [1.]], dtype=float32)
    """
    factor = _matrix(y, "cholesky_solve")
    b, vector = _rhs(x, "cholesky_solve")
    factor, b = _pair(factor, b, "cholesky_solve")
    lower = not upper
    # A = L L^T: solve L z = b, then L^T out = z (U^T U for upper factors)
    z = prims.triangular_solve(factor, b, lower=lower, transpose=not lower,
                               unit_diagonal=False)
    out = prims.triangular_solve(factor, z, lower=lower, transpose=lower, unit_diagonal=False)
    return prims.reshape(out, shape=tuple(out._shape[:-1])) if vector else out


# ---- determinants --------------------------------------------------------------------------

def slogdet(x, name=None) -> Tensor:
    """Sign and natural log of ``|det x|``, stacked in a new first dim (Paddle's layout:
    ``sign, logabsdet = pf.linalg.slogdet(x)`` unpacks it).

    Example:
        >>> import primflow as pf
        >>> sign, logabsdet = pf.linalg.slogdet(pf.to_tensor([[-2.0, 0.0], [0.0, 3.0]]))
        >>> float(sign), round(float(logabsdet), 4)
        (-1.0, 1.7918)
    """
    packed = prims.slogdet(_matrix(x, "slogdet"))
    return moveaxis(packed, -1, 0)


def det(x, name=None) -> Tensor:
    """Determinant, ``sign * exp(logabsdet)`` (differentiable where det != 0).

    Example:
        >>> import primflow as pf
        >>> float(pf.linalg.det(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]])))
        -2.0
    """
    packed = prims.slogdet(_matrix(x, "det"))
    return prims.mul(_last(packed, 0), prims.exp(_last(packed, 1)))


# ---- eigen, QR, SVD ------------------------------------------------------------------------

def eigh(x, UPLO="L", name=None):  # noqa: N803 - Paddle's argument name
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices, read from
    the ``UPLO`` triangle. Returns ``(w, v)``.

    Gradients: with repeated eigenvalues the eigenvectors are not unique; the gradient is
    finite and right when the loss does not depend on the basis chosen in the repeated
    eigenspace (eigenvalues, projectors), and a RuntimeWarning says when it does.

    Example:
        >>> import primflow as pf
        >>> w, v = pf.linalg.eigh(pf.to_tensor([[2.0, 1.0], [1.0, 2.0]], dtype="float64"))
        >>> w.numpy()
        array([1., 3.])
    """
    a = _matrix(x, "eigh")
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    if UPLO == "U":
        a = _mT(a)
    packed = prims.eigh(a)
    n = a._shape[-1]
    return _last(packed, n), _column_slice(packed, 0, n)


def eigvalsh(x, UPLO="L", name=None) -> Tensor:  # noqa: N803
    """Eigenvalues (ascending) of symmetric matrices.

    Example:
        >>> import primflow as pf
        >>> pf.linalg.eigvalsh(pf.to_tensor([[2.0, 0.0], [0.0, 1.0]])).numpy()
        array([1., 2.], dtype=float32)
    """
    return eigh(x, UPLO)[0]


def qr(x, mode="reduced", name=None):
    """QR factorisation ``x = Q @ R`` (Q orthonormal columns, R upper triangular). ``mode``:
    "reduced" (Q [m, k], R [k, n], k = min(m, n)), "complete" (square matrices or m <= n,
    where it equals reduced) or "r" (R only).

    Example:
        >>> import primflow as pf
        >>> q, r = pf.linalg.qr(pf.to_tensor([[3.0, 0.0], [4.0, 5.0]], dtype="float64"))
        >>> (q @ r).numpy().round(12)
        array([[3., 0.],
               [4., 5.]])
    """
    a = _matrix(x, "qr", square=False)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = a._shape[-2:]
    if mode == "complete" and m > n:
        raise ValueError("qr: mode='complete' of a tall matrix is not supported (the extra "
                         "columns of Q are not unique); use mode='reduced'")
    if m >= n:
        packed = prims.qr(a)
        q, r = _row_slice(packed, 0, m), _row_slice(packed, m, m + n)
    else:  # wide: factor the leading square block, R's other columns are Q^T x
        packed = prims.qr(_column_slice(a, 0, m))
        q, r_left = _row_slice(packed, 0, m), _row_slice(packed, m, 2 * m)
        r = prims.concatenate(r_left, _mm(_mT(q), _column_slice(a, m, n)), axis=a.ndim - 1)
    return r if mode == "r" else (q, r)


def svd(x, full_matrices=False, name=None):
    """Thin singular value decomposition ``x = U @ diag(S) @ VH`` with S descending.
    Returns ``(U, S, VH)``. Derivatives of U and VH need distinct nonzero singular values;
    those of S alone are defined everywhere the singular values are distinct.

    Example:
        >>> import primflow as pf
        >>> u, s, vh = pf.linalg.svd(pf.to_tensor([[3.0, 0.0], [0.0, -2.0]]))
        >>> s.numpy()
        array([3., 2.], dtype=float32)
    """
    a = _matrix(x, "svd", square=False)
    if full_matrices and a._shape[-1] != a._shape[-2]:
        raise ValueError("svd: full_matrices=True is not supported for non-square input "
                         "(the extra singular vectors are not unique); use the thin SVD")
    m, n = a._shape[-2:]
    tall = m >= n
    packed = prims.svd(a if tall else _mT(a))
    rows, k = (m, n) if tall else (n, m)
    u = _row_slice(packed, 0, rows)
    s = prims.reshape(_row_slice(packed, rows, rows + 1), shape=tuple(a._shape[:-2]) + (k,))
    v = _row_slice(packed, rows + 1, rows + 1 + k)
    return (u, s, _mT(v)) if tall else (v, s, _mT(u))


def svdvals(x, name=None) -> Tensor:
    """Singular values, descending.

    Example:
        >>> import primflow as pf
        >>> pf.linalg.svdvals(pf.to_tensor([[0.0, 2.0], [1.0, 0.0]])).numpy()
        array([2., 1.], dtype=float32)
    """
    return svd(x)[1]


def pinv(x, rcond=1e-15, hermitian=False, name=None) -> Tensor:
    """Moore-Penrose pseudo-inverse through the SVD; singular values below ``rcond`` times
    the largest count as zero.

    Example:
        >>> import primflow as pf
        >>> pf.linalg.pinv(pf.to_tensor([[2.0, 0.0], [0.0, 0.0]])).numpy()
        array([[0.5, 0. ],
               [0. , 0. ]], dtype=float32)
    """
    a = _matrix(x, "pinv", square=False)
    u, s, vh = svd(a)
    biggest = reduction.max(s, axis=-1, keepdim=True)
    keep = prims.gt(s, prims.mul(broadcast_to(biggest, s._shape), full(s._shape, rcond,
                                                                          s.dtype)))
    one = full(s._shape, 1.0, s.dtype)
    inverse = prims.select(keep, prims.div(one, prims.select(keep, s, one)),
                           full(s._shape, 0.0, s.dtype))
    nd = s.ndim + 1
    scaled = prims.mul(_mT(vh), prims.broadcast_in_dim(
        inverse, shape=tuple(vh._shape[:-2]) + (vh._shape[-1], vh._shape[-2]),
        broadcast_dimensions=tuple(range(nd - 2)) + (nd - 1,)))
    return _mm(scaled, _mT(u))


def lstsq(x, y, rcond=None, driver=None, name=None):
    """Least-squares solution of ``x @ out = y``. Returns ``(solution, residuals, rank,
    singular_values)`` as Paddle does; residuals (squared, per column) are given for tall
    full-rank x, else an empty tensor.

    Example:
        >>> import primflow as pf
        >>> a = pf.to_tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype="float64")
        >>> sol, res, rank, sv = pf.linalg.lstsq(a, pf.to_tensor([[1.0], [2.0], [3.0]],
        ...                                                      dtype="float64"))
        >>> sol.numpy().round(12), int(rank)
        (array([[1.],
               [2.]]), 2)
    """
    a = _matrix(x, "lstsq", square=False)
    b, vector = _rhs(y, "lstsq")
    a, b = _pair_rows(a, b, "lstsq")
    u, s, vh = svd(a)
    m, n = a._shape[-2:]
    cutoff = rcond if rcond is not None else max(m, n) * _EPS[a.dtype.name]
    biggest = reduction.max(s, axis=-1, keepdim=True)
    keep = prims.gt(s, prims.mul(broadcast_to(biggest, s._shape), full(s._shape, cutoff,
                                                                          s.dtype)))
    one = full(s._shape, 1.0, s.dtype)
    inverse = prims.select(keep, prims.div(one, prims.select(keep, s, one)),
                           full(s._shape, 0.0, s.dtype))
    nd = a.ndim
    coefficients = _mm(_mT(u), b)  # [..., k, cols]
    weighted = prims.mul(coefficients, prims.broadcast_in_dim(
        inverse, shape=tuple(coefficients._shape),
        broadcast_dimensions=tuple(range(nd - 2)) + (nd - 2,)))
    solution = _mm(_mT(vh), weighted)
    rank = reduction.sum(prims.convert_element_type(keep, dtype=dtypes.int64), axis=-1)
    residual = _mm(a, solution)
    if m > n:
        diff = prims.sub(residual, b)
        residuals = reduction.sum(prims.mul(diff, diff), axis=-2)
    else:
        residuals = full((0,), 0.0, a.dtype)
    if vector:
        solution = prims.reshape(solution, shape=tuple(solution._shape[:-1]))
        if m > n:
            residuals = prims.reshape(residuals, shape=tuple(residuals._shape[:-1]))
    return solution, residuals, rank, s


_EPS = {"bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}  # machine epsilon


def _pair_rows(a, b, name):
    """Like ``_pair`` for non-square a: b's rows must match a's rows."""
    if b.dtype is not a.dtype:
        d = dtypes.promote_types(a.dtype, b.dtype)
        a, b = cast(a, d), cast(b, d)
    if b._shape[-2] != a._shape[-2]:
        raise ValueError(f"{name}: shapes {a.shape} and {b.shape} do not match: the matrix "
                         f"has {a._shape[-2]} rows, the right-hand side {b._shape[-2]}")
    return _broadcast_batch(a, b, name)


# ---- LU ------------------------------------------------------------------------------------

def lu(x, pivot=True, get_infos=False, name=None):
    """LU factorisation with partial pivoting: ``(LU, pivots)`` as Paddle/LAPACK give them
    (``L`` unit lower and ``U`` packed in one matrix; ``pivots`` 1-based int32 row swaps),
    plus ``infos`` (zeros) when ``get_infos``. ``lu_unpack`` gives ``P, L, U``. On the
    NumPy backend it needs the ``fast`` extra (SciPy's LAPACK ``getrf``; NumPy has no LU).

    Example:
        >>> import primflow as pf
        >>> lu_, piv = pf.linalg.lu(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> piv.numpy()
        array([2, 2], dtype=int32)
    """
    if not pivot:
        raise ValueError("lu: pivot=False is not supported (LAPACK always pivots)")
    a = _matrix(x, "lu")
    packed = prims.lu(a)
    n = a._shape[-1]
    factors = _column_slice(packed, 0, n)
    perm = prims.convert_element_type(_last(packed, n), dtype=dtypes.int32)
    pivots = prims.lu_pivots(perm)
    if get_infos:
        return factors, pivots, full(a._shape[:-2], 0, dtypes.int32)
    return factors, pivots


def _permutation(pivots):
    """The row permutation ``perm`` (P a = a[perm]) from 1-based LAPACK pivots."""
    return prims.lu_permutation(cast(pivots, dtypes.int32))


def _permutation_matrix(perm, like):
    """``P`` with ``(P a)[i] = a[perm[i]]``, in ``like``'s dtype."""
    n = perm._shape[-1]
    shape = tuple(perm._shape) + (n,)
    nd = len(shape)
    rows = prims.broadcast_in_dim(perm, shape=shape,
                                  broadcast_dimensions=tuple(range(nd - 1)))
    columns = prims.iota(shape=shape, dtype=dtypes.int32, dimension=nd - 1)
    return prims.convert_element_type(prims.eq(rows, columns), dtype=like.dtype)


def lu_unpack(x, y, unpack_ludata=True, unpack_pivots=True, name=None):
    """``P, L, U`` with ``A = P @ L @ U`` from ``lu``'s packed factors and pivots (the
    example's ``lu`` needs the ``fast`` extra on the NumPy backend).

    Example:
        >>> import primflow as pf
        >>> a = pf.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> p, l, u = pf.linalg.lu_unpack(*pf.linalg.lu(a))
        >>> (p @ l @ u).numpy()
        array([[1., 2.],
               [3., 4.]], dtype=float32)
    """
    factors = _matrix(x, "lu_unpack")
    eye = _eye_like(factors)
    lower = prims.add(_tril(factors, -1), eye)
    upper = _tril(_mT(factors), 0)
    upper = _mT(upper)
    p = _mT(_permutation_matrix(_permutation(as_tensor(y)), factors))
    return p, lower, upper


def _tril(a, k):
    shape = tuple(a._shape)
    nd = len(shape)
    rows = prims.iota(shape=shape, dtype=dtypes.int64, dimension=nd - 2)
    columns = prims.iota(shape=shape, dtype=dtypes.int64, dimension=nd - 1)
    keep = prims.le(prims.sub(columns, rows), full(shape, k, dtypes.int64))
    return prims.select(keep, a, full(shape, 0, a.dtype))


def lu_solve(b, lu, pivots, trans="N", name=None) -> Tensor:  # noqa: A002
    """Solves ``A @ out = b`` (``A^T @ out = b`` for trans='T') from ``lu(A)`` (the
    example's ``lu`` needs the ``fast`` extra on the NumPy backend).

    Example:
        >>> import primflow as pf
        >>> a = pf.to_tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64")
        >>> lu_, piv = pf.linalg.lu(a)
        >>> pf.linalg.lu_solve(pf.to_tensor([[5.0], [11.0]], dtype="float64"), lu_, piv).numpy()
        array([[1.],
               [2.]])
    """
    factors = _matrix(lu, "lu_solve")
    rhs, vector = _rhs(b, "lu_solve")
    factors, rhs = _pair(factors, rhs, "lu_solve")
    p = _permutation_matrix(_permutation(as_tensor(pivots)), factors)  # P A = L U
    if trans == "N":
        z = prims.triangular_solve(factors, _mm(p, rhs), lower=True, transpose=False,
                                   unit_diagonal=True)
        out = prims.triangular_solve(factors, z, lower=False, transpose=False,
                                     unit_diagonal=False)
    elif trans == "T":  # A^T = U^T L^T P
        z = prims.triangular_solve(factors, rhs, lower=False, transpose=True,
                                   unit_diagonal=False)
        z = prims.triangular_solve(factors, z, lower=True, transpose=True, unit_diagonal=True)
        out = _mm(_mT(p), z)
    else:
        raise ValueError(f"lu_solve: trans must be 'N' or 'T', got {trans!r}")
    return prims.reshape(out, shape=tuple(out._shape[:-1])) if vector else out


# ---- matrix functions ----------------------------------------------------------------------

def matrix_power(x, n, name=None) -> Tensor:
    """``x`` multiplied by itself ``n`` times (``n < 0``: powers of the inverse) by
    repeated squaring.

    Example:
        >>> import primflow as pf
        >>> pf.linalg.matrix_power(pf.to_tensor([[1.0, 1.0], [0.0, 1.0]]), 3).numpy()
        array([[1., 3.],
               [0., 1.]], dtype=float32)
    """
    a = _matrix(x, "matrix_power")
    n = int_arg(n, "matrix_power: n")
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else _mm(result, a)
        n >>= 1
        if n:
            a = _mm(a, a)
    return _eye_like(a) if result is None else result


_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152  # Higham (2005): Pade 13 is accurate to double for |A|_1 below
_TRACED_SQUARINGS = 8  # without values (under jit/vmap): accurate up to |A|_1 ~ 1375


def matrix_exp(x, name=None) -> Tensor:
    """Matrix exponential by scaling and squaring with the degree-13 Padé approximant
    (Higham 2005), written in primflow ops (so it differentiates to any order).

    Example:
        >>> import primflow as pf
        >>> pf.linalg.matrix_exp(pf.to_tensor([[0.0, 1.0], [0.0, 0.0]])).numpy()
        array([[1., 1.],
               [0., 1.]], dtype=float32)
    """
    a = _matrix(x, "matrix_exp")
    if isinstance(a, Tracer):
        squarings = _TRACED_SQUARINGS
    else:
        nd = a.ndim
        norm1 = float(prims.reduce_max(prims.reduce_sum(prims.abs(a), axes=(nd - 2,)),
                                       axes=tuple(range(nd - 1))).item()) if a.size else 0.0
        squarings = max(0, _math.ceil(_math.log2(norm1 / _THETA13))) if norm1 > 0 else 0
    if squarings:
        a = prims.mul(a, full(a._shape, 0.5 ** squarings, a.dtype))
    b = _PADE13
    eye = _eye_like(a)

    def comb(*terms):
        total = None
        for coefficient, m in terms:
            part = prims.mul(m, full(m._shape, coefficient, m.dtype))
            total = part if total is None else prims.add(total, part)
        return total

    a2 = _mm(a, a)
    a4 = _mm(a2, a2)
    a6 = _mm(a4, a2)
    u = _mm(a, prims.add(_mm(a6, comb((b[13], a6), (b[11], a4), (b[9], a2))),
                         comb((b[7], a6), (b[5], a4), (b[3], a2), (b[1], eye))))
    v = prims.add(_mm(a6, comb((b[12], a6), (b[10], a4), (b[8], a2))),
                  comb((b[6], a6), (b[4], a4), (b[2], a2), (b[0], eye)))
    result = prims.solve(prims.sub(v, u), prims.add(v, u))
    for _ in range(squarings):
        result = _mm(result, result)
    return result


# ---- norms ---------------------------------------------------------------------------------

def vector_norm(x, p=2.0, axis=None, keepdim=False, name=None) -> Tensor:
    """Vector p-norm over ``axis`` (all elements when None): p may be inf, -inf, 0 (the
    count of nonzeros) or any other number; complex input uses ``|x|``.

    Example:
        >>> import primflow as pf
        >>> float(pf.linalg.vector_norm(pf.to_tensor([3.0, -4.0]), p=1))
        7.0
    """
    x = as_tensor(x)
    if x.dtype.is_complex:
        x = em.abs(x)
    if p == 0:
        nonzero = prims.convert_element_type(
            prims.ne(x, full(x._shape, 0, x.dtype)), dtype=x.dtype if x.dtype.is_floating
            else dtypes.default_float())
        return reduction.sum(nonzero, axis=axis, keepdim=keepdim)
    if isinstance(p, (int, float)) and p < 0 and p != float("-inf"):
        magnitude = em.abs(x)
        powered = em.pow(magnitude, float(p))
        return em.pow(reduction.sum(powered, axis=axis, keepdim=keepdim), 1.0 / p)
    return reduction.norm(x, p=p, axis=axis, keepdim=keepdim)


def _matrix_axes(x, axis):
    axis = int_list(axis, "matrix_norm: axis")
    if len(axis) != 2:
        raise ValueError(f"matrix_norm: axis must name two dims, got {axis}")
    if any(not -x.ndim <= a < x.ndim for a in axis):
        raise ValueError(f"matrix_norm: axis {axis} is out of range for a tensor of shape "
                         f"{x.shape}")
    a0, a1 = (a % x.ndim for a in axis)
    if a0 == a1:
        raise ValueError(f"matrix_norm: axis must name two different dims, got {axis}")
    rest = [d for d in range(x.ndim) if d not in (a0, a1)]
    return prims.transpose(x, perm=tuple(rest) + (a0, a1)), rest


def matrix_norm(x, p="fro", axis=(-2, -1), keepdim=False, name=None) -> Tensor:
    """Matrix norm over the two dims ``axis``: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2 (2 and
    -2: largest and smallest singular value).

    Example:
        >>> import primflow as pf
        >>> float(pf.linalg.matrix_norm(pf.to_tensor([[1.0, -2.0], [3.0, 4.0]]), p=1))
        6.0
    """
    x = _matrix(x, "matrix_norm", square=False)
    m, rest = _matrix_axes(x, axis)
    if p == "fro":
        out = reduction.norm(m, p=2, axis=[-2, -1])
    elif p == "nuc":
        out = reduction.sum(svdvals(m), axis=-1)
    elif p in (1, -1, float("inf"), float("-inf")):
        summed = reduction.sum(em.abs(m), axis=-2 if p in (1, -1) else -1)
        out = reduction.max(summed, axis=-1) if p > 0 else reduction.min(summed, axis=-1)
    elif p in (2, -2):
        s = svdvals(m)
        out = reduction.max(s, axis=-1) if p == 2 else reduction.min(s, axis=-1)
    else:
        raise ValueError(f"matrix_norm: unsupported p={p!r}; use 'fro', 'nuc', inf, -inf, 1, "
                         f"-1, 2 or -2")
    if keepdim:
        shape = list(x._shape)
        for a in axis:
            shape[a % x.ndim] = 1
        out = prims.reshape(out, shape=tuple(shape))
    return out


def norm(x, p=None, axis=None, keepdim=False, name=None) -> Tensor:
    """Paddle's ``linalg.norm``: a matrix norm when ``axis`` names two dims (or x is a
    matrix and p is a matrix norm's name), else a vector norm (p=None: 2 / Frobenius).

    Example:
        >>> import primflow as pf
        >>> float(pf.linalg.norm(pf.to_tensor([[3.0, 0.0], [0.0, 4.0]])))
        5.0
    """
    x = as_tensor(x)
    if isinstance(axis, (list, tuple)) and len(axis) == 2:
        return matrix_norm(x, "fro" if p is None else p, axis, keepdim)
    if p in ("fro", "nuc") and axis is None and x.ndim == 2:
        return matrix_norm(x, p, (-2, -1), keepdim)
    if p == "nuc":
        raise ValueError("norm: p='nuc' needs a matrix (give axis as two dims)")
    return vector_norm(x, 2.0 if p in (None, "fro") else p, axis, keepdim)


def cond(x, p=None, name=None) -> Tensor:
    """Condition number: ``sigma_max / sigma_min`` (p None or 2; -2 its inverse) or
    ``norm(x, p) * norm(inv(x), p)`` for p in 'fro', 'nuc', inf, -inf, 1, -1.

    Example:
        >>> import primflow as pf
        >>> float(pf.linalg.cond(pf.to_tensor([[2.0, 0.0], [0.0, 0.5]])))
        4.0
    """
    a = _matrix(x, "cond", square=False)
    if p in (None, 2, -2):
        s = svdvals(a)
        big, small = reduction.max(s, axis=-1), reduction.min(s, axis=-1)
        return em.divide(big, small) if p != -2 else em.divide(small, big)
    a = _matrix(a, "cond")
    return em.multiply(matrix_norm(a, p), matrix_norm(inv(a), p))


del stack, squeeze
