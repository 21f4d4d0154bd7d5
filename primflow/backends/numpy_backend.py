"""The NumPy backend: one kernel per primitive, allocation and the dtype map.

``KERNELS`` maps each primitive's name to its kernel; a primitive cannot be declared
without one (``Primitive`` looks it up), and ``backends.install`` refuses a backend that
lacks one. A primitive that is not here runs the NumPy ufunc of its name (elementwise
ones) or the ``reference=`` kernel of its declaration, so a new primitive usually needs no
entry. A kernel that is a NumPy ufunc is written by the code generator as a ufunc call
into a buffer (``compiler/numpy_codegen.py``), so prefer ufuncs.

Kernels take native arrays positionally and the primitive's parameters as keywords. They
may return read-only views (broadcast, transpose, slice); primflow never writes into a
kernel's output in place (in-place tensor updates replace the array, copy-on-write).
"""

from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from . import blas
from ..core.lowering import complex_refused
from .base import Backend
from .npz_check import check_archive
from .numpy_fused import FUSED
from .numpy_numerics import KERNELS as _NUMERICS_KERNELS
from .communicator import KERNELS as _COLLECTIVE_KERNELS  # collectives over MPI
from .numpy_taylor import TAYLOR, is_zero as _taylor_is_zero, rescale as _taylor_rescale

_TO_NATIVE = {
    dtypes.bool_: np.dtype(np.bool_),
    dtypes.int32: np.dtype(np.int32),
    dtypes.int64: np.dtype(np.int64),
    dtypes.float32: np.dtype(np.float32),
    dtypes.float64: np.dtype(np.float64),
    dtypes.complex64: np.dtype(np.complex64),
    dtypes.complex128: np.dtype(np.complex128),
}
_FROM_NATIVE = {v: k for k, v in _TO_NATIVE.items()}
# Paddle compatibility: storage dtypes
_TO_NATIVE.update({dtypes.uint8: np.dtype(np.uint8), dtypes.int8: np.dtype(np.int8),
                   dtypes.int16: np.dtype(np.int16), dtypes.float16: np.dtype(np.float16)})
_FROM_NATIVE.update({v: k for k, v in _TO_NATIVE.items()})


# ---- bfloat16 storage: NumPy's dtype from the optional ml_dtypes package, loaded
# at first use (a missing entry of the dtype map), so importing primflow stays as fast ------
class _NativeDtypes(dict):
    def __missing__(self, dtype):
        if dtype is not dtypes.bfloat16:
            raise KeyError(dtype)
        try:
            import ml_dtypes  # noqa: PLC0415 - optional dependency
        except ImportError:
            raise TypeError("bfloat16 tensors on the NumPy backend need the ml_dtypes "
                            "package: pip install 'primflow[bfloat16]' (or use float16 or "
                            "float32)") from None
        native = np.dtype(ml_dtypes.bfloat16)
        _BFLOAT16.append(native)
        _FROM_NATIVE[native] = dtypes.bfloat16
        self[dtype] = native
        _compute_bfloat16_in_float32()
        return native


_TO_NATIVE = _NativeDtypes(_TO_NATIVE)
_BFLOAT16 = []  # NumPy's bfloat16 dtype once ml_dtypes is loaded


def _is_bfloat16(native_dtype):
    return native_dtype.name == "bfloat16" and native_dtype.kind == "V"


def _in_float32(kernel):
    """``kernel`` computing bfloat16 inputs in float32 (a float32 result is stored back as
    bfloat16): for the kernels NumPy has no bfloat16 loop for or would accumulate in 8 bits
    of precision (sums, matrix products, erf, decompositions, FFT). ml_dtypes's ufuncs
    already compute each element in float32 and round once."""

    def run(*arrays, **params):
        # primitives do not promote: the first input's dtype is the computing one (a cheap
        # test on the hot path: bfloat16 is NumPy's only "V"-kind dtype primflow holds)
        if not arrays or arrays[0].dtype.kind != "V":
            return kernel(*arrays, **params)
        up = [a.astype(np.float32) if _is_bfloat16(a.dtype) else a for a in arrays]
        out = kernel(*up, **params)
        return out.astype(_BFLOAT16[0]) if out.dtype == np.float32 else out

    run.__wrapped__ = getattr(kernel, "__wrapped__", kernel)
    run.computes_bfloat16_in_float32 = True
    return run


