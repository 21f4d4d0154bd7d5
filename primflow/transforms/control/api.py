"""The control-flow functions: ``cond``, ``switch``, ``while_loop``, ``fori_loop``,
``scan`` (JAX semantics, pytrees throughout).

Each checks its arguments, then:

* with a **concrete** predicate or trip count (eager code, the tape, ``pf.jvp``,
  ``pf.jet``, ``pf.grad`` of any order, an unbatched ``pf.vmap``) runs as Python control
  flow on the values (``unrolled.py``), so the operations it applies are recorded by
  whatever is active and every derivative of every order comes from their rules;
* with a predicate **batched** by ``pf.vmap``, ``cond``/``switch`` run every branch and
  select per lane with ``pf.where``; ``while_loop`` runs until every lane is done,
  freezing the lanes that finished;
* inside ``pf.jit`` (**staged**) traces the functions into regions (``tracing.py``) and
  binds one ``cond``/``while``/``scan`` primitive (``primitives.py``), whose rules carry
  it through the transforms in between and the tape, so a loop body is compiled once,
  not unrolled.

Bad input (branches returning different structures, shapes or dtypes; a body changing the
carry; a non-scalar or non-boolean predicate; an index out of range) raises an error naming
both sides.
"""

from __future__ import annotations

from ...backends import get_backend
from ...core import dtypes
from ...core.primitive import Aval, get_primitive
from ...core.pytree import tree_unflatten
from ...core.trace import staging_trace
from ...ops.creation import arange
from ...ops.helpers import as_tensor
from ...ops.math import equal, where
from ...ops.reduction import argmax
from ..vmap import BatchTracer
from .tracing import AvalView, avals_of, check_same, leaves, trace_region, unify
from .unrolled import (BATCHED, as_int, check_index, concrete_value, first, lanes,
                       scalar_check, scan_python, while_python)

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]


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
    pred = scalar_check(pred, "pf.cond: the predicate", allow_int=True)
    if pred.dtype is not dtypes.bool_:
        pred = pred != as_tensor(0, dtype=pred.dtype)
    return branch(pred, [false_fn, true_fn], operands, "pf.cond",
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
    index = scalar_check(index, "pf.switch: the index", allow_int=True, allow_bool=False)
    return branch(index, branches, operands, "pf.switch",
                  [f"branch {i}'s result" for i in range(len(branches))])


def branch(index, branches, operands, what, names, message=None):
    """``branches[index](*operands)``, concrete, staged as a ``cond`` or batched;
    ``message``: this is a check, which raises a RuntimeError saying it when ``index`` is
    out of range (``unrolled.check_index``)."""
    value = concrete_value(index)
    if value is not None and value is not BATCHED:
        i = as_int(value) if index.dtype is not dtypes.bool_ else int(bool(first(value)))
        return branches[check_index(i, len(branches), message)](*operands)
    op_leaves, op_tree = leaves(operands)
    if value is None:  # staged: one cond operation (its rules handle any transform)
        avals = avals_of(op_leaves)
        traced = [trace_region(lambda ins, b=b: b(*tree_unflatten(op_tree, ins)), avals,
                               f"branch{j}") for j, b in enumerate(branches)]
        results = [([AvalView(v.aval) for v in fn.outputs], tree) for fn, _, tree in traced]
    else:  # a predicate batched by vmap: run every branch and select per lane
        results = [leaves(b(*operands)) for b in branches]
    for j in range(1, len(branches)):
        check_same(what, results[0][1], results[0][0], names[0], results[j][1],
                   results[j][0], names[j])
    if value is not None:
        return tree_unflatten(results[0][1], select(index, [r[0] for r in results], message))
    regions, captures = unify([(fn, caps) for fn, caps, _ in traced], len(op_leaves))
    idx = index.astype("int32") if index.dtype is not dtypes.int32 else index
    params = {"branches": tuple(regions)}
    if message is not None:
        params["message"] = message
    outs = get_primitive("cond").bind(idx, *op_leaves, *captures, **params)
    return tree_unflatten(results[0][1], outs)


# ---- per-lane selection (a predicate batched by pf.vmap) -------------------------------------

def select(index, outs, message=None):
    """Per-lane choice among branch results (all computed): a batched ``cond``."""
    if index.dtype is dtypes.bool_:
        return [where(index, b, a) for a, b in zip(outs[0], outs[1])]
    index, outs = _checked_lanes(index, outs, message)
    result = list(outs[0])
    for j in range(1, len(outs)):
        pick = equal(index, as_tensor(j, dtype=index.dtype))
        result = [where(pick, b, a) for a, b in zip(result, outs[j])]
    return result


def _checked_lanes(index, outs, message=None):
    """A batched branch index whose lanes all lie in ``0..len(outs)-1``, and the branches'
    results ``outs``: the rule unbatched ``switch`` follows, eagerly and compiled, holds
    per lane (JAX clamps instead; a silent clamp, or branch 0, hides bugs). Concrete lanes
    are checked now; staged ones (pf.vmap inside pf.jit) and the results go through a
    ``cond`` on the first bad lane's index (0 when none) with identity branches, so the
    compiled program raises the same IndexError when it runs, before anything reads the
    results (with one branch, nothing else would read the check)."""
    n = len(outs)
    per_lane = lanes(index)
    if per_lane is not None:
        values = get_backend().to_numpy(per_lane).reshape(-1)
        bad = ((values < 0) | (values >= n)).nonzero()[0]
        if len(bad):
            k = int(bad[0])
            if message is not None:
                raise RuntimeError(message)
            raise IndexError(f"switch: the branch index is {int(values[k])} in vmap lane {k} "
                             f"but there are {n} branches (valid indices 0..{n - 1})")
        return index, outs
    if n == 1:  # nothing reads the index: the results themselves go through the check
        payload = index
        while isinstance(payload, BatchTracer):
            payload = payload.val
        checked = branch(_first_bad_lane(payload, n), [lambda *r: list(r)], outs[0],
                         "pf.switch", ["branch 0's result"], message)
        return index, [checked]
    return _with_payload(index, lambda lanes_value: branch(
        _first_bad_lane(lanes_value, n), [lambda v: v] * n, (lanes_value,), "pf.switch",
        [f"branch {i}'s result" for i in range(n)], message)), outs


def _first_bad_lane(lanes_value, n):
    """The first lane's index outside ``0..n-1``, or 0 when every lane is valid."""
    flat = lanes_value.reshape([-1])
    bad = (flat < 0) | (flat >= n)
    return (flat * bad.astype(flat.dtype))[argmax(bad)]


def _with_payload(t, fn):
    """``t`` with the array under its vmap levels replaced by ``fn(array)``."""
    if isinstance(t, BatchTracer):
        return BatchTracer(t._trace, _with_payload(t.val, fn), t.bdim)
    return fn(t)


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
    init_leaves, init_tree = leaves(init_val)

    def cond_flat(c):
        return scalar_check(cond_fun(tree_unflatten(init_tree, list(c))),
                             "pf.while_loop: cond_fun's result", allow_int=False)

    def body_flat(c):
        new, tree = leaves(body_fun(tree_unflatten(init_tree, list(c))))
        check_same("pf.while_loop", init_tree, init_leaves, "the initial value", tree,
                    new, "body_fun's result")
        return new

    if max_steps is not None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
            raise ValueError(f"pf.while_loop: max_steps must be an int >= 0, got {max_steps!r}")
        return _bounded_while(cond_flat, body_flat, init_leaves, init_tree, max_steps)
    if staging_trace() is not None:  # one while operation
        avals = avals_of(init_leaves)
        cfn, ccaps, _ = trace_region(cond_flat, avals, "cond")
        bfn, bcaps, _ = trace_region(body_flat, avals, "body")
        (cfn, bfn), captures = unify([(cfn, ccaps), (bfn, bcaps)], len(init_leaves))
        outs = get_primitive("while").bind(*init_leaves, *captures, cond=cfn, body=bfn,
                                           n_carry=len(init_leaves))
        return tree_unflatten(init_tree, outs)
    return tree_unflatten(init_tree, while_python(cond_flat, body_flat, init_leaves))


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
    carry through a ``cond`` with one identity branch whose index is 1 while it is still
    running (on any vmap lane), so the compiled program raises the same error when it
    runs."""
    message = (f"pf.while_loop: the loop condition is still true after max_steps={max_steps} "
               f"steps, so the value reached is not the loop result; raise max_steps to the "
               f"number of steps the loop needs (or check that its condition becomes false)")
    still = cond_flat(carry)
    per_lane = lanes(still)
    if per_lane is not None:
        if get_backend().to_numpy(per_lane).any():
            raise RuntimeError(message)
        return carry
    # staged: a cond whose index is 1 (out of range) while the condition holds, through
    # the cond primitive's rules for the transforms in between (under pf.vmap, a
    # per-lane index checked per lane)
    index = still.astype("int32")
    return branch(index, [lambda *v: list(v)], list(carry), "pf.while_loop", ["the carry"], message)


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
    lo, hi = concrete_value(as_tensor(lower)), concrete_value(as_tensor(upper))
    if lo is not None and lo is not BATCHED and hi is not None and hi is not BATCHED:
        lo, hi = as_int(lo), as_int(hi)
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

        out, _ = scan(step, init_val, arange(lo, hi, dtype="int64"), length=steps)
        return out

    def cond_fun(s):
        return s[0] < s[1]

    def body(s):
        return (s[0] + 1, s[1], body_fun(s[0], s[2]))

    bounds = (as_tensor(lower, dtype="int64"), as_tensor(upper, dtype="int64"))
    return while_loop(cond_fun, body, (*bounds, init_val))[2]


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
    init_leaves, init_tree = leaves(init)
    xs_leaves, xs_tree = leaves(xs)
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
        raise ValueError(f"pf.scan: length={length} but xs have leading size {sizes.pop()}")
    length = int(length)
    y_tree_box = []

    def step(c, x):
        out = f(tree_unflatten(init_tree, list(c)), tree_unflatten(xs_tree, list(x)))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"pf.scan: f must return a pair (new carry, y), got "
                            f"{type(out).__name__}")
        c_leaves, c_tree = leaves(out[0])
        check_same("pf.scan", init_tree, init_leaves, "the initial carry", c_tree, c_leaves,
                    "the carry f returns")
        y_leaves, y_tree = leaves(out[1])
        if y_tree_box and y_tree_box[0] != y_tree:
            raise TypeError(f"pf.scan: f returned ys of structure {y_tree!r} after "
                            f"{y_tree_box[0]!r}")
        if not y_tree_box:
            y_tree_box.append(y_tree)
        return c_leaves, y_leaves

    k = len(init_leaves)
    if staging_trace() is not None and length > 0:  # one scan operation
        avals = avals_of(init_leaves) + [Aval(x._shape[1:], x.dtype) for x in xs_leaves]

        def flat(ins):
            c, y = step(ins[:k], ins[k:])
            return list(c) + list(y)

        body, captures, _ = trace_region(flat, avals, "body")
        outs = get_primitive("scan").bind(*init_leaves, *xs_leaves, *captures, body=body,
                                          length=length, reverse=bool(reverse), n_carry=k,
                                          n_xs=len(xs_leaves))
        return (tree_unflatten(init_tree, outs[:k]), tree_unflatten(y_tree_box[0], outs[k:]))
    if length == 0:
        raise ValueError("pf.scan over zero steps outside pf.jit: the ys' shapes are unknown; "
                         "give at least one step")
    outs = scan_python(step, init_leaves, xs_leaves, length, reverse)
    return (tree_unflatten(init_tree, outs[:k]), tree_unflatten(y_tree_box[0], outs[k:]))
