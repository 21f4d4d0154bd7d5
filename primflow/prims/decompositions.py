"""Matrix decompositions and solves: ``solve``, ``triangular_solve``, ``cholesky``,
``slogdet``, ``eigh`` and ``lu``. Kernels are LAPACK (through NumPy, or SciPy where NumPy
has no batched routine); every rule is written in primitives, so derivatives of any order
need nothing new (solve's rules use solve, cholesky's use triangular_solve, eigh's use
eigh's outputs...).

All act on the last two dims and batch over the leading ones (equal between operands: the
public ops in ``primflow.ops.decompositions`` broadcast first). Real floating dtypes only.

Outputs with several parts are packed into one tensor (the public ops slice them apart, so
the cotangents of unused parts are exact zeros):

* ``slogdet(a) -> [..., 2]``: ``(sign, log|det a|)``,
* ``eigh(a) -> [..., n, n + 1]``: the eigenvectors (columns) then the eigenvalues
  (ascending) as the last column,
* ``lu(a) -> [..., n, n + 1]``: LAPACK's packed ``L \\ U`` (L unit lower) then the row
  permutation ``perm`` (as floats) with ``a[perm] = L @ U``.

Symmetric inputs (``cholesky``, ``eigh``) are read from their lower triangle, and their
derivative rules treat perturbations as symmetric (a perturbation ``da`` acts as
``(da + da^T) / 2``; the cotangent returned is symmetric, as in PyTorch).

Taylor rules are exact recurrences: with ``x(t) = sum_k x_k t^k``, a solve satisfies
``sum_j a_j x_{k-j} = b_k`` and gives ``x_k = a_0^{-1} (b_k - sum_{j>=1} a_j x_{k-j})``; a
factorisation ``a = f(t) g(t)`` gives the order-k factors from the known lower ones by the
same linear map as its jvp.

Example:
    >>> import primflow as pf
    >>> from primflow import prims
    >>> a = pf.to_tensor([[4.0, 2.0], [2.0, 3.0]], dtype="float64")
    >>> prims.cholesky(a).numpy()
    array([[2.        , 0.        ],
           [1.        , 1.41421356]])
"""

from __future__ import annotations

import warnings

from ..core.primitive import Aval, Primitive, PrimitiveError
from ..core.trace import Tracer
from . import _matrix as mx, _taylor as tl, compare as cmp, creation
from . import elementwise as ew, reduce as rd, shape as sh
from . import sharding as sr
from ._util import full_like, zeros_like
from .families import DECOMPOSITION as _F


def _check_matrix(name, a, square=True):
    if a.dtype.kind != "f":
        raise PrimitiveError(f"{name}: expects a real floating matrix, got {a.dtype.name}"
                             f"{list(a.shape)}")
    if len(a.shape) < 2 or (square and a.shape[-1] != a.shape[-2]):
        raise PrimitiveError(f"{name}: expects {'square ' if square else ''}matrices in the "
                             f"last two dims, got shape {list(a.shape)}")


def _check_rhs(name, a, b):
    if b.dtype is not a.dtype:
        raise PrimitiveError(f"{name}: dtypes {a.dtype.name} and {b.dtype.name} differ")
    if len(b.shape) != len(a.shape) or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != a.shape[-1]:
        raise PrimitiveError(f"{name}: right-hand side of shape {list(b.shape)} does not "
                             f"match matrices of shape {list(a.shape)}")


def _mtm(a, b):
    return mx.mm(mx.mT(a), b)


def _gram_rhs(qs, k):
    """``-sum_{j=1..k-1} Q_j^T Q_{k-j}``, what order k of ``Q^T Q = I`` sets
    ``Q_0^T Q_k + Q_k^T Q_0`` to (None: zero)."""
    return tl.scale(tl.convolution(qs, qs, k, hi=k - 1, product=_mtm), -1.0)


