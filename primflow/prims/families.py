"""The primitive families: what kind of operation each primitive is.

A family carries the facts that the compiler and the backends read (elementwise?
transcendental? a view? a fusible reduction?) and the family's default batching rule, so
none of them is kept in a separate list of names: ``ir/passes/fuse.py`` and the code
generators ask ``prim.family``. A new primitive picks its family here (or a new family is
added here) and passes it to ``Primitive(..., family=...)``.

Example:
    >>> from primflow.prims import families
    >>> from primflow.core.primitive import get_primitive
    >>> get_primitive("tanh").family is families.ELEMENTWISE_TRANSCENDENTAL
    True
"""

from __future__ import annotations

from ..core.primitive import Family
from ._batching import axes_batch, axis_batch, elementwise_batch, front_batch
from .sharding import elementwise_from_linearity as _elementwise_shard

# elementwise math computed inline by generated code (negation, roots, rounding, powers)
ELEMENTWISE_UNARY = Family("elementwise", elementwise=True, batch=elementwise_batch,
                           shard=_elementwise_shard)
# elementwise math computed by a libm call (exp, log, trigonometric, pow, atan2)
ELEMENTWISE_TRANSCENDENTAL = Family("elementwise", transcendental=True,
                                    batch=elementwise_batch, shard=_elementwise_shard)
# arithmetic on two same-shaped inputs
ELEMENTWISE_BINARY = Family("elementwise", elementwise=True, batch=elementwise_batch,
                            shard=_elementwise_shard)
# comparisons, logic, select and casts (elementwise, mostly bool results)
COMPARE = Family("compare", elementwise=True, batch=elementwise_batch)
# reductions over static ``axes`` that fuse with their producers
REDUCE = Family("reduce", reduction=True, batch=axes_batch)
# along one ``axis`` (argmax, argmin, cumsum): not fused
AXIS = Family("axis", batch=axis_batch)
# the same elements seen through another shape: views in generated code
VIEW = Family("view", view=True)
# shape changes that copy (pad, concatenate)
SHAPE = Family("shape")
# integer-indexed reads and writes (gather, scatter_add)
INDEX = Family("index")
# contractions (dot_general)
DOT = Family("dot")
# tensors from parameters alone (full, iota)
CREATION = Family("creation", nullary=True)
# random draws, pure functions of a key
RANDOM = Family("random", nullary=True)
# ---- scientific numerics ----
# complex parts (real, imag, conj, complex): elementwise batching, kernels of their own (not
# fused by generated code)
COMPLEX = Family("complex", batch=elementwise_batch, float32_compute=True)
# discrete Fourier transforms over static axes
FFT = Family("fft", float32_compute=True)
# matrix decompositions and solves (LAPACK kernels) over the last two dims
DECOMPOSITION = Family("decomposition", batch=front_batch, float32_compute=True)
# ---- distributed ----
# communication among the processes of a group (all_reduce, all_gather...): kernels of their
# own, never fused, never reordered across one another
COLLECTIVE = Family("collective")
