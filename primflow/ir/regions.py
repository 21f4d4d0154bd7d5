"""Operations with regions: structured control flow inside the SSA program.

A control-flow operation holds its sub-programs (regions: ordinary ``Function`` objects)
in its params and has several results. Since every IR value has one defining operation,
the operation's own result is one value of ``TupleAval`` type (the tuple of its results),
and each result is taken out of it by a ``get(index=k)`` operation::

    %3: (float32[4],float32[10,4]) = scan(%0, %1, %2, length=10, reverse=False, n_carry=1,
                                          n_xs=1) {
      body(%0: float32[4], %1: float32[4], %2: float32[4,4]):
          ...
          return %5, %5
    }
    %4: float32[4] = get(%3, index=0)

The operations and their operands:

* ``cond(index, *operands, branches=(f0, f1, ...))``: runs ``branches[index]`` on the
  operands; every branch has the operands' types as inputs and the same outputs.
  (``pf.cond`` is a two-branch ``cond`` with index 0 for false, 1 for true.)
* ``while(*carry, *consts, cond=c, body=b, n_carry=k)``: ``c(*carry, *consts)`` returns a
  boolean scalar; while it is true, ``carry = b(*carry, *consts)``.
* ``scan(*carry, *xs, *consts, body=b, length=n, reverse=r, n_carry=k, n_xs=m)``: for each
  step ``t`` (backwards when reversed), ``carry, y = b(*carry, *[x[t] for x in xs],
  *consts)``; the results are the last carry and the ``y`` stacked along a new axis 0.

Passes treat such an operation as one opaque operation of the enclosing program (it is not
fused with its neighbours); the optimizer also runs inside each region
(``optimize_regions``), and the compiler compiles each region once and runs it in a loop.
"""

from __future__ import annotations

from ..core.dtypes import bool_
from ..core.primitive import Aval

CONTROL = frozenset({"cond", "while", "scan"})
GET = "get"


class TupleAval(Aval):
    """The type of a control-flow operation's result: the tuple of its results' types.
    (``shape`` is empty and ``dtype`` boolean, so passes that look at every value's type
    see a small non-float scalar they leave alone.)"""

    __slots__ = ("avals",)

    def __init__(self, avals):
        super().__init__((), bool_)
        self.avals = tuple(avals)

    def __repr__(self):
        return "(" + ",".join(repr(a) for a in self.avals) + ")"

    def __eq__(self, other):
        return isinstance(other, TupleAval) and self.avals == other.avals

    def __hash__(self):
        return hash(("tuple",) + self.avals)


def all_ops(fn):
    """Every operation of ``fn`` and, depth first, of the regions inside it.

    Example:
        >>> import primflow as pf
        >>> from primflow.ir.regions import all_ops
        >>> f = pf.jit(lambda x: pf.scan(lambda c, v: (c + v, c), x[0], x)[0])
        >>> program = f.lower(pf.ones([3])).program
        >>> [op.prim for op in all_ops(program)][:3]
        ['slice', 'reshape', 'scan']
    """
    for op in fn.ops:
        yield op
        for _, region in regions_of(op):
            yield from all_ops(region)


def regions_of(op) -> list:
    """``[(param name, Function), ...]`` for the regions of a control-flow operation.

    Example:
        >>> import primflow as pf
        >>> from primflow.ir.regions import regions_of
        >>> f = pf.jit(lambda x: pf.scan(lambda c, v: (c + v, c), x[0], x)[0])
        >>> program = f.lower(pf.ones([3])).program
        >>> [name for op in program.ops for name, _ in regions_of(op)]
        ['body']
    """
    if op.prim not in CONTROL:
        return []
    if op.prim == "cond":
        return [(f"branch{i}", f) for i, f in enumerate(op.params["branches"])]
    if op.prim == "while":
        return [("cond", op.params["cond"]), ("body", op.params["body"])]
    return [("body", op.params["body"])]


def with_regions(op, new_regions) -> dict:
    """``op``'s params with its regions replaced by ``new_regions`` (in ``regions_of``
    order)."""
    params = dict(op.params)
    if op.prim == "cond":
        params["branches"] = tuple(new_regions)
    elif op.prim == "while":
        params["cond"], params["body"] = new_regions
    else:
        (params["body"],) = new_regions
    return params


