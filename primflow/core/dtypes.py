"""Data types: the dtypes primflow supports, promotion rules and the default float dtype.

Complex dtypes (complex64, complex128) count as floating (``is_floating``: they carry
gradients); ``is_complex`` tells them apart and ``is_real`` is true for every other dtype.

DTypes are plain Python objects; the backend maps them to its native types. A DType compares
equal to its name, so ``x.dtype == "float32"`` and ``x.dtype == pf.float32`` both work.
"""

from __future__ import annotations


class DType:
    """A tensor element type.

    Example:
        >>> import primflow as pf
        >>> pf.float32 == "float32", pf.float32.is_floating
        (True, True)
    """

    __slots__ = ("name", "kind", "itemsize", "_rank")

    def __init__(self, name: str, kind: str, itemsize: int, rank: int):
        self.name = name
        self.kind = kind  # "b" bool, "i" signed integer, "f" real floating, "c" complex
        self.itemsize = itemsize
        self._rank = rank  # position in the promotion lattice within a kind

    @property
    def is_floating(self) -> bool:
        """Real or complex floating point: the dtypes that carry gradients."""
        return self.kind == "f" or self.kind == "c"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_real(self) -> bool:
        """Not complex (bool, integer or real floating)."""
        return self.kind != "c"

    @property
    def is_integer(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        if isinstance(other, str):
            return self.name == other
        name = getattr(other, "name", None)  # numpy dtypes and scalar types
        if name is None and isinstance(other, type):
            name = other.__name__
        return name == self.name

    # Identity hash (fast: dtypes key kernel caches on the hot path). A DType equals its
    # name, but dict lookups must use DType objects, not strings.
    __hash__ = object.__hash__

    def __repr__(self):
        return f"primflow.{self.name}"

    def __str__(self):
        return self.name


bool_ = DType("bool", "b", 1, 0)
int32 = DType("int32", "i", 4, 1)
int64 = DType("int64", "i", 8, 2)
float32 = DType("float32", "f", 4, 3)
float64 = DType("float64", "f", 8, 4)
complex64 = DType("complex64", "c", 8, 5)
complex128 = DType("complex128", "c", 16, 6)

ALL_DTYPES = (bool_, int32, int64, float32, float64, complex64, complex128)

# Paddle compatibility: smaller storage dtypes. They hold data and convert; the
# ranks place them in the promotion lattice (uint8 < int8 < int16 < int32, float16 <
# float32). uint8 counts as an integer kind; mixed uint8/int8 promotes to int16.
uint8 = DType("uint8", "i", 1, 0.25)
int8 = DType("int8", "i", 1, 0.5)
int16 = DType("int16", "i", 2, 0.75)
float16 = DType("float16", "f", 2, 2.5)
ALL_DTYPES += (uint8, int8, int16, float16)
# bfloat16: a storage dtype (float32's exponent range, 8 bits of precision);
# backends hold it natively where they can (NumPy through the optional ml_dtypes package)
# and compute in float32 where they lack a kernel for it. float16 meeting bfloat16 gives
# float32 (neither holds the other), as in PyTorch and JAX.
bfloat16 = DType("bfloat16", "f", 2, 2.75)
ALL_DTYPES += (bfloat16,)

BY_NAME = {d.name: d for d in ALL_DTYPES}
BY_NAME.update({"float": float64, "int": int64, "bool_": bool_, "double": float64,
                 "complex": complex128, "cfloat": complex64, "cdouble": complex128})


def complex_of(d: DType) -> DType:
    """The complex dtype with ``d``'s precision (float32 -> complex64, else complex128).

    Example:
        >>> import primflow as pf
        >>> from primflow.core.dtypes import complex_of
        >>> complex_of(pf.float32)
        primflow.complex64
    """
    if d.is_complex:
        return d
    return complex64 if d in (float32, float16, bfloat16) else complex128


def real_of(d: DType) -> DType:
    """The real dtype of a complex dtype's parts (complex64 -> float32); others unchanged.

    Example:
        >>> import primflow as pf
        >>> from primflow.core.dtypes import real_of
        >>> real_of(pf.complex128)
        primflow.float64
    """
    if d is complex64:
        return float32
    if d is complex128:
        return float64
    return d

_default_float = float32


def get_default_dtype() -> str:
    """Returns the name of the default floating dtype (``"float32"`` unless changed).

    Example:
        >>> import primflow as pf
        >>> pf.get_default_dtype()
        'float32'
    """
    return _default_float.name


def set_default_dtype(dtype) -> None:
    """Sets the dtype that floating Python data and new float tensors get.

    Example:
        >>> import primflow as pf
        >>> pf.set_default_dtype("float64"); pf.ones([2]).dtype
        primflow.float64
        >>> pf.set_default_dtype("float32")
    """
    global _default_float
    d = as_dtype(dtype)
    if d.kind != "f":
        raise TypeError(
            f"set_default_dtype expects a floating dtype (float32 or float64), got {d.name}")
    _default_float = d


def default_float() -> DType:
    return _default_float


def as_dtype(dtype) -> DType:
    """Converts a name, DType, numpy dtype or Python type into a primflow DType.

    Raises a TypeError naming the supported dtypes for anything else (float16, complex, ...).
    """
    if isinstance(dtype, DType):
        return dtype
    if dtype is float:
        return _default_float
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if name is None and isinstance(dtype, type):
        name = dtype.__name__
    found = BY_NAME.get(name) if isinstance(name, str) else None
    if found is None:
        raise TypeError(
            f"unsupported dtype {dtype!r}; primflow supports "
            f"{', '.join(d.name for d in ALL_DTYPES)}. Cast your data first, e.g. "
            f"pf.to_tensor(x, dtype='float32').")
    return found


def promote_types(a: DType, b: DType) -> DType:
    """NumPy's promotion between two tensor dtypes.

    bool < int32 < int64; float32 < float64; an integer meeting float32 gives float64, as in
    NumPy (int32 and int64 do not fit exactly into float32).

    Example:
        >>> import primflow as pf
        >>> from primflow.core.dtypes import promote_types
        >>> promote_types(pf.int32, pf.float32)
        primflow.float64
    """
    if a is b:
        return a
    if a.is_complex or b.is_complex:  # the complex dtype wide enough for both
        wide = promote_types(real_of(a), real_of(b))
        return complex_of(wide if wide.is_floating else float64)
    if {a, b} == {uint8, int8}:
        return int16  # NumPy: the smallest signed type holding both ranges
    if {a, b} == {float16, bfloat16}:
        return float32
    if a.kind == b.kind or a.is_bool or b.is_bool:
        return a if a._rank >= b._rank else b
    # one integer, one floating: NumPy's result, the smallest float that holds the integer
    f, i = (a, b) if a.is_floating else (b, a)
    if f is float16 or f is bfloat16:
        return f if i.itemsize == 1 else float32 if i.itemsize == 2 else float64
    if f is float32:
        return float32 if i.itemsize <= 2 else float64
    return f


def result_type_with_scalar(t: DType, scalar) -> DType:
    """Dtype of ``tensor op python_scalar``: Python scalars are weak (NEP 50).

    A Python int keeps the tensor's dtype unless the tensor is bool; a Python float keeps a
    floating tensor's dtype and turns an integer or bool tensor into the default float dtype.
    """
    if isinstance(scalar, bool):
        return t
    if isinstance(scalar, int):
        return int64 if t.is_bool else t
    if isinstance(scalar, float):
        return t if t.is_floating else _default_float
    if isinstance(scalar, complex):
        return complex_of(t if t.is_floating else _default_float)
    raise TypeError(f"cannot combine a tensor with a {type(scalar).__name__}")


def dtype_of_python(value) -> DType:
    """Dtype a Python scalar becomes on its own: bool, int64 or the default float."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return _default_float
    if isinstance(value, complex):
        return complex_of(_default_float)
    raise TypeError(f"cannot make a tensor from a {type(value).__name__}")
