"""Operator learning: Fourier neural operators and the FNO paper's data sets.

* :mod:`~primflow.science.neural_operators.models` - :class:`FNO1D`, :class:`FNO2D` (on
  ``pf.nn.SpectralConv1D/2D``) with the paper's defaults, and the relative-L2 loss.
* :mod:`~primflow.science.neural_operators.data` - generators of the paper's 1-D Burgers
  and 2-D Darcy data (Gaussian random fields, a spectral Burgers solver, a finite-difference
  Darcy solver), seeded and cached as ``.npz`` files.
* :mod:`~primflow.science.neural_operators.training` - Adam with step decay on mini-batches
  (:func:`train_operator`), the paper's recipe.

``primflow demo fno-burgers`` and ``primflow demo fno-darcy`` run them end to end.

Example:
    >>> import primflow as pf
    >>> from primflow.science.neural_operators import FNO2D
    >>> FNO2D(modes1=2, modes2=2, width=4, padding=0)(pf.ones([1, 8, 8])).shape
    [1, 8, 8]
"""

from . import data, models, training
from .data import burgers_dataset, darcy_dataset
from .models import FNO1D, FNO2D, relative_l2_loss
from .training import OperatorResult, OperatorSettings, UnitGaussianNormalizer, train_operator

__all__ = ["FNO1D", "FNO2D", "OperatorResult", "OperatorSettings", "UnitGaussianNormalizer",
           "burgers_dataset", "darcy_dataset", "data", "models", "relative_l2_loss",
           "train_operator", "training"]
