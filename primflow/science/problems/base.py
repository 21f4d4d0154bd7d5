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
from primflow import prims
from primflow.core.dtypes import as_dtype

from ..geometry import _mix


@dataclasses.dataclass
class Settings:
    """Training settings of a problem (``Problem.settings(quick)``; the CLI overrides some).

    Attributes:
        hidden, depth, activation: the MLP (``depth`` hidden layers of ``hidden`` units).
        n_interior, n_boundary: collocation points (boundary: per soft-boundary set).
        sampling: ``"uniform"``, ``"lhs"`` or ``"sobol"``.
        adam_steps, lr, lr_final: Adam phase; the learning rate decays exponentially from
            ``lr`` to ``lr_final``.
        input_lr_scale, output_lr_scale: multipliers of the Adam learning rate for the
            first and the last layer of the network (1: one rate for all). Adam moves every
            weight by about the rate, so a larger first-layer rate speeds up learning the
            features, and a smaller output rate damps the noise that moving many output
            weights at once adds to the function (see ``problems.highdim``).
        lbfgs_steps, lbfgs_chunk: L-BFGS iterations in all, and per ``step(closure)`` call
            (progress, validation and checkpoints happen between calls).
        resample_every: draw fresh collocation points every this many Adam steps (0: fixed).
        rar_points, rar_rounds, rar_candidates: residual-based adaptive refinement in the
            L-BFGS phase (``rar_rounds`` stages, each adding the ``rar_points`` candidates of
            largest residual among ``rar_candidates``; 0 points: off).
        lbfgs_points: interior points of the L-BFGS phase's fixed set (0: ``n_interior``),
            e.g. a larger set after Adam on small resampled batches.
        validate_every: Adam steps between validation errors.
        weights: loss-term weights (missing terms weigh 1).
        target: the relative L2 error this configuration is tuned to reach (documentation).
        amp: ``"float16"`` or ``"bfloat16"``: the Adam phase runs under
            ``pf.amp.auto_cast(dtype=amp)`` (float16 with a ``pf.amp.GradScaler``); the
            L-BFGS phase stays in the network's dtype. None (default): no mixed precision.
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
    input_lr_scale: float = 1.0
    output_lr_scale: float = 1.0
    lbfgs_steps: int = 500
    lbfgs_chunk: int = 25
    resample_every: int = 0
    rar_points: int = 0
    rar_rounds: int = 0
    rar_candidates: int = 10000
    lbfgs_points: int = 0
    validate_every: int = 100
    weights: dict = dataclasses.field(default_factory=dict)
    target: float | None = None
    amp: str | None = None

    def replace(self, **changes):
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


class Problem:
    """Base class of the reference problems (see the module docstring)."""

    name = "problem"
    title = "problem"
    input_names = ("x",)
    output_name = "u"
    dim = 1

    def __init__(self, dtype="float64", geometry=None):
        self.dtype = as_dtype(dtype)
        self._validation = None
        self._geometry = geometry

    # ---- configuration --------------------------------------------------------------------
    def settings(self, quick=False) -> Settings:
        return Settings()

    def describe(self):
        """One line naming the problem and its configuration."""
        return self.title

    # ---- the network's inputs and outputs -------------------------------------------------
    @property
    def geometry(self):
        """The domain, in the internal coordinates the problem trains in (given to
        ``Problem.__init__`` or set by the subclass)."""
        if self._geometry is None:
            raise NotImplementedError(f"{type(self).__name__} gives no geometry: pass "
                                      f"geometry= to Problem.__init__")
        return self._geometry

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

    def model(self, net):
        """The solution model as a :class:`Model` (what the trainer passes to ``losses``)."""
        return Model(self, net)

    # ---- inverse problems: trainable PDE coefficients and measurements --------------------
    #: :class:`Measurements` the model must match (the trainer adds a ``"data"`` loss term)
    measurements = None

    def pde_parameters(self):
        """The PDE's trainable coefficients: a dict name -> ``pf.nn.Parameter`` that the
        trainer optimizes together with the network (empty for a forward problem)."""
        return {}

    def parameter_values(self):
        """name -> float: the PDE's trainable coefficients in physical units (reports)."""
        return {}

    def reset_parameters(self):
        """Puts the trainable PDE coefficients back to their initial guesses (the trainer
        calls it before training)."""

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


