"""Structured control flow: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``
(JAX semantics, pytrees throughout) and Paddle's spellings in ``pf.static.nn``.

How each call runs depends on what decides its control flow:

* **Concrete** (eager code, the tape, ``pf.jvp``, ``pf.jet``, ``pf.grad`` of any order, an
  unbatched ``pf.vmap``): the functions run as Python control flow on the values, and the
  operations they apply are recorded by whatever is active, so every derivative of every
  order comes from the primitives' rules (the tape keeps each step's residuals).
* **Batched** (a predicate that differs between ``pf.vmap`` lanes): ``cond``/``switch`` run
  every branch and select per lane with ``pf.where``; ``while_loop`` runs until every lane
  is done, freezing the lanes that finished.
* **Staged** (inside ``pf.jit``): the functions are traced once into regions (sub-programs,
  ``primflow.ir.regions``) of one ``cond``/``while``/``scan`` operation, so a loop body is
  optimized and compiled once, not unrolled. Their reverse-mode rules are written with the
  same operations (the vjp of ``scan`` is a reverse ``scan`` over the per-step residuals;
  of ``cond`` a ``cond`` of the branches' vjps), so every order works there too;
  ``pf.jvp``, ``pf.vmap`` and ``pf.jet`` inside ``pf.jit`` have loop rules too (the loop
  carries tangents, lanes or Taylor coefficients and stays one operation). A
  ``while_loop`` whose trip count is only known at run time has no reverse mode: use
  ``fori_loop`` with static bounds, ``scan``, or ``while_loop(..., max_steps=n)``.

Bad input (branches returning different structures, shapes or dtypes; a body changing the
carry; a non-scalar or non-boolean predicate; an index out of range) raises an error naming
both sides.
"""

from __future__ import annotations

from ..autodiff.forward import JVPTrace, JVPTracer, split_tangents
from ..autodiff.forward import jvp as _jvp
from ..autodiff.functional import vjp as _vjp
from ..autodiff.taylor import TaylorTrace, TaylorTracer, taylor_series
from ..backends import get_backend
from ..core import dtypes
from ..core.primitive import Aval, record_custom
from ..core.pytree import replace_at, tree_flatten, tree_unflatten
from ..core.state import enable_grad, state
from ..core.trace import Tracer, new_trace, staging_trace
from ..ir import Builder, Function, evaluate_bound
from ..ir.interpreter import set_control_rule
from ..ir.regions import TupleAval, result_avals
from ..ops.helpers import as_tensor
from ..ops.creation import zeros_like
from ..ops.manipulation import stack
from ..ops.math import equal, where
from .jit import JitTrace, JitTracer
from ..ops.reduction import any as any_
from ..ops.reduction import argmax
from ..prims import move_axis, with_batch_front
from .vmap import BatchTrace, BatchTracer

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]

_BATCHED = object()  # _concrete's answer for a value that differs between vmap lanes


# ---- inspecting values ---------------------------------------------------------------------

def _concrete(t):
    """The backend array under ``t`` (through forward-mode and Taylor tracers), ``_BATCHED``
    when a vmap lane axis is in the way, or None when it is staged (a jit tracer)."""
    while True:
        if isinstance(t, JitTracer):
            return None
        if isinstance(t, JVPTracer):
            t = t.primal
        elif isinstance(t, TaylorTracer):
            t = t.series[0]
        elif isinstance(t, BatchTracer):
            return _BATCHED
        elif isinstance(t, Tracer):
            return None
        else:
            return t._value


def _lanes(t):
    """The per-lane values of a batched boolean scalar ``t`` (a BatchTracer), as a backend
    array, or None when they are staged."""
    while isinstance(t, (BatchTracer, JVPTracer, TaylorTracer)):
        t = t.val if isinstance(t, BatchTracer) else (
            t.primal if isinstance(t, JVPTracer) else t.series[0])
    return None if isinstance(t, Tracer) else t._value


def _leaves(tree):
    leaves, treedef = tree_flatten(tree)
    return [as_tensor(x) for x in leaves], treedef


def _check_same(what, tree_a, leaves_a, name_a, tree_b, leaves_b, name_b, hint=""):
    """Raises ``TypeError`` naming both sides when two pytrees of tensors differ in
    structure, shape or dtype."""
    if tree_a != tree_b:
        raise TypeError(f"{what}: {name_a} has structure {tree_a!r} but {name_b} has "
                        f"structure {tree_b!r}; they must match{hint}")
    for i, (a, b) in enumerate(zip(leaves_a, leaves_b)):
        if tuple(a._shape) != tuple(b._shape) or a.dtype is not b.dtype:
            raise TypeError(f"{what}: leaf {i} of {name_a} is {a.dtype.name}{list(a._shape)} "
                            f"but leaf {i} of {name_b} is {b.dtype.name}{list(b._shape)}; "
                            f"shapes and dtypes must match (cast with .astype(...), e.g. start "
                            f"from pf.to_tensor(0.0) rather than 0){hint}")


def _scalar_check(x, what, allow_int, allow_bool=True):
    x = as_tensor(x)
    if x.size != 1 or len(x._shape) > 1:
        raise TypeError(f"{what} must be a scalar (shape [] or [1]), got shape {x.shape}; "
                        f"reduce it first (e.g. pf.all(x > 0) or (x > 0).any())")
    kind_ok = (x.dtype is dtypes.bool_ and allow_bool) or (
        allow_int and not x.dtype.is_floating and x.dtype is not dtypes.bool_)
    if not kind_ok:
        want = "boolean" if not allow_int else "boolean or integer"
        raise TypeError(f"{what} must be a {want} scalar, got {x.dtype.name}; compare first "
                        f"(e.g. x > 0)")
    if x._shape:
        x = x.reshape([])
    return x


def _first(array):
    """The first element of a native array, on the host (any backend)."""
    return get_backend().to_numpy(array).reshape(-1)[0]


def _as_int(array) -> int:
    return int(_first(array))


def _loop_stageable(operands):
    """Whether a staged loop over these operands has rules for every transform among them
    (jit, and vmap, jvp or jet inside jit); otherwise it runs as Python control flow."""
    return all(not isinstance(t, Tracer) or isinstance(t, (JitTracer, JVPTracer, BatchTracer))
               or type(t) is TaylorTracer for t in operands)


