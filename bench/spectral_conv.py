"""SpectralConv1D/2D: the layers' real DFT matrices next to the same layer
written with ``pf.fft`` (rfft/irfft, rfft2/irfft2), compiled forward + backward, float32,
one thread. The layer keeps whichever is faster; only the ratios of one run mean anything
(see README.md).

Cases (batch 20): 1-D width 32, s = 128, 16 modes (fno-burgers default); 1-D width 64,
s = 1,024, 16 modes (the paper's Burgers); 2-D width 32, 38 x 38 (29 + 9 padding), 8 x 8
modes (fno-darcy default); 2-D width 32, 94 x 94 (85 + 9), 12 x 12 modes (the paper's
Darcy). Both versions must agree to float32 rounding (checked before timing).

Run: ``python -m bench.spectral_conv [--quick]``.
"""

from __future__ import annotations

import argparse
import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import primflow as pf  # noqa: E402

from bench.timing import measure  # noqa: E402


def _mix(xr, xi, wr, wi):
    return (pf.matmul(xr, wr) - pf.matmul(xi, wi), pf.matmul(xr, wi) + pf.matmul(xi, wr))


def fft_conv1d(conv, x):
    """SpectralConv1D's map through pf.fft.rfft / irfft."""
    s = x.shape[2]
    X = pf.fft.rfft(x, axis=-1)[:, :, :conv.modes]  # [N, in, modes]
    xr, xi = pf.transpose(pf.real(X), [2, 0, 1]), pf.transpose(pf.imag(X), [2, 0, 1])
    wr = pf.transpose(conv.weight_real, [2, 0, 1])
    wi = pf.transpose(conv.weight_imag, [2, 0, 1])
    yr, yi = _mix(xr, xi, wr, wi)
    Y = pf.complex(pf.transpose(yr, [1, 2, 0]), pf.transpose(yi, [1, 2, 0]))
    return pf.fft.irfft(Y, n=s, axis=-1)


def fft_conv2d(conv, x):
    """SpectralConv2D's map through pf.fft.rfft2 / irfft2."""
    n, cin, s1, s2 = x.shape
    m1, m2, out = conv.modes1, conv.modes2, conv.out_channels
    X = pf.fft.rfft2(x)
    X = pf.concat([X[:, :, :m1, :m2], X[:, :, s1 - m1:, :m2]], axis=2)  # [N, in, 2 m1, m2]
    modes = 2 * m1 * m2
    xr = pf.transpose(pf.reshape(pf.real(X), [n, cin, modes]), [2, 0, 1])
    xi = pf.transpose(pf.reshape(pf.imag(X), [n, cin, modes]), [2, 0, 1])
    wr = pf.transpose(pf.reshape(conv.weight_real, [cin, out, modes]), [2, 0, 1])
    wi = pf.transpose(pf.reshape(conv.weight_imag, [cin, out, modes]), [2, 0, 1])
    yr, yi = _mix(xr, xi, wr, wi)
    yr = pf.reshape(pf.transpose(yr, [1, 2, 0]), [n, out, 2 * m1, m2])
    yi = pf.reshape(pf.transpose(yi, [1, 2, 0]), [n, out, 2 * m1, m2])
    Y = pf.complex(yr, yi)
    gap = pf.zeros([n, out, s1 - 2 * m1, m2], dtype=Y.dtype)
    return pf.fft.irfft2(pf.concat([Y[:, :, :m1], gap, Y[:, :, m1:]], axis=2), s=(s1, s2))


def _time_step(fn, params, x, repeats):
    def loss(x):
        y = fn(x)
        return (y * y).mean()

    step = pf.jit(pf.value_and_grad(loss, None, params))
    return measure(lambda: float(step(x)[0]), reps=repeats, target_s=0.05,
                   warmup_s=0.1)["min_s"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the two small cases, 3 repeats")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    pf.seed(0)
    cases = [("1-D w32 s128 m16", pf.nn.SpectralConv1D(32, 32, 16), (20, 32, 128), fft_conv1d),
             ("2-D w32 38x38 m8", pf.nn.SpectralConv2D(32, 32, 8, 8), (20, 32, 38, 38),
              fft_conv2d)]
    if not args.quick:
        cases += [("1-D w64 s1024 m16", pf.nn.SpectralConv1D(64, 64, 16), (20, 64, 1024),
                   fft_conv1d),
                  ("2-D w32 94x94 m12", pf.nn.SpectralConv2D(32, 32, 12, 12), (20, 32, 94, 94),
                   fft_conv2d)]
    repeats = 3 if args.quick else 10
    print(f"{'case':<20} {'matrices ms':>12} {'pf.fft ms':>10} {'fft/matrices':>13}")
    for name, conv, shape, fft_fn in cases:
        x = pf.to_tensor(rng.random(shape, dtype=np.float32))
        reference, candidate = conv(x).numpy(), fft_fn(conv, x).numpy()
        gap = float(np.abs(reference - candidate).max() / np.abs(reference).max())
        if gap > 1e-5:
            raise SystemExit(f"{name}: the FFT version differs from the layer by {gap:.1e}")
        params = conv.parameters()
        t_matrix = _time_step(conv, params, x, repeats)
        t_fft = _time_step(lambda v, c=conv, f=fft_fn: f(c, v), params, x, repeats)
        print(f"{name:<20} {t_matrix * 1e3:>12.2f} {t_fft * 1e3:>10.2f} "
              f"{t_fft / t_matrix:>12.2f}x", flush=True)


if __name__ == "__main__":
    main()
