"""The primitive set: the only operators a backend runs and the only ones with rules.

One file per family; every primitive's rules live next to its definition. Call a primitive
as ``prims.sin(x)``; primitives do not broadcast, promote or take defaults (``primflow.ops``
does that). Every primitive a family file declares is exported here under its name (no
list to keep).
"""

from ..core.primitive import Primitive as _Primitive
from . import (collective as _collective, compare as _compare, complex as _complex,
               creation as _creation, decompositions as _decompositions,
               elementwise as _elementwise, fft as _fft, index as _index, linalg as _linalg,
               reduce as _reduce, shape as _shape)

for _module in (_creation, _elementwise, _compare, _reduce, _shape, _index, _linalg,
                _complex, _fft, _decompositions, _collective):
    globals().update({name: value for name, value in vars(_module).items()
                      if isinstance(value, _Primitive) and not name.startswith("_")})
del _module


def __getattr__(name):
    """``prims.<name>`` of a primitive declared outside these family files (after primflow
    was imported), as ``pf.<name>`` finds its public op.

    Example:
        >>> import primflow.prims as prims
        >>> prims.__getattr__("exp").name
        'exp'
    """
    from ..core.primitive import get_primitive  # noqa: PLC0415

    found = get_primitive(name, None)
    if found is None:
        raise AttributeError(f"module 'primflow.prims' has no attribute {name!r}")
    return found

# Internal API for the transforms (not primitives): vmap's batch-axis moves.
from ._batching import move_axis, with_batch_front  # noqa: E402