def _foreign(tensors):
    """Whether any value is a tracer of a transform other than jit (vmap, jvp, jet)."""
    return any(isinstance(t, Tracer) and not isinstance(t, JitTracer) for t in tensors)


# ---- regions: tracing a function into a sub-program ------------------------------------------

class RegionTrace(JitTrace):
    """Stages a region's operations into its own program. Values from outside (tracers of
    enclosing traces, tensors that require grad) become extra region inputs: the
    region's captures, which the control-flow operation takes as operands."""

    def __init__(self, level, builder):
        super().__init__(level, builder)
        self.capture_of = {}  # id(outside value) -> (value, region input)
        self.captures = []

    def lift(self, a):
        if isinstance(a, JitTracer) and a._trace is self:
            return a.value
        entry = self.capture_of.get(id(a))
        if entry is None:
            v = self.builder.add_input(Aval(a._shape, a.dtype))
            entry = self.capture_of[id(a)] = (a, v)
            self.captures.append(a)
        return entry[1]

    def capture(self, a):
        """``a`` (from outside) as a value of this region."""
        return JitTracer(self, self.lift(a))


def _trace_region(fn, in_avals, name):
    """Traces ``fn(list of region inputs) -> pytree`` into a ``Function``. Returns the
    function (inputs: ``in_avals`` then the captures), the captured outside values, and the
    output leaves' tree."""
    builder = Builder(name)
    # grad mode stays as it is: operations on outside values alone are recorded by the
    # enclosing trace (hoisted out of the region), and the tape must see them there
    with new_trace(RegionTrace, builder) as trace:
        try:
            ins = [JitTracer(trace, builder.add_input(a)) for a in in_avals]
            out_leaves, out_tree = _leaves(fn(ins))
            builder.fn.outputs = [trace.lift(x) for x in out_leaves]
        finally:
            trace.finished = True
    return builder.fn, trace.captures, out_tree


def _unify(traced, n_fixed):
    """Regions traced separately take the same operands: the first ``n_fixed`` inputs, then
    the union of all captures. Returns ``(regions, captures)``."""
    captures, index = [], {}
    for _, caps in traced:
        for c in caps:
            if id(c) not in index:
                index[id(c)] = len(captures)
                captures.append(c)
    out = []
    for fn, caps in traced:
        mine = {id(c): v for c, v in zip(caps, fn.inputs[n_fixed:])}
        inputs = list(fn.inputs[:n_fixed]) + [
            mine.get(id(c)) or _fresh(c) for c in captures]
        out.append(Function(fn.name, inputs, fn.ops, fn.outputs, fn.consts))
    return out, captures


def _fresh(t):
    from ..ir import Value

    return Value(Aval(t._shape, t.dtype))


def _stage(kind, operands, params, out_avals):
    """Adds a control-flow operation to the innermost staging trace; returns its results
    as tracers."""
    trace = staging_trace()
    ins = [trace.lift(as_tensor(a)) for a in operands]
    tup = trace.builder.add_op(kind, ins, params, TupleAval(out_avals))
    return [JitTracer(trace, trace.builder.add_op("get", [tup], {"index": k}, aval))
            for k, aval in enumerate(out_avals)]


def _needs_grad(operands):
    return state.grad_enabled and any(
        not a.stop_gradient and a.dtype.is_floating for a in operands)


def _attach(results, operands, name, backward):
    """Tape nodes for the float results: ``backward(cotangents) -> operand cotangents``
    (None where there is none), with ``None`` for the results without a cotangent."""
    diff = [i for i, a in enumerate(operands) if not a.stop_gradient and a.dtype.is_floating]
    inputs = [operands[i] for i in diff]
    out = []
    for k, r in enumerate(results):
        if not r.dtype.is_floating:
            out.append(r)
            continue

        def vjp(g, _out, *_inputs, k=k):
            cts = [None] * len(results)
            cts[k] = g
            full = backward(cts)
            return tuple(full[i] for i in diff)

        out.append(record_custom(r, inputs, name, vjp))
    return out


def _region_fn(region):
    """A Python function running ``region`` on a list of values (binding its operations)."""
    return lambda values: evaluate_bound(region, list(values))


def _float_positions(values):
    return [i for i, v in enumerate(values) if v.dtype.is_floating]


# ---- applying a staged operation (also used by ir.evaluate_bound) ---------------------------

def apply_control(kind, params, operands):
    """Applies a control-flow operation given by its regions (``params``, as in
    ``primflow.ir.regions``) to ``operands``: staged when a jit trace is active, else run
    as Python control flow on the values (the tape and other transforms see every step)."""
    operands = [as_tensor(a) for a in operands]
    if staging_trace() is not None:
        if not _foreign(operands):
            return _apply_staged(kind, params, operands, _stage_results)
        # a transform between pf.jit and this operation (jit of vmap or jvp): its rule
        # makes a staged loop of the transformed body
        trace = max((a._trace for a in operands if isinstance(a, Tracer)
                     and not isinstance(a, JitTracer)), key=lambda t: t.level)
        if kind in ("scan", "while") and isinstance(trace, (JVPTrace, BatchTrace)):
            rule = _jvp_rule if isinstance(trace, JVPTrace) else _batch_rule
            return _apply_staged(kind, params, operands,
                                 lambda *a: rule(trace, *a))
        if kind in ("scan", "while") and type(trace) is TaylorTrace:  # jet under jit
            return _apply_staged(kind, params, operands,
                                 lambda *a: _taylor_rule(trace, *a))
    if kind == "cond":
        branches = params["branches"]
        index = _concrete(operands[0])
        message = params.get("message")  # a staged check (see _finished_within)
        if index is None or index is _BATCHED:
            outs = [evaluate_bound(b, operands[1:]) for b in branches]
            return _select(operands[0], outs, message)
        return evaluate_bound(branches[_check_index(_as_int(index), len(branches), message)],
                              operands[1:])
    if kind == "while":
        k = params["n_carry"]
        carry, consts = operands[:k], operands[k:]
        cond_fn = _region_fn(params["cond"])
        body_fn = _region_fn(params["body"])
        return _while_python(lambda c: cond_fn(list(c) + consts)[0],
                             lambda c: body_fn(list(c) + consts), carry)
    k, m, n = params["n_carry"], params["n_xs"], params["length"]
    carry, xs, consts = operands[:k], operands[k:k + m], operands[k + m:]
    body = _region_fn(params["body"])

    def step(c, x):
        outs = body(list(c) + list(x) + consts)
        return outs[:k], outs[k:]

    return _scan_python_flat(step, carry, xs, n, params["reverse"])


