"""Linear algebra: products (dot_general, matmul, ...) and pf.linalg."""

from __future__ import annotations

import numpy as np

import primflow as pf
from primflow import prims

from .base import Limit, OpInfo, SampleInput, _s, binary, fixed

F = pf.nn.functional

def _np_dot_general(x, y, contracting, batch):
    (lc, rc), (lb, rb) = contracting, batch
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    xs = [next(letters) for _ in range(x.ndim)]
    ys = [next(letters) for _ in range(y.ndim)]
    for a, b in zip(lc + lb, rc + rb):
        ys[b] = xs[a]
    out = [xs[d] for d in lb]
    out += [xs[d] for d in range(x.ndim) if d not in lc and d not in lb]
    out += [ys[d] for d in range(y.ndim) if d not in rc and d not in rb]
    return np.einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)


# Symmetric positive-definite inputs are built inside the op (a a^T + n I), so finite
# differences move along symmetric directions; general matrices get + 3 I (well
# conditioned). Outputs that are unique only up to signs (SVD of wide matrices) are checked
# through sign-free combinations.
LA = pf.linalg


def _pf_spd(a):
    return a @ a.mT + 3.0 * pf.eye(a.shape[-1], dtype=a.dtype)


def _np_spd(a):
    return a @ np.swapaxes(a, -1, -2) + 3.0 * np.eye(a.shape[-1])


def _pf_shift(a):
    return a + 3.0 * pf.eye(a.shape[-1], dtype=a.dtype)


def _np_shift(a):
    return a + 3.0 * np.eye(a.shape[-1])


def _mats(*shapes, kw=None):
    """One sample per tuple of shapes (all inputs random in [-1, 1])."""

    def gen(info, rng):
        return [SampleInput(tuple(rng.uniform(-1.0, 1.0, s) for s in group), dict(kw or {}),
                            desc=str(group)) for group in shapes]

    return gen


def _mats_kw(*groups):
    def gen(info, rng):
        return [SampleInput(tuple(rng.uniform(-1.0, 1.0, s) for s in shapes), dict(kw),
                            desc=f"{shapes} {kw}") for shapes, kw in groups]

    return gen


def _np_tri(a, b, upper=True, transpose=False, unitriangular=False):
    a = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        a = a - np.diag(np.diag(a)) + np.eye(a.shape[-1])
    return np.linalg.solve(a.T if transpose else a, b)


def _np_lu_factor(a):
    """LAPACK getrf in NumPy: the packed factors (unit-lower L below the diagonal, U on and
    above it) and the 0-based row swapped with row i at step i (partial pivoting)."""
    lu = np.array(a, dtype=np.float64)
    n = lu.shape[-1]
    piv = np.zeros(n, dtype=np.int64)
    for k in range(n):
        p = k + int(np.argmax(np.abs(lu[k:, k])))
        piv[k] = p
        lu[[k, p]] = lu[[p, k]]
        lu[k + 1:, k] /= lu[k, k]
        lu[k + 1:, k + 1:] -= np.outer(lu[k + 1:, k], lu[k, k + 1:])
    return lu, piv


def _np_lu(a):
    factors, piv = _np_lu_factor(a)
    return factors, (piv + 1).astype(np.int32)


def _np_lu_unpack(a):
    """``(P, L, U)`` with ``a = P @ L @ U`` (scipy.linalg.lu's convention)."""
    factors, piv = _np_lu_factor(a)
    rows = np.arange(a.shape[-1])
    for k, p in enumerate(piv):
        rows[[k, p]] = rows[[p, k]]
    perm = np.eye(a.shape[-1])[rows].T  # row k of P^T a is row rows[k] of a
    return perm, np.tril(factors, -1) + np.eye(a.shape[-1]), np.triu(factors)


def _np_expm(a):
    """exp(a) for each matrix of a stack: the Taylor series of a / 2^s, squared s times."""
    out = []
    for m in a.reshape(-1, *a.shape[-2:]):
        s = max(0, int(np.ceil(np.log2(max(np.linalg.norm(m, 1), 1e-300)))) + 1)
        m = m / 2.0 ** s
        term, total = np.eye(m.shape[-1]), np.eye(m.shape[-1])
        for k in range(1, 30):  # ||m|| <= 1/2: the 30th term is below 1e-40
            term = term @ m / k
            total = total + term
        for _ in range(s):
            total = total @ total
        out.append(total)
    return np.stack(out).reshape(a.shape)


def _np_lstsq(a, b):
    sol, res, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    return sol, res, np.int64(rank), sv


def _np_matrix_norm(a, p="fro"):
    return np.linalg.norm(a, ord=p, axis=(-2, -1))