def _solve_taylor_rule(primals, series, out, solve_with, product):
    """Taylor rule of a solve ``a x = b``: ``x_k = a_0^-1 (b_k - sum_{j>=1} a_j x_{k-j})``
    (``product(a_j, x)``: op(a_j) @ x)."""
    out = solve_with(*primals) if out is None else out
    a_s, b_s = tl.all_series(primals, series)
    xs = [out]
    for k in range(1, len(b_s)):
        rhs = tl.sub(b_s[k], tl.convolution(a_s, xs, k, product=product))
        xs.append(None if rhs is None else solve_with(primals[0], rhs))
    return out, xs


# ---- solve ---------------------------------------------------------------------------------

def _solve_infer(a, b):
    _check_matrix("solve", a)
    _check_rhs("solve", a, b)
    return Aval(b.shape, b.dtype)


def _solve_a_jvp(g, out, a, b):
    return ew.neg(solve(a, mx.mm(g, out)))


def _solve_b_jvp(g, out, a, b):
    return solve(a, g)


def _solve_vjp(g, out, a, b):
    # one transposed solve serves both cotangents (b_bar, then a_bar = -b_bar x^T)
    b_bar = solve(mx.mT(a), g)
    return ew.neg(mx.mm(b_bar, mx.mT(out))), b_bar


def _solve_taylor(primals, series, out=None):
    return _solve_taylor_rule(primals, series, out, solve, mx.mm)


solve = Primitive("solve", family=_F, shard=sr.MATRICES, infer=_solve_infer,
                  jvp=(_solve_a_jvp, _solve_b_jvp), vjp=_solve_vjp, taylor=_solve_taylor,
                  saves_out=True, linear_in=(1,), doc="x with a @ x = b (LU with partial pivoting)")


# ---- triangular_solve ----------------------------------------------------------------------

def _tri_infer(a, b, *, lower, transpose, unit_diagonal):
    _check_matrix("triangular_solve", a)
    _check_rhs("triangular_solve", a, b)
    return Aval(b.shape, b.dtype)


def _tri_part(a, lower, unit_diagonal):
    """The entries the kernel reads: one triangle, without the diagonal if it is unit."""
    if lower:
        return mx.tril(a, -1 if unit_diagonal else 0)
    return mx.triu(a, 1 if unit_diagonal else 0)


def _tri_matrix(a, p):
    """op(a) as the kernel reads it (``p``: the primitive's params)."""
    part = _tri_part(a, p["lower"], p["unit_diagonal"])
    return mx.mT(part) if p["transpose"] else part


def _tri_a_jvp(g, out, a, b, **p):
    return ew.neg(triangular_solve(a, mx.mm(_tri_matrix(g, p), out), **p))


def _tri_b_jvp(g, out, a, b, **p):
    return triangular_solve(a, g, **p)


def _tri_vjp(g, out, a, b, **p):
    b_bar = triangular_solve(a, g, lower=p["lower"], transpose=not p["transpose"],
                             unit_diagonal=p["unit_diagonal"])
    # d(op(a)) receives -b_bar x^T; map it back through op and the triangle mask
    grad_op = ew.neg(mx.mm(b_bar, mx.mT(out)))
    grad = mx.mT(grad_op) if p["transpose"] else grad_op
    return _tri_part(grad, p["lower"], p["unit_diagonal"]), b_bar


def _tri_taylor(primals, series, out=None, **p):
    def solve_with(a, b):
        return triangular_solve(a, b, **p)

    def product(a, x):
        return mx.mm(_tri_matrix(a, p), x)

    return _solve_taylor_rule(primals, series, out, solve_with, product)


triangular_solve = Primitive(
    "triangular_solve", family=_F, shard=sr.MATRICES, infer=_tri_infer, saves_out=True,
    jvp=(_tri_a_jvp, _tri_b_jvp), vjp=_tri_vjp, taylor=_tri_taylor, linear_in=(1,),
    doc="x with op(a) @ x = b for triangular a (op: identity or transpose)")