def _stage_results(kind, params, operands):
    return _stage(kind, operands, params,
                  result_avals(kind, params, [Aval(a._shape, a.dtype) for a in operands]))


def _apply_staged(kind, params, operands, run):
    """Runs the operation with ``run(kind, params, operands)`` (staging it, or a rule of
    the transform in between) and records its reverse-mode rule on the tape when an
    operand requires grad (the tape works at the level the user works at)."""
    if kind == "scan" and _needs_grad(operands):
        return _scan_staged_with_grad(params, operands, run)
    results = run(kind, params, operands)
    if not _needs_grad(operands):
        return results
    if kind == "cond":
        return _attach(results, operands, "cond", lambda cts: _cond_vjp(
            params["branches"], operands, results, cts, params.get("message")))
    return _attach(results, operands, "while_loop", _while_vjp_error)


def _check_index(i, n, message=None):
    """``i`` when it is a valid branch index; else an IndexError, or for a check staged as
    a ``cond`` (``message`` given, see ``_finished_within``) a RuntimeError saying it."""
    if not 0 <= i < n:
        if message is not None:
            raise RuntimeError(message)
        raise IndexError(f"switch: the branch index is {i} but there are {n} branches "
                         f"(valid indices 0..{n - 1})")
    return i


def _select(index, outs, message=None):
    """Per-lane choice among branch results (all computed): a batched ``cond``."""
    if index.dtype is dtypes.bool_:
        return [where(index, b, a) for a, b in zip(outs[0], outs[1])]
    index = _checked_lanes(index, len(outs), message)
    result = list(outs[0])
    for j in range(1, len(outs)):
        pick = equal(index, as_tensor(j, dtype=index.dtype))
        result = [where(pick, b, a) for a, b in zip(result, outs[j])]
    return result


def _checked_lanes(index, n, message=None):
    """A batched branch index whose lanes all lie in ``0..n-1``: the rule unbatched
    ``switch`` follows, eagerly and compiled, holds per lane (JAX clamps instead; a silent
    clamp, or branch 0, hides bugs). Concrete lanes are checked now; staged ones (pf.vmap
    inside pf.jit) go through a ``cond`` on the first bad lane's index (0 when none) with
    ``n`` identity branches, so the compiled program raises the same IndexError when it
    runs, before the selection that reads its result."""
    lanes = _lanes(index)
    if lanes is not None:
        values = get_backend().to_numpy(lanes).reshape(-1)
        bad = ((values < 0) | (values >= n)).nonzero()[0]
        if len(bad):
            k = int(bad[0])
            if message is not None:
                raise RuntimeError(message)
            raise IndexError(f"switch: the branch index is {int(values[k])} in vmap lane {k} "
                             f"but there are {n} branches (valid indices 0..{n - 1})")
        return index
    return _with_payload(index, lambda lanes_value: _staged_index_check(lanes_value, n,
                                                                         message))


def _with_payload(t, fn):
    """``t`` with the array under its vmap levels replaced by ``fn(array)``."""
    if isinstance(t, BatchTracer):
        return BatchTracer(t._trace, _with_payload(t.val, fn), t.bdim)
    return fn(t)


def _staged_index_check(lanes_value, n, message):
    flat = lanes_value.reshape([-1])
    bad = (flat < 0) | (flat >= n)
    first_bad = (flat * bad.astype(flat.dtype))[argmax(bad)]  # 0 when every lane is valid
    return _branch(first_bad, [lambda v: v] * n, (lanes_value,), "pf.switch",
                   [f"branch {i}'s result" for i in range(n)], message)


# ---- reverse-mode rules of staged operations ---------------------------------------------

def _cond_vjp(branches, operands, results, cts, message=None):
    index, ops = operands[0], operands[1:]
    cts = [zeros_like(r) if c is None else c for r, c in zip(results, cts)]
    floats = _float_positions(ops)

    def branch_vjp(branch):
        def run(*args):
            vals, gs = list(args[:len(ops)]), list(args[len(ops):])
            return _region_vjp(branch, vals, floats, gs)
        return run

    grads = _branch(index, [branch_vjp(b) for b in branches], (*ops, *cts), "pf.switch",
                    [f"branch {i}'s vjp" for i in range(len(branches))], message)
    full = [None] * len(operands)
    for i, g in zip(floats, grads):
        full[1 + i] = g
    return full


def _region_vjp(region, values, positions, cotangents, saved=None):
    """Cotangents of ``region``'s inputs at ``positions`` for output cotangents
    (``values`` are region or outside values; computed with the tape, under the staging
    trace when there is one). ``saved`` maps operation indices of ``region`` to their
    values saved by the forward pass: those are not computed again (see ``_replay``)."""
    trace = staging_trace()
    if isinstance(trace, RegionTrace):  # differentiate with respect to this region's values
        values = [v if isinstance(v, JitTracer) and v._trace is trace else trace.capture(v)
                  for v in values]

    slot_of = []  # output -> its position among the distinct output tensors

    def f(*diff):
        full = replace_at(values, positions, diff)
        outs = _replay(region, full, saved) if saved else evaluate_bound(region, full)
        # a tensor returned twice (a carry that is also saved) is one output whose
        # cotangent is the sum of both
        distinct, index = [], {}
        for o in outs:
            if id(o) not in index:
                index[id(o)] = len(distinct)
                distinct.append(o)
            slot_of.append(index[id(o)])
        return distinct

    with enable_grad():
        outs, pullback = _vjp(f, *[values[i] for i in positions])
        summed = [None] * len(outs)
        for slot, ct in zip(slot_of, cotangents):
            summed[slot] = ct if summed[slot] is None else summed[slot] + ct
        return list(pullback(summed))


