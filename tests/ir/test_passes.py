"""Golden-text tests of the passes (dce, cse, constant folding, the pipeline), of fusion
grouping and of memory planning; the verifier runs after every pass."""

from __future__ import annotations

import numpy as np
import pytest

from primflow.ir import evaluate, parse, verify
from primflow.ir.passes import cse, dce, fold_constants, fuse, plan_memory, run_pipeline
from primflow.ir.passes.fuse import TRANSCENDENTAL


def _run(text, *passes):
    fn = parse(text)
    verify(fn)
    for p in passes:
        p(fn)
        verify(fn)
    return fn.as_text()


def test_dce_drops_unused_operations_and_keeps_outputs():
    before = ("def f(%0: float32[3]):\n"
              "    %1: float32[3] = exp(%0)\n"
              "    %2: float32[3] = sin(%1)\n"
              "    %3: float32[3] = neg(%0)\n"
              "    %4: float32[3] = random_normal(shape=(3,), dtype=float32, key=5)\n"
              "    return %3, %0\n")
    after = ("def f(%0: float32[3]):\n"
             "    %1: float32[3] = neg(%0)\n"
             "    return %1, %0\n")
    assert _run(before, dce) == after


def test_cse_merges_equal_operations_and_commuted_operands():
    before = ("def f(%0: float32[3], %1: float32[3]):\n"
              "    %2: float32[3] = mul(%0, %1)\n"
              "    %3: float32[3] = mul(%1, %0)\n"
              "    %4: float32[3] = sub(%0, %1)\n"
              "    %5: float32[3] = sub(%1, %0)\n"
              "    %6: float32[3] = add(%2, %3)\n"
              "    %7: float32[3] = add(%4, %5)\n"
              "    %8: float32[3] = full(shape=(3,), value=2.0, dtype=float32)\n"
              "    %9: float32[3] = full(shape=(3,), value=2.0, dtype=float32)\n"
              "    %10: float32[3] = mul(%6, %8)\n"
              "    %11: float32[3] = mul(%7, %9)\n"
              "    return %10, %11\n")
    after = ("def f(%0: float32[3], %1: float32[3]):\n"
             "    %2: float32[3] = mul(%0, %1)\n"
             "    %3: float32[3] = sub(%0, %1)\n"
             "    %4: float32[3] = sub(%1, %0)\n"
             "    %5: float32[3] = add(%2, %2)\n"
             "    %6: float32[3] = add(%3, %4)\n"
             "    %7: float32[3] = full(shape=(3,), value=2.0, dtype=float32)\n"
             "    %8: float32[3] = mul(%5, %7)\n"
             "    %9: float32[3] = mul(%6, %7)\n"
             "    return %8, %9\n")
    assert _run(before, cse) == after


def test_cse_never_merges_random_draws_or_different_params():
    before = ("def f(%0: float32[2,3]):\n"
              "    %1: float32[3] = reduce_sum(%0, axes=(0,))\n"
              "    %2: float32[2] = reduce_sum(%0, axes=(1,))\n"
              "    %3: float32[3] = random_uniform(shape=(3,), dtype=float32, key=1)\n"
              "    %4: float32[3] = random_uniform(shape=(3,), dtype=float32, key=1)\n"
              "    return %1, %2, %3, %4\n")
    assert _run(before, cse) == before


def test_constant_folding_makes_fulls_and_pool_constants():
    before = ("def f(%0: float32[3]):\n"
              "    %1: float32[3] = full(shape=(3,), value=2.0, dtype=float32)\n"
              "    %2: float32[3] = full(shape=(3,), value=3.0, dtype=float32)\n"
              "    %3: float32[3] = mul(%1, %2)\n"
              "    %4: int32[3] = iota(shape=(3,), dtype=int32, dimension=0)\n"
              "    %5: float32[3] = convert_element_type(%4, dtype=float32)\n"
              "    %6: float32[3] = add(%3, %5)\n"
              "    %7: float32[3] = add(%0, %6)\n"
              "    return %7, %3\n")
    after = ("def f(%0: float32[3]):\n"
             "    %1: float32[3] = full(shape=(3,), value=6.0, dtype=float32)\n"
             "    %2: int32[3] = iota(shape=(3,), dtype=int32, dimension=0)\n"
             "    %3: float32[3] = convert_element_type(%2, dtype=float32)\n"
             "    %4: float32[3] = add(%1, %3)\n"
             "    %5: float32[3] = add(%0, %4)\n"
             "    return %5, %1\n")
    assert _run(before, fold_constants, dce) == after
    # a non-uniform folded value goes to the pool (and dce drops the unused entry)
    pooled = ("def f():\n"
              "    %0: float32[3] = constant(index=0)\n"
              "    %1: float32[3] = full(shape=(3,), value=2.0, dtype=float32)\n"
              "    %2: float32[3] = mul(%0, %1)\n"
              "    return %2\n"
              "const #0: float32[3] = [1.0, 2.0, 3.0]\n")
    assert _run(pooled, fold_constants, dce) == ("def f():\n"
                                                 "    %0: float32[3] = constant(index=1)\n"
                                                 "    return %0\n"
                                                 "const #1: float32[3] = [2.0, 4.0, 6.0]\n")