# ---- cholesky ------------------------------------------------------------------------------

def _cholesky_infer(a):
    _check_matrix("cholesky", a)
    return Aval(a.shape, a.dtype)


def _lower_solve(l, b, transpose=False, unit_diagonal=False):
    return triangular_solve(l, b, lower=True, transpose=transpose, unit_diagonal=unit_diagonal)


def _right_solve_upper(z, r, transposed=False):
    """``z @ r^-1`` (``z @ r^-T`` if ``transposed``) for upper-triangular r."""
    return mx.mT(triangular_solve(r, mx.mT(z), lower=False, transpose=not transposed,
                                  unit_diagonal=False))


def _cholesky_step(l0, c):
    """The L_k solving ``l0 L_k^T + L_k l0^T = c`` with L_k lower: ``l0 phi(l0^-1 c l0^-T)``."""
    inner = mx.mT(_lower_solve(l0, mx.mT(_lower_solve(l0, c))))
    return mx.mm(l0, mx.phi(inner))


def _cholesky_jvp(g, out, a):
    return _cholesky_step(out, mx.sym(g))


def _cholesky_vjp(g, out, a):
    # a_bar = sym(L^-T phi(L^T g) L^-1)
    p = mx.phi(mx.mm(mx.mT(out), g))
    left = _lower_solve(out, p, transpose=True)  # L^-T p
    return mx.sym(mx.mT(_lower_solve(out, mx.mT(left), transpose=True)))


def _cholesky_taylor(primals, series, out=None):
    (a0,), (a_s,) = primals, series
    l0 = cholesky(a0) if out is None else out
    ls = [l0]
    for k in range(1, len(a_s)):
        c = tl.sub(None if a_s[k] is None else mx.sym(a_s[k]), tl.convolution(
            ls, ls, k, hi=k - 1, product=lambda a, b: mx.mm(a, mx.mT(b))))
        ls.append(None if c is None else _cholesky_step(l0, c))
    return l0, ls


cholesky = Primitive("cholesky", family=_F, shard=sr.MATRICES, infer=_cholesky_infer,
                     jvp=(_cholesky_jvp,), vjp=(_cholesky_vjp,), taylor=_cholesky_taylor,
                     saves_out=True, saves_inputs=(),
                     doc="lower-triangular L with a = L @ L^T (a symmetric positive definite)")


# ---- slogdet -------------------------------------------------------------------------------

def _slogdet_infer(a):
    _check_matrix("slogdet", a)
    return Aval(tuple(a.shape[:-2]) + (2,), a.dtype)


def _pack_logdet(logdet):
    """``[..., 2]`` with zero sign and ``logdet`` (derivatives of the packed output)."""
    return mx.join_cols(mx.column(zeros_like(logdet)), mx.column(logdet))


def _trace(a):
    return rd.reduce_sum(mx.diagonal(a), axes=(len(a._shape) - 2,))


def _slogdet_jvp(g, out, a):  # d log|det a| = tr(a^-1 da)
    return _pack_logdet(_trace(solve(a, g)))


def _slogdet_vjp(g, out, a):  # a_bar = g_logdet a^-T
    g_logdet = mx.col(g, 1)
    inv_t = solve(mx.mT(a), mx.eye_like(a))
    return ew.mul(mx.per_matrix(g_logdet, a._shape), inv_t)


def _slogdet_taylor(primals, series, out=None):
    # d/dt log det a(t) = tr(y(t)) with a y = a': the solve recurrence on a's derivative
    (a0,), (a_s,) = primals, series
    order = len(a_s) - 1
    out = slogdet(a0) if out is None else out
    d_s = [None if a_s[m + 1] is None else mx.scale(a_s[m + 1], m + 1) for m in range(order)]
    ys, coefficients = [], [out]
    for m in range(order):
        rhs = tl.sub(d_s[m], tl.convolution(a_s, ys, m, product=mx.mm))
        ys.append(None if rhs is None else solve(a0, rhs))
        coefficients.append(None if ys[m] is None else _pack_logdet(
            _trace(mx.scale(ys[m], 1.0 / (m + 1)))))
    return out, coefficients


