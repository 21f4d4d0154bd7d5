"""Whole-loop numba kernels for ``scan`` and ``while`` operations.

A compiled region called once per step from Python costs a few microseconds of interpreter
work per operation (NumPy call, buffer lookup, argument checks) on top of the arithmetic:
for an RK4 step of a small MLP (8 matrix-vector products, ~40 elementwise operations)
that is ~30-70 us a step, several times the arithmetic. When every operation of a loop's
regions has a numba form, the whole loop becomes ONE numba function: the Python ``for``
(or ``while``) over the steps, the stacked ``ys`` of a ``scan`` written into arrays the
launcher allocates once. One call runs all steps, and a step allocates nothing: the
results of elementwise operations and matrix-vector products are written by explicit
loops into buffers allocated before the first step (consecutive elementwise results of one
size share one loop, chains of them one expression), and a carry trades arrays with the
buffer it was computed into. Other operations (reductions, views that are not contiguous,
matrix-matrix products through ``np.dot``) stay numba array expressions.

What has a numba form (``supports``): arithmetic, comparisons, ``select``, the common
transcendental functions, casts, ``full``/``iota`` (hoisted out of the loop), reshapes,
transposes, broadcasts, slices, edge padding (a slice's transpose), concatenation, 2-d
``dot_general`` without batch dimensions, and sum/max/min reductions (partial ones:
sums), on float32/float64/int32/int64/bool values. Anything else (random draws, nested control flow, linear algebra,
gathers, batched matrix products, complex numbers) keeps the loop in Python around the
compiled regions (``compiler/_control.py``).

The kernels share ``numba_codegen``'s machinery: the source goes to a file in the cache
directory, numba compiles it for one signature (all array inputs C-contiguous, the
launcher copies those that are not), under ``pf.jit``'s default ``auto`` backend in a
background process while the NumPy code runs, and later processes load it from numba's
disk cache.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
import threading

import numpy as np

from ..ir.regions import regions_of
from .numba_codegen import KernelSpec, _literal, cache_dir
from .numpy_codegen import _gemm_form
from .spellings import BY_CODE, integer_safe, numba_form

DTYPES = frozenset({"float32", "float64", "int32", "int64", "bool"})
# as numba_codegen's kernels: reassociation lets LLVM vectorise the dot products' sums
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}

# each elementwise primitive's scalar (and array) form is its declaration's (Lowering.numba,
# read through spellings.py); tanh, select, integer_pow and casts are written here


def _elementwise(prim):
    return prim in BY_CODE or numba_form(prim) is not None


_STRUCTURAL = frozenset({"full", "iota", "reshape", "broadcast_in_dim", "transpose", "slice",
                         "concatenate", "pad", "dot_general", "reduce_sum", "reduce_max",
                         "reduce_min"})
LOOPS = frozenset({"scan", "while"})
_spec_cache = {}  # id(op) -> (op, spec or None): compile_program asks more than once
_failed = set()  # hashes of loop kernels numba could not compile (not tried again)


# tanh that LLVM vectorises: numba calls the scalar libm tanh per element (~8 ns, ~6x
# NumPy's SIMD loop), which made tanh a fifth of an MLP loop body. |x| < 0.625: Cephes'
# rational approximation x + x z P(z) / Q(z), z = x^2 (relative error 2.5e-16); above:
# 1 - 2 / (exp(2|x|) + 1) with exp(y) = 2^k e^r (Cody-Waite reduction, a degree-12 Taylor
# polynomial for |r| <= ln2 / 2, 2^k from a table: tanh(20) is 1.0 in float64, so |x| is
# clamped there). At most 2 ulp from NumPy's tanh (tests/test_numba_loops.py).
TANH_SOURCE = """
POW2_ = np.array([2.0 ** k for k in range(64)])


