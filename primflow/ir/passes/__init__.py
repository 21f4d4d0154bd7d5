"""Program passes, one per file. Each takes a ``Function``, edits it in place and returns it
(so passes chain); ``run_pipeline`` applies the default sequence to a fixed point.

* ``dce``: drops operations whose results nothing uses,
* ``cse``: merges operations that compute the same thing,
* ``fold_constants``: evaluates operations whose operands are all constants,
* ``simplify``: the algebraic rewrite rules of ``primflow.ir.rewrite``,
* ``fuse``: groups elementwise/broadcast chains and reductions with their producers
  (an analysis for the compiler; the program is unchanged),
* ``plan_memory``: assigns reusable buffers to the values the generated code computes,
* ``recompute_broadcasts``: copies cheap broadcast products into each fused consumer,
* ``batch_axes`` / ``block_program``: row blocking of programs whose points are
  independent.
"""

from .cse import cse as cse
from .dce import dce as dce
from .fold import fold_constants as fold_constants
from .fuse import FusionGroup as FusionGroup
from .fuse import fuse as fuse
from .memory import MemoryPlan as MemoryPlan
from .memory import plan_memory as plan_memory
from .blocking import batch_axes as batch_axes
from .blocking import block_program as block_program
from .pipeline import run_pipeline as run_pipeline
from .recompute import recompute_broadcasts as recompute_broadcasts
from .simplify import simplify as simplify