slogdet = Primitive("slogdet", family=_F, shard=sr.MATRICES, infer=_slogdet_infer,
                    jvp=(_slogdet_jvp,), vjp=(_slogdet_vjp,), taylor=_slogdet_taylor,
                    doc="[..., 2]: sign and log|det| of each matrix")


# ---- eigh ----------------------------------------------------------------------------------

def _eigh_infer(a):
    _check_matrix("eigh", a)
    return Aval(tuple(a.shape[:-1]) + (a.shape[-1] + 1,), a.dtype)


def _eigh_parts(packed):
    n = packed._shape[-1] - 1
    return mx.cols(packed, 0, n), mx.col(packed, n)


def _pack_eigh(v, w):
    return mx.join_cols(v, mx.column(w))


def _gap_inverse(w):
    """``F[i, j] = 1 / (w_j - w_i)`` off the diagonal; 0 on it and wherever the gap is
    below a relative tolerance (degenerate eigenvalues: see the eigh docs)."""
    shape = tuple(w._shape) + (w._shape[-1],)
    gap = ew.sub(mx.along(w, shape, -1), mx.along(w, shape, -2))
    scale = rd.reduce_max(ew.abs(w), axes=(len(shape) - 2,))
    rtol = 1e-10 if w.dtype.itemsize == 8 else 1e-5
    tol = mx.per_matrix(mx.scale(ew.add(scale, full_like(scale, 1e-300)), rtol), shape)
    degenerate = cmp.le(ew.abs(gap), tol)
    one = creation.full(shape=shape, value=1.0, dtype=w.dtype)
    safe = cmp.select(degenerate, one, gap)
    return mx.masked(ew.div(one, safe), cmp.logical_not(degenerate)), degenerate


def _eigh_jvp(g, out, a):
    v, w = _eigh_parts(out)
    f, _ = _gap_inverse(w)
    m = mx.mm(mx.mT(v), mx.mm(mx.sym(g), v))
    return _pack_eigh(mx.mm(v, ew.mul(f, m)), mx.diagonal(m))


def _eigh_vjp(g, out, a):
    v, w = _eigh_parts(out)
    v_bar, w_bar = _eigh_parts(g)
    f, degenerate = _gap_inverse(w)
    vt_vbar = mx.mm(mx.mT(v), v_bar)
    if not isinstance(vt_vbar, Tracer):
        _warn_if_not_invariant(vt_vbar, degenerate)
    inner = ew.add(mx.diag_embed(w_bar), ew.mul(f, vt_vbar))
    return mx.sym(mx.mm(v, mx.mm(inner, mx.mT(v))))


def _warn_if_not_invariant(vt_vbar, degenerate):
    """Repeated eigenvalues: the gradient is finite and right when the loss does not depend
    on the choice of basis in the repeated eigenspace; warn when the cotangent says it
    does (its antisymmetric part inside the degenerate block is not zero)."""
    off_diagonal = cmp.logical_and(degenerate, cmp.logical_not(
        mx.band_mask(degenerate._shape, 0, 0)))
    every = tuple(range(len(vt_vbar._shape)))
    if not vt_vbar.size or not rd.reduce_max(cmp.convert_element_type(
            off_diagonal, dtype=vt_vbar.dtype), axes=every).item():
        return
    skew = rd.reduce_max(mx.masked(ew.abs(ew.sub(vt_vbar, mx.mT(vt_vbar))), off_diagonal),
                         axes=every).item()
    scale = rd.reduce_max(ew.abs(vt_vbar), axes=every).item()
    if skew > 1e-6 * max(1.0, scale):
        warnings.warn("eigh: repeated eigenvalues and a loss that depends on the choice of "
                      "eigenvectors in their eigenspace; the gradient sets the undefined "
                      "terms to zero", RuntimeWarning, stacklevel=4)


