"""``paddle`` for the compat suite: primflow under Paddle's name, nothing else.

Only re-exports primflow's names (and registers primflow's subpackages under ``paddle.*``
so ``import paddle.nn.functional as F`` works). Behaviour that Paddle's tests need is
implemented in primflow itself, never here.
"""

import sys

import primflow
from primflow import *  # noqa: F401,F403
from primflow import (Tensor, autograd, device, incubate, nn, optimizer)  # noqa: F401
from primflow import abs, all, any, max, min, pow, round, sum  # noqa: F401,A004
from primflow import bool  # noqa: F401,A004

for _name in ("autograd", "device", "incubate", "incubate.autograd", "nn", "nn.functional",
              "optimizer"):
    sys.modules[f"{__name__}.{_name}"] = sys.modules[f"primflow.{_name}"]
__version__ = primflow.__version__
