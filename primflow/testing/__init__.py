"""Test support: the OpInfo table (``opinfo``), numerical derivative checkers
(``check_grads``) and the optional extras tests skip without (``extras``). Imported only
by tests; NumPy is all it needs (the references included).

Example:
    >>> import numpy as np, primflow as pf
    >>> from primflow.testing.check_grads import check_grads
    >>> check_grads(pf.tanh, [np.array([0.1, -0.4])], order=2)
"""

from . import check_grads, extras, opinfo

__all__ = ["check_grads", "extras", "opinfo"]
