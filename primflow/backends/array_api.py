"""A backend over any namespace that follows the Python array API standard.

``ArrayAPIBackend(namespace)`` implements every kernel of the contract
(``docs/backend-contract.md``) with functions of the standard only, through
``array_api_compat.array_namespace`` (so NumPy, CuPy and PyTorch work through their
compatibility wrappers, and ``array_api_strict`` checks that nothing outside the standard is
used). It has no fast paths: rules run as written in primitives. ``pf.jit`` writes its
optimized programs as Python source over the namespace (``compiler/array_api_codegen.py``).

Functions the standard lacks are built from it: the special functions by the builders their
declarations give (``Lowering(array_api=build)``: ``erf``, ``erfc``), and ``scatter_add``
here (a one-hot matrix product: O(updates x rows) memory, fine for the index sizes
primflow's rules produce, not for huge scatters). Random draws are made on the host by
NumPy's generator from the same key and copied in, so every backend draws the same numbers.

Select it with ``pf.set_backend("array_api", namespace=array_api_strict)``.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ..core import dtypes
from . import blas
from .base import Backend
from .numpy_backend import INTEGER_DIVISION_BY_ZERO


def standard_name(name):
    """The array-API standard's function for primitive ``name``: the one its declaration
    names (``Lowering.array_api``, where the names differ), else its own name.

    Example:
        >>> standard_name("neg"), standard_name("exp")
        ('negative', 'exp')
    """
    from ..core.primitive import get_primitive  # noqa: PLC0415

    prim = get_primitive(name, None)
    spelled = None if prim is None else prim.lowering.array_api
    return spelled if isinstance(spelled, str) else name

_DTYPE_NAMES = ["bool", "int32", "int64", "float32", "float64", "uint8", "int8", "int16",
                "float16", "complex64", "complex128", "bfloat16"]  # (bfloat16 where it has one)


def compat_namespace(namespace):
    """The ``array_api_compat`` namespace of ``namespace`` (a module such as ``numpy``,
    ``torch`` or ``array_api_strict``), the object the kernels call.

    Example:
        >>> import array_api_strict
        >>> compat_namespace(array_api_strict).__name__
        'array_api_strict'
    """
    try:
        import array_api_compat  # noqa: PLC0415 - optional dependency
    except ImportError as e:
        raise ImportError("the array-API backend needs array-api-compat: pip install "
                          "'primflow[array-api]'") from e
    try:
        return array_api_compat.array_namespace(namespace.asarray(0))
    except (AttributeError, TypeError) as e:
        raise TypeError(f"namespace {namespace!r} does not follow the Python array API "
                        f"standard (array_api_compat does not know its arrays); pass a "
                        f"module such as numpy, torch, cupy or array_api_strict") from e


class ArrayAPIBackend(Backend):
    """Kernels written with the Python array API standard on the namespace ``namespace``.

    Example:
        >>> import array_api_strict
        >>> b = ArrayAPIBackend(array_api_strict)
        >>> b.name, b.to_numpy(b.kernels["exp"](b.asarray([0.0], None))).tolist()
        ('array_api:array_api_strict', [1.0])
    """

    fast_paths = {}
    codegen = "array_api"  # pf.jit writes source over ``xp`` (compiler/array_api_codegen.py)

    def __init__(self, namespace, device=None):
        xp = compat_namespace(namespace)
        self.xp = xp
        self.namespace = namespace
        self.name = f"array_api:{namespace.__name__}"
        self.device = device
        self._device_context = contextlib.nullcontext
        if namespace.__name__.startswith("cupy"):  # a GPU: arrays are made on GPU ``device``
            index = device or 0
            self.place, self.name = f"gpu:{index}", f"{self.name}:gpu:{index}"
            # CuPy makes arrays on its current device: select ours around allocations
            self.device, self._device_context = None, lambda: namespace.cuda.Device(index)
        self._to_native = {}
        for name in _DTYPE_NAMES:
            native = getattr(xp, name, None)
            if native is not None:
                self._to_native[dtypes.as_dtype(name)] = native
        self._from_native = [(v, k) for k, v in self._to_native.items()]
        self._array_type = type(xp.asarray(0.0))
        # arrays that are NumPy's (array-api-compat's numpy namespace): compiled programs
        # may also use numba kernels for their fused arithmetic groups, as on NumPy's
        self.arrays_are_numpy = self._array_type is np.ndarray
        # matrix products: over NumPy through primflow's BLAS wrapper (see ``_kernels``)
        self.matmul = blas.matmul if self._array_type is np.ndarray else xp.matmul
        # whether ``matmul`` writes into ``out=`` (generated code then reuses buffers)
        self.matmul_takes_out = self._array_type is np.ndarray or (
            getattr(xp.matmul, "nin", None) == 2)
        self.kernels = _kernels(self)
        from ..core.primitive import primitives  # noqa: PLC0415

        for name in primitives():  # derived, default and host kernels, now (kernel_for)
            with contextlib.suppress(KeyError):  # (install names what is missing)
                self.kernel_for(name)

    def derive_kernel(self, name, family, lowering=None):
        """An elementwise primitive's kernel is the namespace's function of the same name
        (the declaration's ``Lowering.array_api`` where the standard names it differently,
        or its ``build(xp)`` for a function the standard lacks): declaring one needs no
        kernel here."""
        if family is None or not family.elementwise:
            return None
        spelled = None if lowering is None else lowering.array_api
        if callable(spelled):
            return spelled(self.xp)
        return getattr(self.xp, spelled or name, None)

    # ---- allocation and dtypes ------------------------------------------------------------
    def native_dtype(self, dtype):
        try:
            return self._to_native[dtype]
        except KeyError:
            raise TypeError(f"backend {self.name!r} has no dtype {dtype.name} (its namespace "
                            f"lacks it); use float32 or float64") from None

    def asarray(self, data, dtype=None):
        xp = self.xp
        if not isinstance(data, self._array_type) and hasattr(data, "__dlpack__") and (
                not isinstance(data, np.ndarray)):
            raise TypeError(self._foreign(data))
        if isinstance(data, np.ndarray) and data.dtype.kind in "fiub" and not (
                data.flags.c_contiguous):
            data = np.ascontiguousarray(data)
        kwargs = {} if self.device is None else {"device": self.device}
        with self._device_context():
            if dtype is None:
                return xp.asarray(data, **kwargs)
            native = self.native_dtype(dtype)
            if isinstance(data, self._array_type):
                return data if data.dtype == native else xp.astype(data, native)
            return xp.asarray(data, dtype=native, **kwargs)

    def full(self, shape, value, dtype):
        kwargs = {} if self.device is None else {"device": self.device}
        with self._device_context():
            return self.xp.full(tuple(shape), value, dtype=self.native_dtype(dtype), **kwargs)

    def empty(self, shape, dtype):
        """An uninitialized native array (a buffer of compiled programs)."""
        kwargs = {} if self.device is None else {"device": self.device}
        with self._device_context():
            return self.xp.empty(tuple(shape), dtype=self.native_dtype(dtype), **kwargs)

    def dtype_of(self, array):
        if not isinstance(array, (self._array_type, np.generic)):
            raise TypeError(self._foreign(array))
        dtype = getattr(array, "dtype", None)
        for native, found in self._from_native:
            if dtype == native:
                return found
        raise TypeError(f"unsupported dtype {dtype} on backend {self.name!r}; primflow "
                        f"supports bool, int32, int64, float32 and float64 here")

    def is_floating(self, array):
        return self.xp.isdtype(array.dtype, ("real floating", "complex floating"))

    def to_numpy(self, array):
        if hasattr(array, "get") and not isinstance(array, np.ndarray):  # CuPy: to the host
            return array.get()
        if hasattr(array, "detach"):  # PyTorch
            return array.detach().cpu().numpy()
        return np.asarray(array)

    def is_native(self, obj):
        return isinstance(obj, self._array_type)

    # ---- checkpoint I/O: the NumPy backend's .npz format via host copies, so a checkpoint
    # written on one backend or device loads on any other ------------------------------------
    def save_arrays(self, file, arrays, header):
        from .numpy_backend import NumpyBackend  # noqa: PLC0415

        NumpyBackend().save_arrays(file, {k: self.to_numpy(v) for k, v in arrays.items()},
                                   header)

    def load_arrays(self, file):
        from .numpy_backend import NumpyBackend  # noqa: PLC0415

        header, arrays = NumpyBackend().load_arrays(file)
        return header, {k: self.asarray(v) for k, v in arrays.items()}

    def _foreign(self, obj):
        return foreign_array_message(obj, self)


def foreign_array_message(obj, backend):
    """The error for an array of another backend or device reaching ``backend``'s kernels."""
    from .devices import place_of  # noqa: PLC0415

    return (f"a {type(obj).__module__}.{type(obj).__name__} array on {place_of(obj)} reached "
            f"backend {backend.name!r} on {backend.place}: tensors of two backends or devices "
            f"cannot be mixed in one operation. Move them first: x.to({backend.place!r}) or "
            f"pf.to_tensor(x, place={backend.place!r}), or select the device of the others "
            f"with pf.set_device")