# ---- elementwise kernels that need more than one NumPy call ----------------------------------

def _rsqrt(x):
    out = np.sqrt(x)
    if out.ndim == 0:  # NumPy returns a scalar for 0-d input: it has no buffer to reuse
        return np.reciprocal(out)
    return np.reciprocal(out, out=out)


def _logistic(x):
    # 1 / (1 + exp(-x)) without overflow: use exp(-|x|) <= 1 on both branches.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _integer_pow(x, *, y):
    if y == 2:
        return np.square(x)
    return np.power(x, y)


# ---- structural kernels ------------------------------------------------------------------

def _convert_element_type(x, *, dtype):
    if x.dtype.kind == "c" and not dtype.is_complex:  # the real part, without NumPy's warning
        x = x.real
    return x.astype(_TO_NATIVE[dtype])


def _reduce_sum(x, *, axes):
    return np.sum(x, axis=axes, dtype=x.dtype)


def _reduce_max(x, *, axes):
    return np.max(x, axis=axes)


def _reduce_min(x, *, axes):
    return np.min(x, axis=axes)


def _argmax(x, *, axis, index_dtype):
    return np.argmax(x, axis=axis).astype(_TO_NATIVE[index_dtype])


def _argmin(x, *, axis, index_dtype):
    return np.argmin(x, axis=axis).astype(_TO_NATIVE[index_dtype])


def _cumsum(x, *, axis, reverse):
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return np.cumsum(x, axis=axis, dtype=x.dtype)


def _reshape(x, *, shape):
    return np.reshape(x, shape)


def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    # Place x's dims at broadcast_dimensions, size-1 elsewhere, then broadcast (a view).
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    return np.broadcast_to(np.reshape(x, expanded), shape)


def _transpose(x, *, perm):
    return np.transpose(x, perm)


def _slice(x, *, start, limit, strides):
    return x[tuple(slice(s, e, st) for s, e, st in zip(start, limit, strides))]


def _pad(x, padding_value, *, config):
    # config: (low, high, interior) per dim, all >= 0. Interior inserts zeros between items.
    out_shape = []
    index = []
    for n, (lo, hi, interior) in zip(x.shape, config):
        size = lo + hi + n + max(n - 1, 0) * interior
        out_shape.append(size)
        index.append(slice(lo, lo + max(n - 1, 0) * (interior + 1) + 1 if n else lo,
                           interior + 1))
    out = np.full(out_shape, padding_value, dtype=x.dtype)
    out[tuple(index)] = x
    return out


def _concatenate(*xs, axis):
    return np.concatenate(xs, axis=axis)


def _gather(x, indices):
    # indices[..., k] addresses the first k dims of x (gather_nd).
    k = indices.shape[-1]
    return x[tuple(indices[..., i] for i in range(k))]


def _scatter_add(operand, indices, updates):
    out = np.array(operand, copy=True)
    k = indices.shape[-1]
    np.add.at(out, tuple(indices[..., i] for i in range(k)), updates)
    return out


def _iota(*, shape, dtype, dimension):
    line = np.arange(shape[dimension], dtype=_TO_NATIVE[dtype])
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(expanded), shape)


_full_cache = {}


def _full(*, shape, value, dtype):
    # Small constants (scalars in `x * 1.0001`, ones in rules) repeat on every call; arrays
    # are never written in place in primflow, so a cached read-only copy is safe to share.
    # Large ones are a read-only broadcast view of one element: O(1) to make.
    key = (shape, value, dtype)
    try:
        return _full_cache[key]
    except (KeyError, TypeError):
        pass
    native = _TO_NATIVE[dtype]
    if math.prod(shape) > 4096:
        return np.broadcast_to(np.array(value, dtype=native), shape)
    out = np.full(shape, value, dtype=native)
    if value == value:  # NaN never hits: skip it
        if len(_full_cache) >= 512:
            _full_cache.clear()
        out.flags.writeable = False
        _full_cache[key] = out
    return out


