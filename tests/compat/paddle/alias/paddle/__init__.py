"""``paddle`` for the compat suite: primflow under Paddle's name, nothing else.

Only re-exports primflow's public names (every attribute of ``primflow`` not starting with
an underscore, whatever ``primflow.__all__`` lists) and registers primflow's subpackages
under ``paddle.*`` so ``import paddle.nn.functional as F`` works. Behaviour that Paddle's
tests need is implemented in primflow itself, never here.
"""

import sys

import primflow

globals().update({name: getattr(primflow, name) for name in dir(primflow)
                  if not name.startswith("_")})

for _name in ("autograd", "device", "incubate", "incubate.autograd", "io", "nn",
              "nn.functional", "optimizer"):
    sys.modules[f"{__name__}.{_name}"] = sys.modules[f"primflow.{_name}"]
__version__ = primflow.__version__