# ---- kernels ---------------------------------------------------------------------------------

def _kernels(backend):
    """The kernel table of ``backend`` (closures over its namespace)."""
    xp = backend.xp
    # over NumPy itself, matrix products go through primflow's BLAS wrapper, which keeps
    # small products on one BLAS thread (OpenBLAS's own threads are ~100x slower on a busy
    # machine) and sizes the pools to pf.get_num_threads()
    matmul = backend.matmul

    def xp_device(x):
        return getattr(x, "device", None)

    def convert_element_type(x, *, dtype):
        if xp.isdtype(x.dtype, "complex floating") and not dtype.is_complex:
            x = xp.real(x)  # the standard forbids the cast; NumPy's keeps the real part
        return xp.astype(x, backend.native_dtype(dtype))

    def reduce_sum(x, *, axes):
        return xp.sum(x, axis=tuple(axes), dtype=x.dtype)

    def reduce_max(x, *, axes):  # the standard's max and min take numbers only
        return (xp.any if x.dtype == xp.bool else xp.max)(x, axis=tuple(axes))

    def reduce_min(x, *, axes):
        return (xp.all if x.dtype == xp.bool else xp.min)(x, axis=tuple(axes))

    def argmax(x, *, axis, index_dtype):
        return xp.astype(xp.argmax(x, axis=axis), backend.native_dtype(index_dtype))

    def argmin(x, *, axis, index_dtype):
        return xp.astype(xp.argmin(x, axis=axis), backend.native_dtype(index_dtype))

    def cumsum(x, *, axis, reverse):
        if reverse:
            return xp.flip(xp.cumulative_sum(xp.flip(x, axis=axis), axis=axis, dtype=x.dtype),
                           axis=axis)
        return xp.cumulative_sum(x, axis=axis, dtype=x.dtype)

    def reshape(x, *, shape):
        return xp.reshape(x, tuple(shape))

    def broadcast_in_dim(x, *, shape, broadcast_dimensions):
        expanded = [1] * len(shape)
        for src, dst in enumerate(broadcast_dimensions):
            expanded[dst] = x.shape[src]
        return xp.broadcast_to(xp.reshape(x, tuple(expanded)), tuple(shape))

    def transpose(x, *, perm):
        return xp.permute_dims(x, tuple(perm))

    def slice_(x, *, start, limit, strides):
        return x[tuple(slice(s, e, st) for s, e, st in zip(start, limit, strides))]

    def pad(x, padding_value, *, config):
        out_shape, index = [], []
        for n, (lo, hi, interior) in zip(x.shape, config):
            out_shape.append(lo + hi + n + max(n - 1, 0) * interior)
            index.append(slice(lo, lo + max(n - 1, 0) * (interior + 1) + 1 if n else lo,
                               interior + 1))
        # a fresh array (the standard's full takes Python scalars only, the value is 0-d)
        out = xp.zeros(tuple(out_shape), dtype=x.dtype, device=xp_device(x)) + padding_value
        if all(out_shape) and all(x.shape):
            out[tuple(index)] = x
        return out

    def concatenate(*xs, axis):
        return xp.concat(list(xs), axis=axis)

    def flat_index(shape, indices):
        # the row-major position of indices[..., :k] in the first k dims of ``shape``
        k = indices.shape[-1]
        flat = None
        for i in range(k):
            part = indices[..., i] * math.prod(shape[i + 1:k])
            flat = part if flat is None else flat + part
        return flat

    def gather(x, indices):
        k = indices.shape[-1]
        lead = indices.shape[:-1]
        rows = xp.reshape(x, (math.prod(x.shape[:k]),) + tuple(x.shape[k:]))
        flat = xp.reshape(flat_index(x.shape, indices), (math.prod(lead),))
        taken = xp.take(rows, xp.astype(flat, xp.int64), axis=0)
        return xp.reshape(taken, tuple(lead) + tuple(x.shape[k:]))

    def scatter_add(operand, indices, updates):
        k = indices.shape[-1]
        m = math.prod(operand.shape[:k])
        rest = tuple(operand.shape[k:])
        n = math.prod(indices.shape[:-1])
        flat = xp.reshape(xp.astype(flat_index(operand.shape, indices), xp.int64), (n, 1))
        rows = xp.arange(m, dtype=xp.int64, device=xp_device(operand))
        onehot = xp.astype(flat == xp.reshape(rows, (1, m)), operand.dtype)
        if operand.dtype == xp.bool:
            raise TypeError("scatter_add of booleans is not defined")
        added = xp.matmul(xp.permute_dims(onehot, (1, 0)),
                          xp.reshape(updates, (n, math.prod(rest))))
        return operand + xp.reshape(added, operand.shape)

    def dot_general(x, y, *, contracting, batch):
        (lc, rc), (lb, rb) = contracting, batch
        lc, rc, lb, rb = list(lc), list(rc), list(lb), list(rb)
        x_free = [d for d in range(x.ndim) if d not in lc and d not in lb]
        y_free = [d for d in range(y.ndim) if d not in rc and d not in rb]
        batch_shape = tuple(x.shape[d] for d in lb)
        x_free_shape = tuple(x.shape[d] for d in x_free)
        y_free_shape = tuple(y.shape[d] for d in y_free)
        b, k = math.prod(batch_shape), math.prod(x.shape[d] for d in lc)
        m, n = math.prod(x_free_shape), math.prod(y_free_shape)
        if not lb:  # one 2-d product (a stack of one matrix can miss the BLAS fast path)
            xt = xp.reshape(xp.permute_dims(x, tuple(x_free + lc)), (m, k))
            yt = xp.reshape(xp.permute_dims(y, tuple(rc + y_free)), (k, n))
            return xp.reshape(matmul(xt, yt), x_free_shape + y_free_shape)
        xt = xp.reshape(xp.permute_dims(x, tuple(lb + x_free + lc)), (b, m, k))
        yt = xp.reshape(xp.permute_dims(y, tuple(rb + rc + y_free)), (b, k, n))
        return xp.reshape(matmul(xt, yt), batch_shape + x_free_shape + y_free_shape)

    def div(x, y):  # on integers floor division refusing a zero divisor (numpy_backend._div)
        if xp.isdtype(x.dtype, "integral"):
            if not bool(xp.all(y)):
                raise ZeroDivisionError(INTEGER_DIVISION_BY_ZERO)
            return xp.floor_divide(x, y)
        return xp.divide(x, y)

    # the other elementwise kernels are the namespace's functions of the same name
    # (``derive_kernel``); rsqrt, logistic, integer_pow, iota, full, the random draws and
    # the LU helpers are the defaults of ``defaults.py``
    kernels = {
        "div": div, "convert_element_type": convert_element_type,
        # reductions
        "reduce_sum": reduce_sum, "reduce_max": reduce_max, "reduce_min": reduce_min,
        "argmax": argmax, "argmin": argmin, "cumsum": cumsum,
        # shape and indexing
        "reshape": reshape, "broadcast_in_dim": broadcast_in_dim, "transpose": transpose,
        "slice": slice_, "pad": pad, "concatenate": concatenate, "gather": gather,
        "scatter_add": scatter_add, "dot_general": dot_general,
    }
    kernels.update(_numerics_kernels(backend))
    kernels.update(_collective_kernels(backend))  # MPI collectives, run on host copies
    return kernels