def _replay(region, args, saved):
    """``evaluate_bound`` of ``region`` in which the operations in ``saved`` (index ->
    value the forward pass computed) are not run again: their saved values are recorded on
    the tape as their results, so reverse mode reads them instead of recomputing."""
    from ..core.primitive import Node, get_primitive

    env = dict(zip(region.inputs, args))
    ops = region.ops
    for index, op in enumerate(ops):
        if index not in saved:
            part = Function(region.name, [], [op], [op.out], region.consts)
            for v in op.inputs:
                part.inputs.append(v)
            env[op.out] = evaluate_bound(part, [env[v] for v in op.inputs])[0]
            continue
        ins = [env[v] for v in op.inputs]
        out = saved[index].detach()  # a handle of its own: the tape node goes on it
        if state.grad_enabled and any(not a.stop_gradient for a in ins):
            out._node = Node(get_primitive(op.prim), op.params, ins, out)
            out.stop_gradient = False
        env[op.out] = out
    return [env[v] for v in region.outputs]


def _worth_saving(body, n_step_inputs):
    """Indices of the body's operations whose results the reverse pass should read from
    the forward pass rather than recompute: matrix products and transcendental functions
    of the step's values (the carry and the slices; loop-invariant ones are not stacked),
    and the step-dependent operands of the matrix products (an RK stage's input, say,
    looked through reshapes): a weight's gradient is a product with that operand, so the
    reverse pass reads it instead of rebuilding it and stacking it again for the
    weight-gradient product after the loop. Residuals the reverse body does not read (a
    matrix product whose consumers are linear) are pruned from both loops later
    (``ir.regions.simplify_loops`` and ``prune_results``)."""
    from ..ir.passes.fuse import TRANSCENDENTAL

    per_step = set(body.inputs[:n_step_inputs])
    index_of = {op.out: index for index, op in enumerate(body.ops)}
    out = set()
    for index, op in enumerate(body.ops):
        if not any(v in per_step for v in op.inputs):
            continue
        per_step.add(op.out)
        if not op.out.aval.dtype.is_floating:
            continue
        if op.prim in TRANSCENDENTAL:
            out.add(index)
        elif op.prim == "dot_general":
            out.add(index)
            for v in op.inputs:
                while v.op is not None and v.op.prim == "reshape" and v in index_of:
                    v = v.op.inputs[0]
                if v in per_step and v in index_of:  # computed in the step (not an input)
                    out.add(index_of[v])
    return sorted(out)


def _while_vjp_error(cts):
    raise ValueError(
        "reverse-mode differentiation (grad, vjp, backward) of pf.while_loop under pf.jit is "
        "not possible: its trip count is only known at run time, so the steps' residuals "
        "cannot be planned. Use pf.fori_loop with static (Python int) bounds, pf.scan, or "
        "pf.while_loop(cond, body, init, max_steps=n), a bounded loop that is "
        "reverse-differentiable; forward mode (pf.jvp) works on while_loop")


def _scan_staged_with_grad(params, operands, run):
    """A staged scan that also returns, stacked over the steps, each step's carry and the
    results of its costly operations (the residuals), with a tape node whose backward is a
    reverse scan of the body's vjp reading them (``_scan_vjp``)."""
    body, k, m = params["body"], params["n_carry"], params["n_xs"]
    # the saved intermediates are replayed on the tape; under jvp/vmap rules (foreign
    # operands) the step is recomputed instead
    saved = _worth_saving(body, k + m) if run is _stage_results else []
    res_body = body.copy()  # same operation order: indices carry over
    res_body.outputs = (res_body.outputs + res_body.inputs[:k]
                        + [res_body.ops[i].out for i in saved])
    res_params = dict(params, body=res_body)
    staged = run("scan", res_params, operands)
    n_out = len(body.outputs)

    # the residuals are results too (second and higher derivatives flow through them):
    # their cotangents enter the reverse scan like those of the other ys
    def backward(cts):
        return _scan_vjp(res_params, operands, staged, cts, n_out, saved)

    attached = _attach(staged, operands, "scan", backward)
    staged[:] = attached
    return attached[:n_out]


def _scan_vjp(params, operands, results, cts, n_out, saved):
    """Operand cotangents of a scan whose body (``params``) returns, after its ``n_out``
    results, its carry input and the results of its operations ``saved`` (indices), for
    the cotangents ``cts`` of all its results."""
    body, k, m, n = params["body"], params["n_carry"], params["n_xs"], params["length"]
    carries = results[n_out:n_out + k]
    intermediates = results[n_out + k:]
    carry0, xs, consts = operands[:k], operands[k:k + m], operands[k + m:]
    cts = [zeros_like(r) if c is None else c for r, c in zip(results, cts)]
    g_carry, g_ys = cts[:k], cts[k:]
    fc = _float_positions(carry0)
    fx = [i for i in _float_positions(xs)]
    fk = _float_positions(consts)

    def bwd_step(bcarry, bx):
        gc, gk = bcarry
        x_t, c_t, s_t, gy_t = bx
        values = list(c_t) + list(x_t) + list(consts)
        positions = ([i for i in fc] + [k + i for i in fx] + [k + m + i for i in fk])
        out_cts = []
        gc_full = dict(zip(fc, gc))
        for j in range(k):
            out_cts.append(gc_full[j] if j in gc_full else zeros_like(c_t[j]))
        out_cts += list(gy_t)
        grads = _region_vjp(body, values, positions, out_cts, dict(zip(saved, s_t)))
        dc = grads[:len(fc)]
        dx = grads[len(fc):len(fc) + len(fx)]
        dk = grads[len(fc) + len(fx):]
        return (dc, [a + b for a, b in zip(gk, dk)]), dx

    gk0 = [zeros_like(consts[i]) for i in fk]
    (dc0, dk), dxs = scan(bwd_step, ([g_carry[i] for i in fc], gk0),
                          (list(xs), list(carries), list(intermediates), list(g_ys)),
                          length=n, reverse=not params["reverse"])
    full = [None] * len(operands)
    for i, g in zip(fc, dc0):
        full[i] = g
    for i, g in zip(fx, dxs):
        full[k + i] = g
    for i, g in zip(fk, dk):
        full[k + m + i] = g
    return full


# ---- forward-mode and batching rules of staged loops (jit of jvp, jit of vmap) ---------------

