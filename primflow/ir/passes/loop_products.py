"""Accumulated products leave the loop: a ``scan`` carry updated as
``acc = acc + dot(a_t, b_t) + dot(c_t, d_t) + ...`` (what reverse mode through a loop
does with the cotangent of a weight matrix the body reads) becomes a carry that passes
through unchanged, the factors ``a_t, b_t, ...`` stacked as extra results, and one
product over the stacked steps after the loop:

    acc_final = acc_init + dot(A, B, contracting (0, ...)) + dot(C, D, ...)

Per step an outer product of two vectors writes a whole matrix (memory bound); after the
rewrite the loop only stores the vectors and a single matrix product sums them, which is
what makes the gradient of a scan over an MLP cost a few forward passes instead of many.
"""

from __future__ import annotations

from ...core.primitive import get_primitive
from .._program import Operation, replace_uses, uses
from ..regions import GET, TupleAval


def hoist_accumulated_products(fn) -> bool:
    """Rewrites every ``scan`` of ``fn`` (not inside regions) whose carries accumulate
    products (see the module docstring). Returns whether anything changed.

    Example:
        >>> import primflow as pf
        >>> from primflow.compiler import optimize_program
        >>> def f(w, xs):
        ...     def step(g, x):
        ...         return g + pf.matmul(x[:, None], pf.tanh(x)[None, :]), None
        ...     return pf.scan(step, w, xs)[0]
        >>> program = pf.jit(f).lower(pf.zeros([3, 3]), pf.ones([5, 3])).program
        >>> [op.prim for op in program.ops if op.prim in ("scan", "dot_general")]
        ['scan', 'dot_general']
        >>> [op.prim for op in program.ops[0].params["body"].ops]  # no product per step
        ['tanh', 'reshape']
    """
    changed = False
    for op in list(fn.ops):
        if op.prim == "scan":
            changed |= _rewrite_scan(fn, op)
    return changed


def _terms(body, j, count):
    """The dot_general operations whose sum the carry ``j`` accumulates, or None."""
    inp, out = body.inputs[j], body.outputs[j]
    if count.get(inp, 0) != 1 or not inp.aval.dtype.is_floating:
        return None
    if sum(1 for v in body.outputs if v is out) != 1 or out is inp:
        return None
    terms, seen_input = [], False
    stack = [out]
    while stack:
        v = stack.pop()
        if v is inp:
            seen_input = True
            continue
        node = v.op
        if node is None:
            return None
        if v is not out and count.get(v, 0) != 1:
            return None  # an intermediate sum read elsewhere
        if node.prim == "add" and v.aval == inp.aval and all(
                u.aval == inp.aval for u in node.inputs):
            stack.extend(node.inputs)
        elif (node.prim == "dot_general" and node.params["batch"] == ((), ())
              and v is not out and node.out.aval == inp.aval):
            terms.append(node)
        else:
            return None
    return terms if seen_input and terms else None


def _rewrite_scan(fn, op):
    body, k, n = op.params["body"], op.params["n_carry"], op.params["length"]
    count = uses(body)
    found = {j: t for j in range(k) if (t := _terms(body, j, count)) is not None}
    gets = {g.params["index"]: g for g in fn.ops if g.prim == GET and g.inputs[0] is op.out}
    found = {j: t for j, t in found.items() if j in gets}
    if not found:
        return False
    new_body, mapping = _copy(body)
    avals = list(op.out.aval.avals)
    factor_index = {}  # id(term) -> (index of a, index of b) among the results
    for j, terms in found.items():
        new_body.outputs[j] = new_body.inputs[j]
        for t in terms:
            a, b = mapping[t.inputs[0]], mapping[t.inputs[1]]
            factor_index[id(t)] = (len(avals), len(avals) + 1)
            for v in (a, b):
                new_body.outputs.append(v)
                avals.append(type(v.aval)((n,) + tuple(v.aval.shape), v.aval.dtype))
    op.params = dict(op.params, body=new_body)
    old_out = op.out
    op.out = type(old_out)(TupleAval(avals), op)
    for g in fn.ops:
        if g.prim == GET and g.inputs[0] is old_out:
            g.inputs = [op.out]
    dot = get_primitive("dot_general")
    after = []  # new operations, placed right after the scan
    replacements = {}
    for j, terms in found.items():
        total = None
        for t in terms:
            ia, ib = factor_index[id(t)]
            (ca, cb) = t.params["contracting"]
            stacked = []
            for index in (ia, ib):
                g = Operation(GET, [op.out], {"index": index}, avals[index])
                after.append(g)
                stacked.append(g.out)
            params = {"contracting": ((0,) + tuple(c + 1 for c in ca),
                                      (0,) + tuple(c + 1 for c in cb)), "batch": ((), ())}
            aval = dot.abstract_eval(*[v.aval for v in stacked], **params)
            prod = Operation("dot_general", stacked, params, aval)
            after.append(prod)
            if total is None:
                total = prod.out
            else:
                s = Operation("add", [total, prod.out], {}, aval)
                after.append(s)
                total = s.out
        own = Operation(GET, [op.out], {"index": j}, avals[j])  # the carry: its initial value
        final = Operation("add", [own.out, total], {}, avals[j])
        after[:0] = [own]
        after.append(final)
        replacements[gets[j].out] = final.out
    replace_uses(fn, replacements)  # before the new operations join: they read the gets
    position = fn.ops.index(op) + 1
    fn.ops[position:position] = after
    return True


def _copy(fn):
    """A copy of ``fn`` and the map from its values to the copy's."""
    from .._program import Function, Value

    mapping = {}
    inputs = []
    for v in fn.inputs:
        mapping[v] = Value(v.aval)
        inputs.append(mapping[v])
    ops = []
    for o in fn.ops:
        new = Operation(o.prim, [mapping[v] for v in o.inputs], o.params, o.out.aval)
        mapping[o.out] = new.out
        ops.append(new)
    return Function(fn.name, inputs, ops, [mapping[v] for v in fn.outputs],
                    dict(fn.consts)), mapping
