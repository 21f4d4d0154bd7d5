"""Inverse Kirchhoff plate: identify the flexural rigidity D from noisy deflections.

The forward problem is :class:`~primflow.science.problems.Plate` (``D Δ²w = q`` on a
simply supported rectangle under a sinusoidal load, Navier solution). Here D is unknown:
the model is the network and ``D = D_guess exp(θ)`` with a trainable ``θ`` (the log keeps
D positive and makes the steps relative), trained on

* the PDE residual ``exp(θ) Δ'²w' / K - sin(π x'/a') sin(π y'/b')`` (non-dimensional as in
  :class:`Plate`, with the deflection scaled by the amplitude the *initial guess* of D
  predicts - the true D is unknown),
* the boundary condition Δw = 0 (w = 0 is built in),
* a ``"data"`` term: ``n_measurements`` deflections at random interior points with
  Gaussian noise of ``noise`` times their RMS (synthetic, from the Navier solution with the
  true D; ``noise=0.01`` is 1 %).

The deflection's amplitude pins D: w = q / (D π⁴ (1/a² + 1/b²)²) for this load.

Example:
    >>> from primflow.science.problems import PlateInverse
    >>> p = PlateInverse(guess=2.0)
    >>> p.D_true, p.parameter_values()["D"]
    (1.0, 2.0)
"""

from __future__ import annotations

import math

import primflow as pf

from ..operators import biharmonic
from .base import Measurements, Settings
from .plate import Plate


class PlateInverse(Plate):
    """The plate with an unknown rigidity (see the module docstring).

    Args:
        config: the plate (``"unit"`` or ``"paddlescience"``), giving the true D.
        guess: the initial guess of D as a multiple of the true D.
        noise: measurement noise, relative to the RMS deflection.
        n_measurements: measured points.
        seed: seeds the measurement points and noise.
    """

    name = "plate-inverse"

    def __init__(self, config="unit", guess=2.0, noise=0.01, n_measurements=200, seed=0,
                 dtype="float64", method=None, **overrides):
        super().__init__(config, dtype, method, **overrides)
        if not guess > 0:
            raise ValueError(f"guess must be a positive multiple of the true D, got {guess!r}")
        if isinstance(n_measurements, bool) or not isinstance(n_measurements, int) or \
                n_measurements < 1:
            raise ValueError(f"n_measurements must be a positive int, got {n_measurements!r}")
        self.D_true = self.D
        self.D_guess = float(guess) * self.D_true
        self.noise = float(noise)
        # the deflection scale an engineer would pick: the amplitude the guess predicts
        self.W = self.q0 * self.L ** 4 / (self.D_guess * self.K)
        self.reset_parameters()
        self.measurements = Measurements.from_reference(self, n_measurements, noise=noise,
                                                        seed=seed)
        self.title = (f"Inverse Kirchhoff plate ({config}): find D in D Δ²w = q0 sin(πx/a) "
                      f"sin(πy/b) from {n_measurements} deflections with "
                      f"{100 * self.noise:g} % noise; true D = {self.D_true:.6g}, initial "
                      f"guess {self.D_guess:.6g}")

    def settings(self, quick=False):
        if quick:
            return Settings(hidden=16, depth=2, n_interior=256, n_boundary=64, adam_steps=200,
                            lr=1e-2, lr_final=1e-3, lbfgs_steps=100, validate_every=25,
                            lbfgs_chunk=10, target=5e-2)
        return Settings(hidden=20, depth=3, n_interior=1024, n_boundary=256, adam_steps=500,
                        lr=1e-2, lr_final=5e-4, lbfgs_steps=500, validate_every=50,
                        target=1e-2)

    # ---- the unknown -----------------------------------------------------------------------
    def reset_parameters(self):
        self.log_ratio = pf.nn.Parameter(pf.zeros([1], dtype=self.dtype), name="log_D_ratio")

    def pde_parameters(self):
        return {"log_D_ratio": self.log_ratio}

    def parameter_values(self):
        return {"D": self.D_guess * math.exp(float(self.log_ratio.detach()[0]))}

    def true_parameters(self):
        """name -> the true value (the synthetic measurements' D)."""
        return {"D": self.D_true}

    def parameter_error(self):
        """``|D - D_true| / D_true`` of the current estimate."""
        return abs(self.parameter_values()["D"] - self.D_true) / self.D_true

    # ---- the PDE with the trainable coefficient ----------------------------------------
    def residual(self, u, X):
        ratio = pf.exp(self.log_ratio)
        return ratio * biharmonic(u, X, method=self.method) * (1.0 / self.K) - self.load(X)

    def reference(self, X):
        """The true deflection in the model's units (scaled by the guess's amplitude)."""
        return (self.D_guess / self.D_true) * self.load(X)
