"""The Problem interface shared by the reference PDE problems.

A problem owns

* its domain (``geometry``, in the internal, non-dimensional coordinates it trains in),
* the map of the network's inputs to ``[-1, 1]^d`` (``normalize``) and a hard-constraint
  output transform (``transform``) that builds boundary/initial conditions into ``u``,
* the collocation sets (``sample``) and the loss terms (``losses``: PDE residual, soft
  boundary conditions), each a mean square,
* an exact or independently computed reference (``reference``) and a validation grid,
* default training settings (``settings(quick)``) tuned to reach the stated targets.

Example:
    >>> import primflow as pf
    >>> from primflow.science.problems import Poisson2D
    >>> p = Poisson2D()
    >>> batch = p.sample(64, 16, seed=0)
    >>> sorted(batch)
    ['interior']
"""

from __future__ import annotations

import dataclasses
import math

import primflow as pf
from primflow.core.dtypes import as_dtype


@dataclasses.dataclass
class Settings:
    """Training settings of a problem (``Problem.settings(quick)``; the CLI overrides some).

    Attributes:
        hidden, depth, activation: the MLP (``depth`` hidden layers of ``hidden`` units).
        n_interior, n_boundary: collocation points (boundary: per soft-boundary set).
        sampling: ``"uniform"``, ``"lhs"`` or ``"sobol"``.
        adam_steps, lr, lr_final: Adam phase; the learning rate decays exponentially from
            ``lr`` to ``lr_final``.
        lbfgs_steps, lbfgs_chunk: L-BFGS iterations in all, and per ``step(closure)`` call
            (progress, validation and checkpoints happen between calls).
        resample_every: draw fresh collocation points every this many Adam steps (0: fixed).
        rar_points, rar_rounds, rar_candidates: residual-based adaptive refinement in the
            L-BFGS phase (``rar_rounds`` stages, each adding the ``rar_points`` candidates of
            largest residual among ``rar_candidates``; 0 points: off).
        validate_every: Adam steps between validation errors.
        weights: loss-term weights (missing terms weigh 1).
        target: the relative L2 error this configuration is tuned to reach (documentation).
    """

    hidden: int = 32
    depth: int = 3
    activation: str = "tanh"
    n_interior: int = 1000
    n_boundary: int = 100
    sampling: str = "lhs"
    adam_steps: int = 1000
    lr: float = 1e-3
    lr_final: float = 1e-4
    lbfgs_steps: int = 500
    lbfgs_chunk: int = 25
    resample_every: int = 0
    rar_points: int = 0
    rar_rounds: int = 0
    rar_candidates: int = 10000
    validate_every: int = 100
    weights: dict = dataclasses.field(default_factory=dict)
    target: float | None = None

    def replace(self, **changes):
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


class Problem:
    """Base class of the reference problems (see the module docstring)."""

    name = "problem"
    title = "problem"
    input_names = ("x",)
    output_name = "u"
    dim = 1

    def __init__(self, dtype="float64"):
        self.dtype = as_dtype(dtype)
        self._validation = None

    # ---- configuration --------------------------------------------------------------------
    def settings(self, quick=False) -> Settings:
        return Settings()

    def describe(self):
        """One line naming the problem and its configuration."""
        return self.title

    # ---- the network's inputs and outputs -------------------------------------------------
    @property
    def geometry(self):
        raise NotImplementedError

    def normalize(self, X):
        """Internal coordinates -> ``[-1, 1]^d`` (the network's input)."""
        lo, hi = self.geometry.bounds()
        lo_t = pf.to_tensor(lo, dtype=X.dtype)
        scale = pf.to_tensor([2.0 / (b - a) for a, b in zip(lo, hi)], dtype=X.dtype)
        return (X - lo_t) * scale - 1.0

    def transform(self, X, N):
        """The hard-constraint output transform: ``u`` from the network output ``N``."""
        return N

    def u(self, net, X):
        """The solution model: ``transform(X, net(normalize(X)))``."""
        return self.transform(X, net(self.normalize(X)))

    # ---- training data and losses ---------------------------------------------------------
    def sample(self, n_interior, n_boundary, method="lhs", seed=None):
        """A dict of named point sets in internal coordinates."""
        return {"interior": self.geometry.sample_interior(n_interior, method, seed,
                                                          self.dtype)}

    def losses(self, u, batch):
        """A dict of named scalar loss terms for the model ``u`` (a function of points)."""
        raise NotImplementedError

    def residual(self, u, X):
        """The (scaled) PDE residual of the model ``u`` at interior points ``X``."""
        raise NotImplementedError

    # ---- reference and validation ---------------------------------------------------------
    def reference(self, X):
        """The reference solution at internal points ``X`` (``[N, 1]``)."""
        raise NotImplementedError

    def grid_counts(self):
        """Points per axis of the validation grid."""
        return (101,) * self.dim

    def validation_set(self):
        """``(X, U_ref, counts)``: the validation grid and the reference on it (cached)."""
        if self._validation is None:
            counts = self.grid_counts()
            X = self.geometry.grid(*counts, dtype=self.dtype)
            with pf.no_grad():
                U = self.reference(X)
            self._validation = (X, U, counts)
        return self._validation

    def predict(self, net, X, chunk=8192):
        """The model's values at ``X`` without recording a graph."""
        outs = []
        with pf.no_grad():
            for start in range(0, X.shape[0], chunk):
                outs.append(self.u(net, X[start:start + chunk]))
        return pf.concat(outs, axis=0) if len(outs) > 1 else outs[0]

    def relative_l2(self, net):
        """``||u - u_ref|| / ||u_ref||`` on the validation grid."""
        X, U, _ = self.validation_set()
        P = self.predict(net, X)
        return relative_l2(P, U)

    # ---- physical units (for reports and plots) -------------------------------------------
    def to_physical(self, X, U):
        """Internal points and values -> physical ones (identity unless scaled)."""
        return X, U

    @property
    def physical_names(self):
        return self.input_names, self.output_name


def relative_l2(pred, ref):
    """``||pred - ref||_2 / ||ref||_2`` as a float."""
    diff = pf.reshape(pred, [-1]) - pf.reshape(ref, [-1])
    num = math.sqrt(float((diff * diff).sum()))
    den = math.sqrt(float((ref * ref).sum()))
    return num / den if den > 0 else num


def mean_square(r):
    """``mean(r^2)``."""
    return (r * r).mean()