def _collective_kernels(backend):
    """The collectives: MPI moves host memory, so they run on host copies."""
    from .communicator import KERNELS as host  # noqa: PLC0415

    def on_host(kernel):
        def run(x, **params):
            return backend.asarray(kernel(backend.to_numpy(x), **params))
        return run

    return {name: on_host(kernel) for name, kernel in host.items()}


def _numerics_kernels(backend):
    """Complex parts, FFT (the standard's ``fft`` extension) and matrix decompositions (its
    ``linalg`` extension). LU and its pivots have no counterpart in the standard: they run
    on the host through the NumPy kernels and are copied back."""
    xp = backend.xp

    def complex_(re, im):
        c = xp.complex128 if re.dtype == xp.float64 else xp.complex64
        return xp.astype(re, c) + xp.astype(im, c) * 1j

    def fft(x, *, kind, axes, n_last, norm):
        axes = tuple(axes)
        if kind == "fft":
            return xp.fft.fftn(x, axes=axes, norm=norm)
        if kind == "ifft":
            return xp.fft.ifftn(x, axes=axes, norm=norm)
        if kind == "rfft":
            return xp.fft.rfftn(x, axes=axes, norm=norm)
        s = tuple(x.shape[a] for a in axes[:-1]) + (n_last,)
        return xp.fft.irfftn(x, s=s, axes=axes, norm=norm)

    def eye_like(a):
        n = a.shape[-1]
        return xp.eye(n, dtype=a.dtype, device=getattr(a, "device", None))

    def triangular_solve(a, b, *, lower, transpose, unit_diagonal):
        m = xp.tril(a) if lower else xp.triu(a)
        if unit_diagonal:
            eye = eye_like(a)
            m = m * (1 - eye) + eye
        if transpose:
            m = xp.matrix_transpose(m)
        return xp.linalg.solve(m, b)

    def slogdet(a):
        sign, logabsdet = xp.linalg.slogdet(a)
        return xp.astype(xp.stack([sign, logabsdet], axis=-1), a.dtype)

    def eigh(a):
        w, v = xp.linalg.eigh(a)
        return xp.concat([v, xp.expand_dims(w, axis=-1)], axis=-1)

    def qr(a):
        q, r = xp.linalg.qr(a, mode="reduced")
        return xp.concat([q, r], axis=-2)

    def svd(a):
        u, s, vh = xp.linalg.svd(a, full_matrices=False)
        return xp.concat([u, xp.expand_dims(s, axis=-2), xp.matrix_transpose(vh)], axis=-2)

    return {
        "complex": complex_, "real": xp.real, "imag": xp.imag, "conj": xp.conj, "fft": fft,
        "solve": xp.linalg.solve, "triangular_solve": triangular_solve,
        "cholesky": xp.linalg.cholesky, "slogdet": slogdet, "eigh": eigh, "qr": qr, "svd": svd,
    }