def _jvp_region(region, values, tangents):
    """``(outputs, output tangents)`` of ``region`` at ``values``, pushing ``tangents``
    (None: zero) by forward mode."""
    positions = [i for i, t in enumerate(tangents) if t is not None]
    if not positions:
        outs = evaluate_bound(region, list(values))
        return outs, [zeros_like(o) if o.dtype.is_floating else None for o in outs]

    def f(*diff):
        return evaluate_bound(region, replace_at(values, positions, diff))

    outs, dots = _jvp(f, tuple(values[i] for i in positions),
                      tuple(tangents[i] for i in positions))
    return list(outs), [d if o.dtype.is_floating else None for o, d in zip(outs, dots)]


def _placed(positions, values, n):
    """A list of ``n`` Nones with ``values`` at ``positions``."""
    return replace_at([None] * n, positions, values)


def _augmented_loop(kind, params, primals, extras, fill, through):
    """A staged loop carrying, beside each float carry (and each scanned input that has
    one), an extra: its tangent (jvp) or its Taylor coefficients (jet). ``fill(value,
    extra)`` makes the extra where there is none (zeros); ``through(region, values,
    extras) -> (outs, out_extras)`` runs the body on both. The loop stays one operation
    instead of being unrolled. Returns the outputs and their extras (None: none)."""
    k = params["n_carry"]
    fc = _float_positions(primals[:k])
    carry_e = [fill(primals[i], extras[i]) for i in fc]
    if kind == "while":
        consts_p, consts_e = primals[k:], extras[k:]

        def cond_fn(state):
            return evaluate_bound(params["cond"], list(state[0]) + consts_p)[0]

        def body_fn(state):
            cp, ce = state
            outs, out_e = through(params["body"], list(cp) + consts_p,
                                  _placed(fc, ce, k) + consts_e)
            return outs, [fill(outs[i], out_e[i]) for i in fc]

        cp, ce = while_loop(cond_fn, body_fn, (primals[:k], carry_e))
        return list(cp), _placed(fc, ce, k)
    m = params["n_xs"]
    xs_p, xs_e = primals[k:k + m], extras[k:k + m]
    consts_p, consts_e = primals[k + m:], extras[k + m:]
    tx = [i for i, e in enumerate(xs_e) if e is not None]

    def step(carry, x):
        (cp, ce), (xp, xe) = carry, x
        outs, out_e = through(params["body"], list(cp) + list(xp) + consts_p,
                              _placed(fc, ce, k) + _placed(tx, xe, m) + consts_e)
        fy = _float_positions(outs[k:])
        return ((outs[:k], [fill(outs[i], out_e[i]) for i in fc]),
                (outs[k:], [fill(outs[k + j], out_e[k + j]) for j in fy]))

    (cp, ce), (ys, ye) = scan(step, (primals[:k], carry_e),
                              (xs_p, [fill(xs_p[i], xs_e[i]) for i in tx]),
                              length=params["length"], reverse=params["reverse"])
    return list(cp) + list(ys), _placed(fc, ce, k) + _placed(_float_positions(ys), ye, len(ys))


def _jvp_rule(trace, kind, params, operands):
    """The jvp of a staged loop: a loop carrying primals and tangents, whose body is the
    jvp of the body (every float carry gets a tangent, zero where it had none)."""
    primals, tangents = split_tangents(trace, operands)
    out_p, out_t = _augmented_loop(kind, params, primals, tangents,
                                   lambda v, t: zeros_like(v) if t is None else t, _jvp_region)
    return [JVPTracer(trace, p, t) if t is not None else p for p, t in zip(out_p, out_t)]


def _taylor_rule(trace, kind, params, operands):
    """The jet of a staged loop: a loop carrying each float carry's Taylor coefficients
    (zeros where it has none), whose body propagates them through the body in Taylor mode."""
    order = trace.order
    primals, series = [], []
    for a in operands:
        if isinstance(a, TaylorTracer) and a._trace is trace:
            primals.append(a.series[0])
            series.append(list(a.series[1:]))
        else:
            primals.append(a)
            series.append(None)

    def filled(value, coeffs):
        return [c if c is not None else zeros_like(value) for c in (coeffs or [None] * order)]

    def through(region, values, in_series):
        outs = taylor_series(lambda *v: evaluate_bound(region, list(v)), list(values),
                             [None if c is None else list(c) for c in in_series], order)
        return [o[0] for o in outs], [o[1:] for o in outs]

    out_p, out_s = _augmented_loop(kind, params, primals, series, filled, through)
    return [TaylorTracer(trace, [p] + list(s)) if s is not None else p
            for p, s in zip(out_p, out_s)]


def _batch_rule(trace, kind, params, operands):
    """The vmap of a staged loop: a loop over the whole batch (batch axis 0 of every carry;
    scanned inputs batched along axis 1), whose body is the vmapped body; a batched
    ``while`` runs until every lane's condition is false, freezing the finished lanes."""
    from .vmap import vmap

    size = trace.size
    vals, axes = [], []
    for a in operands:
        if isinstance(a, BatchTracer) and a._trace is trace:
            vals.append(a.val)
            axes.append(a.bdim)
        else:
            vals.append(a)
            axes.append(None)
    k = params["n_carry"]
    carry = [with_batch_front(v, b, size) for v, b in zip(vals[:k], axes[:k])]

    def lanes(region, consts, const_axes):
        """``region`` vmapped over the batched carry (and the constants' own axes)."""
        def run(*args):
            return evaluate_bound(region, list(args))

        in_axes = tuple([0] * k) + tuple(const_axes)
        return lambda c: vmap(run, in_axes=in_axes)(*c, *consts)

    if kind == "while":
        consts, c_axes = vals[k:], axes[k:]
        lane_cond = lanes(params["cond"], consts, c_axes)
        lane_body = lanes(params["body"], consts, c_axes)

        def cond_fn(c):
            return any_(lane_cond(list(c))[0])

        def body_fn(c):
            active = lane_cond(list(c))[0]
            new = lane_body(list(c))
            return [vmap(lambda a, n, o: where(a, n, o))(active, n, o)
                    for n, o in zip(new, c)]

        out = while_loop(cond_fn, body_fn, carry)
        return [BatchTracer(trace, o, 0) for o in out]
    m = params["n_xs"]
    xs, x_axes = vals[k:k + m], axes[k:k + m]
    consts, c_axes = vals[k + m:], axes[k + m:]
    # a batched scanned input: scan axis first, batch axis second
    xs = [x if b is None else move_axis(x, b, 1) for x, b in zip(xs, x_axes)]
    slice_axes = [None if b is None else 0 for b in x_axes]
    body = params["body"]

    def step(c, x):
        def run(*args):
            return evaluate_bound(body, list(args))

        outs = vmap(run, in_axes=tuple([0] * k) + tuple(slice_axes) + tuple(c_axes))(
            *c, *x, *consts)
        return list(outs[:k]), list(outs[k:])

    c_out, ys = scan(step, carry, xs, length=params["length"], reverse=params["reverse"])
    return ([BatchTracer(trace, o, 0) for o in c_out]
            + [BatchTracer(trace, y, 1) for y in ys])


