"""Euler–Bernoulli cantilever under a uniform load (non-dimensional).

    u'''' = -1 on [0, 1],   u(0) = u'(0) = 0 (clamped),   u''(1) = u'''(1) = 0 (free),
    u = -x^4/24 + x^3/6 - x^2/4.

The clamped end is built in: ``u = x^2 N(x)``; the free-end conditions are soft.

Example:
    >>> import primflow as pf
    >>> from primflow.science.problems import Beam
    >>> round(float(Beam().reference(pf.to_tensor([[1.0]], dtype="float64"))), 6)
    -0.125
"""

from __future__ import annotations

import primflow as pf

from ..geometry import Interval
from ..operators import Derivatives
from .base import Problem, Settings, mean_square


class Beam(Problem):
    name = "beam"
    title = "Euler–Bernoulli cantilever: u'''' = -1 on [0,1], u(0)=u'(0)=0, u''(1)=u'''(1)=0"
    input_names = ("x",)
    dim = 1

    def __init__(self, dtype="float64"):
        super().__init__(dtype)
        self._geometry = Interval(0.0, 1.0)

    def settings(self, quick=False):
        if quick:
            return Settings(hidden=16, depth=2, n_interior=64, adam_steps=300, lr=5e-3,
                            lr_final=1e-3, lbfgs_steps=100, validate_every=50, target=5e-3)
        return Settings(hidden=20, depth=3, n_interior=200, adam_steps=1000, lr=5e-3,
                        lr_final=5e-4, lbfgs_steps=500, validate_every=100, target=5e-4)

    def transform(self, X, N):
        return X * X * N

    def sample(self, n_interior, n_boundary, method="lhs", seed=None):
        return {"interior": self.geometry.sample_interior(n_interior, method, seed, self.dtype),
                "tip": pf.to_tensor([[1.0]], dtype=self.dtype)}

    def residual(self, u, X):
        return Derivatives(u, X)(0, 0, 0, 0) + 1.0

    def losses(self, u, batch):
        pde = self.residual(u, batch["interior"])
        T = Derivatives(u, batch["tip"])
        return {"pde": mean_square(pde), "moment": mean_square(T(0, 0)),
                "shear": mean_square(T(0, 0, 0))}

    def reference(self, X):
        x = X[:, 0:1]
        return -x ** 4 / 24.0 + x ** 3 / 6.0 - x ** 2 / 4.0

    def grid_counts(self):
        return (1001,)