def optimize_regions(fn, optimize) -> None:
    """Replaces every region of ``fn`` (at any depth) by ``optimize(copy of region)``, so the
    traced program keeps its own regions untouched."""
    for op in fn.ops:
        if op.prim in CONTROL:
            new = []
            for _, region in regions_of(op):
                region = region.copy()
                optimize_regions(region, optimize)
                new.append(optimize(region))
            op.params = with_regions(op, new)


def result_avals(prim, params, operand_avals):
    """The results' types of a control-flow operation (what the verifier checks)."""
    if prim == "cond":
        return tuple(v.aval for v in params["branches"][0].outputs)
    if prim == "while":
        return tuple(operand_avals[:params["n_carry"]])
    body, k = params["body"], params["n_carry"]
    n = params["length"]
    ys = [Aval((n,) + tuple(v.aval.shape), v.aval.dtype) for v in body.outputs[k:]]
    return tuple(operand_avals[:k]) + tuple(ys)


def check_regions(op) -> None:
    """Raises ``ValueError`` naming the mismatch when a control-flow operation's regions do
    not fit its operands and results."""
    ins = [v.aval for v in op.inputs]
    name = op.prim

    def sig(f):
        return [v.aval for v in f.inputs]

    def outs(f):
        return [v.aval for v in f.outputs]

    if name == "cond":
        index = ins[0]
        if index.shape != () or index.dtype.is_floating:
            raise ValueError(f"cond: the branch index must be an integer scalar, got {index}")
        branches = op.params["branches"]
        for i, f in enumerate(branches):
            if sig(f) != ins[1:]:
                raise ValueError(f"cond: branch {i} takes {sig(f)} but the operands are "
                                 f"{ins[1:]}")
            if outs(f) != outs(branches[0]):
                raise ValueError(f"cond: branch {i} returns {outs(f)} but branch 0 returns "
                                 f"{outs(branches[0])}")
    elif name == "while":
        k = op.params["n_carry"]
        for part in ("cond", "body"):
            if sig(op.params[part]) != ins:
                raise ValueError(f"while: the {part} region takes {sig(op.params[part])} but "
                                 f"the operands are {ins}")
        c = outs(op.params["cond"])
        if len(c) != 1 or c[0].shape != () or c[0].dtype is not bool_:
            raise ValueError(f"while: the cond region must return one bool scalar, got {c}")
        if outs(op.params["body"]) != ins[:k]:
            raise ValueError(f"while: the body returns {outs(op.params['body'])} but the "
                             f"carry is {ins[:k]}")
    elif name == "scan":
        k, m, n = op.params["n_carry"], op.params["n_xs"], op.params["length"]
        body = op.params["body"]
        xs = ins[k:k + m]
        for x in xs:
            if not x.shape or x.shape[0] != n:
                raise ValueError(f"scan: a scanned operand of type {x} does not have "
                                 f"length {n} along axis 0")
        want = ins[:k] + [Aval(x.shape[1:], x.dtype) for x in xs] + ins[k + m:]
        if sig(body) != want:
            raise ValueError(f"scan: the body takes {sig(body)} but the carry, slices and "
                             f"constants are {want}")
        if outs(body)[:k] != ins[:k]:
            raise ValueError(f"scan: the body returns the carry {outs(body)[:k]} but the "
                             f"carry is {ins[:k]}")
    expected = TupleAval(result_avals(name, op.params, ins))
    if op.out.aval != expected:
        raise ValueError(f"{name}: the result type is {op.out.aval} but the regions give "
                         f"{expected}")


