"""Code emission: one Python function for a fused, memory-planned program.

``generate`` schedules the operations (each numba/CUDA kernel group contiguous), fuses
``reduce_sum(mul(a, b))`` into one einsum, plans the buffers (``ir.passes.plan_memory``)
and writes one statement per operation, by kind: constants (precomputed into the
function's namespace), control flow (a runner around compiled regions, or one whole-loop
numba kernel), kernel groups (one call of the generated kernel) and every other operation
(spelled by the emitter: ``numpy_codegen``'s ``np.tanh(a0, out=b0)`` or the array-API
emitter's ``xp.tanh(a0)``); the source is compiled once per distinct text and executed
into an ``Executable``."""

from __future__ import annotations

import hashlib
import linecache
import threading
from collections import Counter

from ..ir import CONSTANT, IMPURE, Function, Operation
from ..ir.passes import plan_memory
from ..ir.passes.fuse import ELEMENTWISE, VIEWS
from ..ir.printer import format_op, names_of
from ..ir.regions import CONTROL, GET
from . import numba_loops
from . import numpy_codegen as npc
from ._control import control_runner
from .executable import Executable, Workspace
from .spellings import tuple_source

_code_cache = {}  # source text -> code object
_lock = threading.Lock()


def generate(fn, groups, numba_groups, backend, emitter=npc, kernel_maker=None, whole_loops=False):
    """One Python function for ``fn``; ``emitter`` spells each operation (the NumPy
    backend's ``numpy_codegen`` module, or an ``array_api_codegen.ArrayAPIEmitter``), and
    ``kernel_maker`` (``numba_codegen`` by default, ``cupy_codegen`` on CuPy) compiles the
    groups in ``numba_groups`` into kernels; with ``whole_loops`` each scan/while loop numba
    supports runs as one whole-loop kernel (``compiler/numba_loops.py``)."""
    if kernel_maker is None and numba_groups:
        from . import numba_codegen as kernel_maker
    names = names_of(fn)  # (of the program as given: scheduling and fusing keep its names)
    kernel_groups = [g for g in groups if id(g) in numba_groups]
    skip = {id(op) for g in kernel_groups for op in g.ops}  # ops computed by a kernel
    kernel_outputs = {v for g in kernel_groups for v in g.outputs}  # (the others stay in
    # the kernel's registers)
    if kernel_groups:
        fn = _schedule(fn, kernel_groups)
    if getattr(emitter, "fuses_products", True):
        fn = _fuse_products_into_sums(fn, skip)
    unread = _views_only_kernels_see_through(fn, skip, kernel_groups, kernel_maker)

    def can_write(op):
        if id(op) in skip:
            return op.out in kernel_outputs
        return emitter.can_write(op)

    # a kernel reads and writes element by element: no buffer it reads may be handed to a
    # result of the same kernel (memory planning treats each kernel group as one unit)
    plan = plan_memory(fn, can_write=can_write, units=[g.ops for g in kernel_groups])
    out = _Emission(fn, names, plan, emitter, backend, kernel_maker, whole_loops)
    out.group_of = {id(op): g.gid for g in groups for op in g.ops}
    # the kernel group whose last operation is this one, with the kernel's index
    kernel_of = {id(g.ops[-1]): (g, k) for k, g in enumerate(kernel_groups)}
    for op in fn.ops:
        if op.prim == CONSTANT or op.prim in ("full", "iota"):
            out.constant(op)
        elif id(op) in unread:
            continue
        elif op.prim in CONTROL or op.prim == GET:
            out.control(op)
        elif id(op) in skip:
            if id(op) in kernel_of:
                out.kernel(*kernel_of[id(op)])
        else:
            out.operation(op)
    outs = ", ".join(out.var[v] for v in fn.outputs)
    out.body.append(f"    return [{outs}]")
    source = "def program(args, keys, ws):\n" + "\n".join(out.body) + "\n"
    code = _compile_source(source)
    exec(code, out.ns)  # noqa: S102 - our own generated source
    kernels = out.compiled_kernels
    return Executable(fn, out.ns["program"], source, plan, groups, kernels,
                      backend=getattr(kernel_maker, "LABEL", "numba") if kernels
                      else getattr(emitter, "label", "numpy"), workspace=out.workspace)