def _dot_general(x, y, *, contracting, batch):
    (lc, rc), (lb, rb) = contracting, batch
    if not lb:
        # One GEMM over all free dims (np.matmul would loop over leading dims instead), as
        # np.tensordot computes it, through the BLAS of ``backends/blas.py``
        x_free = [d for d in range(x.ndim) if d not in lc]
        y_free = [d for d in range(y.ndim) if d not in rc]
        m = math.prod(x.shape[d] for d in x_free)
        k = math.prod(x.shape[d] for d in lc)
        n = math.prod(y.shape[d] for d in y_free)
        xt = np.transpose(x, x_free + list(lc)).reshape(m, k)
        yt = np.transpose(y, list(rc) + y_free).reshape(k, n)
        return blas.matmul(xt, yt).reshape(tuple(x.shape[d] for d in x_free)
                                           + tuple(y.shape[d] for d in y_free))
    x_free = tuple(d for d in range(x.ndim) if d not in lc and d not in lb)
    y_free = tuple(d for d in range(y.ndim) if d not in rc and d not in rb)
    batch_shape = tuple(x.shape[d] for d in lb)
    x_free_shape = tuple(x.shape[d] for d in x_free)
    y_free_shape = tuple(y.shape[d] for d in y_free)
    b = math.prod(batch_shape)
    m = math.prod(x_free_shape)
    k = math.prod(x.shape[d] for d in lc)
    n = math.prod(y_free_shape)
    xt = np.transpose(x, lb + x_free + lc).reshape(b, m, k)
    yt = np.transpose(y, rb + rc + y_free).reshape(b, k, n)
    return blas.matmul(xt, yt).reshape(batch_shape + x_free_shape + y_free_shape)


INTEGER_DIVISION_BY_ZERO = ("integer division by zero: the divisor has a zero element (an "
                            "integer tensor has no inf or nan to give); mask the zeros, or "
                            "cast to a float dtype to get inf/nan")


def _div(x, y):
    """``x / y``; on integers Python's floor division ``x // y``, which refuses a zero
    divisor (NumPy's would give 0 with a warning, a wrong quotient that looks valid)."""
    if x.dtype.kind in "iu":
        if not np.all(y):
            raise ZeroDivisionError(INTEGER_DIVISION_BY_ZERO)
        return np.floor_divide(x, y)
    return np.divide(x, y)


_div.__wrapped__ = np.divide  # generated code calls the ufunc for floats (numpy_codegen)


_BELOW_ONE = {"float16": 1.0 - 2.0 ** -11, "bfloat16": 1.0 - 2.0 ** -8}  # largest below 1


def _random_uniform(*, shape, dtype, key):
    native = _TO_NATIVE[dtype]
    rng = np.random.default_rng(key)
    if native.itemsize >= 4:
        return rng.random(shape, dtype=native)
    # NumPy draws float32/float64 only: a float32 draw rounded to 16 bits, kept below 1
    return np.minimum(rng.random(shape, dtype=np.float32).astype(native),
                      _BELOW_ONE[dtype.name]).astype(native)


def _random_normal(*, shape, dtype, key):
    native = _TO_NATIVE[dtype]
    rng = np.random.default_rng(key)
    if native.itemsize >= 4:
        return rng.standard_normal(shape, dtype=native)
    return rng.standard_normal(shape, dtype=np.float32).astype(native)  # (as above)


