"""Linear algebra and FFT forward + backward, primflow next to hand-written
NumPy/SciPy adjoints and (when importable) torch eager. One process, one thread per
framework; only the ratios of one run mean anything (see README.md).

* ``solve``: x = solve(a, b) with a [64, 256, 256], b [64, 256, 16] float64, loss
  <w, x>; backward gives a_bar and b_bar. Peers: NumPy (np.linalg.solve forward, a second
  np.linalg.solve with a^T backward: the same two factorisations primflow does) and SciPy
  reusing the LU factors (lu_factor once, lu_solve forward and transposed).
* ``cholesky``: L = cholesky(a) for SPD a [64, 256, 256] float64, loss <w, L>; the adjoint
  sym(L^-T phi(L^T w) L^-1) by hand with SciPy's solve_triangular.
* ``rfft2``: y = rfft2(x) for x [32, 64, 128, 128] float32, loss Re<w, y>; the adjoint
  irfft2 of the half-weighted cotangent by hand, with numpy.fft (pocketfft) and scipy.fft.
  Target: primflow within 1.3x of the fastest hand-written peer.

Run: ``python -m bench.linalg_fft [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import scipy.fft  # noqa: E402
import scipy.linalg  # noqa: E402

import primflow as pf  # noqa: E402

try:  # optional peer, never a dependency
    import torch  # noqa: E402

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - depends on the environment
    torch = None


def timed(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# ---- solve ---------------------------------------------------------------------------------

def solve_case(batch, n, k, rng):
    a = rng.standard_normal((batch, n, n)) + n ** 0.5 * np.eye(n)
    b = rng.standard_normal((batch, n, k))
    w = rng.standard_normal((batch, n, k))
    return a, b, w


def solve_primflow(a, b, w):
    at, bt, wt = (pf.to_tensor(a, stop_gradient=False), pf.to_tensor(b, stop_gradient=False),
                  pf.to_tensor(w))

    def step():
        at.clear_grad()
        bt.clear_grad()
        (pf.linalg.solve(at, bt) * wt).sum().backward()
        return at.grad, bt.grad

    return step


def solve_numpy(a, b, w):
    def step():
        x = np.linalg.solve(a, b)
        b_bar = np.linalg.solve(np.swapaxes(a, -1, -2), w)
        return -b_bar @ np.swapaxes(x, -1, -2), b_bar

    return step


def solve_scipy_lu(a, b, w):
    def step():
        a_bar, b_bar = np.empty_like(a), np.empty_like(b)
        for i in range(a.shape[0]):
            factors = scipy.linalg.lu_factor(a[i], check_finite=False)
            x = scipy.linalg.lu_solve(factors, b[i], check_finite=False)
            b_bar[i] = scipy.linalg.lu_solve(factors, w[i], trans=1, check_finite=False)
            a_bar[i] = -b_bar[i] @ x.T
        return a_bar, b_bar

    return step


def solve_torch(a, b, w):
    at = torch.tensor(a, requires_grad=True)
    bt = torch.tensor(b, requires_grad=True)
    wt = torch.tensor(w)

    def step():
        at.grad = bt.grad = None
        (torch.linalg.solve(at, bt) * wt).sum().backward()

    return step


# ---- cholesky ------------------------------------------------------------------------------

def cholesky_case(batch, n, rng):
    m = rng.standard_normal((batch, n, n))
    a = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
    return a, rng.standard_normal((batch, n, n))


def cholesky_primflow(a, w):
    at, wt = pf.to_tensor(a, stop_gradient=False), pf.to_tensor(w)

    def step():
        at.clear_grad()
        (pf.linalg.cholesky(at) * wt).sum().backward()
        return at.grad

    return step


def _phi(x):
    return np.tril(x, -1) + 0.5 * np.einsum("...ii->...i", x)[..., None] * np.eye(x.shape[-1])


def cholesky_scipy(a, w):
    def step():
        lower = np.linalg.cholesky(a)
        p = _phi(np.swapaxes(lower, -1, -2) @ w)
        out = np.empty_like(a)
        for i in range(a.shape[0]):
            left = scipy.linalg.solve_triangular(lower[i], p[i], lower=True, trans=1,
                                                 check_finite=False)
            out[i] = scipy.linalg.solve_triangular(lower[i], left.T, lower=True, trans=1,
                                                   check_finite=False).T
        return 0.5 * (out + np.swapaxes(out, -1, -2))

    return step


def cholesky_torch(a, w):
    at, wt = torch.tensor(a, requires_grad=True), torch.tensor(w)

    def step():
        at.grad = None
        (torch.linalg.cholesky(at) * wt).sum().backward()

    return step


# ---- rfft2 ---------------------------------------------------------------------------------

def rfft2_case(shape, rng):
    x = rng.standard_normal(shape, dtype=np.float32)
    half = shape[:-1] + (shape[-1] // 2 + 1,)
    w = (rng.standard_normal(half, dtype=np.float32)
         + 1j * rng.standard_normal(half, dtype=np.float32)).astype(np.complex64)
    return x, w


def rfft2_primflow(x, w):
    xt = pf.to_tensor(x, stop_gradient=False)
    wr, wi = pf.to_tensor(w.real.copy()), pf.to_tensor(w.imag.copy())

    def step():
        xt.clear_grad()
        y = pf.fft.rfft2(xt)
        (pf.real(y) * wr + pf.imag(y) * wi).sum().backward()
        return xt.grad

    return step


def _rfft2_adjoint(module, w, n):
    weights = np.full(w.shape[-1], 0.5, dtype=np.float32)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    return module.irfft2(w * weights, s=w.shape[-2:-1] + (n,), norm="forward")


def rfft2_hand(module, x, w):
    def step():
        y = module.rfft2(x)
        loss = float(np.sum(y.real * w.real + y.imag * w.imag))
        return loss, _rfft2_adjoint(module, w, x.shape[-1])

    return step


def rfft2_torch(x, w):
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w)

    def step():
        xt.grad = None
        y = torch.fft.rfft2(xt)
        (y.real * wt.real + y.imag * wt.imag).sum().backward()

    return step


# ---- driver --------------------------------------------------------------------------------

def report(title, rows):
    print(f"\n{title}")
    base = rows[0][1]
    for name, seconds in rows:
        if seconds is None:
            print(f"  {name:<34} n/a")
        else:
            print(f"  {name:<34} {seconds * 1e3:9.1f} ms   primflow / this = "
                  f"{base / seconds:5.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer reps")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    reps = 3 if args.quick else 5
    batch, n = (8, 128) if args.quick else (64, 256)
    fft_shape = (4, 16, 64, 64) if args.quick else (32, 64, 128, 128)
    print(f"one thread per framework; {'quick sizes' if args.quick else 'issue sizes'}; "
          f"torch {'eager ' + torch.__version__ if torch else 'not installed'}")

    a, b, w = solve_case(batch, n, 16, rng)
    ref = solve_numpy(a, b, w)()
    got = solve_primflow(a, b, w)()
    assert np.allclose(got[0].numpy(), ref[0]) and np.allclose(got[1].numpy(), ref[1])
    report(f"solve fwd+bwd a[{batch},{n},{n}] b[{batch},{n},16] float64", [
        ("primflow", timed(solve_primflow(a, b, w), reps)),
        ("numpy (2 LU: forward, a^T backward)", timed(solve_numpy(a, b, w), reps)),
        ("scipy (1 LU, reused)", timed(solve_scipy_lu(a, b, w), reps)),
        ("torch eager", timed(solve_torch(a, b, w), reps) if torch else None)])

    a, w = cholesky_case(batch, n, rng)
    assert np.allclose(cholesky_primflow(a, w)().numpy(), cholesky_scipy(a, w)())
    report(f"cholesky fwd+bwd a[{batch},{n},{n}] float64", [
        ("primflow", timed(cholesky_primflow(a, w), reps)),
        ("numpy + scipy solve_triangular", timed(cholesky_scipy(a, w), reps)),
        ("torch eager", timed(cholesky_torch(a, w), reps) if torch else None)])

    x, w = rfft2_case(fft_shape, rng)
    grad = rfft2_primflow(x, w)().numpy()
    assert np.allclose(grad, rfft2_hand(np.fft, x, w)()[1], atol=1e-2 * np.abs(grad).max())
    report(f"rfft2 fwd+bwd x{list(fft_shape)} float32", [
        ("primflow", timed(rfft2_primflow(x, w), reps)),
        ("numpy.fft (pocketfft) + hand adjoint", timed(rfft2_hand(np.fft, x, w), reps)),
        ("scipy.fft + hand adjoint", timed(rfft2_hand(scipy.fft, x, w), reps)),
        ("torch eager", timed(rfft2_torch(x, w), reps) if torch else None)])


if __name__ == "__main__":
    main()
