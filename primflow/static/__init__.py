"""Paddle's ``paddle.static`` names that primflow provides: ``pf.static.nn`` holds the
control-flow operations with Paddle's spellings (``cond``, ``while_loop``,
``switch_case``)."""

from . import nn as nn