class _Emission:
    """The function being written: its namespace (constants, kernels, parameters), the
    Python name of each value, and its body, one method per kind of operation."""

    def __init__(self, fn, names, plan, emitter, backend, kernel_maker, whole_loops):
        self.fn, self.plan, self.emitter, self.backend = fn, plan, emitter, backend
        self.kernel_maker, self.whole_loops = kernel_maker, whole_loops
        self.names = names
        self.ns = emitter.namespace()
        self.var = {v: f"a{i}" for i, v in enumerate(fn.inputs)}
        self.scalar = {}  # full values -> the name of their scalar
        self.group_of = {}
        self.random_index = 0
        self.compiled_kernels = []
        self.body = [f"    {tuple_source([self.var[v] for v in fn.inputs])} = args"
                     if fn.inputs else "    pass"]
        if plan.buffers:
            bnames = [f"b{i}" for i in range(len(plan.buffers))]
            self.body.append(f"    {tuple_source(bnames)} = ws.buffers")
        self.workspace = Workspace(plan.buffers, emitter.allocate)

    def constant(self, op):
        """A constant, ``full`` or ``iota``: computed once into the namespace, shared
        (never written in place)."""
        name, ns = self.names[op.out][1:], self.ns
        self.var[op.out] = f"c{name}"
        if op.prim == CONSTANT:
            ns[f"c{name}"] = self.fn.consts[op.params["index"]]
            return
        ns[f"c{name}"] = ns[f"K_{op.prim}"](**op.params)
        if op.prim == "full":  # elementwise consumers broadcast a scalar instead
            self.scalar[op.out] = f"s{name}"
            ns[f"s{name}"] = self.emitter.scalar(op.params["value"], op.params["dtype"])

    def control(self, op):
        """A control-flow operation (see ``compiler/_control.py``) or ``get`` of one of its
        results."""
        name, var, body = self.names[op.out][1:], self.var, self.body
        v = f"v{name}"
        var[op.out] = v
        body.append(f"    # {format_op(op, self.names)}")
        if op.prim == GET:
            body.append(f"    {v} = {var[op.inputs[0]]}[{op.params['index']}]")
            return
        launcher = numba_loops.try_compile_loop(op) if self.whole_loops else None
        if launcher is not None:
            self.compiled_kernels.append(launcher)
            body[-1] += "  [the whole loop is one numba kernel]"
        self.ns[f"R{name}"] = launcher or control_runner(op, self.backend)
        body.append(f"    {v} = R{name}([{', '.join(var[u] for u in op.inputs)}])")

    def kernel(self, g, k):
        """Kernel group ``g`` (the ``k``-th): one call of its generated kernel, writing into
        planned buffers (or fresh arrays for the values that leave the program)."""
        maker, names, var, plan = self.kernel_maker, self.names, self.var, self.plan
        kernel = maker.compile_group(g)
        self.compiled_kernels.append(kernel)
        self.ns[f"N{k}"] = kernel
        outs = []
        for v in g.outputs:
            vname = f"v{names[v][1:]}"
            var[v] = vname
            if v in plan.buffer_of:
                outs.append(f"b{plan.buffer_of[v]}")
            else:
                outs.append(f"empty({v.aval.shape!r}, dtype=D_{vname})")
                self.ns[f"D_{vname}"] = self.emitter.native_dtype(v.aval.dtype)
        ins = ", ".join(var[maker.kernel_operand(v)] for v in g.inputs)
        self.body.append(f"    # {getattr(maker, 'LABEL', 'numba')} kernel {k}: group {g.gid} "
                         f"({' '.join(o.prim for o in g.ops)})")
        self.body.append(f"    {tuple_source([var[v] for v in g.outputs])} = "
                         f"N{k}({ins}{', ' if ins else ''}{', '.join(outs)})")

    def operation(self, op):
        """Any other operation: the emitter's spelling, into its planned buffer; a random
        one draws with the call's next key."""
        name, var, scalar, plan = self.names[op.out][1:], self.var, self.scalar, self.plan
        args = [var[v] for v in op.inputs]
        if op.prim in ELEMENTWISE and any(v in scalar for v in op.inputs):
            shape = op.out.aval.shape
            if any(v not in scalar and v.aval.shape == shape for v in op.inputs):
                args = [scalar.get(v, var[v]) for v in op.inputs]
        out = f"b{plan.buffer_of[op.out]}" if op.out in plan.buffer_of else None
        pname = f"P{name}"
        if op.prim in IMPURE:
            params = dict(op.params)
            params.pop("key")
            self.ns[pname] = params
            expr = f"K_{op.prim}(key=keys[{self.random_index}], **{pname})"
            self.random_index += 1
        else:
            self.ns[pname] = op.params
            expr = self.emitter.emit(op, args, out, pname)
        v = f"v{name}"
        var[op.out] = v
        note = format_op(op, self.names)
        if id(op) in self.group_of:
            note += f"  [group {self.group_of[id(op)]}]"
        if op.prim in VIEWS:
            note += "  [view]"
        self.body.append(f"    # {note}")
        self.body.append(f"    {v} = {expr}")


