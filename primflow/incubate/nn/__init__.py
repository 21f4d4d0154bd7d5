"""``pf.incubate.nn``: Paddle's ``paddle.incubate.nn`` names that primflow implements (its
``functional``: ``fused_rms_norm``)."""

from . import functional

__all__ = ["functional"]
