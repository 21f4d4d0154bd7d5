"""``pf.regularizer`` (also ``pf.optimizer.regularizer``): weight-decay terms for an
optimizer's ``weight_decay`` or a ParamAttr's ``regularizer`` (Paddle's names).

Example:
    >>> import primflow as pf
    >>> net = pf.nn.Linear(2, 1)
    >>> opt = pf.optimizer.Momentum(0.1, parameters=net.parameters(),
    ...                             weight_decay=pf.regularizer.L2Decay(1e-4))
"""

from ._optimizer import L1Decay, L2Decay

__all__ = ["L1Decay", "L2Decay"]