def _eigh_taylor(primals, series, out=None):
    (a0,), (a_s,) = primals, series
    out = eigh(a0) if out is None else out
    v0, w0 = _eigh_parts(out)
    f, _ = _gap_inverse(w0)
    vs, ws, coefficients = [v0], [w0], [out]
    a_s = [a_s[0]] + [None if c is None else mx.sym(c) for c in a_s[1:]]
    for k in range(1, len(a_s)):
        # r_k = sum_{j=1}^{k-1} v_j w_{k-j} - sum_{j=1}^{k} a_j v_{k-j}
        r = tl.sub(tl.convolution(vs, ws, k, hi=k - 1, product=_scale_columns),
                   tl.convolution(a_s, vs, k, product=mx.mm))
        vk = wk = None
        if r is not None:
            t = mx.mm(mx.mT(v0), r)  # w0 c - c w0 - w_k = t
            s = _gram_rhs(vs, k)
            c = ew.mul(f, ew.neg(t))
            if s is not None:
                c = ew.add(c, mx.scale(mx.diag_embed(mx.diagonal(s)), 0.5))
            vk, wk = mx.mm(v0, c), ew.neg(mx.diagonal(t))
        vs.append(vk)
        ws.append(wk)
        coefficients.append(None if r is None else _pack_eigh(vk, wk))
    return out, coefficients


eigh = Primitive("eigh", family=_F, shard=sr.MATRICES, infer=_eigh_infer, jvp=(_eigh_jvp,),
                 vjp=(_eigh_vjp,), taylor=_eigh_taylor, saves_out=True, saves_inputs=(),
                 doc="[..., n, n + 1]: eigenvectors then eigenvalues of a symmetric matrix")


# ---- lu ------------------------------------------------------------------------------------

def _lu_infer(a):
    _check_matrix("lu", a)
    return Aval(tuple(a.shape[:-1]) + (a.shape[-1] + 1,), a.dtype)


def _lu_parts(packed):
    """(L unit lower, U upper, permutation matrix P with P a = L U)."""
    n = packed._shape[-1] - 1
    factors = mx.cols(packed, 0, n)
    lower = ew.add(mx.tril(factors, -1), mx.eye_like(factors))
    upper = mx.triu(factors)
    shape = tuple(factors._shape)
    perm_rows = mx.along(mx.col(packed, n), shape, -2)
    columns = creation.iota(shape=shape, dtype=factors.dtype, dimension=len(shape) - 1)
    p = cmp.convert_element_type(cmp.eq(perm_rows, columns), dtype=factors.dtype)
    return lower, upper, p


def _lu_step(lower, upper, c):
    """L_k, U_k from ``l0 U_k + L_k u0 = c``: x = l0^-1 c u0^-1 split in two."""
    x = _right_solve_upper(_lower_solve(lower, c, unit_diagonal=True), upper)
    return mx.mm(lower, mx.tril(x, -1)), mx.mm(mx.triu(x), upper)


def _pack_lu(lk, uk):
    factors = ew.add(lk, uk)
    zero = creation.full(shape=tuple(factors._shape[:-1]) + (1,), value=0, dtype=factors.dtype)
    return mx.join_cols(factors, zero)


def _lu_jvp(g, out, a):
    lower, upper, p = _lu_parts(out)
    return _pack_lu(*_lu_step(lower, upper, mx.mm(p, g)))


def _lu_vjp(g, out, a):
    lower, upper, p = _lu_parts(out)
    g = mx.cols(g, 0, upper._shape[-1])
    x_bar = ew.add(mx.tril(mx.mm(mx.mT(lower), mx.tril(g, -1)), -1),
                   mx.triu(mx.mm(mx.triu(g), mx.mT(upper))))
    z = _lower_solve(lower, x_bar, transpose=True, unit_diagonal=True)
    return mx.mm(mx.mT(p), _right_solve_upper(z, upper, transposed=True))


