"""Kirchhoff plate, simply supported on all edges, under a sinusoidal load.

    D Δ²w = q0 sin(pi x / a) sin(pi y / b)  on [0, a] x [0, b],
    w = 0 and Δw = 0 on the edges (simple support on straight edges: w = 0 and zero
    normal bending moment, which there reduces to Δw = 0),
    w = q0 / (D pi^4 (1/a^2 + 1/b^2)^2) sin(pi x / a) sin(pi y / b)   (Navier).

Configurations:

* ``"unit"`` (default): the unit square with D = 1, q0 = 1.
* ``"paddlescience"``: PaddleScience's example, a = 2, b = 3 (m), h = 0.01, E = 201.88e9,
  nu = 0.25 (D = E h^3 / (12 (1 - nu^2)) = 17944.9), q0 = 980 (w_max = 4.30e-3 m).

Training is non-dimensional: lengths are scaled by L = max(a, b) and w by the Navier
one-mode amplitude W = q0 L^4 / (D pi^4 (1/a'^2 + 1/b'^2)^2) (a' = a/L, b' = b/L), which
gives Δ'²w' = K sin(pi x'/a') sin(pi y'/b') with K = pi^4 (1/a'^2 + 1/b'^2)^2; the residual
is divided by K and the boundary Laplacian by sqrt(K), so every loss term is O(1).
The condition w = 0 is built in: ``w' = 16 x'(a'-x') y'(b'-y') / (a' b')^2 N``; Δw = 0 on
the edges is a soft condition.

Example:
    >>> from primflow.science.problems import Plate
    >>> p = Plate("paddlescience")
    >>> round(p.D, 1), round(p.w_max, 5)
    (17944.9, 0.0043)
"""

from __future__ import annotations

import math

import primflow as pf

from ..geometry import Rectangle
from ..operators import Derivatives, biharmonic
from .base import Problem, Settings, mean_square

CONFIGS = {
    "unit": {"a": 1.0, "b": 1.0, "D": 1.0, "q0": 1.0},
    "paddlescience": {"a": 2.0, "b": 3.0, "h": 0.01, "E": 201.88e9, "nu": 0.25, "q0": 980.0},
}


class Plate(Problem):
    name = "plate"
    input_names = ("x", "y")
    output_name = "w"
    dim = 2

    def __init__(self, config="unit", dtype="float64", method=None, **overrides):
        super().__init__(dtype)
        if config not in CONFIGS:
            raise ValueError(f"unknown plate configuration {config!r}; choose one of "
                             f"{', '.join(CONFIGS)}")
        params = dict(CONFIGS[config], **overrides)
        self.config = config
        self.a, self.b, self.q0 = float(params["a"]), float(params["b"]), float(params["q0"])
        if "D" in params:
            self.D = float(params["D"])
        else:
            E, h, nu = params["E"], params["h"], params["nu"]
            self.D = E * h ** 3 / (12 * (1 - nu ** 2))
        self.method = method
        self.L = max(self.a, self.b)
        self.ah, self.bh = self.a / self.L, self.b / self.L
        self.K = math.pi ** 4 * (1 / self.ah ** 2 + 1 / self.bh ** 2) ** 2
        self.W = self.q0 * self.L ** 4 / (self.D * self.K)
        self.w_max = self.q0 / (self.D * math.pi ** 4 * (1 / self.a ** 2 + 1 / self.b ** 2) ** 2)
        self._geometry = Rectangle([0.0, 0.0], [self.ah, self.bh])
        self.title = (f"Kirchhoff plate ({config}): D Δ²w = q0 sin(πx/a) sin(πy/b) on "
                      f"[0,{self.a:g}]x[0,{self.b:g}], simply supported; D = {self.D:.6g}, "
                      f"q0 = {self.q0:g}")

    def settings(self, quick=False):
        if quick:
            return Settings(hidden=16, depth=2, n_interior=256, n_boundary=64, adam_steps=100,
                            lr=5e-3, lr_final=1e-3, lbfgs_steps=50, validate_every=25,
                            lbfgs_chunk=10, target=5e-2)
        return Settings(hidden=20, depth=3, n_interior=1024, n_boundary=256, adam_steps=300,
                        lr=5e-3, lr_final=5e-4, lbfgs_steps=300, validate_every=50,
                        target=1e-2)

    # internal (non-dimensional) formulation
    def load(self, X):
        return pf.sin((math.pi / self.ah) * X[:, 0:1]) * pf.sin((math.pi / self.bh) * X[:, 1:2])

    def transform(self, X, N):
        x, y = X[:, 0:1], X[:, 1:2]
        bump = x * (self.ah - x) * y * (self.bh - y) * (16.0 / (self.ah * self.bh) ** 2)
        return bump * N

    def sample(self, n_interior, n_boundary, method="lhs", seed=None):
        inner = self.geometry.sample_interior(n_interior, method, seed, self.dtype)
        edge = self.geometry.sample_boundary(n_boundary, method,
                                             None if seed is None else seed + 7919, self.dtype)
        return {"interior": inner, "boundary": edge}

    def residual(self, u, X):
        return biharmonic(u, X, method=self.method) * (1.0 / self.K) - self.load(X)

    def losses(self, u, batch):
        lap = Derivatives(u, batch["boundary"]).laplacian()
        return {"pde": mean_square(self.residual(u, batch["interior"])),
                "bc_moment": mean_square(lap * (1.0 / math.sqrt(self.K)))}

    def reference(self, X):
        return self.load(X)

    # physical units
    def to_physical(self, X, U):
        return X * self.L, U * self.W

    def exact_physical(self, X):
        """The Navier solution in physical units at physical points ``[N, 2]``."""
        return self.w_max * pf.sin((math.pi / self.a) * X[:, 0:1]) * pf.sin(
            (math.pi / self.b) * X[:, 1:2])

    def load_physical(self, X):
        """The load q in physical units."""
        return self.q0 * pf.sin((math.pi / self.a) * X[:, 0:1]) * pf.sin(
            (math.pi / self.b) * X[:, 1:2])