def test_folding_leaves_random_and_failing_operations():
    before = ("def f():\n"
              "    %0: float32[2] = random_normal(shape=(2,), dtype=float32, key=3)\n"
              "    %1: float32[2] = exp(%0)\n"
              "    return %1\n")
    assert _run(before, fold_constants) == before


def test_pipeline_reaches_a_fixed_point_and_preserves_values():
    # (x * 1 + 0) * y + (y * x) with a broadcast constant and a dead branch
    before = ("def f(%0: float64[4], %1: float64[4]):\n"
              "    %2: float64[] = full(shape=(), value=1.0, dtype=float64)\n"
              "    %3: float64[4] = broadcast_in_dim(%2, shape=(4,), broadcast_dimensions=())\n"
              "    %4: float64[4] = mul(%0, %3)\n"
              "    %5: float64[4] = full(shape=(4,), value=0.0, dtype=float64)\n"
              "    %6: float64[4] = add(%4, %5)\n"
              "    %7: float64[4] = mul(%6, %1)\n"
              "    %8: float64[4] = mul(%1, %0)\n"
              "    %9: float64[4] = add(%7, %8)\n"
              "    %10: float64[4] = tanh(%9)\n"
              "    %11: float64[4] = convert_element_type(%9, dtype=float64)\n"
              "    return %11\n")
    after = ("def f(%0: float64[4], %1: float64[4]):\n"
             "    %2: float64[4] = mul(%0, %1)\n"
             "    %3: float64[4] = add(%2, %2)\n"
             "    return %3\n")
    fn = parse(before)
    x, y = np.arange(4.0), np.linspace(-1, 1, 4)
    expected = evaluate(fn, [x, y])[0]
    run_pipeline(fn, verify=True)
    assert fn.as_text() == after
    np.testing.assert_allclose(evaluate(fn, [x, y])[0], expected)


FUSION = ("def f(%0: float32[4,8], %1: float32[8], %2: float32[8,8]):\n"
          "    %3: float32[4,8] = broadcast_in_dim(%1, shape=(4,8), broadcast_dimensions=(1,))\n"
          "    %4: float32[4,8] = mul(%0, %3)\n"
          "    %5: float32[4,8] = tanh(%4)\n"
          "    %6: float32[4,8] = mul(%5, %5)\n"
          "    %7: float32[4] = reduce_sum(%6, axes=(1,))\n"
          "    %8: float32[4,8] = dot_general(%5, %2, contracting=((1,),(0,)), batch=((),()))\n"
          "    %9: float32[4,8] = add(%8, %4)\n"
          "    %10: float32[4,8] = exp(%9)\n"
          "    return %7, %10\n")


def test_fusion_groups_chains_with_their_reduction_and_stays_convex():
    fn = parse(FUSION)
    groups = fuse(fn)
    assert [[op.prim for op in g.ops] for g in groups] == [
        ["mul", "tanh", "mul", "reduce_sum"], ["add", "exp"]]
    first, second = groups
    assert first.reduction is not None and second.reduction is None
    names = {v: i for i, v in enumerate(fn.inputs + [op.out for op in fn.ops])}
    assert [names[v] for v in first.inputs] == [0, 3]
    assert [names[v] for v in first.outputs] == [4, 5, 7]  # %4, %5 are read outside
    # %9 = add(%8, %4) cannot join the first group: %8 (a matmul) depends on it
    assert [names[v] for v in second.inputs] == [8, 4]