# ---- Python control flow (concrete or batched predicates) -----------------------------------

def _while_python(cond_fn, body_fn, carry, check=None):
    """Runs a while loop on flat lists; a predicate batched by vmap runs until every lane is
    done, freezing finished lanes with ``where``."""
    carry = list(carry)
    while True:
        pred = cond_fn(carry)
        value = _concrete(pred)
        if value is None:
            raise TypeError(
                "pf.while_loop: the loop condition is a value staged by pf.jit inside another "
                "transform (vmap/jvp under jit); move the transform outside pf.jit, or use "
                "pf.fori_loop/pf.scan with a static trip count")
        if value is _BATCHED:
            lanes = _lanes(pred)
            if lanes is None:
                raise TypeError(
                    "pf.while_loop: a vmap-batched loop condition inside pf.jit is not "
                    "supported; apply pf.vmap outside pf.jit, or use pf.fori_loop/pf.scan")
            if not lanes.any():
                return carry
            new = body_fn(carry)
            if check is not None:
                check(new)
            carry = [where(pred, b, a) for a, b in zip(carry, new)]
            continue
        if not bool(_first(value)):
            return carry
        carry = list(body_fn(carry))
        if check is not None:
            check(carry)


def _scan_python_flat(step, carry, xs, n, reverse):
    """A scan on flat lists: ``step(carry, x) -> (carry, ys)``; returns carry + stacked ys."""
    carry = list(carry)
    ys = []
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        carry, y = step(carry, [x[i] for x in xs])
        carry = list(carry)
        ys.append(list(y))
    if reverse:
        ys.reverse()
    n_y = len(ys[0]) if ys else 0
    return carry + [stack([y[j] for y in ys]) for j in range(n_y)]


# ---- the public functions ---------------------------------------------------------------------

def cond(pred, true_fn, false_fn, *operands):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (JAX ``lax.cond``).

    ``pred`` is a boolean (or integer) scalar tensor. Eagerly only the chosen branch runs;
    under ``pf.vmap`` with a per-lane predicate both run and each lane takes its own;
    under ``pf.jit`` both branches are traced into one ``cond`` operation. Both branches
    must return the same structure, shapes and dtypes.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor(2.0)
        >>> float(pf.cond(x > 0, lambda v: v * 10, lambda v: -v, x))
        20.0
    """
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("pf.cond(pred, true_fn, false_fn, *operands): true_fn and false_fn "
                        "must be callables")
    pred = _scalar_check(pred, "pf.cond: the predicate", allow_int=True)
    if pred.dtype is not dtypes.bool_:
        pred = pred != as_tensor(0, dtype=pred.dtype)
    return _branch(pred, [false_fn, true_fn], operands, "pf.cond",
                   ["false_fn's result", "true_fn's result"])


def switch(index, branches, *operands):
    """``branches[index](*operands)`` (JAX ``lax.switch``); ``index`` an integer scalar.

    An index outside ``0..len(branches)-1`` raises ``IndexError`` (JAX clamps it; a silent
    clamp hides bugs): eagerly; under ``pf.jit``, where the index is traced, when the
    compiled program runs; under ``pf.vmap`` when any lane's index is out of range (naming
    the lane when the lanes are concrete).

    Example:
        >>> import primflow as pf
        >>> fs = [lambda v: v + 1, lambda v: v * 2, lambda v: v - 3]
        >>> float(pf.switch(pf.to_tensor(1), fs, pf.to_tensor(5.0)))
        10.0
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("pf.switch(index, branches, *operands): branches must be a non-empty "
                        "sequence of callables")
    index = _scalar_check(index, "pf.switch: the index", allow_int=True, allow_bool=False)
    return _branch(index, branches, operands, "pf.switch",
                   [f"branch {i}'s result" for i in range(len(branches))])


def _branch(index, branches, operands, what, names, message=None):
    """``branches[index](*operands)``, concrete, staged as a ``cond`` or batched;
    ``message``: this is a check, which raises a RuntimeError saying it when ``index`` is
    out of range (``_check_index``)."""
    value = _concrete(index)
    if value is not None and value is not _BATCHED:
        i = _as_int(value) if index.dtype is not dtypes.bool_ else int(bool(
            _first(value)))
        return branches[_check_index(i, len(branches), message)](*operands)
    op_leaves, op_tree = _leaves(operands)
    if value is None and not _foreign(op_leaves):
        avals = [Aval(x._shape, x.dtype) for x in op_leaves]
        traced, trees = [], []
        for j, b in enumerate(branches):
            fn, caps, tree = _trace_region(
                lambda ins, b=b: b(*tree_unflatten(op_tree, ins)), avals, f"branch{j}")
            traced.append((fn, caps))
            trees.append(tree)
        first = [_AvalView(v.aval) for v in traced[0][0].outputs]
        for j in range(1, len(branches)):
            _check_same(what, trees[0], first, names[0], trees[j],
                        [_AvalView(v.aval) for v in traced[j][0].outputs], names[j])
        regions, captures = _unify(traced, len(op_leaves))
        if not _foreign(captures):
            idx = index.astype("int32") if index.dtype is not dtypes.int32 else index
            params = {"branches": tuple(regions)}
            if message is not None:
                params["message"] = message
            outs = apply_control("cond", params, [idx] + op_leaves + captures)
            return tree_unflatten(trees[0], outs)
    # batched predicate (or staged values mixed with other transforms): run every branch
    # and select
    results = []
    for b in branches:
        leaves, tree = _leaves(b(*operands))
        results.append((leaves, tree))
    for j in range(1, len(branches)):
        _check_same(what, results[0][1], results[0][0], names[0], results[j][1],
                    results[j][0], names[j])
    return tree_unflatten(results[0][1], _select(index, [r[0] for r in results], message))


