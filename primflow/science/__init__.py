"""Scientific machine learning on primflow: geometries and samplers, differential
operators of networks, PDE problems with reference solutions, and a PINN trainer.

* :mod:`~primflow.science.geometry` - Interval, Rectangle, Box, Disk, Polygon; uniform,
  Latin-hypercube and Sobol sampling of interiors and boundaries (with outward normals).
* :mod:`~primflow.science.operators` - gradient, divergence, laplacian, biharmonic, mixed
  partials of networks at a batch of points, by nested reverse mode, nested forward mode
  or (collapsed) Taylor mode; all differentiable in the network's parameters.
* :mod:`~primflow.science.problems` - Kirchhoff plate, Euler–Bernoulli beam, Poisson,
  Burgers (Cole–Hopf reference), heat (series), each with residuals, hard constraints,
  sampling and a reference.
* :mod:`~primflow.science.time_stepping` - RK4 integration inside ``pf.scan`` and a neural
  ODE trained through the integrator (compiled once, reverse mode by a reverse scan).
* :mod:`~primflow.science.trainer` - Adam then L-BFGS with validation, progress bars,
  checkpoints and resume; :mod:`~primflow.science.plotting` - PNG plots.

The ``primflow demo NAME`` command runs the problems end to end (see ``primflow.cli``).

Example:
    >>> import primflow as pf
    >>> from primflow import science
    >>> X = science.Rectangle([0, 0], [1, 1]).sample_interior(16, method="lhs", seed=0)
    >>> X.shape
    [16, 2]
"""

from . import geometry, networks, operators, plotting, problems, threads
from . import time_stepping  # RK4 in pf.scan, neural ODE
from .geometry import (
                       SAMPLING_METHODS,
                       Box,
                       Disk,
                       Geometry,
                       Interval,
                       Polygon,
                       Rectangle,
                       unit_samples,
)
from .operators import (
                       Derivatives,
                       biharmonic,
                       directional,
                       divergence,
                       gradient,
                       laplacian,
                       partial,
)
from .problems import (
                       PROBLEMS,
                       Beam,
                       Burgers,
                       Heat1D,
                       Plate,
                       Poisson2D,
                       Problem,
                       Settings,
                       make_problem,
                       relative_l2,
)
from .trainer import Progress, Trainer, TrainingError, TrainResult

__all__ = [
    "PROBLEMS", "SAMPLING_METHODS", "Beam", "Box", "Burgers", "Derivatives", "Disk",
    "Geometry", "Heat1D", "Interval", "Plate", "Poisson2D", "Polygon", "Problem", "Progress",
    "Rectangle", "Settings", "TrainResult", "Trainer", "TrainingError", "biharmonic",
    "directional", "divergence", "geometry", "gradient", "laplacian", "make_problem",
    "networks", "operators", "partial", "plotting", "problems", "relative_l2", "threads",
    "unit_samples",
]