def test_memory_plan_reuses_buffers_and_never_buffers_outputs():
    fn = parse("def f(%0: float32[1000]):\n"
               "    %1: float32[1000] = exp(%0)\n"
               "    %2: float32[1000] = tanh(%1)\n"
               "    %3: float32[1000] = mul(%2, %0)\n"
               "    %4: float32[1000] = sin(%3)\n"
               "    %5: float32[1000] = add(%3, %4)\n"
               "    %6: float32[1000] = neg(%5)\n"
               "    %7: float32[10,100] = reshape(%6, shape=(10,100))\n"
               "    return %7\n")
    plan = plan_memory(fn)
    ops = fn.ops
    # one buffer ping-pongs with in-place updates; %4 needs a second (it reads %3 live)
    assert len(plan.buffers) == 2
    assert plan.buffer_of[ops[0].out] == plan.buffer_of[ops[1].out] == plan.buffer_of[ops[2].out]
    assert plan.buffer_of[ops[3].out] != plan.buffer_of[ops[2].out]
    # %6 escapes through the reshape view: it gets a fresh array each call
    assert ops[5].out not in plan.buffer_of and ops[6].out not in plan.buffer_of
    assert plan.in_place >= 3


def test_memory_plan_keeps_buffers_alive_through_views():
    fn = parse("def f(%0: float32[4,4]):\n"
               "    %1: float32[4,4] = exp(%0)\n"
               "    %2: float32[4,4] = transpose(%1, perm=(1,0))\n"
               "    %3: float32[4,4] = sin(%0)\n"
               "    %4: float32[4,4] = add(%2, %3)\n"
               "    %5: float32[4,4] = add(%4, %1)\n"
               "    return %5\n")
    plan = plan_memory(fn)
    e, s = fn.ops[0].out, fn.ops[2].out
    assert plan.buffer_of[e] != plan.buffer_of[s]  # exp is alive (viewed) while sin runs
    # add(%2, %3) must not write in place into %1's buffer, which it reads transposed
    assert plan.buffer_of.get(fn.ops[3].out) != plan.buffer_of[e]


@pytest.mark.parametrize("backend", ["numpy", "interpret"])
def test_compiled_program_equals_the_interpreter(backend):
    from primflow.compiler import compile_program

    fn = parse(FUSION)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.aval.shape).astype(np.float32) for v in fn.inputs]
    expected = evaluate(fn, args)
    exe = compile_program(fn, backend=backend)
    for _ in range(2):  # buffers are reused across calls
        got = exe(args)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    if backend == "numpy":
        assert "out=b" in exe.source and "matmul" in exe.source


# ---- fusion across unit dimensions, merging, and recomputed broadcast products -------------

def test_fusion_continues_through_unit_dimension_reshapes():
    fn = parse("def f(%0: float32[4,8], %1: float32[4,1,8]):\n"
               "    %2: float32[4,8] = mul(%0, %0)\n"
               "    %3: float32[4,1,8] = reshape(%2, shape=(4,1,8))\n"
               "    %4: float32[4,1,8] = add(%3, %1)\n"
               "    %5: float32[4,8,1] = broadcast_in_dim(%2, shape=(4,8,1), "
               "broadcast_dimensions=(0,1))\n"
               "    %6: float32[2,16] = reshape(%2, shape=(2,16))\n"
               "    return %4, %5, %6\n")
    (group,) = fuse(fn)
    # the unit reshape joins; the unit broadcast only feeds the output and stays a view; the
    # reshape to [2,16] changes the element layout and never joins
    assert [op.prim for op in group.ops] == ["mul", "reshape", "add"]
    assert group.outputs == [fn.ops[0].out, fn.ops[2].out]


def test_fusion_merges_the_groups_an_operation_reads():
    fn = parse("def f(%0: float32[64], %1: float32[64]):\n"
               "    %2: float32[64] = mul(%0, %0)\n"
               "    %3: float32[64] = tanh(%1)\n"
               "    %4: float32[64] = mul(%3, %3)\n"
               "    %5: float32[64] = add(%2, %4)\n"
               "    return %5\n")
    (group,) = fuse(fn, exclude=TRANSCENDENTAL)
    assert [op.prim for op in group.ops] == ["mul", "mul", "add"]
    assert group.outputs == [fn.ops[3].out]  # %2 and %4 stay in registers