KERNELS = {
    # elementwise: the ones that need more than a NumPy ufunc (a ufunc of the declared name,
    # core/lowering.py, is derived: derive_kernel)
    "rsqrt": _rsqrt, "logistic": _logistic, "integer_pow": _integer_pow, "div": _div,
    # select and casts
    "select": np.where, "convert_element_type": _convert_element_type,
    # reductions
    "reduce_sum": _reduce_sum, "reduce_max": _reduce_max, "reduce_min": _reduce_min,
    "argmax": _argmax, "argmin": _argmin, "cumsum": _cumsum,
    # shape and indexing
    "reshape": _reshape, "broadcast_in_dim": _broadcast_in_dim, "transpose": _transpose,
    "slice": _slice, "pad": _pad, "concatenate": _concatenate, "gather": _gather,
    "scatter_add": _scatter_add, "iota": _iota, "full": _full,
    # linear algebra and random
    "dot_general": _dot_general, "random_uniform": _random_uniform,
    "random_normal": _random_normal,
}

# ---- kernels of further family files, one line each: KERNELS.update(numpy_<family>.KERNELS)
# ---- scientific numerics: complex parts, FFT, decompositions --------------------
KERNELS.update(_NUMERICS_KERNELS)
# ---- distributed: collectives run the group's communicator ----------------------
KERNELS.update(_COLLECTIVE_KERNELS)


def _checked(kernel, name, real_only, restore_dtype):
    """``kernel`` of a primitive that is defined on real numbers only (NumPy would order
    complex numbers lexicographically, maximum and comparisons, where a clear error is
    wanted) or whose kernel may answer in another dtype than its input's (a reference
    kernel computing float16 in float32, or float32 in float64): one wrapper for both."""

    def checked(*arrays, **params):
        a = arrays[0]  # the primitives' inputs share one dtype
        if real_only and a.dtype.kind == "c":
            raise TypeError(complex_refused(name, a.dtype.name, a.shape))
        out = kernel(*arrays, **params)
        if restore_dtype and out.dtype != a.dtype and out.dtype.kind in "fc" and \
                a.dtype.kind in "fcV":
            return out.astype(a.dtype)
        return out

    checked.__wrapped__ = getattr(kernel, "__wrapped__", kernel)  # generated code: the ufunc
    return checked


def _float32_computed(kernel, family, lowering):
    return (lowering is not None and lowering.float32_compute) or (
        family is not None and family.float32_compute)


# ---- bfloat16: the kernels that compute it in float32 (their declarations say so,
# Lowering.float32_compute or the family's), wrapped when ml_dtypes is first loaded, so
# float32/float64 calls pay nothing in a process that never uses bfloat16
def _compute_bfloat16_in_float32():
    from ..core.backend import get_backend  # noqa: PLC0415 - the active backend
    from ..core.primitive import bind_kernels, get_primitive, primitives  # noqa: PLC0415

    active = get_backend()
    if isinstance(active, NumpyBackend):  # primitives run the wrapped kernels from now on
        for name in primitives():
            prim = get_primitive(name)
            kernel = active.kernels.get(name)
            if kernel is not None and _float32_computed(kernel, prim.family, prim.lowering) \
                    and not getattr(kernel, "computes_bfloat16_in_float32", False):
                if "kernels" not in vars(active):
                    active.kernels = dict(active.kernels)
                active.kernels[name] = _in_float32(kernel)
        bind_kernels(active)


