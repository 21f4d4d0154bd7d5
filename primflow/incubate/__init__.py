"""``pf.incubate``: Paddle's ``paddle.incubate`` names that primflow implements."""

from . import autograd

__all__ = ["autograd"]