class _AvalView:
    """Stands for a region output in type checks (shape and dtype only)."""

    def __init__(self, aval):
        self._shape = tuple(aval.shape)
        self.dtype = aval.dtype


def while_loop(cond_fun, body_fun, init_val, max_steps=None):
    """Runs ``val = body_fun(val)`` while ``cond_fun(val)`` is true (JAX ``lax.while_loop``).

    ``init_val`` is any pytree of tensors; ``body_fun`` must return the same structure,
    shapes and dtypes. Eagerly the loop runs in Python (the tape records every step, so
    ``grad`` works); under ``pf.jit`` it is one ``while`` operation, forward-mode
    differentiable only. ``max_steps=n`` makes it a bounded loop (a ``scan`` of ``n``
    masked steps that stop changing the value once ``cond_fun`` is false), which is
    reverse-differentiable everywhere. If ``cond_fun`` is still true after ``n`` steps (on
    any vmap lane), the loop raises a ``RuntimeError`` instead of returning the ``n``-step
    value: at once when the condition is concrete, and under ``pf.jit`` when the compiled
    program runs.

    Example:
        >>> import primflow as pf
        >>> out = pf.while_loop(lambda v: v < 10, lambda v: v * 2, pf.to_tensor(1.0))
        >>> float(out)
        16.0
    """
    if not callable(cond_fun) or not callable(body_fun):
        raise TypeError("pf.while_loop(cond_fun, body_fun, init_val): cond_fun and body_fun "
                        "must be callables")
    init_leaves, init_tree = _leaves(init_val)

    def cond_flat(c):
        return _scalar_check(cond_fun(tree_unflatten(init_tree, list(c))),
                             "pf.while_loop: cond_fun's result", allow_int=False)

    def body_flat(c):
        leaves, tree = _leaves(body_fun(tree_unflatten(init_tree, list(c))))
        _check_same("pf.while_loop", init_tree, init_leaves, "the initial value", tree,
                    leaves, "body_fun's result")
        return leaves

    if max_steps is not None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
            raise ValueError(f"pf.while_loop: max_steps must be an int >= 0, got {max_steps!r}")
        return _bounded_while(cond_flat, body_flat, init_leaves, init_tree, max_steps)
    if staging_trace() is not None:
        avals = [Aval(x._shape, x.dtype) for x in init_leaves]
        cfn, ccaps, _ = _trace_region(cond_flat, avals, "cond")
        bfn, bcaps, _ = _trace_region(body_flat, avals, "body")
        (cfn, bfn), captures = _unify([(cfn, ccaps), (bfn, bcaps)], len(init_leaves))
        if _loop_stageable(init_leaves + captures):
            outs = apply_control("while", {"cond": cfn, "body": bfn,
                                           "n_carry": len(init_leaves)},
                                 init_leaves + captures)
            return tree_unflatten(init_tree, outs)
    return tree_unflatten(init_tree, _while_python(cond_flat, body_flat, init_leaves))


def _bounded_while(cond_flat, body_flat, init_leaves, init_tree, max_steps):
    def step(carry, _):
        active = cond_flat(carry)
        new = body_flat(carry)
        return [where(active, b, a) for a, b in zip(carry, new)], None

    out, _ = scan(step, list(init_leaves), None, length=max_steps)
    return tree_unflatten(init_tree, _finished_within(cond_flat, out, max_steps))


def _finished_within(cond_flat, carry, max_steps):
    """``carry`` after a bounded loop, once its condition is false on it; while it is still
    true ``max_steps`` was too few and the value is not the loop's result: a concrete
    condition (eager, vmap lanes, jvp, grad) raises now; a staged one (pf.jit) sends the
    carry through a ``cond`` with one identity branch whose index is 1 while any lane is
    still running, so the compiled program raises the same error when it runs."""
    message = (f"pf.while_loop: the loop condition is still true after max_steps={max_steps} "
               f"steps, so the value reached is not the loop result; raise max_steps to the "
               f"number of steps the loop needs (or check that its condition becomes false)")
    still = cond_flat(carry)
    lanes = _lanes(still)
    if lanes is not None:
        if get_backend().to_numpy(lanes).any():
            raise RuntimeError(message)
        return carry
    while isinstance(still, BatchTracer):  # every lane's flag, under vmap inside jit
        still = still.val
    index = any_(still).astype("int32")
    payloads = []
    for c in carry:
        _collect_payloads(c, payloads)
    checked = iter(_branch(index, [lambda *v: list(v)], payloads, "pf.while_loop",
                           ["the carry"], message))
    return [_replace_payloads(c, checked) for c in carry]


def _collect_payloads(t, out):
    """Appends the staged values under ``t``'s vmap/jvp/jet levels to ``out``."""
    if isinstance(t, BatchTracer):
        _collect_payloads(t.val, out)
    elif isinstance(t, JVPTracer):
        _collect_payloads(t.primal, out)
        if t.tangent is not None:
            _collect_payloads(t.tangent, out)
    elif type(t) is TaylorTracer:
        for s in t.series:
            _collect_payloads(s, out)
    else:
        out.append(t)


def _replace_payloads(t, new):
    """``t`` rebuilt on the next values of the iterator ``new`` (``_collect_payloads``
    order)."""
    if isinstance(t, BatchTracer):
        return BatchTracer(t._trace, _replace_payloads(t.val, new), t.bdim)
    if isinstance(t, JVPTracer):
        primal = _replace_payloads(t.primal, new)
        tangent = None if t.tangent is None else _replace_payloads(t.tangent, new)
        return JVPTracer(t._trace, primal, tangent)
    if type(t) is TaylorTracer:
        return TaylorTracer(t._trace, [_replace_payloads(s, new) for s in t.series])
    return next(new)