def _lu_taylor(primals, series, out=None):
    (a0,), (a_s,) = primals, series
    out = lu(a0) if out is None else out
    lower, upper, p = _lu_parts(out)
    ls, us, coefficients = [lower], [upper], [out]
    for k in range(1, len(a_s)):
        c = tl.sub(None if a_s[k] is None else mx.mm(p, a_s[k]),
                   tl.convolution(ls, us, k, hi=k - 1, product=mx.mm))
        lk, uk = (None, None) if c is None else _lu_step(lower, upper, c)
        ls.append(lk)
        us.append(uk)
        coefficients.append(None if c is None else _pack_lu(lk, uk))
    return out, coefficients


lu = Primitive("lu", family=_F, shard=sr.MATRICES, infer=_lu_infer, jvp=(_lu_jvp,),
               vjp=(_lu_vjp,), taylor=_lu_taylor, saves_out=True, saves_inputs=(),
               doc="[..., n, n + 1]: packed L\\U and the row permutation (as floats)")


# ---- LAPACK pivots <-> permutations (integer, no derivatives) -------------------------------

def _pivots_infer(x):
    if x.dtype.kind != "i":
        raise PrimitiveError(f"expects an integer tensor, got {x.dtype.name}")
    return Aval(x.shape, x.dtype)


lu_pivots = Primitive("lu_pivots", family=_F, shard=sr.PIVOTS, infer=_pivots_infer,
                      differentiable=False, doc="1-based LAPACK row swaps of a row permutation")
lu_permutation = Primitive("lu_permutation", family=_F, shard=sr.PIVOTS, infer=_pivots_infer,
                           differentiable=False,
                           doc="the row permutation of 1-based LAPACK row swaps")


# ---- qr (reduced, m >= n) ------------------------------------------------------------------

def _check_tall(name, a):
    _check_matrix(name, a, square=False)
    m, n = a.shape[-2:]
    if m < n:
        raise PrimitiveError(f"{name}: the primitive takes tall matrices (m >= n), got shape "
                             f"{list(a.shape)}; pf.linalg.{name} handles wide ones")
    return m, n


def _qr_infer(a):
    m, n = _check_tall("qr", a)
    return Aval(tuple(a.shape[:-2]) + (m + n, n), a.dtype)


def _qr_parts(packed):
    n = packed._shape[-1]
    m = packed._shape[-2] - n
    return mx.rows(packed, 0, m), mx.rows(packed, m, m + n)


def _qr_step(q0, r0, c, s):
    """Q_k, R_k from ``q0 R_k + Q_k r0 = c`` and ``q0^T Q_k + Q_k^T q0 = s`` (s may be
    None: zero)."""
    c_rinv = _right_solve_upper(c, r0)
    b = mx.mm(mx.mT(q0), c_rinv)
    low = mx.tril(b, -1)
    omega = ew.sub(low, mx.mT(low))
    if s is not None:
        omega = ew.add(omega, ew.add(mx.triu(s, 1), mx.scale(mx.diag_only(s), 0.5)))
    rk = mx.mm(ew.sub(b, omega), r0)
    qk = ew.add(mx.mm(q0, omega), ew.sub(c_rinv, mx.mm(q0, b)))
    return qk, rk


def _qr_jvp(g, out, a):
    q, r = _qr_parts(out)
    return mx.join_rows(*_qr_step(q, r, g, None))


def _qr_vjp(g, out, a):
    q, r = _qr_parts(out)
    q_bar, r_bar = _qr_parts(g)
    rrt = mx.mm(r_bar, mx.mT(r))
    omega_bar = ew.sub(mx.mm(mx.mT(q), q_bar), rrt)
    b_bar = ew.add(rrt, mx.tril(ew.sub(omega_bar, mx.mT(omega_bar)), -1))
    inner = ew.add(mx.mm(q, b_bar), ew.sub(q_bar, mx.mm(q, mx.mm(mx.mT(q), q_bar))))
    return _right_solve_upper(inner, r, transposed=True)


