"""Reference PDE problems with exact or independently computed solutions.

``PROBLEMS`` maps the CLI names to the classes; ``make_problem(name, **options)`` builds one.
"""

from .base import Measurements, Model, Problem, Settings, mean_square, relative_l2
from .beam import Beam
from .burgers import Burgers, cole_hopf
from .heat import Heat1D
from .highdim import HighDimPDE
from .plate import Plate
from .plate_inverse import PlateInverse
from .poisson import Poisson2D

PROBLEMS = {"plate": Plate, "beam": Beam, "poisson": Poisson2D, "burgers": Burgers,
            "heat": Heat1D}
# high-dimensional and inverse problems
PROBLEMS["poisson-hd"] = HighDimPDE
PROBLEMS["allen-cahn-hd"] = lambda **options: HighDimPDE(equation="allen-cahn", **options)
PROBLEMS["plate-inverse"] = PlateInverse


def make_problem(name, **options):
    """The problem called ``name`` (one of ``PROBLEMS``), built with ``options``."""
    if name not in PROBLEMS:
        raise ValueError(f"unknown problem {name!r}; choose one of {', '.join(PROBLEMS)}")
    return PROBLEMS[name](**options)


__all__ = [
    "PROBLEMS",
    "Beam",
    "Burgers",
    "Heat1D",
    "HighDimPDE",
    "Measurements",
    "Model",
    "Plate",
    "PlateInverse",
    "Poisson2D",
    "Problem",
    "Settings",
    "cole_hopf",
    "make_problem",
    "mean_square",
    "relative_l2",
]