@numba.njit(inline="always", error_model="numpy", FLAGS)
def tanh1_(v):
    a = min(abs(v), 20.0)
    z = a * a
    p = (-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z \
        - 1.61468768441708447952e3
    q = ((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z \
        + 4.84406305325125486048e3
    small = a + a * z * p / q
    y = 2.0 * a
    k = np.floor(y * 1.4426950408889634 + 0.5)
    r = (y - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
    e = 1.0 / 479001600.0
    for c in (1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
              1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
        e = e * r + c
    large = 1.0 - 2.0 / (e * POW2_[np.int64(k)] + 1.0)
    return math.copysign(small if a < 0.625 else large, v)


@numba.njit(inline="always", error_model="numpy", FLAGS)
def tanh_(x):  # x: C-contiguous (the kernel passes views through np.ascontiguousarray)
    out = np.empty_like(x)
    flat, result = x.reshape(x.size), out.reshape(out.size)
    for i in range(x.size):
        result[i] = tanh1_(flat[i])
    return out

"""


# the loop-invariant matrices of matrix-vector products are copied once per call to memory
# starting at a 64-byte boundary (numba's and NumPy's allocations guarantee 32 and 16): a
# 64-byte (AVX-512) load of a misaligned row spans two cache lines, which made an RK4 step
# of a 256-64-256 MLP ~14% slower
ALIGNED_SOURCE = """

@numba.njit(inline="always")
def aligned_copy_(a):
    size = a.size
    buffer = np.empty(size + 64 // a.itemsize, a.dtype)
    start = ((64 - buffer.ctypes.data % 64) % 64) // a.itemsize
    out = buffer[start:start + size].reshape(a.shape)
    out[...] = a
    return out

"""


# prefetch_: a hint to fetch the next step's slices of a scan's xs while this step computes:
# read in the loop (backwards for a reverse scan) they missed the caches at every step,
# ~0.7 ms of the 8 ms reverse loop of an RK4 gradient (the four saved activations of 64
# values). stream_: a store that does not read the line into the caches first (LLVM's
# nontemporal hint; a plain store elsewhere), for the stacked ys, read only after the
# loop; stream_fence_ orders them before the kernel returns.
INTRINSICS_SOURCE = """
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


@intrinsic
def prefetch_(typingctx, array, index):
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", [address.type],
            ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32]))
        builder.call(fn, [address, i32(0), i32(3), i32(1)])  # read, keep, data cache
        return context.get_dummy_value()

    return types.void(array, index), codegen


@intrinsic
def stream_(typingctx, array, index, value):
    if not isinstance(array, types.Array) or array.layout != "C":
        return None

    def codegen(context, builder, signature, args):
        dtype = signature.args[0].dtype
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        value = context.cast(builder, args[2], signature.args[2], dtype)
        store = builder.store(context.get_value_as_data(builder, dtype, value),
                              builder.gep(data, [args[1]]))
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic
def stream_fence_(typingctx):
    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen

"""


class Unsupported(Exception):
    """An operation of the loop has no numba form here (the loop stays in Python)."""


def supports(op) -> bool:
    """Whether the control-flow operation ``op`` (a ``scan`` or ``while``) can run as one
    numba kernel.

    Example:
        >>> import primflow as pf
        >>> f = pf.jit(lambda x: pf.scan(lambda c, v: (c * v, c), x[0], x)[0])
        >>> op = [o for o in f.lower(pf.ones([3])).program.ops if o.prim == "scan"][0]
        >>> supports(op)
        True
    """
    return loop_spec(op) is not None


def loop_spec(op):
    """The ``KernelSpec`` (source, signature, hash, cache path) of ``op``'s loop kernel, or
    None when some operation of its regions has no numba form. Cached on the operation."""
    if op.prim not in LOOPS:
        return None
    hit = _spec_cache.get(id(op))
    if hit is not None and hit[0] is op:
        return hit[1]
    try:
        source, signature = _loop_source(op)
    except Unsupported:
        spec = None
    else:
        sha = hashlib.sha1((source + repr(signature)).encode()).hexdigest()[:16]
        spec = KernelSpec(source, signature, sha, os.path.join(cache_dir(), f"L_{sha}.py"))
    if len(_spec_cache) > 256:
        _spec_cache.clear()
    _spec_cache[id(op)] = (op, spec)  # (the operation is kept: its id stays its own)
    return spec


def loop_specs(fn) -> list:
    """The kernel specs of the loops of ``fn`` (its own operations) that numba can run."""
    specs = []
    for op in fn.ops:
        spec = loop_spec(op)
        if spec is not None and not _rejected(spec):
            specs.append(spec)
    return specs


def _rejected(spec) -> bool:
    """Whether numba failed to compile this kernel before (here or in a compile worker)."""
    from .numba_worker import failed_marker

    return spec.sha in _failed or os.path.exists(failed_marker(spec.path))


# ---- source generation ---------------------------------------------------------------------

def _dtype(v):
    return v.aval.dtype.name


def _shape(v):
    return tuple(v.aval.shape)


def _scalar_cast(expr, dtype):
    return f"bool({expr})" if dtype == "bool" else f"np.{dtype}({expr})"


class _Values:
    """What each IR value is inside the kernel: an expression and its kind ("s": a
    numba scalar, for shape-() values; "C": a C-contiguous array; "A": any other array;
    "lit": a constant, written as a scalar literal where an elementwise operation can
    broadcast it, else materialised before the loop)."""

    def __init__(self, hoisted):
        self.expr = {}
        self.kind = {}
        self.literal = {}  # value -> (literal source, shape) for full values
        self.hoisted = hoisted  # lines computed once before the loop
        self.count = 0
        self.stmts = []  # statements the current operation needs before its own line
        self.invariant = set()  # expressions that are the same at every step
        self.cache = {}  # hoisted derived values (transposed weights), by what they derive
        self.allow_loops = True  # matrix-vector products as loops (else np.dot)
        self.base = {}  # reshaped values -> (expression, shape) of the array they view
        self.flat_src = {}  # reshaped values -> the value whose elements they are, in order
        self.inlined = {}  # elementwise values written into their one reader: their op
        self.owned = set()  # buffers the kernel allocates once and rewrites every step

    def fresh(self, prefix="t"):
        self.count += 1
        return f"{prefix}{self.count}"

    def contiguous(self, v):
        """An expression for ``v`` as a C-contiguous array (copying a view if needed)."""
        kind = self.kind[v]
        if kind == "lit":
            return self.materialise(v)
        if kind == "A":
            return f"np.ascontiguousarray({self.expr[v]})"
        return self.expr[v]

    def view(self, v, shape):
        """An expression for the C-contiguous array ``v`` (or a contiguous copy of a view,
        made by a statement) with ``shape``: chains of reshapes read their first source,
        and a reshape back to that source's shape is the source itself."""
        if self.kind[v] == "A":
            name = self.fresh("c")
            self.stmts.append(f"{name} = np.ascontiguousarray({self.expr[v]})")
            self.expr[v], self.kind[v] = name, "C"
        if self.kind[v] == "lit":
            base, base_shape = self.materialise(v), _shape(v)
        else:
            base, base_shape = self.base.get(v) or (self.expr[v], _shape(v))
        return base if tuple(shape) == tuple(base_shape) else f"{base}.reshape({shape!r})"

    def materialise(self, v):
        """The array expression of a constant (hoisted out of the loop once)."""
        lit, shape = self.literal[v]
        name = self.expr.get(v)
        if name is None:
            name = self.fresh("h")
            self.hoisted.append(f"{name} = np.full({shape!r}, {lit})")
            self.expr[v] = name
        return name

    def array(self, v):
        """An expression usable as an array operand (any layout)."""
        if self.kind[v] == "lit":
            return self.materialise(v) if _shape(v) else self.literal[v][0]
        return self.expr[v]


def _check_value(v):
    if _dtype(v) not in DTYPES:
        raise Unsupported(f"dtype {_dtype(v)}")


def _emit_region(region, inputs, values, lines, indent):
    """Writes ``region``'s operations as kernel statements (``lines``, at ``indent``) with
    its inputs bound to ``inputs`` ([(expr, kind)]); returns the outputs' [(expr, kind)]."""
    for v, (expr, kind) in zip(region.inputs, inputs):
        _check_value(v)
        values.expr[v], values.kind[v] = expr, kind
    pad = "    " * indent
    # an elementwise result read once, by another elementwise operation, is written into
    # its reader's expression (no array of its own); the other elementwise results are
    # written by explicit loops into buffers allocated once, before the steps, and
    # consecutive ones of the same size share one loop (_ElementLoop)
    uses = {}
    for op in region.ops:
        for v in op.inputs:
            uses[v] = uses.get(v, 0) + (1 if _elementwise(op.prim) else 2)
    for v in region.outputs:
        uses[v] = uses.get(v, 0) + 2
    loop = _ElementLoop(values, lines, pad)
    for op in region.ops:
        _check_value(op.out)
        for v in op.inputs:
            _check_value(v)
        expr, kind = _emit_op(op, values)
        if values.stmts:  # (they may read the open loop's results)
            loop.flush()
            lines += [pad + line for line in values.stmts]
            values.stmts = []
        if kind == "lit":
            continue
        if kind == "view":
            values.kind[op.out] = "C"
            continue
        if _elementwise(op.prim) and uses.get(op.out) == 1 and len(expr) < 400:
            values.expr[op.out], values.kind[op.out] = f"({expr})", kind
            if kind == "C":
                values.inlined[op.out] = op
            continue
        if _elementwise(op.prim) and kind == "C" and loop.add(op):
            continue
        loop.flush()
        name = values.fresh()
        lines.append(f"{pad}{name} = {expr}")
        values.expr[op.out], values.kind[op.out] = name, kind
    loop.flush()
    out = []
    for v in region.outputs:
        if values.kind[v] == "lit":
            lit, shape = values.literal[v]
            out.append((values.materialise(v) if shape else lit, "C" if shape else "s"))
        else:
            out.append((values.expr[v], values.kind[v]))
    return out


class _Flush(Exception):
    """An element reads a result of the open loop other than through its flat index."""


class _ElementLoop:
    """Consecutive elementwise results of one size computed by ONE loop over their flat
    index, each into a buffer allocated before the steps: ``for q in range(size): v1 =
    ...; b1[q] = v1; v2 = ... v1 ...; b2[q] = v2``. A chain of inlined operations becomes
    one scalar expression (tanh the inlined ``tanh1_``), so a step allocates nothing and
    reads each operand element once. Operands must be C-contiguous arrays of the result's
    size (or scalars, constants); a view (transpose, broadcast, slice) keeps the NumPy
    array expression."""

    def __init__(self, values, lines, pad):
        self.values, self.lines, self.pad = values, lines, pad
        self._reset()

    def _reset(self):
        self.size = None
        self.pre = []  # flat views the loop reads, made before it
        self.body = []
        self.pending = {}  # buffer name -> the loop's scalar holding its element
        self.flat = {}  # n-d array expression -> its flat view's name

    def flush(self):
        if self.body:
            self.lines += [self.pad + line for line in self.pre]
            self.lines.append(f"{self.pad}for q in range({self.size}):")
            self.lines += [f"{self.pad}    {line}" for line in self.body]
        self._reset()

    def add(self, op):
        """Adds the computation of ``op`` (elementwise) to the loop, flushing it first when
        the result has another size or reads the loop's results as a view; False when it
        has no loop form."""
        v = op.out
        if not all(_has_element_form(u, self.values) for u in op.inputs):
            return False
        size = math.prod(_shape(v))
        if self.size is not None and self.size != size:
            self.flush()
        try:
            expr = _element_expr(op, [self._element(u) for u in op.inputs])
        except _Flush:
            self.flush()
            expr = _element_expr(op, [self._element(u) for u in op.inputs])
        values, dtype = self.values, _dtype(v)
        self.size = size
        buf, local = values.fresh("b"), values.fresh("v")
        np_dtype = "np.bool_" if dtype == "bool" else f"np.{dtype}"
        values.hoisted.append(f"{buf} = np.empty({_shape(v)!r}, {np_dtype})")
        values.owned.add(buf)
        if dtype in ("float32", "int32"):  # (numba's scalar arithmetic widens int32)
            expr = _scalar_cast(expr, dtype)
        self.body.append(f"{local} = {expr}")
        self.body.append(f"{self._flat_name(buf, _shape(v))}[q] = {local}")
        self.pending[buf] = local
        values.expr[v], values.kind[v] = buf, "C"
        return True

    def _flat_name(self, expr, shape):
        if len(shape) <= 1:
            return expr
        name = self.flat.get(expr)
        if name is None:
            name = self.flat[expr] = self.values.fresh("f")
            self.pre.append(f"{name} = {expr}.reshape(({math.prod(shape)},))")
        return name

    def _element(self, v):
        """The scalar expression of element ``q`` of ``v``."""
        values = self.values
        op = values.inlined.get(v)
        if op is not None:
            return "(" + _element_expr(op, [self._element(u) for u in op.inputs]) + ")"
        root = values.flat_src.get(v, v)
        kind = values.kind[root]
        if kind == "s":
            return values.expr[root]
        if kind == "lit":
            return values.literal[root][0]
        expr, shape = values.base.get(root) or (values.expr[root], _shape(root))
        if expr in self.pending:
            return self.pending[expr]
        if self.pending and re.search(r"\b(" + "|".join(self.pending) + r")\b", expr):
            raise _Flush
        return f"{self._flat_name(expr, shape)}[q]"


def _has_element_form(v, values):
    """Whether ``v`` (an elementwise result) can be computed element by element: every
    array it reads (through inlined operations) is C-contiguous, a scalar or a constant."""
    op = values.inlined.get(v)
    if op is not None:
        return all(_has_element_form(u, values) for u in op.inputs)
    root = values.flat_src.get(v, v)
    return values.kind.get(root) in ("s", "lit", "C")


def _element_expr(op, args):
    """The scalar form of elementwise ``op`` on the scalar expressions ``args``."""
    prim, dtype = op.prim, _dtype(op.out)
    if prim == "tanh":
        return f"tanh1_({args[0]})"
    form = numba_form(prim)
    if form is not None:
        return form.format(*args, one=_literal(1, dtype))
    if prim == "select":
        return f"({args[1]} if {args[0]} else {args[2]})"
    if prim == "integer_pow":
        y = op.params["y"]
        expr = "(" + " * ".join([args[0]] * abs(y)) + ")"
        return f"({_literal(1, dtype)} / {expr})" if y < 0 else expr
    # convert_element_type
    if _dtype(op.inputs[0]) == dtype:
        return args[0]
    return f"({args[0]} != 0)" if dtype == "bool" else _scalar_cast(args[0], dtype)


def _emit_op(op, values):  # noqa: C901 - one case per primitive family
    prim = op.prim
    out = op.out
    dtype = _dtype(out)
    shape = _shape(out)
    scalar_out = shape == ()
    if prim == "full":
        values.literal[out] = (_literal(op.params["value"], dtype), shape)
        values.kind[out] = "lit"
        return None, "lit"
    if _elementwise(prim):
        if not integer_safe(prim) and not out.aval.dtype.is_floating:
            raise Unsupported(f"{prim} on {dtype}")
        if any(not v.aval.dtype.is_floating and not v.aval.dtype.is_bool
               and not _dtype(v).startswith("int") for v in op.inputs):
            raise Unsupported("complex")
        args = []
        for v in op.inputs:
            if values.kind[v] == "lit":
                # a constant broadcasts as a scalar when another operand has the full shape
                others = [u for u in op.inputs if u is not v and values.kind[u] != "lit"
                          and _shape(u) == shape]
                args.append(values.literal[v][0] if (others or scalar_out)
                            else values.materialise(v))
            else:
                args.append(values.expr[v])
        if prim == "tanh" and scalar_out:
            expr = f"tanh1_({args[0]})"
        elif prim == "tanh":
            arg = args[0]
            if values.kind.get(op.inputs[0]) == "A":
                arg = f"np.ascontiguousarray({arg})"
            expr = f"tanh_({arg})"
        elif numba_form(prim) is not None:
            expr = numba_form(prim).format(*args, one=_literal(1, dtype))
        elif prim == "select":
            if scalar_out:
                expr = f"({args[1]} if {args[0]} else {args[2]})"
            else:
                expr = f"np.where({args[0]}, {args[1]}, {args[2]})"
        elif prim == "integer_pow":
            y = op.params["y"]
            if y == 0:
                return _constant(values, out, 1)
            expr = "(" + " * ".join([args[0]] * abs(y)) + ")"
            if y < 0:
                if not out.aval.dtype.is_floating:
                    raise Unsupported("negative integer power of an integer")
                expr = f"({_literal(1, dtype)} / {expr})"
        else:  # convert_element_type
            src = op.inputs[0]
            if scalar_out:
                expr = (f"({args[0]} != 0)" if dtype == "bool"
                        else _scalar_cast(args[0], dtype))
            elif dtype == "bool":
                expr = f"({args[0]} != 0)"
            else:
                expr = f"{args[0]}.astype(np.{dtype})"
            if _dtype(src) == dtype:
                expr = args[0]
        if scalar_out:
            return _scalar_cast(expr, dtype), "s"
        return expr, "C"
    if prim not in _STRUCTURAL:
        raise Unsupported(prim)
    if prim == "iota":
        d = op.params["dimension"]
        expanded = [1] * len(shape)
        expanded[d] = shape[d]
        name = values.fresh("h")
        values.hoisted.append(f"{name} = np.ascontiguousarray(np.broadcast_to(np.arange("
                              f"{shape[d]}).astype(np.{dtype}).reshape({tuple(expanded)!r}), "
                              f"{shape!r}))")
        return name, "C"
    x = op.inputs[0]
    if prim == "reshape":
        if values.kind[x] == "lit":
            return _constant(values, out, None, values.literal[x][0])
        if values.kind[x] == "s":
            return (f"np.full({shape!r}, {values.expr[x]})", "C") if shape else (
                values.expr[x], "s")
        if scalar_out:
            return f"{values.contiguous(x)}.reshape((1,))[0]", "s"
        values.expr[out] = values.view(x, shape)  # a view: no statement of its own
        values.base[out] = values.base.get(x) or (values.expr[x], _shape(x))
        values.flat_src[out] = values.flat_src.get(x, x)
        return values.expr[out], "view"
    if prim == "broadcast_in_dim":
        if values.kind[x] == "lit":
            return _constant(values, out, None, values.literal[x][0])
        if values.kind[x] == "s":
            return f"np.full({shape!r}, {values.expr[x]})", "C"
        expanded = [1] * len(shape)
        for src_dim, dst in enumerate(op.params["broadcast_dimensions"]):
            expanded[dst] = _shape(x)[src_dim]
        return (f"np.broadcast_to({values.contiguous(x)}.reshape({tuple(expanded)!r}), "
                f"{shape!r})", "A")
    if prim == "transpose":
        if values.kind[x] == "s":
            return values.expr[x], "s"
        perm = tuple(op.params["perm"])
        if perm == tuple(range(len(perm))):
            return values.array(x), values.kind[x] if values.kind[x] != "lit" else "C"
        return f"np.transpose({values.array(x)}, {perm!r})", "A"
    if prim == "slice":
        if values.kind[x] == "s":
            return values.expr[x], "s"
        index = ", ".join(f"{s}:{e}:{st}" for s, e, st in zip(
            op.params["start"], op.params["limit"], op.params["strides"]))
        if scalar_out:
            return f"np.ascontiguousarray({values.array(x)}[{index}]).reshape((1,))[0]", "s"
        return f"{values.array(x)}[{index}]", "A"
    if prim == "pad":  # the transpose of a slice: indexing's reverse mode in a loop body
        return _emit_pad(op, values, shape, dtype)
    if prim == "concatenate":
        if any(values.kind[v] == "s" for v in op.inputs):
            raise Unsupported("concatenate of scalars")
        parts = ", ".join(values.array(v) for v in op.inputs)
        return f"np.concatenate(({parts},), axis={op.params['axis']})", "C"
    if prim == "dot_general":
        return _emit_dot(op, values)
    # reductions
    axes = tuple(sorted(op.params["axes"]))
    if values.kind[x] == "s" or not axes:
        return values.array(x), values.kind[x] if values.kind[x] != "lit" else "C"
    fn = {"reduce_sum": "np.sum", "reduce_max": "np.max", "reduce_min": "np.min"}[prim]
    src = values.array(x)
    if scalar_out:
        return _scalar_cast(f"{fn}({src})", dtype), "s"
    if prim != "reduce_sum":
        raise Unsupported(f"{prim} over some axes")
    expr = src
    for a in reversed(axes):
        expr = f"np.sum({expr}, axis={a})"
    if dtype != "float64":
        expr = f"{expr}.astype(np.{dtype})"
    return expr, "C"


def _emit_pad(op, values, shape, dtype):
    """``pad`` with non-negative edges and no interior padding: a filled array (the padding
    value) with the operand written into its middle, by statements before the result."""
    x, fill = op.inputs
    config = op.params["config"]
    if not _shape(x) or any(lo < 0 or hi < 0 or interior for lo, hi, interior in config):
        raise Unsupported("pad of a scalar, or with interior or negative padding")
    if values.kind[fill] == "lit":
        fill_expr = values.literal[fill][0]
    elif values.kind[fill] == "s":
        fill_expr = values.expr[fill]
    else:
        raise Unsupported("pad with an array padding value")
    name = values.fresh("p")
    index = ", ".join(f"{lo}:{lo + n}" for (lo, _, _), n in zip(config, _shape(x)))
    values.stmts.append(f"{name} = np.full({shape!r}, {fill_expr}, np.{dtype})")
    values.stmts.append(f"{name}[{index}] = {values.array(x)}")
    return name, "C"


def _constant(values, out, value, literal=None):
    values.literal[out] = (literal if literal is not None else _literal(value, _dtype(out)),
                           _shape(out))
    values.kind[out] = "lit"
    return None, "lit"


def _emit_dot(op, values):
    x, y = op.inputs
    if not (x.aval.dtype.is_floating and y.aval.dtype.is_floating) or _dtype(x) != _dtype(y):
        raise Unsupported("dot_general on non-float operands")
    if values.kind[x] == "s" or values.kind[y] == "s":
        raise Unsupported("dot_general of a scalar")
    form = _gemm_form(op)
    if form is None or form[0] != "gemm":
        raise Unsupported("dot_general with batch dimensions or an unusual layout")
    _, (m, k, n), tx, ty = form

    def matrix(v, rows, cols, transposed):
        want = (cols, rows) if transposed else (rows, cols)
        if _shape(v) == want and values.kind[v] != "lit":
            expr = values.expr[v]
        else:
            expr = f"{values.contiguous(v)}.reshape({want!r})"
        return f"{expr}.T" if transposed else expr

    expr = _matvec(op, values, m, k, n, tx, ty, matrix)
    if expr is not None:
        if op.out in values.base:
            values.expr[op.out] = expr
            return expr, "view"
        return expr, "C"
    if expr is None:
        expr = f"np.dot({matrix(x, m, k, tx)}, {matrix(y, k, n, ty)})"
    if _shape(op.out) != (m, n):
        if _shape(op.out) == ():
            return _scalar_cast(f"{expr}[0, 0]", _dtype(op.out)), "s"
        expr = f"{expr}.reshape({_shape(op.out)!r})"
    return expr, "C"


def _matvec(op, values, m, k, n, tx, ty, matrix):
    """A vector-matrix (or matrix-vector) product as a loop of dot products over the
    contiguous rows of the matrix (read transposed: a loop-invariant weight's transpose is
    copied once, before the loop), with the sizes written in: for the small products of a
    loop body (an MLP layer on one state) this runs near the speed the matrix streams from
    cache (~0.75 us for 256x64 float64), where a BLAS call through np.dot costs ~1.1 us.
    Returns the result's name, or None to use np.dot."""
    x, y = op.inputs
    if not values.allow_loops:
        return None
    if m == 1 and n > 1:  # vector x (k) times matrix y (k, n): rows of y's transpose
        vec, mat, rows_n, given_as_rows = x, y, n, ty
    elif n == 1 and m > 1:  # matrix x (m, k) times vector y (k)
        vec, mat, rows_n, given_as_rows = y, x, m, not tx
    else:
        return None
    dtype = _dtype(op.out)
    invariant = values.kind[mat] == "C" and values.expr[mat] in values.invariant
    if given_as_rows and invariant:  # stored as (rows_n, k): its rows are what each reads
        key = ("rows", values.expr[mat])  # (an aligned copy, made once)
        rows = values.cache.get(key)
        if rows is None:
            rows = values.cache[key] = values.fresh("h")
            values.hoisted.append(
                f"{rows} = aligned_copy_({matrix(mat, rows_n, k, False)})")
    elif given_as_rows:
        rows = matrix(mat, rows_n, k, False)
    elif invariant:
        key = ("T", values.expr[mat])  # stored as (k, rows_n): transposed once
        rows = values.cache.get(key)
        if rows is None:
            rows = values.cache[key] = values.fresh("h")
            values.hoisted.append(
                f"{rows} = aligned_copy_({matrix(mat, k, rows_n, False)}.T)")
    else:
        return None
    if values.kind[mat] == "A" and given_as_rows:
        rows = f"np.ascontiguousarray({rows})"
    vector, out = values.view(vec, (k,)), values.fresh("b")
    if not rows.isidentifier():  # (an expression would be evaluated at every element)
        name = values.fresh("m")
        values.stmts.append(f"{name} = {rows}")
        rows = name
    if not vector.isidentifier():
        name = values.fresh("u")
        values.stmts.append(f"{name} = {vector}")
        vector = name
    values.hoisted.append(f"{out} = np.empty({rows_n}, np.{dtype})")  # (once, not per step)
    values.owned.add(out)
    values.stmts += _dot_rows(rows, vector, out, rows_n, k, _literal(0, dtype))
    if _shape(op.out) == (rows_n,):
        return out
    values.base[op.out] = (out, (rows_n,))  # a view of the vector (read through it later)
    return f"{out}.reshape({_shape(op.out)!r})"


def _dot_rows(rows, vector, out, rows_n, k, zero):
    """Statements computing ``out[j] = rows[j, :] @ vector`` for ``j < rows_n``; for long
    rows (``k >= 128``) four rows at a time: the four dot products share each load of the
    vector and run as four independent chains (one row alone waits on its accumulator's
    additions). Measured on an RK4 step of a 256-64-256 MLP: 7% faster; for short rows
    (64) four at a time was slower."""
    lines = []
    four = rows_n - rows_n % 4 if k >= 128 else 0
    if four:
        lines += [f"for j in range(0, {four}, 4):"]
        lines += [f"    {out}_{r} = {zero}" for r in range(4)]
        lines += [f"    for i in range({k}):", f"        {out}_v = {vector}[i]"]
        lines += [f"        {out}_{r} += {rows}[j + {r}, i] * {out}_v" for r in range(4)]
        lines += [f"    {out}[j + {r}] = {out}_{r}" for r in range(4)]
    if four < rows_n:
        lines += [f"for j in range({four}, {rows_n}):",
                  f"    {out}_0 = {zero}",
                  f"    for i in range({k}):",
                  f"        {out}_0 += {rows}[j, i] * {vector}[i]",
                  f"    {out}[j] = {out}_0"]
    return lines


def _loop_source(op):
    """``(source, signature)`` of the kernel running ``op``; raises ``Unsupported``."""
    for _, region in regions_of(op):
        for inner in region.ops:
            if regions_of(inner):
                raise Unsupported("nested control flow")
    values = _Values(hoisted=[])
    params, pre, sig = [], [], []
    body = []
    args = []  # the loop's operand expressions and kinds, in operand order

    def operand(i, v, carry):
        _check_value(v)
        name = f"a{i}"
        params.append(name)
        sig.append((_dtype(v), len(_shape(v)), "C", True))
        if _shape(v) == ():
            pre.append(f"    {name}s = {name}[()]")
            return f"{name}s", "s"
        if carry:  # rebound every step to arrays the kernel makes: a writable C array
            pre.append(f"    {name}c = {name}.copy()")
            return f"{name}c", "C"
        return name, "C"

    if op.prim == "scan":
        k, m = op.params["n_carry"], op.params["n_xs"]
        reverse = op.params["reverse"]
        body_fn = op.params["body"]
        for i, v in enumerate(op.inputs):
            args.append(operand(i, v, i < k))
        carry = args[:k]
        # the trip count is an argument (a 0-d int64 array): one kernel for every length
        params.append("steps")
        sig.append(("int64", 0, "C", True))
        pre.append("    n = steps[()]")
        ys = body_fn.outputs[k:]
        out_names = []
        for j, v in enumerate(ys):
            _check_value(v)
            name = f"y{j}"
            params.append(name)
            out_names.append(name)
            sig.append((_dtype(v), len(_shape(v)) + 1, "C", False))
        slices = []
        for i in range(k, k + m):  # each step's slices of the xs, taken once
            row = math.prod(_shape(op.inputs[i])[1:])
            line = 64 // op.inputs[i].aval.dtype.itemsize  # (elements per cache line)
            if row >= line:  # (never faults: the last step's hint points past the end)
                body += [f"        for q in range(0, {row}, {line}):",
                         f"            prefetch_({args[i][0]}, (t {'-' if reverse else '+'} 1)"
                         f" * {row} + q)"]
            body.append(f"        x{i} = {args[i][0]}[t]")
            slices.append((f"x{i}", "s" if len(_shape(op.inputs[i])) == 1 else "C"))
        loop = ("    for t in range(n - 1, -1, -1):" if reverse
                else "    for t in range(n):")
        region_in = carry + slices + args[k + m:]
        values.invariant.update(expr for expr, _ in args[k + m:])
        outs = _emit_region(body_fn, region_in, values, body, 2)
        rows = {}  # row size -> [(stacked output's flat view, 1-d row)]
        for j, (expr, kind) in enumerate(outs[k:]):
            v = body_fn.outputs[k + j]
            size = math.prod(_shape(v))
            if kind == "s" or not _shape(v) or values.kind.get(v) not in ("C", "A", "lit"):
                body.append(f"        {out_names[j]}[t] = {expr}")
                continue
            row = values.view(v, (size,))
            body += ["        " + line for line in values.stmts]
            values.stmts = []
            if not row.isidentifier():
                name = values.fresh("r")
                body.append(f"        {name} = {row}")
                row = name
            rows.setdefault(size, []).append((out_names[j], row, v.aval.dtype.itemsize))
        # the rows are copied by explicit loops, one per row size, with streaming stores
        # (stream_): an RK4 step's eight saved rows cost ~1.6 us of its 8 as slice
        # assignments, ~1 us as plain stores (every line read from memory before it is
        # written, the rows going backwards in a reverse scan), ~0 streamed
        # (rows shorter than a cache line are stored as usual: a streamed partial line
        # costs more than it saves)
        for size, pairs in rows.items():
            body.append(f"        for q in range({size}):")
            for stacked, row, itemsize in pairs:
                if size * itemsize >= 64:
                    body.append(f"            stream_({stacked}, t * {size} + q, {row}[q])")
                else:
                    values.hoisted.append(f"{stacked}f = {stacked}.reshape((n, {size}))")
                    body.append(f"            {stacked}f[t, q] = {row}[q]")
        carry_names = [c[0] for c in carry]
        body += _rebind(carry_names, outs[:k], [c[1] for c in carry], values,
                        body_fn.outputs[:k], 2)
        lines = [loop] + body
        returned = carry_names
    else:  # while
        k = op.params["n_carry"]
        for i, v in enumerate(op.inputs):
            args.append(operand(i, v, i < k))
        carry = args[:k]
        cond_lines = []
        values.invariant.update(expr for expr, _ in args[k:])
        (test, _), = _emit_region(op.params["cond"], carry + args[k:], values, cond_lines, 2)
        outs = _emit_region(op.params["body"], carry + args[k:], values, body, 2)
        carry_names = [c[0] for c in carry]
        lines = (["    while True:"] + cond_lines + [f"        if not {test}:",
                                                      "            break"]
                 + body + _rebind(carry_names, outs, [c[1] for c in carry], values,
                                          op.params["body"].outputs, 2))
        returned = carry_names
    flags = "fastmath={" + ", ".join(repr(f) for f in sorted(FASTMATH)) + "}"
    header = "import math\n\nimport numpy as np\nimport numba\n\n"
    if "tanh" in "\n".join(lines + values.hoisted):
        header += TANH_SOURCE.replace("FLAGS", flags)
    if "aligned_copy_(" in "\n".join(values.hoisted):
        header += ALIGNED_SOURCE
    if "prefetch_(" in "\n".join(lines) or "stream_(" in "\n".join(lines):
        header += INTRINSICS_SOURCE
    header += f"\n@numba.njit(cache=True, nogil=True, error_model='numpy', {flags})\n"
    text = [f"def kernel({', '.join(params)}):"] + pre
    text += ["    " + h for h in values.hoisted] + lines
    if "stream_(" in "\n".join(lines):
        text.append("    stream_fence_()")  # (streamed stores are visible to other threads)
    text.append(f"    return ({', '.join(returned)}{',' if len(returned) == 1 else ''})"
                if returned else "    return 0")
    return header + "\n".join(text) + "\n", sig


def _rebind(names, outs, kinds, values, out_values, indent):
    """Assigns each step's carry outputs to the carry names, keeping each one's numba type
    (a C-contiguous array or a scalar): a view is copied, a constant made an array.

    A carry computed into one of the kernel's step buffers trades places with it (the
    buffer takes the carry's old array, which the next step rewrites before reading it):
    nothing is copied or allocated. That needs the buffer to be this carry's alone and
    the old array to be read by no other carry; otherwise the buffer is copied (a carry
    must never be an array the next step overwrites)."""
    pad = "    " * indent
    storage = [_storage(v, values) if want != "s" else None
               for v, want in zip(out_values, kinds)]
    temps, buffers, olds = [], [], []
    for i, ((expr, kind), want, name) in enumerate(zip(outs, kinds, names)):
        others = storage[:i] + storage[i + 1:]
        if want == "s" or (kind == "C" and storage[i] not in values.owned):
            temps.append(expr)
        elif storage[i] in values.owned:
            if expr == storage[i] and expr not in others and name not in others:
                buffers.append(expr)  # the carry and its buffer trade arrays
                olds.append(name)
                temps.append(expr)
            else:
                temps.append(f"({expr}).copy()")
        else:
            temps.append(f"np.ascontiguousarray({expr})")
    # all outputs are read before any carry changes (a body may return carries swapped)
    lines = []
    lhs, rhs = list(names) + buffers, temps + olds
    if lhs:
        lines.append(f"{pad}{', '.join(lhs)}{',' if len(lhs) == 1 else ''} = "
                     f"{', '.join(rhs)}{',' if len(rhs) == 1 else ''}")
    return lines


def _storage(v, values):
    """The name of the array whose memory ``v`` (an array value of a region) is: a
    buffer, a carry, an operand, or its own expression."""
    root = values.flat_src.get(v, v)
    if values.kind.get(root) == "lit":
        return None
    base = values.base.get(root)
    return base[0] if base else values.expr[root]


# ---- running ---------------------------------------------------------------------------------

class LoopLauncher:
    """Runs a loop kernel: ``launcher(list of arrays) -> list of arrays`` (the last carry,
    then a scan's stacked ys), like ``compiler/_control.py``'s runner. Operands that are not
    C-contiguous arrays of their declared dtype are converted first."""

    def __init__(self, entry, op, spec):
        self.entry = entry
        self.source = spec.source
        self.dtypes = [np.dtype(d if d != "bool" else np.bool_) for d, _, _, _ in
                       spec.signature[:len(op.inputs)]]
        self.carry_dtypes = self.dtypes[:op.params["n_carry"]]
        if op.prim == "scan":
            k, n = op.params["n_carry"], op.params["length"]
            self.ys = [((n,) + _shape(v), np.dtype(_dtype(v) if _dtype(v) != "bool"
                                                   else np.bool_))
                       for v in op.params["body"].outputs[k:]]
            self.steps = [np.array(n, dtype=np.int64)]
        else:
            self.ys, self.steps = [], []
        self._spare = None  # the last call's ys, reused once nothing else holds them
        self._lock = threading.Lock()

    def _outputs(self):
        """Arrays for the ys: the last call's when the program has let go of them all (a
        reverse-mode program reads the saved steps once, then drops them), else new ones.
        Fresh multi-megabyte arrays cost a page fault per 4 KB at their first write,
        which measured ~15% of an RK4 gradient's time."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and all(sys.getrefcount(spare[i]) <= 2
                                     for i in range(len(spare))):
            return spare
        return [np.empty(shape, dtype) for shape, dtype in self.ys]

    def __call__(self, args):
        ins = []
        for a, dtype in zip(args, self.dtypes):
            if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous):
                a = np.ascontiguousarray(a, dtype=dtype)
            ins.append(a)
        ys = self._outputs() if self.ys else []
        result = self.entry(*ins, *self.steps, *ys)
        if ys:
            self._spare = list(ys)
        carry = result if self.carry_dtypes else ()
        out = [c if isinstance(c, np.ndarray) else np.asarray(c, dtype=d)
               for c, d in zip(carry, self.carry_dtypes)]
        return out + ys


def write_source(spec):
    """Writes a loop kernel's source to the cache directory, signed (see ``kernel_cache``)."""
    from .kernel_cache import write_source as write_signed

    write_signed(spec.path, spec.source)


def is_loaded(spec) -> bool:
    from .numba_codegen import _kernels

    return spec.sha in _kernels


def try_compile_loop(op):
    """``compile_loop(op)``, or None (with a warning naming the reason) when ``op`` has no
    numba form or numba fails to compile it: the loop then runs in Python around its
    compiled regions, as without numba."""
    spec = loop_spec(op)
    if spec is None or _rejected(spec):
        return None
    try:
        return compile_loop(op)
    except Exception as e:  # noqa: BLE001 - any numba failure: keep the Python loop
        import warnings

        _failed.add(spec.sha)
        warnings.warn(f"pf.jit: the {op.prim} loop could not be compiled as one numba kernel "
                      f"({type(e).__name__}: {str(e)[:300]}); it runs as a Python loop over "
                      f"its compiled body ({spec.path})", RuntimeWarning, stacklevel=2)
        return None


def compile_loop(op) -> LoopLauncher:
    """The launcher of ``op``'s loop kernel, compiled now or loaded from the disk cache."""
    from .numba_codegen import _kernels, _lock
    from .numba_worker import load_kernel, mark_ready

    spec = loop_spec(op)
    entry = _kernels.get(spec.sha)
    if entry is None:
        with _lock:
            entry = _kernels.get(spec.sha)
            if entry is None:
                write_source(spec)
                entry = _kernels[spec.sha] = load_kernel(spec.path, spec.signature)
                mark_ready(spec.path)
    return LoopLauncher(entry, op, spec)
