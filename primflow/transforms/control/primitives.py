"""The control-flow primitives ``cond``, ``while`` and ``scan``: one declaration each, with
their rules (``core/region_primitive.py`` says what each rule does).

* ``unroll``: Python control flow on the values (``unrolled.py``), what ``bind`` does when
  nothing is staged;
* ``jvp``, ``batch``, ``taylor``: ``transform_rules.py``; ``vjp``: ``reverse.py``;
* the kernel (``reference=``): the operation on backend arrays, running its regions with
  the IR interpreter (``ir.regions.run_native``), which is what ``ir.evaluate`` does;
  compiled programs compile each region once instead (``compiler/_control.py``);
* sharding (``UNROLLED``): on distributed tensors the operation runs unrolled
  (``unroll``; ``DistTrace`` calls it) and each of its regions' primitives applies its own
  sharding rule; the declared rule only says so if it is ever asked for a layout.

The operations' IR form (operands, params, results) is documented in ``ir/regions.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

from ...core.primitive import Family
from ...core.region_primitive import RegionPrimitive
from ...ir import evaluate, evaluate_bound
from ...ir.regions import TupleAval, regions_of, result_avals, run_native
from ...prims.sharding import ShardingRule
from .api import select
from .reverse import cond_vjp_rule, scan_vjp_rule, while_vjp_rule
from .transform_rules import cond_batch, cond_jvp, cond_taylor, loop_batch, loop_jvp, loop_taylor
from .unrolled import BATCHED, as_int, check_index, concrete_value, scan_python, while_python

CONTROL_FLOW = Family("control flow")


def _unrolled_layout(specs, avals, out_aval, size, **params):
    raise NotImplementedError(
        "a control-flow operation has no layout of its own on distributed tensors: it runs "
        "unrolled on them, each of its regions' primitives with its own sharding rule; stage "
        "it under pf.jit with local tensors instead")


UNROLLED = ShardingRule(_unrolled_layout, name="unrolled")


def _kernel(name):
    def kernel(*arrays, **params):
        op = SimpleNamespace(prim=name, params=params)  # all run_native reads of an operation
        return run_native(op, list(arrays), evaluate)

    kernel.__name__ = f"{name}_kernel"
    return kernel


def _infer(name):
    def infer(*avals, **params):
        return TupleAval(result_avals(name, params, list(avals)))

    return infer


def _cond_unroll(operands, *, branches, message=None):
    index = operands[0]
    value = concrete_value(index)
    if value is None or value is BATCHED:  # every branch runs, each lane takes its own
        return select(index, [evaluate_bound(b, operands[1:]) for b in branches], message)
    return evaluate_bound(branches[check_index(as_int(value), len(branches), message)],
                          operands[1:])


def _while_unroll(operands, *, cond, body, n_carry):
    carry, consts = operands[:n_carry], operands[n_carry:]
    return while_python(lambda c: evaluate_bound(cond, list(c) + consts)[0],
                        lambda c: evaluate_bound(body, list(c) + consts), carry)


def _scan_unroll(operands, *, body, length, reverse, n_carry, n_xs):
    k, m = n_carry, n_xs
    carry, xs, consts = operands[:k], operands[k:k + m], operands[k + m:]

    def step(c, x):
        outs = evaluate_bound(body, list(c) + list(x) + consts)
        return outs[:k], outs[k:]

    return scan_python(step, carry, xs, length, reverse)


def _declare(name, unroll, jvp, vjp, batch, taylor, doc):
    return RegionPrimitive(
        name, family=CONTROL_FLOW, infer=_infer(name), unroll=unroll, jvp=jvp, vjp=vjp,
        batch=batch, taylor=taylor, shard=UNROLLED, regions=regions_of,
        reference=_kernel(name), doc=doc)


cond = _declare(
    "cond", _cond_unroll, cond_jvp, cond_vjp_rule, cond_batch, cond_taylor,
    "cond(index, *operands, branches=(f0, f1, ...)): runs branches[index] on the "
    "operands (pf.cond, pf.switch)")
while_ = _declare(
    "while", _while_unroll, loop_jvp("while"), while_vjp_rule, loop_batch("while"),
    loop_taylor("while"),
    "while(*carry, *consts, cond=c, body=b, n_carry=k): carry = b(carry, consts) while "
    "c(carry, consts) (pf.while_loop)")
scan = _declare(
    "scan", _scan_unroll, loop_jvp("scan"), scan_vjp_rule, loop_batch("scan"),
    loop_taylor("scan"),
    "scan(*carry, *xs, *consts, body=b, length=n, reverse=r, n_carry=k, n_xs=m): carry, "
    "y = b(carry, x[t], consts) for each step t; the last carry and the ys stacked "
    "(pf.scan)")
