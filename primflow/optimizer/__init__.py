"""``pf.optimizer``: SGD, Momentum, Adam, AdamW, LBFGS and learning-rate schedules
(``pf.optimizer.lr``), with Paddle's calling conventions.

Example:
    >>> import primflow as pf
    >>> net = pf.nn.Linear(2, 1)
    >>> opt = pf.optimizer.Adam(learning_rate=1e-2, parameters=net.parameters())
    >>> x, y = pf.ones([8, 2]), pf.zeros([8, 1])
    >>> for _ in range(3):
    ...     loss = pf.nn.functional.mse_loss(net(x), y)
    ...     loss.backward(); opt.step(); opt.clear_grad()
"""

from . import lr, regularizer
from ._first_order import SGD, Adam, AdamW, Momentum
from ._lbfgs import LBFGS, strong_wolfe
from ._optimizer import L1Decay, L2Decay, Optimizer

__all__ = ["Adam", "AdamW", "L1Decay", "L2Decay", "LBFGS", "Momentum", "Optimizer", "SGD",
           "lr", "regularizer", "strong_wolfe"]
