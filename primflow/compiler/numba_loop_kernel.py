"""The structure of a whole-loop numba kernel (``numba_loops``): the function around the
operations ``numba_loop_emit`` writes (its parameters, the hoisted constants, the Python
``for`` or ``while`` over the steps, the carries rebound to the buffers computed into, the
stacked ``ys`` written per step) and the helper functions the kernels share (a vectorisable
tanh, aligned copies, prefetch and streaming-store intrinsics).
"""

from __future__ import annotations

import math

from ..ir.regions import regions_of
from .numba_codegen import FASTMATH_ARG
from .numba_loop_emit import Unsupported, Values, check_value, dtype_name, emit_region, shape_of
from .spellings import tuple_source


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


def loop_source(op):
    """``(source, signature)`` of the kernel running ``op``; raises ``Unsupported``."""
    for _, region in regions_of(op):
        for inner in region.ops:
            if regions_of(inner):
                raise Unsupported("nested control flow")
    values = Values(hoisted=[])
    params, pre, sig, body = [], [], [], []

    def operand(i, v, carry):
        check_value(v)
        name = f"a{i}"
        params.append(name)
        sig.append((dtype_name(v), len(shape_of(v)), "C", True))
        if shape_of(v) == ():
            pre.append(f"    {name}s = {name}[()]")
            return f"{name}s", "s"
        if carry:  # rebound every step to arrays the kernel makes: a writable C array
            pre.append(f"    {name}c = {name}.copy()")
            return f"{name}c", "C"
        return name, "C"

    k, body_fn = op.params["n_carry"], op.params["body"]
    args = [operand(i, v, i < k) for i, v in enumerate(op.inputs)]  # (expression, kind)
    carry = args[:k]
    if op.prim == "scan":
        m, reverse = op.params["n_xs"], op.params["reverse"]
        # the trip count is an argument (a 0-d int64 array): one kernel for every length
        params.append("steps")
        sig.append(("int64", 0, "C", True))
        pre.append("    n = steps[()]")
        ys = body_fn.outputs[k:]
        out_names = [f"y{j}" for j in range(len(ys))]
        for name, v in zip(out_names, ys):
            check_value(v)
            params.append(name)
            sig.append((dtype_name(v), len(shape_of(v)) + 1, "C", False))
        slices = []
        for i in range(k, k + m):  # each step's slices of the xs, taken once
            row = math.prod(shape_of(op.inputs[i])[1:])
            line = 64 // op.inputs[i].aval.dtype.itemsize  # (elements per cache line)
            if row >= line:  # (never faults: the last step's hint points past the end)
                body += [f"        for q in range(0, {row}, {line}):",
                         f"            prefetch_({args[i][0]}, (t {'-' if reverse else '+'} 1)"
                         f" * {row} + q)"]
            body.append(f"        x{i} = {args[i][0]}[t]")
            slices.append((f"x{i}", "s" if len(shape_of(op.inputs[i])) == 1 else "C"))
        loop = "    for t in range(n - 1, -1, -1):" if reverse else "    for t in range(n):"
        region_in = carry + slices + args[k + m:]
        values.invariant.update(expr for expr, _ in args[k + m:])
        outs = emit_region(body_fn, region_in, values, body, 2)
        rows = {}  # row size -> [(stacked output's flat view, 1-d row)]
        for j, (expr, kind) in enumerate(outs[k:]):
            v = body_fn.outputs[k + j]
            size = math.prod(shape_of(v))
            if kind == "s" or not shape_of(v) or values.kind.get(v) not in ("C", "A", "lit"):
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
        lines = [loop] + body
    else:  # while
        cond_lines = []
        values.invariant.update(expr for expr, _ in args[k:])
        (test, _), = emit_region(op.params["cond"], carry + args[k:], values, cond_lines, 2)
        outs = emit_region(body_fn, carry + args[k:], values, body, 2)
        lines = ["    while True:", *cond_lines, f"        if not {test}:", "            break",
                 *body]
    carry_names = [c[0] for c in carry]
    lines += _rebind(carry_names, outs[:k], [c[1] for c in carry], values, body_fn.outputs[:k])
    header = "import math\n\nimport numpy as np\nimport numba\n\n"
    if "tanh" in "\n".join(lines + values.hoisted):
        header += TANH_SOURCE.replace("FLAGS", FASTMATH_ARG)
    if "aligned_copy_(" in "\n".join(values.hoisted):
        header += ALIGNED_SOURCE
    if "prefetch_(" in "\n".join(lines) or "stream_(" in "\n".join(lines):
        header += INTRINSICS_SOURCE
    header += f"\n@numba.njit(cache=True, nogil=True, error_model='numpy', {FASTMATH_ARG})\n"
    text = [f"def kernel({', '.join(params)}):"] + pre
    text += ["    " + h for h in values.hoisted] + lines
    if "stream_(" in "\n".join(lines):
        text.append("    stream_fence_()")  # (streamed stores are visible to other threads)
    text.append(f"    return ({tuple_source(carry_names)})" if carry_names else "    return 0")
    return header + "\n".join(text) + "\n", sig


def _rebind(names, outs, kinds, values, out_values):
    """Assigns each step's carry outputs to the carry names, keeping each one's numba type
    (a C-contiguous array or a scalar): a view is copied, a constant made an array.

    A carry computed into one of the kernel's step buffers trades places with it (the
    buffer takes the carry's old array, which the next step rewrites before reading it):
    nothing is copied or allocated. That needs the buffer to be this carry's alone and
    the old array to be read by no other carry; otherwise the buffer is copied (a carry
    must never be an array the next step overwrites)."""
    storage = [_storage(v, values) if want != "s" else None for v, want in zip(out_values, kinds)]
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
    lhs, rhs = list(names) + buffers, temps + olds
    return [f"        {tuple_source(lhs)} = {tuple_source(rhs)}"] if lhs else []


def _storage(v, values):
    """The name of the array whose memory ``v`` (an array value of a region) is: a
    buffer, a carry, an operand, or its own expression."""
    root = values.flat_src.get(v, v)
    if values.kind.get(root) == "lit":
        return None
    base = values.base.get(root)
    return base[0] if base else values.expr[root]
