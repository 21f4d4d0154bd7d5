"""``mindspore.numpy`` over primflow: the NumPy-like functions (``mnp.tanh`` is
``pf.tanh``).

Example:
    >>> import primflow as pf
    >>> import primflow.compat.mindspore.numpy as mnp
    >>> float(mnp.tanh(pf.to_tensor(0.0)))
    0.0
"""

from ... import ops as _pf

(abs, arange, cos, cosh, exp, expm1, linspace, log, log1p, matmul, maximum, mean,  # noqa: A001
 minimum, ones, power, sin, sinh, sqrt, square, sum, tan, tanh, where, zeros) = (
    _pf.abs, _pf.arange, _pf.cos, _pf.cosh, _pf.exp, _pf.expm1, _pf.linspace, _pf.log,
    _pf.log1p, _pf.matmul, _pf.maximum, _pf.mean, _pf.minimum, _pf.ones, _pf.pow, _pf.sin,
    _pf.sinh, _pf.sqrt, _pf.square, _pf.sum, _pf.tan, _pf.tanh, _pf.where, _pf.zeros)

__all__ = ["abs", "arange", "cos", "cosh", "exp", "expm1", "linspace", "log", "log1p",
           "matmul", "maximum", "mean", "minimum", "ones", "power", "sin", "sinh", "sqrt",
           "square", "sum", "tan", "tanh", "where", "zeros"]