class Measurements:
    """Point measurements ``values ≈ u(points)`` for inverse problems and data terms.

    The loss term is ``mean((u(points) - values)^2) / mean(values^2)`` (relative, so O(1)
    whatever the units). :meth:`from_reference` makes synthetic ones from a problem's
    reference solution with Gaussian noise of standard deviation ``noise`` times the RMS
    of the clean values (``noise=0.01``: "1 % noise").

    Example:
        >>> import primflow as pf
        >>> from primflow.science.problems import Measurements, Poisson2D
        >>> m = Measurements.from_reference(Poisson2D(), 50, noise=0.01, seed=0)
        >>> m.points.shape, m.values.shape
        ([50, 2], [50, 1])
        >>> round(float(m.loss(Poisson2D().reference)), 4)  # the noise alone: about 1e-4
        0.0001
    """

    def __init__(self, points, values):
        points = points if isinstance(points, pf.Tensor) else pf.to_tensor(points)
        values = values if isinstance(values, pf.Tensor) else pf.to_tensor(values,
                                                                           dtype=points.dtype)
        if points.ndim != 2:
            raise ValueError(f"measurement points must be [N, d], got shape {points.shape}")
        values = pf.reshape(values, [-1, 1])
        if values.shape[0] != points.shape[0]:
            raise ValueError(f"{values.shape[0]} measured values for {points.shape[0]} points")
        if points.shape[0] == 0:
            raise ValueError("measurements need at least one point")
        self.points, self.values = points.detach(), values.astype(points.dtype).detach()
        self.norm = float((self.values * self.values).mean())
        if not self.norm > 0:
            raise ValueError("all measured values are zero; a relative data loss needs some "
                             "non-zero values")

    @classmethod
    def from_reference(cls, problem, n, noise=0.0, seed=0, method="uniform"):
        """``n`` interior points of ``problem`` with its reference values plus noise."""
        if not noise >= 0:
            raise ValueError(f"noise must be non-negative, got {noise!r}")
        X = problem.geometry.sample_interior(n, method, seed, problem.dtype)
        with pf.no_grad():
            U = pf.reshape(problem.reference(X), [-1, 1])
        if noise:
            rms = math.sqrt(float((U * U).mean()))
            draws = prims.random_normal(shape=(n, 1), dtype=U.dtype, key=_mix(seed, 7919))
            U = U + draws * (noise * rms)
        return cls(X, U)

    def __len__(self):
        return self.points.shape[0]

    def loss(self, u):
        """The relative mean-square misfit of the model ``u`` (a function of points)."""
        diff = pf.reshape(u(self.points), [-1, 1]) - self.values
        return (diff * diff).mean() * (1.0 / self.norm)


class Model:
    """The solution model ``u`` of a problem and a network: ``model(X)`` is
    ``problem.u(net, X)``; ``model.raw(X)`` is the network's output before the
    hard-constraint transform (losses that differentiate the transform by hand use it).

    Example:
        >>> import primflow as pf
        >>> from primflow.science.problems import Poisson2D
        >>> from primflow.science.networks import make_mlp
        >>> p = Poisson2D()
        >>> u = p.model(make_mlp(2, 1, hidden=4, depth=1))
        >>> X = pf.to_tensor([[0.0, 0.5]], dtype="float64")
        >>> abs(float(u(X))), u.raw(X).shape  # u = 0 on the boundary x = 0
        (0.0, [1, 1])
    """

    def __init__(self, problem, net):
        self.problem = problem
        self.net = net

    def __call__(self, X):
        return self.problem.u(self.net, X)

    def raw(self, X):
        return self.net(self.problem.normalize(X))


def relative_l2(pred, ref):
    """``||pred - ref||_2 / ||ref||_2`` as a float."""
    diff = pf.reshape(pred, [-1]) - pf.reshape(ref, [-1])
    num = math.sqrt(float((diff * diff).sum()))
    den = math.sqrt(float((ref * ref).sum()))
    return num / den if den > 0 else num


def mean_square(r):
    """``mean(r^2)``."""
    return (r * r).mean()


def vanishing_on_unit_box(*coords):
    """The bump ``prod 4 c (1 - c)`` over the coordinate columns ``coords`` of ``[0, 1]^k``:
    zero on the box's boundary, 1 at its centre. Multiplying the network output by it builds
    homogeneous Dirichlet conditions into ``u`` (the problems' ``transform``).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([[0.0], [0.5]], dtype="float64")
        >>> vanishing_on_unit_box(x, x).numpy().ravel().tolist()
        [0.0, 1.0]
    """
    out = None
    for c in coords:
        factor = 4.0 * c * (1.0 - c)
        out = factor if out is None else out * factor
    return out
