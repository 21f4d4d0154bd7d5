"""Scientific machine learning on primflow: geometries and samplers, differential
operators of networks, PDE problems with reference solutions, and a PINN trainer.

Example:
    >>> import primflow as pf
    >>> from primflow import science
    >>> X = science.Rectangle([0, 0], [1, 1]).sample_interior(16, method="lhs", seed=0)
    >>> X.shape
    [16, 2]
"""

from . import geometry, networks, operators
from .geometry import (SAMPLING_METHODS, Box, Disk, Geometry, Interval, Polygon, Rectangle,
                       unit_samples)
from .operators import (Derivatives, biharmonic, directional, divergence, gradient,
                        laplacian, partial)
from . import problems
from .problems import (PROBLEMS, Beam, Burgers, Heat1D, Plate, Poisson2D, Problem, Settings,
                       make_problem, relative_l2)
from .trainer import Progress, Trainer, TrainingError, TrainResult
from . import plotting
from . import threads