def run_native(op, args, run_region) -> list:
    """Runs a control-flow operation on backend arrays; ``run_region(region, arrays) ->
    list of arrays`` runs one region (the interpreter's ``evaluate``, or a compiled
    region). The ``scan`` results are written into arrays allocated once."""
    from ..backends import get_backend

    backend = get_backend()
    if op.prim == "cond":
        branches = op.params["branches"]
        index = int(backend.to_numpy(args[0]).reshape(-1)[0])
        if not 0 <= index < len(branches):
            if "message" in op.params:  # a check staged as a cond (pf.while_loop max_steps)
                raise RuntimeError(op.params["message"])
            raise IndexError(f"switch: the branch index is {index} but there are "
                             f"{len(branches)} branches (valid indices 0..{len(branches) - 1})")
        return list(run_region(branches[index], list(args[1:])))
    if op.prim == "while":
        k = op.params["n_carry"]
        carry, consts = list(args[:k]), list(args[k:])
        cond, body = op.params["cond"], op.params["body"]
        while bool(run_region(cond, carry + consts)[0]):
            carry = list(run_region(body, carry + consts))
        return carry
    k, m, n = op.params["n_carry"], op.params["n_xs"], op.params["length"]
    carry, xs, consts = list(args[:k]), list(args[k:k + m]), list(args[k + m:])
    body = op.params["body"]
    ys = [backend.full((n,) + tuple(v.aval.shape), 0, v.aval.dtype) for v in body.outputs[k:]]
    for t in (range(n - 1, -1, -1) if op.params["reverse"] else range(n)):
        outs = run_region(body, carry + [x[t, ...] for x in xs] + consts)  # any backend
        carry = list(outs[:k])
        for y, o in zip(ys, outs[k:]):
            y[t, ...] = o
    return carry + ys


def prune_results(fn) -> bool:
    """Dead-code elimination across regions: results of a ``scan`` (its stacked ys) or a
    ``cond`` that no ``get`` reads are removed from the operation and its regions, so the
    regions stop computing them (a reverse scan recorded for higher derivatives that
    nobody takes, say, keeps no residuals). Run DCE first (unused gets gone) and again
    inside the regions after. Returns whether anything changed."""
    from ._program import Value

    changed = False
    readers = {}
    for op in fn.ops:
        if op.prim == GET:
            readers.setdefault(op.inputs[0], []).append(op)
    for op in fn.ops:
        if op.prim not in ("scan", "cond"):
            continue
        gets = readers.get(op.out, [])
        used = {g.params["index"] for g in gets}
        avals = op.out.aval.avals
        first = op.params["n_carry"] if op.prim == "scan" else 0
        keep = [i for i in range(len(avals)) if i < first or i in used]
        if len(keep) == len(avals):
            continue
        changed = True
        new_index = {old: new for new, old in enumerate(keep)}
        body_keep = keep  # scan results and body outputs correspond one to one
        regions = []
        for _, region in regions_of(op):
            region = region.copy()
            region.outputs = [region.outputs[i] for i in body_keep]
            regions.append(region)
        op.params = with_regions(op, regions)
        new_out = Value(TupleAval([avals[i] for i in keep]), op)
        old_out, op.out = op.out, new_out
        for g in gets:
            g.inputs = [new_out]
            g.params = dict(g.params, index=new_index[g.params["index"]])
        del old_out
    return changed


def simplify_loops(fn) -> bool:
    """Moves what does not change from step to step out of each ``scan`` of ``fn``:

    * a scanned operand that is a ``full`` (the zero cotangents a reverse scan starts
      from, say) becomes a ``full`` of one slice inside the body, and a constant operand
      that is a ``full`` a ``full`` inside the body, so the body's own passes fold it
      (``x + 0 -> x``) and the loop stops reading it;
    * a carry the body returns unchanged (a weight's gradient accumulated outside the
      loop, say) becomes a constant operand, and its result is that operand;
    * an operand the body does not read is dropped;
    * a stacked result that is each step's slice of a scanned operand (or a reshape of
      it) is that operand (reshaped): the loop stops copying it.

    Regions are edited as copies. Run the optimizer inside the regions after. Returns
    whether anything changed.

    Example:
        >>> import primflow as pf
        >>> from primflow.ir.regions import simplify_loops
        >>> f = pf.jit(lambda x, w: pf.scan(lambda c, v: ((c[0] + v, c[1]), c[0]),
        ...                                 (x[0], w), x)[0][0])
        >>> program = f.lower(pf.ones([3]), pf.ones([2])).traced.copy()
        >>> simplify_loops(program), [op.params["n_carry"] for op in program.ops
        ...                           if op.prim == "scan"]
        (True, [1])
    """
    readers = {}
    for op in fn.ops:
        if op.prim == GET:
            readers.setdefault(op.inputs[0], []).append(op)
    replace = {}  # results of removed gets -> the values they are
    dropped = set()  # ids of removed gets
    changed = False
    for op in fn.ops:
        if replace:
            op.inputs = [replace.get(v, v) for v in op.inputs]
        if op.prim == "scan":
            changed |= _simplify_scan(op, readers.get(op.out, []), replace, dropped)
    if dropped:
        fn.ops = [op for op in fn.ops if id(op) not in dropped]
    if replace:
        fn.outputs = [replace.get(v, v) for v in fn.outputs]
    return changed


