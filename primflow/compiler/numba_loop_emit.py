"""The operations of a whole-loop numba kernel (``numba_loops``): the values table of the
generated source (``Values``), the element loops that fuse consecutive elementwise results
of one size, and one emitter per operation kind (elementwise forms read from the
declarations, constants, reshapes and views, padding, reductions and matrix products).
``emit_region`` writes the statements of one region; ``numba_loop_kernel`` puts them
inside the kernel's loop.
"""

from __future__ import annotations

import math
import re

from .numba_codegen import _literal
from .numpy_codegen import _gemm_form
from .spellings import BY_CODE, integer_safe, numba_form

DTYPES = frozenset({"float32", "float64", "int32", "int64", "bool"})

# each elementwise primitive's scalar (and array) form is its declaration's (Lowering.numba,
# read through spellings.py); tanh, select, integer_pow and casts are written here


def _elementwise(prim):
    return prim in BY_CODE or numba_form(prim) is not None


_STRUCTURAL = frozenset({"full", "iota", "reshape", "broadcast_in_dim", "transpose", "slice",
                         "concatenate", "pad", "dot_general", "reduce_sum", "reduce_max",
                         "reduce_min"})


class Unsupported(Exception):
    """An operation of the loop has no numba form here (the loop stays in Python)."""


# ---- source generation ---------------------------------------------------------------------

def dtype_name(v):
    return v.aval.dtype.name


def shape_of(v):
    return tuple(v.aval.shape)


def scalar_cast(expr, dtype):
    return f"bool({expr})" if dtype == "bool" else f"np.{dtype}({expr})"


class Values:
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
            base, base_shape = self.materialise(v), shape_of(v)
        else:
            base, base_shape = self.base.get(v) or (self.expr[v], shape_of(v))
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
            return self.materialise(v) if shape_of(v) else self.literal[v][0]
        return self.expr[v]


def check_value(v):
    if dtype_name(v) not in DTYPES:
        raise Unsupported(f"dtype {dtype_name(v)}")


def emit_region(region, inputs, values, lines, indent):
    """Writes ``region``'s operations as kernel statements (``lines``, at ``indent``) with
    its inputs bound to ``inputs`` ([(expr, kind)]); returns the outputs' [(expr, kind)]."""
    for v, (expr, kind) in zip(region.inputs, inputs):
        check_value(v)
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
        for v in (op.out, *op.inputs):
            check_value(v)
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
        size = math.prod(shape_of(v))
        if self.size is not None and self.size != size:
            self.flush()
        try:
            expr = _element_expr(op, [self._element(u) for u in op.inputs])
        except _Flush:
            self.flush()
            expr = _element_expr(op, [self._element(u) for u in op.inputs])
        values, dtype = self.values, dtype_name(v)
        self.size = size
        buf, local = values.fresh("b"), values.fresh("v")
        np_dtype = "np.bool_" if dtype == "bool" else f"np.{dtype}"
        values.hoisted.append(f"{buf} = np.empty({shape_of(v)!r}, {np_dtype})")
        values.owned.add(buf)
        if dtype in ("float32", "int32"):  # (numba's scalar arithmetic widens int32)
            expr = scalar_cast(expr, dtype)
        self.body.append(f"{local} = {expr}")
        self.body.append(f"{self._flat_name(buf, shape_of(v))}[q] = {local}")
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
        expr, shape = values.base.get(root) or (values.expr[root], shape_of(root))
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
    prim, dtype = op.prim, dtype_name(op.out)
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
    if dtype_name(op.inputs[0]) == dtype:
        return args[0]
    return f"({args[0]} != 0)" if dtype == "bool" else scalar_cast(args[0], dtype)