def _views_only_kernels_see_through(fn, skip, kernel_groups, kernel_maker):
    """Ids of the broadcasts (and views of them) nothing reads: a numba kernel reads a
    broadcast's source instead (``numba_codegen.kernel_operand``), so the NumPy view would
    only cost a call per block."""
    if not kernel_groups:
        return set()
    read = set(fn.outputs)
    for g in kernel_groups:
        read.update(kernel_maker.kernel_operand(v) for v in g.inputs)
    unread = set()
    for op in reversed(fn.ops):
        if id(op) in skip:
            continue
        if op.prim in VIEWS and op.out not in read:
            unread.add(id(op))
        else:
            read.update(op.inputs)
    return unread


def _schedule(fn, kernel_groups):
    """An operation order in which each kernel group's operations are contiguous (the
    kernel runs as one unit: all of its inputs must exist before it and every consumer of
    its outputs must come after it). Groups are convex, so the condensed graph is acyclic;
    units are placed in their original order whenever their inputs are ready."""
    group_of = {id(op): g for g in kernel_groups for op in g.ops}
    units, seen = [], set()
    for op in fn.ops:
        g = group_of.get(id(op))
        if g is None:
            units.append(([op], list(op.inputs)))
        elif id(g) not in seen:
            seen.add(id(g))
            units.append((list(g.ops), list(g.inputs)))
    available = set(fn.inputs)
    ops = []
    while units:
        for k, (unit_ops, needs) in enumerate(units):
            if all(v in available for v in needs):
                break
        else:  # pragma: no cover - convex groups cannot deadlock
            raise RuntimeError("fusion groups form a cycle")
        units.pop(k)
        ops.extend(unit_ops)
        available.update(op.out for op in unit_ops)
    return Function(fn.name, fn.inputs, ops, fn.outputs, fn.consts)


def _fuse_products_into_sums(fn, skip):
    """``reduce_sum(mul(a, b))`` with the product used nowhere else becomes one
    ``mul_reduce_sum(a, b)`` (an einsum: no temporary, 2-6x faster than multiply + sum).
    Returns a shallow copy of ``fn`` with the new operation list (``fn`` is unchanged)."""
    count = Counter(v for op in fn.ops for v in op.inputs)
    outputs = set(fn.outputs)
    replace, dropped = {}, set()
    for op in fn.ops:
        if (op.prim != "reduce_sum" or id(op) in skip or not op.out.aval.dtype.is_floating
                or npc.holds_bfloat16(op)):  # (no einsum for bfloat16)
            continue
        v = op.inputs[0]
        prod = v.op
        if (prod is None or prod.prim != "mul" or count.get(v) != 1 or v in outputs
                or id(prod) in skip):
            continue
        fused = Operation("mul_reduce_sum", prod.inputs, op.params, op.out.aval)
        fused.out = op.out  # keep the value (later operations read it)
        replace[id(op)] = fused
        dropped.add(id(prod))
    if not replace:
        return fn
    ops = [replace.get(id(op), op) for op in fn.ops if id(op) not in dropped]
    return Function(fn.name, fn.inputs, ops, fn.outputs, fn.consts)


def _compile_source(source):
    code = _code_cache.get(source)
    if code is None:
        digest = hashlib.sha1(source.encode()).hexdigest()[:12]
        filename = f"<primflow-jit-{digest}>"
        code = compile(source, filename, "exec")
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        with _lock:
            if len(_code_cache) > 2048:
                _code_cache.clear()
            _code_cache[source] = code
    return code