class NumpyBackend(Backend):
    """The default backend: NumPy arrays, NumPy ufuncs and BLAS through ``np.matmul``."""

    name = "numpy"
    kernels = KERNELS
    codegen = "numpy"  # pf.jit writes NumPy source (compiler/numpy_codegen.py)
    # eager fast paths of rules (fast_paths.py): composites' fused kernels (numpy_fused.py),
    # unary Taylor rules' fused kernels and pf.jet's helpers (numpy_taylor.py)
    fast_paths = {"composite": FUSED, "taylor": TAYLOR,
                  "jet": {"is_zero": _taylor_is_zero, "rescale": _taylor_rescale}}

    # ---- derived kernels: an elementwise primitive whose declared NumPy spelling
    # (Lowering.numpy, else its name) is a NumPy ufunc needs no entry in KERNELS
    def derive_kernel(self, name, family, lowering=None):
        ufunc = getattr(np, (lowering.numpy if lowering is not None else None) or name, None)
        if family is not None and family.elementwise and isinstance(ufunc, np.ufunc):
            return ufunc
        return None

    def finish_kernel(self, name, kernel, family, lowering, from_reference):
        """Refuses complex inputs of a real-only primitive, restores the input's dtype of a
        reference kernel's elementwise result, computes bfloat16 in float32 where the
        declaration says so (once ml_dtypes is loaded): the same for native and reference
        kernels."""
        real_only = lowering is not None and lowering.real_only
        restore = from_reference and family is not None and family.elementwise
        if real_only or restore:
            kernel = _checked(kernel, name, real_only, restore)
        if _BFLOAT16 and _float32_computed(kernel, family, lowering):
            kernel = _in_float32(kernel)
        return kernel

    def host_kernel(self, name, reference):
        """A primitive's NumPy ``reference=`` kernel is this backend's kernel as it is."""
        return reference

    def asarray(self, data, dtype=None):
        if dtype is None:
            return np.asarray(data)
        return np.asarray(data, dtype=_TO_NATIVE[dtype])

    def full(self, shape, value, dtype):
        return np.full(shape, value, dtype=_TO_NATIVE[dtype])

    def dtype_of(self, array):
        native = isinstance(array, (np.ndarray, np.generic))
        found = _FROM_NATIVE.get(array.dtype) if native else None
        if found is None and native and _is_bfloat16(array.dtype):  # made by ml_dtypes
            _TO_NATIVE[dtypes.bfloat16]  # noqa: B018 - registers it
            found = dtypes.bfloat16
        if found is None and not native:  # another backend's array
            from .array_api import foreign_array_message  # noqa: PLC0415 - errors only

            raise TypeError(foreign_array_message(array, self))
        if found is None:
            raise TypeError(
                f"unsupported dtype {array.dtype}; primflow supports "
                f"{', '.join(d.name for d in dtypes.ALL_DTYPES)}. Convert first, e.g. "
                f"np.asarray(x, dtype='float32').")
        return found

    def is_floating(self, array):
        return array.dtype.kind in "fc" or _is_bfloat16(array.dtype)

    def native_dtype(self, dtype):
        return _TO_NATIVE[dtype]

    def to_numpy(self, array):
        return np.asarray(array)

    def is_native(self, obj):
        return isinstance(obj, np.ndarray)

    # ---- checkpoint I/O: one .npz archive, arrays stored raw (never pickled) -------------
    HEADER_KEY = "__primflow_header__"
    BFLOAT16_KEY = "__primflow_bfloat16__"  # names of the arrays stored as bfloat16 bits

    def save_arrays(self, file, arrays, header):
        payload = {}
        bfloat16 = []
        for name, array in arrays.items():
            array = np.asarray(array)
            if _is_bfloat16(array.dtype):  # .npy has no bfloat16: its bits, as uint16
                bfloat16.append(name)
                array = array.view(np.uint16)
            if array.dtype.hasobject:  # np.save would pickle these
                raise TypeError(f"array {name!r} has dtype object, which cannot be saved "
                                f"without pickle; convert it to a numeric dtype")
            payload[name] = array
        payload[self.HEADER_KEY] = np.frombuffer(header.encode("utf-8"), dtype=np.uint8)
        if bfloat16:
            payload[self.BFLOAT16_KEY] = np.frombuffer("\n".join(bfloat16).encode("utf-8"),
                                                       dtype=np.uint8)
        np.savez(file, **payload)

    def load_arrays(self, file):
        check_archive(file)  # declared sizes against the file's, before anything is allocated
        arrays = {}
        header = None
        bfloat16 = ()
        with np.load(file, allow_pickle=False) as archive:
            for name in archive.files:
                value = archive[name]  # reads and checks the member now (CRC, npy header)
                if name == self.HEADER_KEY:
                    header = value.tobytes().decode("utf-8")
                elif name == self.BFLOAT16_KEY:
                    bfloat16 = value.tobytes().decode("utf-8").split("\n")
                else:
                    arrays[name] = value
        for name in bfloat16:
            if name in arrays and arrays[name].dtype == np.uint16:
                arrays[name] = arrays[name].view(_TO_NATIVE[dtypes.bfloat16])
        return header, arrays
