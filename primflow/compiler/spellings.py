"""The code generators' spellings of the elementwise primitives, read from the declarations
(``Lowering``, ``core/lowering.py``) instead of tables kept here: a primitive declared with a
``c=`` form is fused into CuPy's CUDA kernels, one with a ``numba=`` form into numba's loop
kernels and (when it is not transcendental) numba's fused elementwise kernels. (Also
``tuple_source``, the generated source of a tuple of names.)

Example:
    >>> c_form("tanh"), numba_form("neg"), fused_numba_form("neg"), fused_numba_form("exp")
    ('tanh({0})', '(-{0})', '-{0}', None)
"""

from __future__ import annotations

from ..core.primitive import get_primitive

# primitives every code generator writes by code of its own (parameters, dtypes, branches)
BY_CODE = frozenset({"select", "integer_pow", "convert_element_type"})


def lowering_of(prim):
    """The declared ``Lowering`` of the primitive named ``prim`` (None for unknown names)."""
    found = get_primitive(prim, None)
    return None if found is None else found.lowering


def c_form(prim):
    """The CUDA C expression of ``prim`` (CuPy's fused kernels), or None."""
    return getattr(lowering_of(prim), "c", None)


def numba_form(prim):
    """The scalar expression of ``prim`` in numba's loop kernels, or None."""
    return getattr(lowering_of(prim), "numba", None)


def fused_numba_form(prim):
    """The scalar expression of ``prim`` in numba's fused elementwise kernels, or None:
    transcendental primitives stay NumPy ufuncs between those kernels (numba without SVML
    computes them slower than NumPy's SIMD loops)."""
    found = get_primitive(prim, None)
    if found is None or found.family.transcendental:
        return None
    return found.lowering.numba_fused


def integer_safe(prim):
    """Whether ``prim``'s generated forms also hold for integer results (``/`` does not)."""
    return getattr(lowering_of(prim), "integers", True)  # (unknown names: no objection)


def tuple_source(names):
    """Generated source listing ``names`` as a tuple: a single name gets its trailing comma.

    Example:
        >>> tuple_source(["a0"]), tuple_source(["a0", "a1"])
        ('a0,', 'a0, a1')
    """
    return ", ".join(names) + ("," if len(names) == 1 else "")