def _emit_op(op, values):  # noqa: C901 - one case per primitive family
    prim = op.prim
    out = op.out
    dtype = dtype_name(out)
    shape = shape_of(out)
    scalar_out = shape == ()
    if prim == "full":
        return _constant(values, out, _literal(op.params["value"], dtype))
    if _elementwise(prim):
        if not integer_safe(prim) and not out.aval.dtype.is_floating:
            raise Unsupported(f"{prim} on {dtype}")
        if any(not v.aval.dtype.is_floating and not v.aval.dtype.is_bool
               and not dtype_name(v).startswith("int") for v in op.inputs):
            raise Unsupported("complex")
        args = []
        for v in op.inputs:
            if values.kind[v] == "lit":
                # a constant broadcasts as a scalar when another operand has the full shape
                others = [u for u in op.inputs if u is not v and values.kind[u] != "lit"
                          and shape_of(u) == shape]
                args.append(values.literal[v][0] if (others or scalar_out)
                            else values.materialise(v))
            else:
                args.append(values.expr[v])
        if prim == "integer_pow" and op.params["y"] == 0:
            return _constant(values, out, _literal(1, dtype))
        if prim == "integer_pow" and op.params["y"] < 0 and not out.aval.dtype.is_floating:
            raise Unsupported("negative integer power of an integer")
        if scalar_out:  # the scalar form (what the element loops compute)
            return scalar_cast(_element_expr(op, args), dtype), "s"
        if prim == "tanh":
            arg = args[0]
            if values.kind.get(op.inputs[0]) == "A":
                arg = f"np.ascontiguousarray({arg})"
            return f"tanh_({arg})", "C"
        if prim == "select":
            return f"np.where({args[0]}, {args[1]}, {args[2]})", "C"
        if prim == "convert_element_type" and dtype not in ("bool", dtype_name(op.inputs[0])):
            return f"{args[0]}.astype(np.{dtype})", "C"
        return _element_expr(op, args), "C"  # (the numba forms are array forms too)
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
    if prim in ("reshape", "broadcast_in_dim") and values.kind[x] == "lit":
        return _constant(values, out, values.literal[x][0])
    if prim in ("transpose", "slice") and values.kind[x] == "s":
        return values.expr[x], "s"
    if prim == "reshape":
        if values.kind[x] == "s":
            return (f"np.full({shape!r}, {values.expr[x]})", "C") if shape else (
                values.expr[x], "s")
        if scalar_out:
            return f"{values.contiguous(x)}.reshape((1,))[0]", "s"
        values.expr[out] = values.view(x, shape)  # a view: no statement of its own
        values.base[out] = values.base.get(x) or (values.expr[x], shape_of(x))
        values.flat_src[out] = values.flat_src.get(x, x)
        return values.expr[out], "view"
    if prim == "broadcast_in_dim":
        if values.kind[x] == "s":
            return f"np.full({shape!r}, {values.expr[x]})", "C"
        expanded = [1] * len(shape)
        for src_dim, dst in enumerate(op.params["broadcast_dimensions"]):
            expanded[dst] = shape_of(x)[src_dim]
        return (f"np.broadcast_to({values.contiguous(x)}.reshape({tuple(expanded)!r}), "
                f"{shape!r})", "A")
    if prim == "transpose":
        perm = tuple(op.params["perm"])
        if perm == tuple(range(len(perm))):
            return values.array(x), values.kind[x] if values.kind[x] != "lit" else "C"
        return f"np.transpose({values.array(x)}, {perm!r})", "A"
    if prim == "slice":
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
        return scalar_cast(f"{fn}({src})", dtype), "s"
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
    if not shape_of(x) or any(lo < 0 or hi < 0 or interior for lo, hi, interior in config):
        raise Unsupported("pad of a scalar, or with interior or negative padding")
    if values.kind[fill] == "lit":
        fill_expr = values.literal[fill][0]
    elif values.kind[fill] == "s":
        fill_expr = values.expr[fill]
    else:
        raise Unsupported("pad with an array padding value")
    name = values.fresh("p")
    index = ", ".join(f"{lo}:{lo + n}" for (lo, _, _), n in zip(config, shape_of(x)))
    values.stmts.append(f"{name} = np.full({shape!r}, {fill_expr}, np.{dtype})")
    values.stmts.append(f"{name}[{index}] = {values.array(x)}")
    return name, "C"


def _constant(values, out, literal):
    values.literal[out], values.kind[out] = (literal, shape_of(out)), "lit"
    return None, "lit"


def _emit_dot(op, values):
    x, y = op.inputs
    if not x.aval.dtype.is_floating or dtype_name(x) != dtype_name(y):  # (then y is floating too)
        raise Unsupported("dot_general on non-float operands")
    if values.kind[x] == "s" or values.kind[y] == "s":
        raise Unsupported("dot_general of a scalar")
    form = _gemm_form(op)
    if form is None or form[0] != "gemm":
        raise Unsupported("dot_general with batch dimensions or an unusual layout")
    _, (m, k, n), tx, ty = form

    def matrix(v, rows, cols, transposed):
        want = (cols, rows) if transposed else (rows, cols)
        if shape_of(v) == want and values.kind[v] != "lit":
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
    expr = f"np.dot({matrix(x, m, k, tx)}, {matrix(y, k, n, ty)})"
    if shape_of(op.out) != (m, n):
        if shape_of(op.out) == ():
            return scalar_cast(f"{expr}[0, 0]", dtype_name(op.out)), "s"
        expr = f"{expr}.reshape({shape_of(op.out)!r})"
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
    dtype = dtype_name(op.out)
    invariant = values.kind[mat] == "C" and values.expr[mat] in values.invariant
    if invariant:  # an aligned copy, made once: of its rows when it is stored as (rows_n, k),
        # else of its transpose (stored as (k, rows_n))
        key = ("rows" if given_as_rows else "T", values.expr[mat])
        rows = values.cache.get(key)
        if rows is None:
            rows = values.cache[key] = values.fresh("h")
            copied = (matrix(mat, rows_n, k, False) if given_as_rows
                      else f"{matrix(mat, k, rows_n, False)}.T")
            values.hoisted.append(f"{rows} = aligned_copy_({copied})")
    elif given_as_rows:
        rows = matrix(mat, rows_n, k, False)
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
    if shape_of(op.out) == (rows_n,):
        return out
    values.base[op.out] = (out, (rows_n,))  # a view of the vector (read through it later)
    return f"{out}.reshape({shape_of(op.out)!r})"


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
