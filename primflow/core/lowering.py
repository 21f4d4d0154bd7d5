"""What a primitive's declaration says below and above its rules: how each code generator and
backend spells it (``Lowering``) and the public op it becomes (``PublicOp``).

A primitive states these facts once, in its ``Primitive(...)`` declaration; the tables the
code generators (``compiler/cupy_codegen.py``, ``numba_codegen.py``, ``numba_loops``), the
backends (real-only and float32-computed kernels, NumPy ufuncs, array-API names) and the
tests read are derived from the registry, so a new elementwise primitive is fused into CUDA
and numba kernels, refused on complex inputs and exported as ``pf.<name>`` and
``Tensor.<name>`` without a second list to edit. ``tests/test_lowering_coverage.py`` walks
the registry and names any primitive a code generator or backend cannot lower.

Example:
    >>> from primflow.core.primitive import get_primitive
    >>> get_primitive("exp").lowering.c, get_primitive("maximum").lowering.real_only
    ('exp({0})', True)
"""

from __future__ import annotations

import functools


def _unwrapped(form):
    """``form`` without one pair of parentheses around all of it (``"(-{0})"`` -> ``"-{0}"``),
    for code that assigns every operation to a variable and needs no grouping."""
    if not (form.startswith("(") and form.endswith(")")):
        return form
    depth = 0
    for i, ch in enumerate(form):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and i < len(form) - 1:
            return form  # "(a) + (b)": the outer pair does not enclose everything
    return form[1:-1]


class Lowering:
    """How the code generators and backends spell a primitive, written in its declaration.

    Templates take the inputs as ``{0}``, ``{1}`` and the dtype's literal one as ``{one}``.

    * ``numpy``: the NumPy ufunc computing it, where its name differs from the primitive's
      (``"negative"`` for ``neg``); a ufunc of the primitive's own name needs nothing.
    * ``array_api``: the array-API standard's function where the names differ
      (``"negative"``), or ``build(xp) -> kernel``, a kernel written with the namespace's
      functions only (for functions the standard lacks).
    * ``c``: the CUDA C expression of CuPy's fused elementwise kernels
      (``compiler/cupy_codegen.py``).
    * ``numba``: the scalar expression of numba's loop kernels (``compiler/numba_loops``),
      parenthesised so that it nests; ``numba_fused``: the one of numba's fused elementwise
      kernels (``compiler/numba_codegen.py``) where it differs (Python's ``max`` is faster on
      scalars than ``np.maximum``); by default ``numba`` without its outer parentheses.
      Only non-transcendental primitives go into the fused kernels (the family says which).
    * ``real_only``: defined on real numbers only: complex inputs raise a clear error, in
      eager mode (the backend's kernel) and in traced code (``infer``) alike.
    * ``float32_compute``: narrow floats (bfloat16) are computed in float32 and rounded once
      (sums, products, special functions NumPy has no bfloat16 loop for).
    * ``integers``: whether the ``numba`` form is right for integer results too (``/`` is
      not integer division, so ``div`` says False).

    Example:
        >>> Lowering(c="exp({0})", numba="np.exp({0})").numba_fused
        'np.exp({0})'
        >>> Lowering(numba="(-{0})").numba_fused
        '-{0}'
    """

    __slots__ = ("numpy", "array_api", "c", "numba", "numba_fused", "real_only",
                 "float32_compute", "integers")

    def __init__(self, *, numpy=None, array_api=None, c=None, numba=None, numba_fused=None,
                 real_only=False, float32_compute=False, integers=True):
        self.numpy, self.array_api, self.c, self.numba = numpy, array_api, c, numba
        self.numba_fused = numba_fused if numba_fused is not None else (
            None if numba is None else _unwrapped(numba))
        self.real_only, self.float32_compute, self.integers = real_only, float32_compute, integers

    def __repr__(self):
        facts = {k: getattr(self, k) for k in self.__slots__
                 if getattr(self, k) not in (None, False) and k != "integers"}
        return f"Lowering({', '.join(f'{k}={v!r}' for k, v in facts.items())})"


NOWHERE = Lowering()  # a primitive that declares no spelling (non-elementwise ones)


class PublicOp:
    """The public op an elementwise primitive becomes: ``pf.<name>`` (its input converted to
    a floating tensor first when ``floating``), the Tensor method ``x.<name>()`` and the
    name in ``primflow.prims``. ``doc`` is the op's docstring, ``example`` a call (after
    ``import primflow as pf``) and ``result`` what it prints, run by the doctests.

    Example:
        >>> from primflow.core.primitive import get_primitive
        >>> get_primitive("logistic").public.name
        'sigmoid'
    """

    __slots__ = ("name", "doc", "example", "result", "floating")

    def __init__(self, doc, example, result, *, name=None, floating=True):
        self.name, self.doc, self.example, self.result = name, doc, example, result
        self.floating = floating


def real_only_infer(name, infer):
    """``infer`` of a primitive defined on real numbers only, refusing complex inputs (the
    message says what to apply it to instead).

    Example:
        >>> from primflow.core import dtypes
        >>> from primflow.core.primitive import Aval
        >>> real_only_infer("floor", lambda x: x)(Aval((2,), dtypes.complex64))
        Traceback (most recent call last):
        TypeError: floor is not defined for complex tensors (got complex64[2]); apply it to pf.real(x), pf.imag(x) or pf.abs(x)
    """

    @functools.wraps(infer)  # its signature stays the primitive's (docs/backend-contract.md)
    def checked(*avals, **params):
        for a in avals:
            if a.dtype.is_complex:
                raise TypeError(complex_refused(name, a.dtype.name, a.shape))
        return infer(*avals, **params)

    return checked


def complex_refused(name, dtype_name, shape):
    """The message of a real-only primitive given a complex tensor (traced or eager)."""
    return (f"{name} is not defined for complex tensors (got {dtype_name}{list(shape)}); "
            f"apply it to pf.real(x), pf.imag(x) or pf.abs(x)")