def fori_loop(lower, upper, body_fun, init_val):
    """``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)`` (JAX
    ``lax.fori_loop``); ``i`` is an int64 scalar tensor.

    With Python-int (or concrete) bounds the trip count is static: under ``pf.jit`` it is a
    ``scan``, reverse-differentiable. Bounds staged by ``pf.jit`` make it a ``while_loop``
    (forward mode only). Bounds must be integers: a float (``2.5``, or ``3.0``) raises a
    ``TypeError`` rather than being truncated.

    Example:
        >>> import primflow as pf
        >>> float(pf.fori_loop(0, 4, lambda i, v: v + i, pf.to_tensor(0, dtype="int64")))
        6.0
    """
    for name, bound in (("lower", lower), ("upper", upper)):
        dtype = as_tensor(bound).dtype
        if dtype.is_floating or dtype is dtypes.bool_:
            raise TypeError(f"pf.fori_loop: {name} must be an integer (a Python int or an "
                            f"integer tensor), got {bound!r} ({dtype.name}); a loop runs a "
                            f"whole number of steps: round it explicitly (int(...)) if that "
                            f"is what you mean")
    lo, hi = _concrete(as_tensor(lower)), _concrete(as_tensor(upper))
    if lo is not None and lo is not _BATCHED and hi is not None and hi is not _BATCHED:
        lo, hi = _as_int(lo), _as_int(hi)
        if staging_trace() is None:  # plain Python loop
            val = init_val
            for i in range(lo, hi):
                val = body_fun(as_tensor(i, dtype="int64"), val)
            return val
        steps = max(hi - lo, 0)
        if steps == 0:
            return init_val

        def step(c, i):
            return body_fun(i, c), None

        from ..ops.creation import arange

        out, _ = scan(step, init_val, arange(lo, hi, dtype="int64"), length=steps)
        return out
    lower = as_tensor(lower, dtype="int64")
    upper = as_tensor(upper, dtype="int64")
    return _fori_traced(lower, upper, body_fun, init_val)


def _fori_traced(lower, upper, body_fun, init_val):
    def cond_fun(s):
        return s[0] < s[1]

    def body(s):
        return (s[0] + 1, s[1], body_fun(s[0], s[2]))

    return while_loop(cond_fun, body, (lower, upper, init_val))[2]


def scan(f, init, xs=None, length=None, reverse=False):
    """Loops ``carry, y = f(carry, x)`` over the leading axis of ``xs`` (JAX ``lax.scan``).

    Returns ``(final carry, ys stacked along a new axis 0)``. ``xs`` is a pytree of tensors
    with equal leading size, or None with ``length`` given; ``reverse=True`` walks from the
    end (ys keep their positions). Under ``pf.jit`` the body is traced once into one
    ``scan`` operation and compiled once; its reverse mode is a reverse scan over the
    saved per-step carries.

    Example:
        >>> import primflow as pf
        >>> total, partial = pf.scan(lambda c, x: (c + x, c + x), pf.to_tensor(0.0),
        ...                          pf.to_tensor([1.0, 2.0, 3.0]))
        >>> float(total), partial.numpy().tolist()
        (6.0, [1.0, 3.0, 6.0])
    """
    if not callable(f):
        raise TypeError("pf.scan(f, init, xs): f must be a callable (carry, x) -> (carry, y)")
    init_leaves, init_tree = _leaves(init)
    xs_leaves, xs_tree = _leaves(xs)
    sizes = {x._shape[0] if x._shape else None for x in xs_leaves}
    if None in sizes:
        raise ValueError("pf.scan: every leaf of xs needs a leading axis to scan over; got a "
                         "scalar")
    if len(sizes) > 1:
        raise ValueError(f"pf.scan: the leaves of xs have different leading sizes "
                         f"{sorted(sizes)}; they must all have the same length")
    if length is None:
        if not sizes:
            raise ValueError("pf.scan: give xs or length (with xs=None the number of steps "
                             "is unknown)")
        length = sizes.pop()
    elif sizes and sizes != {int(length)}:
        raise ValueError(f"pf.scan: length={length} but xs have leading size "
                         f"{sizes.pop()}")
    length = int(length)
    y_tree_box = []

    def step(c, x):
        out = f(tree_unflatten(init_tree, list(c)), tree_unflatten(xs_tree, list(x)))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"pf.scan: f must return a pair (new carry, y), got "
                            f"{type(out).__name__}")
        c_leaves, c_tree = _leaves(out[0])
        _check_same("pf.scan", init_tree, init_leaves, "the initial carry", c_tree, c_leaves,
                    "the carry f returns")
        y_leaves, y_tree = _leaves(out[1])
        if y_tree_box and y_tree_box[0] != y_tree:
            raise TypeError(f"pf.scan: f returned ys of structure {y_tree!r} after "
                            f"{y_tree_box[0]!r}")
        if not y_tree_box:
            y_tree_box.append(y_tree)
        return c_leaves, y_leaves

    k = len(init_leaves)
    if staging_trace() is not None and length > 0:
        avals = ([Aval(x._shape, x.dtype) for x in init_leaves]
                 + [Aval(x._shape[1:], x.dtype) for x in xs_leaves])

        def flat(ins):
            c, y = step(ins[:k], ins[k:])
            return list(c) + list(y)

        body, captures, _ = _trace_region(flat, avals, "body")
        if _loop_stageable(init_leaves + xs_leaves + captures):
            outs = apply_control("scan", {"body": body, "length": length,
                                          "reverse": bool(reverse), "n_carry": k,
                                          "n_xs": len(xs_leaves)},
                                 init_leaves + xs_leaves + captures)
            return (tree_unflatten(init_tree, outs[:k]),
                    tree_unflatten(y_tree_box[0], outs[k:]))
        y_tree_box.clear()
    if length == 0:
        raise ValueError("pf.scan over zero steps outside pf.jit: the ys' shapes are unknown; "
                         "give at least one step")
    outs = _scan_python_flat(step, init_leaves, xs_leaves, length, reverse)
    return (tree_unflatten(init_tree, outs[:k]), tree_unflatten(y_tree_box[0], outs[k:]))


set_control_rule(apply_control)  # evaluate_bound (ir, below this layer) runs regions with it
