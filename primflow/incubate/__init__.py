"""``pf.incubate``: Paddle's ``paddle.incubate`` names that primflow implements."""

from . import autograd, nn

__all__ = ["autograd", "nn"]
