"""Data sets of the Fourier neural operator paper, generated here (no downloads).

Li et al., "Fourier Neural Operator for Parametric PDEs" (ICLR 2021, arXiv 2010.08895):

* **1-D Burgers** (:func:`burgers_dataset`): ``u_t + (u^2/2)_x = nu u_xx`` on the periodic
  unit interval, ``nu = 0.1``; learn ``u(., 0) -> u(., 1)``. Initial conditions are
  Gaussian random fields ``N(0, 625 (-Δ + 25 I)^-2)`` (:func:`grf_1d`, the paper's
  ``GaussianRF(1, s, alpha=2, tau=5, sigma=25)`` with its normalisation and a zero mean
  mode). The solver (:func:`burgers_solve`) is pseudo-spectral with the paper's splitting:
  the viscous part exactly in Fourier space (an integrating factor) and the nonlinear part
  by a fourth-order Runge–Kutta step (the paper: fine forward-Euler steps), 2/3-rule
  dealiasing, on ``grid`` points, then subsampled to ``s`` points.
* **2-D Darcy flow** (:func:`darcy_dataset`): ``-∇·(a ∇u) = 1`` on the unit square, ``u = 0``
  on the boundary; learn ``a -> u``. ``a = 12`` where a Gaussian random field
  ``N(0, (-Δ + 9 I)^-2)`` with zero-Neumann conditions (a cosine series, :func:`grf_2d`)
  is non-negative and 3 elsewhere. The solver (:func:`darcy_solve`) is the second-order
  5-point finite-difference scheme with harmonic means of ``a`` on the cell faces, solved by
  ``scipy.sparse`` when installed or else by Jacobi-preconditioned conjugate gradients, on a
  grid twice as fine as ``s`` (``2 (s - 1) + 1`` points a side), then subsampled.

Every generator takes a ``seed`` (NumPy's ``default_rng``), and the data sets are cached as
``.npz`` files (never pickles) under ``cache_dir``: the second call loads them. A cached
file that cannot be read, or whose metadata, shapes or values do not match the request,
is regenerated with a message (:func:`load_or_generate`).

These are data, not differentiated: plain NumPy (``numpy.fft``) is the right tool.

Example:
    >>> from primflow.science.neural_operators.data import grf_1d, burgers_solve
    >>> u0 = grf_1d(2, 64, seed=0)
    >>> u1 = burgers_solve(u0, nu=0.1, t=0.1)
    >>> u0.shape, u1.shape, bool(abs(u1.mean(axis=1)).max() < 1e-10)  # the mean is conserved
    ((2, 64), (2, 64), True)
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading

import numpy as np

__all__ = [
    "GENERATOR_VERSION",
    "burgers_cole_hopf",
    "burgers_dataset",
    "burgers_solve",
    "darcy_dataset",
    "darcy_solve",
    "default_cache_dir",
    "grf_1d",
    "grf_2d",
    "load_or_generate",
]

GENERATOR_VERSION = 1  # bump when a generator changes: cached files of older ones regenerate


# ---- Gaussian random fields ----------------------------------------------------------------

def _rng(seed):
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    return np.random.default_rng(int(seed))


def _check_count(n, what, least=1):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < least:
        raise ValueError(f"{what} must be an int >= {least}, got {n!r}")
    return int(n)


def grf_1d(n, s, alpha=2.0, tau=5.0, sigma=25.0, seed=0):
    """``n`` samples ``[n, s]`` of the periodic Gaussian random field
    ``N(0, sigma^2 (-Δ + tau^2 I)^-alpha)`` on ``s`` equispaced points of [0, 1), with the
    FNO code's normalisation (``sqrt_eig = s sqrt(2) sigma (4 pi^2 k^2 + tau^2)^(-alpha/2)``,
    complex normal coefficients, the real part of the inverse FFT) and a zero mean mode.

    Example:
        >>> from primflow.science.neural_operators.data import grf_1d
        >>> u = grf_1d(500, 128, seed=1)
        >>> round(float(u.std()), 1)
        0.9
    """
    n, s = _check_count(n, "n"), _check_count(s, "s", 4)
    rng = _rng(seed)
    k = np.fft.fftfreq(s, d=1.0 / s)  # 0, 1, ..., -1 (integers)
    sqrt_eig = s * math.sqrt(2.0) * sigma * (4 * math.pi ** 2 * k ** 2 + tau ** 2) ** (-alpha / 2)
    sqrt_eig[0] = 0.0
    coeff = rng.standard_normal((n, s)) + 1j * rng.standard_normal((n, s))
    return np.fft.ifft(sqrt_eig * coeff, axis=1).real


def grf_2d(n, s, alpha=2.0, tau=3.0, seed=0):
    """``n`` samples ``[n, s, s]`` of the Gaussian random field ``N(0, (-Δ + tau^2 I)^-alpha)``
    with zero-Neumann conditions on the unit square, at the ``s x s`` grid including the
    boundary: a cosine series with coefficients ``s tau^(alpha-1) (pi^2 |k|^2 + tau^2)^(-alpha/2)
    xi_k`` and a zero mean mode (the FNO paper's MATLAB ``GRF`` generator, by matrix
    products instead of an inverse DCT).

    Example:
        >>> from primflow.science.neural_operators.data import grf_2d
        >>> grf_2d(3, 17, seed=0).shape
        (3, 17, 17)
    """
    n, s = _check_count(n, "n"), _check_count(s, "s", 3)
    rng = _rng(seed)
    k = np.arange(s)
    K1, K2 = np.meshgrid(k, k, indexing="ij")
    coef = tau ** (alpha - 1) * (math.pi ** 2 * (K1 ** 2 + K2 ** 2) + tau ** 2) ** (-alpha / 2)
    coef[0, 0] = 0.0
    x = np.linspace(0.0, 1.0, s)
    # orthonormal DCT-II-like basis sampled at the grid: sqrt(2) cos(pi k x) (k >= 1), 1 (k = 0)
    C = np.cos(math.pi * np.outer(x, k)) * np.where(k == 0, 1.0, math.sqrt(2.0))
    xi = rng.standard_normal((n, s, s))
    L = s * coef * xi
    return np.einsum("ik,nkl,jl->nij", C, L, C, optimize=True)


# ---- 1-D Burgers ---------------------------------------------------------------------------

def burgers_solve(u0, nu=0.1, t=1.0, dt=None, cfl=0.4):
    """Solves ``u_t + (u^2/2)_x = nu u_xx`` on the periodic unit interval from ``u0``
    (``[n, N]`` or ``[N]``, values at ``N`` equispaced points) to time ``t``.

    Integrating-factor RK4 in Fourier space with 2/3-rule dealiasing of the nonlinear term;
    the time step is ``dt`` or, by default, ``cfl * dx / max|u0|`` (the viscous part is
    exact, so only advection limits the step; the maximum of |u| does not grow for this
    equation).

    Raises ValueError when the grid cannot resolve the solution: a viscous length
    ``nu / max|u0|`` below a grid spacing, or a non-finite result.

    Example:
        >>> import numpy as np
        >>> from primflow.science.neural_operators.data import burgers_solve
        >>> x = np.arange(64) / 64
        >>> u = burgers_solve(np.sin(2 * np.pi * x), nu=0.1, t=0.0)
        >>> bool(np.allclose(u, np.sin(2 * np.pi * x)))
        True
    """
    u = np.atleast_2d(np.asarray(u0, dtype=np.float64))
    n_grid = u.shape[1]
    if n_grid < 8:
        raise ValueError(f"the Burgers solver needs at least 8 grid points, got {n_grid}")
    if not nu > 0:
        raise ValueError(f"the viscosity nu must be positive, got {nu!r}")
    if not t >= 0:
        raise ValueError(f"the final time t must be non-negative, got {t!r}")
    dx = 1.0 / n_grid
    umax = float(np.abs(u).max()) if u.size else 0.0
    if umax * dx / nu > 2.0:  # cell Reynolds number: the viscous shock is under-resolved
        raise ValueError(
            f"a grid of {n_grid} points cannot resolve this Burgers solution stably: the "
            f"viscous length nu/max|u0| = {nu / umax:.3g} is below the spacing {dx:.3g}; use "
            f"a finer grid (at least {math.ceil(umax / (2 * nu))} points) or a larger nu")
    if t == 0:
        return u.reshape(np.shape(u0)) if np.ndim(u0) == 1 else u
    if dt is None:
        dt = min(cfl * dx / max(umax, 1e-12), t)
    steps = max(1, math.ceil(t / dt))
    dt = t / steps
    k = 2 * math.pi * np.fft.rfftfreq(n_grid, d=dx)  # angular wavenumbers
    lin = -nu * k ** 2
    keep = np.abs(np.fft.rfftfreq(n_grid, d=1.0 / n_grid)) < n_grid / 3  # 2/3 rule
    ik = 1j * k * keep

    def nonlinear(v_hat):  # -(u^2/2)_x in Fourier space
        w = np.fft.irfft(v_hat, n=n_grid, axis=1)
        return -0.5 * ik * np.fft.rfft(w * w, axis=1)

    E, E2 = np.exp(lin * dt), np.exp(lin * dt / 2)
    v = np.fft.rfft(u, axis=1)
    for _ in range(steps):
        a = nonlinear(v)
        b = nonlinear(E2 * (v + 0.5 * dt * a))
        c = nonlinear(E2 * v + 0.5 * dt * b)
        d = nonlinear(E * v + dt * E2 * c)
        v = E * v + (dt / 6) * (E * a + 2 * E2 * (b + c) + d)
    out = np.fft.irfft(v, n=n_grid, axis=1)
    if not np.isfinite(out).all():
        raise ValueError(f"the Burgers solver diverged on {n_grid} points with dt = {dt:.3g}; "
                         f"use a smaller cfl or a finer grid")
    return out.reshape(np.shape(u0)) if np.ndim(u0) == 1 else out


def burgers_cole_hopf(u0, nu=0.1, t=1.0, refine=8):
    """The exact solution of the periodic Burgers problem by the Cole–Hopf transform
    (an independent check of :func:`burgers_solve`): ``u = -2 nu phi_x / phi`` with
    ``phi_t = nu phi_xx`` and ``phi(., 0) = exp(-∫u0 / (2 nu))``; the heat equation is solved
    exactly in Fourier space on a grid ``refine`` times finer (``u0`` given as values at
    ``N`` equispaced points of a smooth periodic zero-mean function, interpolated
    spectrally).

    Example:
        >>> import numpy as np
        >>> from primflow.science.neural_operators.data import burgers_cole_hopf
        >>> x = np.arange(32) / 32
        >>> u = burgers_cole_hopf(0.5 * np.sin(2 * np.pi * x), nu=0.1, t=0.0)
        >>> bool(np.allclose(u, 0.5 * np.sin(2 * np.pi * x)))
        True
    """
    u0 = np.atleast_2d(np.asarray(u0, dtype=np.float64))
    n = u0.shape[1]
    m = n * refine
    u_hat = np.fft.rfft(u0, axis=1)
    if np.abs(u_hat[:, 0]).max() > 1e-9 * max(1.0, np.abs(u_hat).max()):
        raise ValueError("the Cole–Hopf reference needs a zero-mean initial condition")
    fine_hat = np.zeros((u0.shape[0], m // 2 + 1), dtype=complex)
    fine_hat[:, :u_hat.shape[1]] = u_hat * (m / n)
    k = 2 * math.pi * np.fft.rfftfreq(m, d=1.0 / m)
    k_safe = np.where(k == 0, 1.0, k)
    potential_hat = np.where(k == 0, 0.0, fine_hat / (1j * k_safe))  # ∫u0, periodic
    potential = np.fft.irfft(potential_hat, n=m, axis=1)
    expo = -potential / (2 * nu)
    phi0 = np.exp(expo - expo.max(axis=1, keepdims=True))
    phi_hat = np.fft.rfft(phi0, axis=1) * np.exp(-nu * k ** 2 * t)
    phi = np.fft.irfft(phi_hat, n=m, axis=1)
    phi_x = np.fft.irfft(1j * k * phi_hat, n=m, axis=1)
    u = -2 * nu * phi_x / phi
    return u[:, ::refine]


def _burgers_generate(n, s, grid, nu, seed):
    if grid % s:
        raise ValueError(f"the solver grid ({grid}) must be a multiple of the resolution s={s}")
    u0 = grf_1d(n, grid, seed=seed)
    chunks = [burgers_solve(u0[i:i + 100], nu=nu, t=1.0) for i in range(0, n, 100)]
    u1 = np.concatenate(chunks, axis=0)
    step = grid // s
    return {"x": u0[:, ::step].copy(), "y": u1[:, ::step].copy()}


def burgers_dataset(n_train=1000, n_test=100, s=256, grid=None, nu=0.1, seed=0,
                    cache_dir=None, log=None):
    """The FNO paper's 1-D Burgers data: ``(x_train, y_train, x_test, y_test)``, each
    ``[n, s]`` (initial condition, solution at t = 1) on ``s`` points of [0, 1).

    Args:
        n_train, n_test: sample counts (the paper: 1000 and 100).
        s: the resolution (the paper's default run: 1024, subsampled from 8192).
        grid: the solver's grid (a multiple of ``s``; default: the smallest multiple of
            ``s`` with at least 256 points - ν = 0.1 keeps the solution smooth: the solver
            agrees with the Cole–Hopf solution to 1e-10 on 256 points).
        nu: viscosity (0.1).
        seed: the random seed of the initial conditions.
        cache_dir: where to cache the ``.npz`` file (default :func:`default_cache_dir`;
            ``False``: no cache).
        log: a function taking a line of text (progress messages; default stderr).

    Example:
        >>> from primflow.science.neural_operators.data import burgers_dataset
        >>> xs = burgers_dataset(4, 2, s=32, grid=256, cache_dir=False)
        >>> [a.shape for a in xs]
        [(4, 32), (4, 32), (2, 32), (2, 32)]
    """
    n_train, n_test = _check_count(n_train, "n_train"), _check_count(n_test, "n_test")
    s = _check_count(s, "s", 8)
    grid = s * math.ceil(256 / s) if grid is None else _check_count(grid, "grid", 8)
    if grid % s:
        raise ValueError(f"the solver grid ({grid}) must be a multiple of the resolution s={s}")
    meta = {"problem": "burgers", "n": n_train + n_test, "s": s, "grid": grid, "nu": nu,
            "seed": seed}
    data = load_or_generate(meta, lambda: _burgers_generate(n_train + n_test, s, grid, nu,
                                                            seed),
                            {"x": (n_train + n_test, s), "y": (n_train + n_test, s)},
                            cache_dir, log)
    x, y = data["x"], data["y"]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


# ---- 2-D Darcy -----------------------------------------------------------------------------

def _harmonic(p, q):
    return 2.0 * p * q / (p + q)


def darcy_operator(a, h):
    """The 5-point matrix of ``-∇·(a ∇u)`` on the interior nodes of a square grid with
    spacing ``h`` (``a``: ``[m, m]`` node values including the boundary, ``u = 0`` there),
    face coefficients the harmonic means of the neighbouring nodes: returns ``(diag, west,
    east, south, north)`` arrays ``[m-2, m-2]`` (zero couplings across the boundary)."""
    aw = _harmonic(a[1:-1, 1:-1], a[:-2, 1:-1])
    ae = _harmonic(a[1:-1, 1:-1], a[2:, 1:-1])
    as_ = _harmonic(a[1:-1, 1:-1], a[1:-1, :-2])
    an = _harmonic(a[1:-1, 1:-1], a[1:-1, 2:])
    inv = 1.0 / (h * h)
    return (aw + ae + as_ + an) * inv, aw * inv, ae * inv, as_ * inv, an * inv


def _apply(op, u):
    diag, w, e, s_, nth = op
    out = diag * u
    out[1:, :] -= w[1:, :] * u[:-1, :]
    out[:-1, :] -= e[:-1, :] * u[1:, :]
    out[:, 1:] -= s_[:, 1:] * u[:, :-1]
    out[:, :-1] -= nth[:, :-1] * u[:, 1:]
    return out


def _cg(op, f, tol=1e-10, max_iter=20000):
    """Jacobi-preconditioned conjugate gradients for the SPD 5-point system."""
    diag = op[0]
    u = np.zeros_like(f)
    r = f.copy()
    z = r / diag
    p = z.copy()
    rz = float((r * z).sum())
    f_norm = math.sqrt(float((f * f).sum()))
    for _ in range(max_iter):
        Ap = _apply(op, p)
        alpha = rz / float((p * Ap).sum())
        u += alpha * p
        r -= alpha * Ap
        if math.sqrt(float((r * r).sum())) <= tol * f_norm:
            return u
        z = r / diag
        rz_new = float((r * z).sum())
        p = z + (rz_new / rz) * p
        rz = rz_new
    raise ValueError(f"conjugate gradients did not converge in {max_iter} iterations; the "
                     f"coefficient may be too rough for this grid")


def _sparse_solve(op, f):
    try:
        import scipy.sparse as sp
        import scipy.sparse.linalg as spla
    except ImportError as exc:
        raise ImportError("darcy_solve(solver='sparse') needs SciPy: pip install "
                          "'primflow[fast]' (or pip install scipy), or use solver='cg'") from exc

    diag, w, e, s_, nth = op
    m = diag.shape[0]
    idx = np.arange(m * m).reshape(m, m)
    rows, cols, vals = [idx.ravel()], [idx.ravel()], [diag.ravel()]
    for coef, (di, dj) in ((w, (-1, 0)), (e, (1, 0)), (s_, (0, -1)), (nth, (0, 1))):
        i0, i1 = max(0, -di), m - max(0, di)
        j0, j1 = max(0, -dj), m - max(0, dj)
        rows.append(idx[i0:i1, j0:j1].ravel())
        cols.append(idx[i0 + di:i1 + di, j0 + dj:j1 + dj].ravel())
        vals.append(-coef[i0:i1, j0:j1].ravel())
    A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(m * m, m * m))
    return spla.spsolve(A.tocsc(), f.ravel()).reshape(m, m)


def darcy_solve(a, f=1.0, solver="auto"):
    """Solves ``-∇·(a ∇u) = f`` on the unit square with ``u = 0`` on the boundary by the
    5-point scheme (harmonic face means) on the grid of ``a`` (``[m, m]`` node values,
    boundary included); returns ``u`` ``[m, m]``. ``f``: a number or ``[m, m]`` values.
    ``solver``: ``"sparse"`` (SciPy), ``"cg"`` or ``"auto"`` (SciPy when installed).

    Example:
        >>> import numpy as np
        >>> from primflow.science.neural_operators.data import darcy_solve
        >>> u = darcy_solve(np.ones((33, 33)))
        >>> round(float(u.max()), 3)  # the torsion function's maximum, 0.07367
        0.074
    """
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 3:
        raise ValueError(f"a must be a square [m, m] grid with m >= 3, got shape {a.shape}")
    if not (a > 0).all():
        raise ValueError("the coefficient a must be positive everywhere")
    m = a.shape[0]
    h = 1.0 / (m - 1)
    f = np.broadcast_to(np.asarray(f, dtype=np.float64), a.shape)[1:-1, 1:-1].copy()
    op = darcy_operator(a, h)
    if solver == "auto":
        solver = "sparse" if _have_scipy() else "cg"
    if solver == "sparse":
        inner = _sparse_solve(op, f)
    elif solver == "cg":
        inner = _cg(op, f)
    else:
        raise ValueError(f"unknown solver {solver!r}; choose 'auto', 'sparse' or 'cg'")
    u = np.zeros_like(a)
    u[1:-1, 1:-1] = inner
    return u


def _have_scipy():
    try:
        import scipy.sparse.linalg  # noqa: F401
        return True
    except ImportError:
        return False


def _darcy_generate(n, s, seed, log):
    fine = 2 * (s - 1) + 1
    field = grf_2d(n, fine, seed=seed)
    a = np.where(field >= 0, 12.0, 3.0)
    u = np.empty_like(a)
    for i in range(n):
        u[i] = darcy_solve(a[i])
        if log and (i + 1) % max(1, n // 10) == 0:
            log(f"  darcy: {i + 1}/{n} solved")
    return {"x": a[:, ::2, ::2].copy(), "y": u[:, ::2, ::2].copy()}


def darcy_dataset(n_train=1000, n_test=100, s=85, seed=0, cache_dir=None, log=None):
    """The FNO paper's 2-D Darcy data: ``(a_train, u_train, a_test, u_test)``, each
    ``[n, s, s]`` on the grid of [0, 1]^2 including the boundary, solved on the grid
    ``2 (s - 1) + 1`` points a side and subsampled (the paper: 421 subsampled to 85).

    Example:
        >>> from primflow.science.neural_operators.data import darcy_dataset
        >>> a, u, a_test, u_test = darcy_dataset(2, 1, s=9, cache_dir=False)
        >>> a.shape, sorted(set(a.ravel().tolist()))
        ((2, 9, 9), [3.0, 12.0])
    """
    n_train, n_test = _check_count(n_train, "n_train"), _check_count(n_test, "n_test")
    s = _check_count(s, "s", 5)
    if s > 421:
        raise ValueError(f"resolution s={s} is beyond what this generator solves in reasonable "
                         f"time and memory (it solves on {2 * (s - 1) + 1}^2 nodes); use "
                         f"s <= 421")
    meta = {"problem": "darcy", "n": n_train + n_test, "s": s, "seed": seed}
    log = _logger(log)
    data = load_or_generate(meta, lambda: _darcy_generate(n_train + n_test, s, seed, log),
                            {"x": (n_train + n_test, s, s), "y": (n_train + n_test, s, s)},
                            cache_dir, log)
    x, y = data["x"], data["y"]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


# ---- the cache -----------------------------------------------------------------------------

def default_cache_dir():
    """``$XDG_CACHE_HOME/primflow/datasets`` (default ``~/.cache/primflow/datasets``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "primflow", "datasets")