def _qr_taylor(primals, series, out=None):
    (a0,), (a_s,) = primals, series
    out = qr(a0) if out is None else out
    q0, r0 = _qr_parts(out)
    qs, rs, coefficients = [q0], [r0], [out]
    for k in range(1, len(a_s)):
        c = tl.sub(a_s[k], tl.convolution(qs, rs, k, hi=k - 1, product=mx.mm))
        qk, rk = (None, None) if c is None else _qr_step(q0, r0, c, _gram_rhs(qs, k))
        qs.append(qk)
        rs.append(rk)
        coefficients.append(None if c is None else mx.join_rows(qk, rk))
    return out, coefficients


qr = Primitive("qr", family=_F, shard=sr.MATRICES, infer=_qr_infer, jvp=(_qr_jvp,),
               vjp=(_qr_vjp,), taylor=_qr_taylor, saves_out=True, saves_inputs=(),
               doc="[..., m + n, n]: reduced Q (first m rows) then R of a tall matrix")


# ---- svd (thin, m >= n) --------------------------------------------------------------------

def _svd_infer(a):
    m, n = _check_tall("svd", a)
    return Aval(tuple(a.shape[:-2]) + (m + 1 + n, n), a.dtype)


def _svd_parts(packed):
    """U [m, n], s [n], V [n, n] (columns: singular vectors)."""
    n = packed._shape[-1]
    m = packed._shape[-2] - n - 1
    s = sh.reshape(mx.rows(packed, m, m + 1), shape=tuple(packed._shape[:-2]) + (n,))
    return mx.rows(packed, 0, m), s, mx.rows(packed, m + 1, m + 1 + n)


def _pack_svd(u, s, v):
    return mx.join_rows(u, mx.row(s), v)


def _scale_columns(x, s):
    """``x @ diag(s)``."""
    return ew.mul(x, mx.along(s, x._shape, -1))


def _scale_rows(x, s):
    """``diag(s) @ x``."""
    return ew.mul(x, mx.along(s, x._shape, -2))


def _square_gap_inverse(s):
    """``F[i, j] = 1 / (s_j^2 - s_i^2)`` off the diagonal (0 on it and for repeated values)."""
    return _gap_inverse(ew.mul(s, s))[0]


def _svd_step(u0, s0, v0, f, r1, r2, su, sv):
    """Order-k coefficients (see the module docstring of the recurrences)."""
    p1 = _mtm(u0, r1)
    q1, q2 = p1, _mtm(v0, r2)
    if su is not None:
        q1 = ew.add(q1, mx.scale(_scale_columns(su, s0), 0.5))
        q2 = ew.sub(q2, mx.scale(_scale_rows(su, s0), 0.5))
    if sv is not None:
        q1 = ew.sub(q1, mx.scale(_scale_rows(sv, s0), 0.5))
        q2 = ew.add(q2, mx.scale(_scale_columns(sv, s0), 0.5))
    # (s_j^2 - s_i^2) Ca_ij = -s_j q1_ij - s_i q2_ij ; (..) Da_ij = -s_i q1_ij - s_j q2_ij
    ca = ew.mul(f, ew.neg(ew.add(_scale_columns(q1, s0), _scale_rows(q2, s0))))
    da = ew.mul(f, ew.neg(ew.add(_scale_rows(q1, s0), _scale_columns(q2, s0))))
    c = ca if su is None else ew.add(ca, mx.scale(su, 0.5))
    d = da if sv is None else ew.add(da, mx.scale(sv, 0.5))
    sk = ew.neg(mx.diagonal(q1))
    uk = mx.mm(u0, c)
    if u0._shape[-2] > u0._shape[-1]:  # tall: (I - u0 u0^T) is 0 for a square matrix
        projected = ew.sub(r1, mx.mm(u0, p1))  # (I - u0 u0^T) r1
        uk = ew.sub(uk, _scale_columns(projected, _reciprocal_or_zero(s0)))
    return uk, sk, mx.mm(v0, d)


