"""How the compiler writes each primitive as source over an array-API namespace ``xp``
(the lowering of ``backends/array_api.py``: array-api-strict, NumPy or CuPy through
array-api-compat, PyTorch).

The driver (``emit.generate``) is the one the NumPy backend uses: the same fusion
groups, the same memory plan, one line per operation. What differs is the spelling: an
operation is a call of the standard's function on ``xp`` (``xp.tanh(v3)``,
``xp.permute_dims(v4, (1, 0))``, ``matmul(v5, xp.matrix_transpose(v6))``), and it writes
into a planned buffer (``out=``) only where the namespace's function takes one: a ufunc
(NumPy's and CuPy's elementwise functions, which array-api-compat passes through) and a
matrix product that accepts ``out``. Over array-api-strict nothing takes ``out=``, so every
operation is a plain expression and the plan has no buffers. Everything without a
specialised spelling calls the backend's kernel (``K_<prim>(..., **params)``), so every
primitive compiles.

``ArrayAPIEmitter(backend)`` has the interface of ``compiler/numpy_codegen.py``
(``namespace``, ``can_write``, ``emit``, ``allocate``, ``scalar``, ``native_dtype``).
"""

from __future__ import annotations

from ..backends.array_api import standard_name
from . import numpy_codegen as npc  # the dot_general forms (pure IR analysis, no NumPy calls)

# reductions: the ufunc whose reduce writes into a buffer, and the standard's function
_REDUCERS = {"reduce_sum": ("add", "sum"), "reduce_max": ("maximum", "max"),
             "reduce_min": ("minimum", "min")}


def _takes_out(fn, nin) -> bool:
    """Whether ``fn`` is a ufunc of ``nin`` inputs and one output (NumPy's or CuPy's: both
    have ``nin``/``nout`` and an ``out=`` argument)."""
    return getattr(fn, "nin", None) == nin and getattr(fn, "nout", None) == 1