def _is_full(v):
    return v.op is not None and v.op.prim == "full"


def _simplify_scan(op, gets, replace, dropped) -> bool:
    from ._program import Operation, Value

    k, m = op.params["n_carry"], op.params["n_xs"]
    body = op.params["body"]
    ins = list(op.inputs)
    fixed = [j for j in range(k) if body.outputs[j] is body.inputs[j]]
    fulls = [i for i in range(k, len(ins)) if _is_full(ins[i])]
    used = set(body.outputs)
    for inner in body.ops:
        used.update(inner.inputs)
    unused = [i for i in range(k, len(ins)) if body.inputs[i] not in used]
    gone = set(fulls) | set(unused)
    # ys that are a step's slice of a scanned operand (or a reshape of it): the saved
    # forward values a reverse scan hands on to the weight-gradient products after it
    slice_of = {body.inputs[i]: i for i in range(k, k + m) if i not in fulls}
    copied = {}
    for j in range(k, len(body.outputs)):
        v = body.outputs[j]
        if v.op is not None and v.op.prim == "reshape":
            v = v.op.inputs[0]
        if v in slice_of:
            copied[j] = slice_of[v]
    if not fixed and not gone and not copied:
        return False
    body = body.copy()
    inlined = {}
    new_ops = []
    for i in fulls:  # a full's slice (or the full itself) is a full of the input's type
        if i in unused:
            continue
        aval = body.inputs[i].aval
        full = Operation("full", [], dict(ins[i].op.params, shape=tuple(aval.shape)), aval)
        new_ops.append(full)
        inlined[body.inputs[i]] = full.out
    for inner in body.ops:
        inner.inputs = [inlined.get(v, v) for v in inner.inputs]
    body.ops = new_ops + body.ops
    body.outputs = [inlined.get(v, v) for v in body.outputs]
    carry = [j for j in range(k) if j not in fixed]
    xs = [i for i in range(k, k + m) if i not in gone]
    consts = [i for i in range(k + m, len(ins)) if i not in gone] + fixed
    order = carry + xs + consts
    op.inputs = [ins[i] for i in order]
    body.inputs = [body.inputs[i] for i in order]
    ys = [j for j in range(k, len(body.outputs)) if j not in copied]
    body.outputs = [body.outputs[j] for j in carry] + [body.outputs[j] for j in ys]
    params = dict(op.params, n_carry=len(carry), n_xs=len(xs))
    params["body"] = body
    op.params = params
    avals = op.out.aval.avals
    new_index = {j: n for n, j in enumerate(carry + ys)}
    op.out = Value(TupleAval([avals[j] for j in carry + ys]), op)
    for g in gets:
        index = g.params["index"]
        if index in new_index:
            g.inputs = [op.out]
            g.params = dict(g.params, index=new_index[index])
            continue
        # a carry the loop never changes (its initial value), or a stacked slice of a
        # scanned operand (the operand itself, reshaped if the body reshaped the slice)
        source = ins[copied[index]] if index in copied else ins[index]
        if tuple(source.aval.shape) == tuple(g.out.aval.shape):
            replace[g.out] = source
            dropped.add(id(g))
        else:
            g.prim, g.inputs = "reshape", [source]
            g.params = {"shape": tuple(g.out.aval.shape)}
    return True