def _reciprocal_or_zero(s):
    """``1 / s``, 0 where ``s == 0``. It scales the (I - U U^T) part of U's derivative, which
    exists only for tall matrices: there a zero singular value's left vector is not unique
    (its derivative is undefined, see pf.linalg.svd), and 0 instead of inf keeps 0 * inf =
    nan out of the derivatives that are defined (the singular values', and the other
    vectors')."""
    zero, one = full_like(s, 0.0), full_like(s, 1.0)
    is_zero = cmp.eq(s, zero)
    return cmp.select(is_zero, zero, ew.div(one, cmp.select(is_zero, one, s)))


def _svd_jvp(g, out, a):
    u, s, v = _svd_parts(out)
    f = _square_gap_inverse(s)
    return _pack_svd(*_svd_step(u, s, v, f, ew.neg(mx.mm(g, v)), ew.neg(mx.mm(mx.mT(g), u)),
                                None, None))


def _svd_vjp(g, out, a):
    u, s, v = _svd_parts(out)
    u_bar, s_bar, v_bar = _svd_parts(g)
    f = _square_gap_inverse(s)
    ut_ubar = mx.mm(mx.mT(u), u_bar)
    vt_vbar = mx.mm(mx.mT(v), v_bar)
    j = _scale_columns(ew.mul(f, ew.sub(ut_ubar, mx.mT(ut_ubar))), s)
    k = _scale_rows(ew.mul(f, ew.sub(vt_vbar, mx.mT(vt_vbar))), s)
    inner = ew.add(ew.add(j, k), mx.diag_embed(s_bar))
    core = mx.mm(u, mx.mm(inner, mx.mT(v)))
    if u._shape[-2] == u._shape[-1]:  # square: (I - U U^T) is 0
        return core
    outside = ew.sub(u_bar, mx.mm(u, ut_ubar))  # (I - U U^T) U_bar
    return ew.add(core, mx.mm(_scale_columns(outside, _reciprocal_or_zero(s)), mx.mT(v)))


def _svd_taylor(primals, series, out=None):
    (a0,), (a_s,) = primals, series
    out = svd(a0) if out is None else out
    u0, s0, v0 = _svd_parts(out)
    f = _square_gap_inverse(s0)
    us, ss, vs, coefficients = [u0], [s0], [v0], [out]
    for k in range(1, len(a_s)):
        r1 = tl.sub(tl.convolution(us, ss, k, hi=k - 1, product=_scale_columns),
                    tl.convolution(a_s, vs, k, product=mx.mm))
        r2 = tl.sub(tl.convolution(vs, ss, k, hi=k - 1, product=_scale_columns),
                    tl.convolution(a_s, us, k, product=_mtm))
        uk = sk = vk = None
        if r1 is not None or r2 is not None:
            uk, sk, vk = _svd_step(u0, s0, v0, f, tl.dense(r1, u0), tl.dense(r2, v0),
                                   _gram_rhs(us, k), _gram_rhs(vs, k))
        us.append(uk)
        ss.append(sk)
        vs.append(vk)
        coefficients.append(None if uk is None else _pack_svd(uk, sk, vk))
    return out, coefficients


svd = Primitive("svd", family=_F, shard=sr.MATRICES, infer=_svd_infer, jvp=(_svd_jvp,),
                vjp=(_svd_vjp,), taylor=_svd_taylor, saves_out=True, saves_inputs=(),
                doc="[..., m + 1 + n, n]: U, the singular values (descending) and V of a "
                    "tall matrix (a = U diag(s) V^T)")
