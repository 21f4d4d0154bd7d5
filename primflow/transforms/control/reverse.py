"""Reverse-mode rules of the control-flow primitives (``RegionPrimitive.vjp``): each runs
the operation and records tape nodes whose backward is written with the same control-flow
functions, so every derivative order works when staged too. The vjp of ``scan`` is a
reverse ``scan`` over per-step residuals; of ``cond`` a ``cond`` of the branches' vjps;
``while`` has none (its trip count is only known at run time)."""

from __future__ import annotations

from ...autodiff.functional import vjp as _vjp
from ...core.primitive import Node, get_primitive
from ...core.pytree import replace_at
from ...core.state import enable_grad, state
from ...ir import Function, evaluate_bound
from ...ir.passes.fuse import TRANSCENDENTAL
from ...ops.creation import zeros_like
from ..jit.jitted import record_outputs
from .api import branch, scan
from .tracing import as_region_values


def float_positions(values):
    """Positions of the floating values (the ones with derivatives)."""
    return [i for i, v in enumerate(values) if v.dtype.is_floating]


def _attach(results, operands, name, backward):
    """Tape nodes for the float results: ``backward(cotangents) -> operand cotangents``
    (None where there is none), with ``None`` for the results without a cotangent."""
    diff = [i for i, a in enumerate(operands) if not a.stop_gradient and a.dtype.is_floating]

    def pullback(cts):
        full = backward(cts)
        return [full[i] for i in diff]

    return record_outputs(results, [operands[i] for i in diff], name, pullback,
                          [r.dtype.is_floating for r in results])


def _cond_vjp(branches, operands, results, cts, message=None):
    index, ops = operands[0], operands[1:]
    cts = [zeros_like(r) if c is None else c for r, c in zip(results, cts)]
    floats = float_positions(ops)

    def branch_vjp(branch):
        def run(*args):
            vals, gs = list(args[:len(ops)]), list(args[len(ops):])
            return _region_vjp(branch, vals, floats, gs)
        return run

    grads = branch(index, [branch_vjp(b) for b in branches], (*ops, *cts), "pf.switch",
                    [f"branch {i}'s vjp" for i in range(len(branches))], message)
    return replace_at([None] * len(operands), [1 + i for i in floats], grads)


def _region_vjp(region, values, positions, cotangents, saved=None):
    """Cotangents of ``region``'s inputs at ``positions`` for output cotangents
    (``values`` are region or outside values; computed with the tape, under the staging
    trace when there is one). ``saved`` maps operation indices of ``region`` to their
    values saved by the forward pass: those are not computed again (see ``_replay``)."""
    values = as_region_values(values)  # differentiate with respect to the region's values

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
    env = dict(zip(region.inputs, args))
    ops = region.ops
    for index, op in enumerate(ops):
        if index not in saved:
            part = Function(region.name, op.inputs, [op], [op.out], region.consts)
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


def cond_vjp_rule(run, operands, staged, **params):
    """The reverse-mode rule of ``cond``: a tape node whose backward is a ``cond`` of the
    branches' vjps."""
    results = run(params, operands)
    return _attach(results, operands, "cond", lambda cts: _cond_vjp(
        params["branches"], operands, results, cts, params.get("message")))


def while_vjp_rule(run, operands, staged, **params):
    """The reverse-mode rule of ``while``: none (the trip count is only known at run
    time); the tape node raises, saying what to use instead, when it is reached."""
    return _attach(run(params, operands), operands, "while_loop", _while_vjp_error)


def _while_vjp_error(cts):
    raise ValueError(
        "reverse-mode differentiation (grad, vjp, backward) of pf.while_loop under pf.jit is "
        "not possible: its trip count is only known at run time, so the steps' residuals "
        "cannot be planned. Use pf.fori_loop with static (Python int) bounds, pf.scan, or "
        "pf.while_loop(cond, body, init, max_steps=n), a bounded loop that is "
        "reverse-differentiable; forward mode (pf.jvp) works on while_loop")


def scan_vjp_rule(run, operands, staged, **params):
    """The reverse-mode rule of ``scan``: the scan also returns, stacked over the steps,
    each step's carry and the results of its costly operations (the residuals), with a
    tape node whose backward is a reverse scan of the body's vjp reading them
    (``_scan_vjp``)."""
    body, k, m = params["body"], params["n_carry"], params["n_xs"]
    # the saved intermediates are replayed on the tape when the scan is staged as it is;
    # through another transform's rule (jvp, vmap inside jit) the step is recomputed
    saved = _worth_saving(body, k + m) if staged else []
    res_body = body.copy()  # same operation order: indices carry over
    res_body.outputs = (res_body.outputs + res_body.inputs[:k]
                        + [res_body.ops[i].out for i in saved])
    res_params = dict(params, body=res_body)
    staged = run(res_params, operands)
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
    fc, fx, fk = float_positions(carry0), float_positions(xs), float_positions(consts)
    positions = fc + [k + i for i in fx] + [k + m + i for i in fk]

    def bwd_step(bcarry, bx):
        gc, gk = bcarry
        x_t, c_t, s_t, gy_t = bx
        values = list(c_t) + list(x_t) + list(consts)
        gc_full = dict(zip(fc, gc))
        out_cts = [gc_full[j] if j in gc_full else zeros_like(c_t[j]) for j in range(k)]
        grads = _region_vjp(body, values, positions, out_cts + list(gy_t), dict(zip(saved, s_t)))
        dc = grads[:len(fc)]
        dx = grads[len(fc):len(fc) + len(fx)]
        dk = grads[len(fc) + len(fx):]
        return (dc, [a + b for a, b in zip(gk, dk)]), dx

    gk0 = [zeros_like(consts[i]) for i in fk]
    (dc0, dk), dxs = scan(bwd_step, ([g_carry[i] for i in fc], gk0),
                          (list(xs), list(carries), list(intermediates), list(g_ys)),
                          length=n, reverse=not params["reverse"])
    return replace_at([None] * len(operands), positions, [*dc0, *dxs, *dk])
