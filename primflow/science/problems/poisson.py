"""2-D Poisson with a manufactured solution.

    -Δu = 2 pi^2 sin(pi x) sin(pi y)  on [0, 1]^2,   u = 0 on the boundary,
    u = sin(pi x) sin(pi y).

The boundary condition is built in: ``u = 16 x (1 - x) y (1 - y) N(x, y)`` (the bump is 1
at the centre), so the loss is the PDE residual alone, scaled by 2 pi^2 so that it is O(1).

Example:
    >>> import primflow as pf
    >>> from primflow.science.problems import Poisson2D
    >>> p = Poisson2D()
    >>> X = pf.to_tensor([[0.5, 0.5]], dtype="float64")
    >>> float(p.reference(X))
    1.0
"""

from __future__ import annotations

import math

import primflow as pf

from ..geometry import Rectangle
from ..operators import laplacian
from .base import Problem, Settings, mean_square, vanishing_on_unit_box


class Poisson2D(Problem):
    name = "poisson"
    title = "Poisson 2-D: -Δu = 2π² sin(πx) sin(πy) on [0,1]², u = 0 on the boundary"
    input_names = ("x", "y")
    dim = 2

    def __init__(self, dtype="float64"):
        super().__init__(dtype, geometry=Rectangle([0.0, 0.0], [1.0, 1.0]))

    def settings(self, quick=False):
        if quick:
            return Settings(hidden=16, depth=2, n_interior=256, adam_steps=200, lr=5e-3,
                            lr_final=1e-3, lbfgs_steps=100, validate_every=50, target=1e-2)
        return Settings(hidden=20, depth=3, n_interior=1024, adam_steps=1000, lr=5e-3,
                        lr_final=5e-4, lbfgs_steps=500, validate_every=100, target=1e-3)

    def source(self, X):
        return (2 * math.pi ** 2) * pf.sin(math.pi * X[:, 0:1]) * pf.sin(math.pi * X[:, 1:2])

    def transform(self, X, N):
        x, y = X[:, 0:1], X[:, 1:2]
        return vanishing_on_unit_box(x, y) * N

    def residual(self, u, X):
        """``(Δu + f) / (2 pi^2)`` at the points."""
        return (laplacian(u, X) + self.source(X)) * (1.0 / (2 * math.pi ** 2))

    def losses(self, u, batch):
        return {"pde": mean_square(self.residual(u, batch["interior"]))}

    def reference(self, X):
        return pf.sin(math.pi * X[:, 0:1]) * pf.sin(math.pi * X[:, 1:2])