def _logger(log):
    if log is None:
        return lambda line: print(line, file=sys.stderr, flush=True)
    return log


def _cache_name(meta):
    parts = [meta["problem"]] + [f"{k}{meta[k]}" for k in sorted(meta) if k != "problem"]
    return "-".join(str(p) for p in parts).replace(".", "p") + f"-v{GENERATOR_VERSION}.npz"


def load_or_generate(meta, generate, shapes, cache_dir=None, log=None):
    """The arrays ``generate()`` returns, cached in ``cache_dir`` as an ``.npz`` file named
    after ``meta`` (a dict of the generator's parameters, also stored in the file).

    A cached file is used only when it loads without pickles, holds the same metadata and
    generator version, arrays of the expected ``shapes`` and only finite values; otherwise
    it is regenerated with a message saying why. ``cache_dir=False`` disables the cache.
    """
    log = _logger(log)
    if cache_dir is False:
        return generate()
    folder = default_cache_dir() if cache_dir is None else os.fspath(cache_dir)
    path = os.path.join(folder, _cache_name(meta))
    stored_meta = json.dumps(dict(meta, version=GENERATOR_VERSION), sort_keys=True)
    if os.path.exists(path):
        problem = _check_cached(path, stored_meta, shapes)
        if problem is None:
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in shapes}
        log(f"cached data set {path} is unusable ({problem}); regenerating it")
    log(f"generating the {meta['problem']} data set ({meta}); it is cached in {path}")
    data = generate()
    os.makedirs(folder, exist_ok=True)
    # one temporary per writer: two runs generating the same set must not share one
    tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp.npz"
    try:
        np.savez(tmp, meta=np.array(stored_meta), **data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return data


def _check_cached(path, stored_meta, shapes):
    """None when the cached file is good, else the reason it is not."""
    try:
        with np.load(path, allow_pickle=False) as f:
            if "meta" not in f.files or str(f["meta"]) != stored_meta:
                return "its parameters or generator version differ"
            for key, shape in shapes.items():
                if key not in f.files:
                    return f"the array {key!r} is missing"
                arr = f[key]
                if arr.shape != tuple(shape):
                    return f"{key!r} has shape {arr.shape}, expected {tuple(shape)}"
                if not np.isfinite(arr).all():
                    return f"{key!r} holds non-finite values"
    except Exception as exc:  # noqa: BLE001 - any failure to read means "regenerate"
        return f"it cannot be read: {type(exc).__name__}: {exc}"
    return None