def test_fusion_does_not_merge_groups_linked_through_an_outside_operation():
    fn = parse("def f(%0: float32[64], %1: float32[64]):\n"
               "    %2: float32[64] = mul(%0, %0)\n"
               "    %3: float32[64] = tanh(%2)\n"
               "    %4: float32[64] = mul(%3, %1)\n"
               "    %5: float32[64] = add(%2, %4)\n"
               "    return %5\n")
    groups = fuse(fn, min_size=1, exclude=TRANSCENDENTAL)
    # {%2} runs before tanh, {%4, %5} after it: one group would need tanh in its middle
    assert [[op.prim for op in g.ops] for g in groups] == [["mul"], ["mul", "add"]]


_SHARED_PRODUCT = (
    "def f(%0: float64[32,128], %1: float64[256,128], %2: float64[128,128], "
    "%3: float64[256,128]):\n"
    "    %4: float64[256,32,128] = broadcast_in_dim(%0, shape=(256,32,128), "
    "broadcast_dimensions=(1,2))\n"
    "    %5: float64[256,32,128] = broadcast_in_dim(%1, shape=(256,32,128), "
    "broadcast_dimensions=(0,2))\n"
    "    %6: float64[256,32,128] = mul(%4, %5)\n"
    "    %7: float64[8192,128] = reshape(%6, shape=(8192,128))\n"
    "    %8: float64[8192,128] = dot_general(%7, %2, contracting=((1,),(0,)), "
    "batch=((),()))\n"
    "    %9: float64[256,32,1,128] = reshape(%8, shape=(256,32,1,128))\n"
    "    %10: float64[256,32,128] = broadcast_in_dim(%3, shape=(256,32,128), "
    "broadcast_dimensions=(0,2))\n"
    "    %11: float64[256,32,128] = mul(%6, %10)\n"
    "    %12: float64[256,32,128] = neg(%11)\n"
    "    %13: float64[256,32,1,128] = reshape(%12, shape=(256,32,1,128))\n"
    "    %14: float64[256,32,1,128] = add(%9, %13)\n"
    "    return %14\n")


def test_recompute_gives_the_fused_consumer_its_own_broadcast_product():
    from primflow.ir.passes.recompute import recompute_broadcasts

    fn = parse(_SHARED_PRODUCT)
    # before: the product %6 is stored for the matmul and read back by a second kernel,
    # which also stores %12 for the add (the add cannot join it: the matmul is between)
    assert [[op.prim for op in g.ops] for g in fuse(fn, min_size=1)] == [
        ["mul", "mul", "neg"], ["add"]]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.aval.shape) for v in fn.inputs]
    want = evaluate(fn, args)[0]
    recompute_broadcasts(fn)
    verify(fn)
    lines = fn.as_text().splitlines()
    assert lines[8:12] == [
        "    %11: float64[256,32,128] = mul(%4, %5)",  # the copy of %6, right before its use
        "    %12: float64[256,32,128] = mul(%11, %10)",
        "    %13: float64[256,32,128] = neg(%12)",
        "    %14: float64[256,32,1,128] = reshape(%13, shape=(256,32,1,128))"]
    # after: the matmul's operand is one multiply; the add's kernel recomputes the product
    assert [[op.prim for op in g.ops] for g in fuse(fn, min_size=1)] == [
        ["mul"], ["mul", "mul", "neg", "reshape", "add"]]
    np.testing.assert_array_equal(evaluate(fn, args)[0], want)


def test_recompute_leaves_products_of_large_operands_and_single_uses_alone():
    from primflow.ir.passes.recompute import recompute_broadcasts

    text = ("def f(%0: float32[64], %1: float32[64]):\n"
            "    %2: float32[64] = mul(%0, %1)\n"  # full-size operands: not cheap
            "    %3: float32[64] = exp(%2)\n"
            "    %4: float32[64] = add(%2, %3)\n"
            "    return %4\n")
    fn = parse(text)
    assert recompute_broadcasts(fn).as_text() == parse(text).as_text()
    text = ("def f(%0: float32[8], %1: float32[4,8]):\n"
            "    %2: float32[4,8] = broadcast_in_dim(%0, shape=(4,8), "
            "broadcast_dimensions=(1,))\n"
            "    %3: float32[4,8] = mul(%2, %2)\n"  # cheap, but read once
            "    %4: float32[4,8] = add(%3, %1)\n"
            "    return %4\n")
    fn = parse(text)
    assert recompute_broadcasts(fn).as_text() == parse(text).as_text()
