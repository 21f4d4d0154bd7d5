"""Test support: the OpInfo table (``opinfo``) and numerical derivative checkers
(``check_grads``). Imported only by tests; the references need SciPy.

Example:
    >>> import numpy as np, primflow as pf
    >>> from primflow.testing.check_grads import check_grads
    >>> check_grads(pf.tanh, [np.array([0.1, -0.4])], order=2)
"""

from . import check_grads, opinfo

__all__ = ["check_grads", "opinfo"]
