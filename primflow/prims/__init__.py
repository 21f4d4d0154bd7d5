"""The primitive set: the only operators a backend runs and the only ones with rules.

One file per family; every primitive's rules live next to its definition. Call a primitive
as ``prims.sin(x)``; primitives do not broadcast, promote or take defaults (``primflow.ops``
does that).
"""

from .creation import full, iota, random_normal, random_uniform
from .elementwise import (abs, add, atan2, ceil, cos, div, erf, exp, expm1, floor,
                          integer_pow, log, log1p, logistic, maximum, minimum, mul, neg, pow,
                          round, rsqrt, sign, sin, sqrt, sub, tanh)
from .compare import (convert_element_type, eq, ge, gt, le, logical_and, logical_not,
                      logical_or, lt, ne, select)
from .reduce import argmax, argmin, cumsum, reduce_max, reduce_min, reduce_sum
from .shape import broadcast_in_dim, concatenate, pad, reshape, slice, transpose
from .index import gather, scatter_add
from .linalg import dot_general
# scientific numerics (issue 18): complex parts and FFT
from .complex import complex, conj, imag, real
from .fft import fft
from .decompositions import (cholesky, eigh, lu, lu_permutation, lu_pivots, qr, slogdet,
                             solve, svd, triangular_solve)

# Internal API for the transforms (not primitives): vmap's batch-axis moves.
from ._batching import move_axis, with_batch_front  # noqa: E402
# distributed (issue 15): collectives over a group of processes
from .collective import all_gather, all_reduce, all_to_all, reduce_scatter  # noqa: E402