class ArrayAPIEmitter:
    """Writes operations as calls on ``backend.xp`` (see the module docstring).

    Example:
        >>> import array_api_strict
        >>> from primflow.backends.array_api import ArrayAPIBackend
        >>> emitter = ArrayAPIEmitter(ArrayAPIBackend(array_api_strict))
        >>> emitter.function_name("mul"), emitter.function_name("tanh")
        ('xp.multiply', 'xp.tanh')
    """

    label = "array_api"  # Executable.backend of the programs it writes

    def __init__(self, backend):
        self.backend = backend
        self.xp = backend.xp
        self.matmul = backend.matmul
        self.matmul_takes_out = backend.matmul_takes_out
        # einsum is outside the standard: reduce_sum(mul(a, b)) is fused into one only
        # where the namespace has it (NumPy, CuPy, PyTorch)
        self.fuses_products = hasattr(self.xp, "einsum")
        # NumPy's einsum writes into out= (CuPy's and PyTorch's have none)
        self._einsum_into = getattr(getattr(self.xp, "einsum", None), "__module__",
                                    "").startswith("numpy")
        # NumPy's ufuncs reduce into a buffer (add.reduce(x, axis, out=)); CuPy's and
        # the standard's reductions make a fresh array
        self._reduces_into = all(_takes_out(getattr(self.xp, u, None), 2) and hasattr(
            getattr(self.xp, u), "reduce") for u, _ in _REDUCERS.values()) and (
            type(self.xp.add).__module__ == "numpy")
        self._names = {}  # prim -> "xp.<name>" or None
        for prim, kernel in backend.kernels.items():
            name = standard_name(prim)
            # (a real-only kernel checks its inputs eagerly; traced code is checked already)
            if getattr(self.xp, name, None) is getattr(kernel, "__wrapped__", kernel):
                self._names[prim] = f"xp.{name}"

    def function_name(self, prim):
        """``xp.<name>`` when ``prim``'s kernel is the namespace's function of that name
        (the elementwise functions), else None."""
        return self._names.get(prim)

    def namespace(self):
        """Globals of generated code: ``xp``, the kernels (``K_<prim>``), ``matmul``."""
        ns = {"xp": self.xp, "matmul": self.matmul, "empty": self._empty}
        for name, kernel in self.backend.kernels.items():
            ns[f"K_{name}"] = kernel
        return ns

    def _empty(self, shape, dtype):
        """A kernel's output array (``dtype`` native), on the backend's device."""
        kwargs = {} if self.backend.device is None else {"device": self.backend.device}
        return self.xp.empty(shape, dtype=dtype, **kwargs)

    def native_dtype(self, dtype):
        return self.backend.native_dtype(dtype)

    def scalar(self, value, dtype):
        """``value`` as a 0-d array of ``dtype`` (the standard's functions take arrays)."""
        return self.backend.asarray(value, dtype)

    def allocate(self, shape, dtype):
        return self.backend.empty(shape, dtype)

    def _ufunc(self, op):
        name = self.function_name(op.prim)
        takes_out = name is not None and _takes_out(self.backend.kernels[op.prim], len(op.inputs))
        return name if takes_out else None

    def can_write(self, op) -> bool:
        """Whether ``emit`` writes ``op`` into a preallocated buffer."""
        dtype = op.out.aval.dtype
        if not (dtype.is_floating or dtype.is_bool):
            return False
        if self._ufunc(op) is not None:
            return True
        if not dtype.is_floating:
            return False
        prim = op.prim
        if prim == "rsqrt" or (prim == "integer_pow" and op.params["y"] in (2, 3)):
            return (_takes_out(self.xp.sqrt, 1) if prim == "rsqrt"
                    else _takes_out(self.xp.multiply, 2))
        if prim in _REDUCERS:
            return self._reduces_into
        if prim == "mul_reduce_sum":
            return self._einsum_into
        if prim == "dot_general" and self.matmul_takes_out:
            return npc._matmul_form(op) is not None or (npc._gemm_form(op) or ("",))[0] == "gemm"
        return False

    def emit(self, op, args, out, params_name):
        """The source of one expression computing ``op`` on the operand expressions
        ``args``, into ``out`` (a buffer name) when ``can_write(op)``."""
        prim = op.prim
        into = "" if out is None else f", out={out}"
        name = self.function_name(prim)
        if name is not None:
            if out is not None and self._ufunc(op) is None:
                into = ""
            return f"{name}({', '.join(args)}{into})"
        if prim == "rsqrt" and out is not None:
            return f"xp.divide(1.0, xp.sqrt({args[0]}, out={out}), out={out})"
        if prim == "integer_pow" and op.params["y"] == 2:
            return f"xp.multiply({args[0]}, {args[0]}{into})"
        if prim == "integer_pow" and op.params["y"] == 3 and out is not None:
            return (f"xp.multiply(xp.multiply({args[0]}, {args[0]}, out={out}), {args[0]}, "
                    f"out={out})")
        if prim in _REDUCERS and op.out.aval.dtype.is_floating:
            ufunc, function = _REDUCERS[prim]
            axes = tuple(op.params["axes"])
            if out is not None:  # a ufunc's reduce writes into the buffer
                return f"xp.{ufunc}.reduce({args[0]}, axis={axes!r}, out={out})"
            return f"xp.{function}({args[0]}, axis={axes!r})"
        if prim == "mul_reduce_sum":  # only made where the namespace has einsum
            ndim = len(op.inputs[0].aval.shape)
            letters = "abcdefghijklmnopqrstuvwxyz"[:ndim]
            kept = "".join(c for d, c in enumerate(letters) if d not in op.params["axes"])
            return f"xp.einsum('{letters},{letters}->{kept}', {args[0]}, {args[1]}{into})"
        if prim == "dot_general" and npc._matmul_form(op) is not None:
            return self._emit_matmul(op, args, out)
        if prim == "dot_general" and (npc._gemm_form(op) or ("",))[0] == "gemm":
            return self._emit_gemm(op, args, out)
        if prim == "reshape":
            return f"xp.reshape({args[0]}, {tuple(op.params['shape'])!r})"
        if prim == "transpose":
            return f"xp.permute_dims({args[0]}, {tuple(op.params['perm'])!r})"
        if prim == "broadcast_in_dim":
            return self._emit_broadcast(op, args[0])
        return f"K_{prim}({', '.join(args)}{', ' if args else ''}**{params_name})"

    def _emit_broadcast(self, op, arg):
        shape = tuple(op.params["shape"])
        expanded = [1] * len(shape)
        for src, dst in enumerate(op.params["broadcast_dimensions"]):
            expanded[dst] = op.inputs[0].aval.shape[src]
        expanded = tuple(expanded)
        if expanded != tuple(op.inputs[0].aval.shape):
            arg = f"xp.reshape({arg}, {expanded!r})"
        return arg if expanded == shape else f"xp.broadcast_to({arg}, {shape!r})"

    def _emit_matmul(self, op, args, out):
        into = "" if out is None or not self.matmul_takes_out else f", out={out}"
        tx, ty = npc._matmul_form(op)
        a = f"xp.matrix_transpose({args[0]})" if tx else args[0]
        b = f"xp.matrix_transpose({args[1]})" if ty else args[1]
        return f"matmul({a}, {b}{into})"

    def _emit_gemm(self, op, args, out):
        into = "" if out is None or not self.matmul_takes_out else f", out={out}"
        _, (m, k, n), tx, ty = npc._gemm_form(op)
        x, y = op.inputs
        a = self._as_matrix(args[0], x.aval.shape, m, k, tx)
        b = self._as_matrix(args[1], y.aval.shape, k, n, ty)
        shape = tuple(op.out.aval.shape)
        if shape == (m, n):
            return f"matmul({a}, {b}{into})"
        if not into:
            return f"xp.reshape(matmul({a}, {b}), {shape!r})"
        return f"xp.reshape(matmul({a}, {b}, out=xp.reshape({out}, ({m}, {n}))), {shape!r})"

    @staticmethod
    def _as_matrix(arg, shape, rows, cols, transposed):
        if transposed:
            expr = arg if tuple(shape) == (cols, rows) else f"xp.reshape({arg}, ({cols}, {rows}))"
            return f"xp.matrix_transpose({expr})"
        return arg if tuple(shape) == (rows, cols) else f"xp.reshape({arg}, ({rows}, {cols}))"


_emitters = {}


def emitter_for(backend) -> ArrayAPIEmitter:
    """The (cached) emitter of ``backend``, an ``ArrayAPIBackend``.

    Example:
        >>> import array_api_strict
        >>> from primflow.backends import make_backend
        >>> emitter_for(make_backend("array_api", array_api_strict)).xp.__name__
        'array_api_strict'
    """
    found = _emitters.get(id(backend))
    if found is None or found.backend is not backend:
        found = _emitters[id(backend)] = ArrayAPIEmitter(backend)
    return found