def _svd_sign_free(a):
    u, s, vh = LA.svd(a)
    return u @ vh, s


def _np_svd_sign_free(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u @ vh, s


# decompositions: orders 1-4 on the primitives' own entries, 1-2 on composites; the jet test
# (nested jvp to order 6 by default) is capped at order 3: each order costs ~5x the last
_LA_CORE = dict(order_samples=1, max_order=4, jet_order=3)
_LA_MID = dict(order_samples=1, max_order=3, jet_order=2)
_LA_ORDER = dict(order_samples=1, max_order=2, jet_order=1)
_NEEDS_LU = ("fast",)  # pf.linalg.lu factors with SciPy's getrf (NumPy has no LU)

ENTRIES = [
    # ---- linear algebra ----
    OpInfo("dot_general", lambda x, y, **p: prims.dot_general(x, y, **p),
           lambda x, y, contracting, batch: _np_dot_general(x, y, contracting, batch),
           fixed(*[_s(lambda i, r, a=a, b=b: (i.make(r, a), i.make(r, b)),
                      {"contracting": c, "batch": bt}, desc=f"{a} x {b} {c} {bt}")
                   for a, b, c, bt in [
                       ((2, 3), (3, 2), ((1,), (0,)), ((), ())),
                       ((2, 3, 2), (2, 2, 3), ((1,), (2,)), ((0,), (0,))),
                       ((3, 2), (2, 3), ((0,), (1,)), ((), ())),
                       ((2, 3), (4,), ((), ()), ((), ())),
                       ((3, 2, 2), (2, 3, 2), ((0, 2), (1, 0)), ((), ())),
                       ((2, 2, 3), (3, 2), ((2,), (0,)), ((1,), (1,))),
                       ((3,), (3,), ((0,), (0,)), ((), ()))]]),
           prims=("dot_general",), covers=()),
    OpInfo("matmul", lambda x, y, **kw: pf.matmul(x, y, **kw),
           lambda x, y, transpose_x=False, transpose_y=False: np.matmul(
               np.swapaxes(x, -1, -2) if transpose_x and x.ndim > 1 else x,
               np.swapaxes(y, -1, -2) if transpose_y and y.ndim > 1 else y),
           fixed(*[_s(lambda i, r, a=a, b=b: (i.make(r, a), i.make(r, b)), kw,
                      desc=f"{a} @ {b} {kw}")
                   for a, b, kw in [
                       ((2, 3), (3, 2), {}), ((2, 1, 2, 3), (3, 3, 2), {}),
                       ((3,), (3, 2), {}), ((2, 3), (3,), {}), ((3,), (3,), {}),
                       ((2, 2, 3), (3, 2), {}), ((3, 2), (2, 3), {"transpose_x": True,
                                                                  "transpose_y": True})]]),
           prims=("dot_general",), covers=("matmul", "mm", "bmm")),
    OpInfo("dot", pf.dot, lambda x, y: np.sum(x * y, axis=-1),
           binary((((3,), (3,)), ((2, 3), (2, 3)))), prims=("dot_general",), covers=("dot",)),
    OpInfo("inner", pf.inner, np.inner, binary((((2, 3), (4, 3)), ((3,), (3,)))),
           prims=("dot_general",), covers=("inner",)),
    OpInfo("outer", pf.outer, np.outer, binary((((3,), (2,)), ((2, 2), (3,)))),
           prims=("dot_general",), covers=("outer",)),
    OpInfo("linear", lambda x, w, b=None: F.linear(x, w, b),
           lambda x, w, b=None: x @ w + (0 if b is None else b),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (3, 2)), i.make(r, (2,)))),
                 _s(lambda i, r: (i.make(r, (2, 2, 3)), i.make(r, (3, 2)))),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, (3, 2)), i.make(r, (2,))))),
           prims=("dot_general", "add"), covers=("linear",)),

    OpInfo("linalg.solve", lambda a, b, **kw: LA.solve(_pf_shift(a), b, **kw),
           lambda a, b, left=True: np.linalg.solve(_np_shift(a), b) if left else np.swapaxes(
               np.linalg.solve(np.swapaxes(_np_shift(a), -1, -2), np.swapaxes(b, -1, -2)),
               -1, -2),
           _mats_kw((((2, 2), (2, 2)), {}), (((2, 3, 3), (3, 1)), {}),
                    (((2, 2), (3, 2)), {"left": False})),
           prims=("solve",), **_LA_CORE),
    OpInfo("linalg.solve_vector", lambda a, b: LA.solve(_pf_shift(a), b),
           lambda a, b: np.linalg.solve(_np_shift(a), b[..., None])[..., 0] if a.ndim > 2
           else np.linalg.solve(_np_shift(a), b), _mats(((3, 3), (3,)), ((2, 3, 3), (3,))),
           prims=("solve",), **_LA_ORDER),
    OpInfo("linalg.inv", lambda a: LA.inv(_pf_shift(a)), lambda a: np.linalg.inv(_np_shift(a)),
           _mats(((3, 3),), ((2, 2, 2),)), prims=("solve",), **_LA_ORDER),
    OpInfo("linalg.det", lambda a: LA.det(a), np.linalg.det, _mats(((3, 3),), ((2, 2, 2),)),
           prims=("slogdet",), **_LA_ORDER),
    OpInfo("linalg.slogdet", lambda a: LA.slogdet(a),
           lambda a: np.stack(np.linalg.slogdet(a)), _mats(((2, 2),), ((2, 3, 3),)),
           prims=("slogdet",), **_LA_MID),
    OpInfo("linalg.cholesky", lambda a, **kw: LA.cholesky(_pf_spd(a), **kw),
           lambda a, upper=False: np.swapaxes(np.linalg.cholesky(_np_spd(a)), -1, -2) if upper
           else np.linalg.cholesky(_np_spd(a)),
           _mats_kw((((2, 2),), {}), (((2, 3, 3),), {"upper": True})),
           prims=("cholesky",), **_LA_CORE),
    OpInfo("linalg.cholesky_solve",
           lambda b, a, **kw: LA.cholesky_solve(b, LA.cholesky(_pf_spd(a), **kw), **kw),
           lambda b, a, upper=False: np.linalg.solve(_np_spd(a), b),
           _mats_kw((((3, 2), (3, 3)), {}), (((2, 3, 1), (3, 3)), {"upper": True})),
           prims=("cholesky", "triangular_solve"), **_LA_ORDER),
    OpInfo("linalg.triangular_solve",
           lambda a, b, **kw: LA.triangular_solve(_pf_shift(a), b, **kw),
           lambda a, b, **kw: _np_tri(_np_shift(a), b, **kw),
           _mats_kw((((2, 2), (2, 2)), {}), (((3, 3), (3, 1)), {"upper": False}),
                    (((3, 3), (3, 2)), {"transpose": True, "unitriangular": True})),
           prims=("triangular_solve",), **_LA_MID),
    OpInfo("linalg.eigh", lambda a: LA.eigh(a + a.mT),
           lambda a: np.linalg.eigh(a + np.swapaxes(a, -1, -2)),
           _mats(((2, 2),), ((2, 3, 3),)), prims=("eigh",), **_LA_CORE),
    OpInfo("linalg.eigvalsh", lambda a, **kw: LA.eigvalsh(a + a.mT, **kw),
           lambda a, UPLO="L": np.linalg.eigvalsh(a + np.swapaxes(a, -1, -2)),
           _mats_kw((((3, 3),), {}), (((3, 3),), {"UPLO": "U"})), prims=("eigh",),
           **_LA_ORDER),
    OpInfo("linalg.lu", lambda a: LA.lu(_pf_shift(a)), lambda a: _np_lu(_np_shift(a)),
           _mats(((2, 2),), ((4, 4),)), prims=("lu", "lu_pivots"), extras=_NEEDS_LU,
           **_LA_MID),
    OpInfo("linalg.lu_unpack", lambda a: LA.lu_unpack(*LA.lu(a)),
           _np_lu_unpack, _mats(((3, 3),)),
           prims=("lu", "lu_pivots", "lu_permutation"), extras=_NEEDS_LU, **_LA_ORDER),
    OpInfo("linalg.lu_solve", lambda a, b, **kw: LA.lu_solve(b, *LA.lu(_pf_shift(a)), **kw),
           lambda a, b, trans="N": np.linalg.solve(
               _np_shift(a) if trans == "N" else _np_shift(a).T, b),
           _mats_kw((((3, 3), (3, 2)), {}), (((3, 3), (3, 1)), {"trans": "T"})),
           prims=("lu", "lu_permutation", "triangular_solve"), extras=_NEEDS_LU,
           **_LA_ORDER),
    OpInfo("linalg.qr", lambda a, **kw: LA.qr(a, **kw),
           lambda a, mode="reduced": np.linalg.qr(a, mode=mode),
           _mats_kw((((3, 2),), {}), (((2, 3, 3),), {}), (((2, 4),), {}),
                    (((4, 2),), {"mode": "r"})), prims=("qr",), **_LA_MID),
    OpInfo("linalg.svd", lambda a: LA.svd(a), lambda a: np.linalg.svd(a, full_matrices=False),
           _mats(((3, 2),), ((2, 3, 3),)), prims=("svd",), **_LA_MID),
    OpInfo("linalg.svd_wide", _svd_sign_free, _np_svd_sign_free, _mats(((2, 4),)),
           prims=("svd",), **_LA_ORDER),
    OpInfo("linalg.svdvals", lambda a: LA.svdvals(a), lambda a: np.linalg.svd(a, compute_uv=False),
           _mats(((3, 2),), ((2, 3),)), prims=("svd",), **_LA_ORDER),
    OpInfo("linalg.pinv", lambda a: LA.pinv(a), np.linalg.pinv, _mats(((3, 2),), ((2, 3),)),
           prims=("svd",), **_LA_ORDER),
    OpInfo("linalg.lstsq", lambda a, b: LA.lstsq(a, b), _np_lstsq,
           _mats(((4, 2), (4, 2)), ((3, 3), (3, 1))), prims=("svd",), order_samples=1,
           max_order=2),
    OpInfo("linalg.matrix_power", lambda a, **kw: LA.matrix_power(_pf_shift(a), **kw),
           lambda a, n: np.linalg.matrix_power(_np_shift(a), n),
           _mats_kw((((3, 3),), {"n": 3}), (((2, 2, 2),), {"n": -2}), (((2, 2),), {"n": 0})),
           prims=("dot_general",), **_LA_ORDER),
    OpInfo("linalg.matrix_exp", lambda a: LA.matrix_exp(a),
           _np_expm,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3, 3)),)),
                 _s(lambda i, r: (r.uniform(-3, 3, (2, 2, 2)),), desc="squarings")),
           prims=("solve",), **_LA_ORDER,
           # the squarings amplify rounding: jit's and eager's float32 orders of operations
           # end ~1e-5 apart
           tol={"agree_float32": 3e-5, "value_float32": 1e-4},
           limits=(Limit("traced, it squares a fixed number of times (eager chooses the count "
                         "from the norm): each squaring doubles bfloat16's rounding error, "
                         "~30% here", dtypes=("bfloat16",),
                         modes=("jit", "jit_numba", "vmap", "jet")),)),
    OpInfo("linalg.vector_norm", lambda x, **kw: LA.vector_norm(x, **kw),
           lambda x, p=2.0, axis=None, keepdim=False: np.linalg.norm(
               x.ravel() if axis is None else x, ord=p, axis=axis, keepdims=keepdim)
           if axis is not None or not keepdim else None,
           _mats_kw((((2, 3),), {}), (((2, 3),), {"p": 3, "axis": 1}),
                    (((2, 3),), {"p": float("inf"), "axis": 0}), (((4,),), {"p": -1})),
           **_LA_ORDER),
    OpInfo("linalg.matrix_norm", lambda a, **kw: LA.matrix_norm(a, **kw), _np_matrix_norm,
           _mats_kw((((2, 3),), {}), (((3, 2),), {"p": "nuc"}), (((2, 3, 3),), {"p": 1}),
                    (((3, 3),), {"p": float("inf")}), (((3, 2),), {"p": 2}),
                    (((3, 3),), {"p": -2})), **_LA_ORDER),
    OpInfo("linalg.norm", lambda a, **kw: LA.norm(a, **kw),
           lambda a, p=None, axis=None: np.linalg.norm(a, ord=p, axis=axis),
           _mats_kw((((2, 3),), {}), (((3, 2),), {"p": "nuc"}), (((3,),), {"p": 1})),
           **_LA_ORDER),
    OpInfo("linalg.cond", lambda a, **kw: LA.cond(_pf_shift(a), **kw),
           lambda a, p=None: np.linalg.cond(_np_shift(a), p=p),
           _mats_kw((((3, 3),), {}), (((3, 3),), {"p": "fro"}), (((2, 2, 2),), {"p": -2})),
           prims=("svd",), **_LA_ORDER),
]

# LAPACK has no half precision: the decompositions raise a TypeError naming float16 (bfloat16
# computes in float32)
_NO_HALF = Limit("LAPACK has no half precision: float16 matrices raise a TypeError (convert "
                 "them to float32)", dtypes=("float16",))
_DECOMPOSITIONS = {"solve", "slogdet", "cholesky", "triangular_solve", "eigh", "lu", "qr", "svd"}
for _info in ENTRIES:
    if _DECOMPOSITIONS & set(_info.prims) or _info.name in (
            "linalg.matrix_norm", "linalg.norm", "linalg.matrix_power"):
        _info.limits += (_NO_HALF,)
