"""Row blocking (ir/passes/blocking.py): which programs may run in blocks of rows, the
rewritten block program, and compiled blocked programs against the interpreter and eager."""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.ir import evaluate, parse, verify
from primflow.ir.passes.blocking import batch_axes, block_program

_MLP = ("def f(%0: float64[12,3], %1: float64[3,5], %2: float64[5]):\n"
        "    %3: float64[12,5] = dot_general(%0, %1, contracting=((1,),(0,)), batch=((),()))\n"
        "    %4: float64[12,5] = broadcast_in_dim(%2, shape=(12,5), broadcast_dimensions=(1,))\n"
        "    %5: float64[12,5] = add(%3, %4)\n"
        "    %6: float64[12,5] = tanh(%5)\n"
        "    %7: float64[12,1,5] = reshape(%6, shape=(12,1,5))\n"
        "    %8: float64[5,12] = transpose(%6, perm=(1,0))\n"
        "    %9: float64[12] = reduce_sum(%6, axes=(1,))\n"
        "    %10: float64[12,2] = slice(%6, start=(0,1), limit=(12,3), strides=(1,1))\n"
        "    %11: float64[12,5] = full(shape=(12,5), value=2.0, dtype=float64)\n"
        "    %12: float64[12,5] = mul(%6, %11)\n"
        "    return %7, %8, %9, %10, %12\n")


def test_batch_axes_of_a_per_point_program():
    fn = parse(_MLP)
    n, axis_of = batch_axes(fn)
    assert n == 12
    assert [axis_of[v] for v in fn.inputs] == [0, None, None]
    assert [axis_of[v] for v in fn.outputs] == [0, 1, 0, 0, 0]


def test_block_program_rewrites_shapes_and_computes_the_rows():
    fn = parse(_MLP)
    n, axis_of = batch_axes(fn)
    prologue, block = block_program(fn, axis_of, n, 4)
    assert prologue is None  # nothing to hoist (fills stay: kernels inline them)
    verify(block)
    text = block.as_text()
    assert "float64[4,1,5] = reshape(%6, shape=(4,1,5))" in text
    assert "full(shape=(4,5), value=2.0" in text
    assert "slice(%6, start=(0,1), limit=(4,3)" in text
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.aval.shape) for v in fn.inputs]
    whole = evaluate(fn, args)
    for start in range(0, 12, 4):
        part = evaluate(block, [args[0][start:start + 4]] + args[1:])
        for w, p, v in zip(whole, part, fn.outputs):
            ax = axis_of[v]
            np.testing.assert_allclose(np.take(w, range(start, start + 4), axis=ax), p,
                                       rtol=1e-15)


def test_block_program_hoists_what_does_not_depend_on_the_rows():
    fn = parse("def f(%0: float64[12,3], %1: float64[3,3]):\n"
               "    %2: float64[3,3] = exp(%1)\n"
               "    %3: float64[3,3] = dot_general(%2, %1, contracting=((1,),(0,)), "
               "batch=((),()))\n"
               "    %4: float64[12,3] = dot_general(%0, %3, contracting=((1,),(0,)), "
               "batch=((),()))\n"
               "    %5: float64[3] = reduce_sum(%2, axes=(0,))\n"
               "    %6: float64[12,3] = broadcast_in_dim(%5, shape=(12,3), "
               "broadcast_dimensions=(1,))\n"
               "    %7: float64[12,3] = add(%4, %6)\n"
               "    return %7\n")
    n, axis_of = batch_axes(fn)
    prologue, block = block_program(fn, axis_of, n, 3)
    verify(prologue)
    verify(block)
    assert [op.prim for op in prologue.ops] == ["exp", "dot_general", "reduce_sum"]
    assert [op.prim for op in block.ops] == ["dot_general", "broadcast_in_dim", "add"]
    assert [v.aval.shape for v in block.inputs] == [(3, 3), (3, 3), (3, 3), (3,)]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.aval.shape) for v in fn.inputs]
    hoisted = evaluate(prologue, args)
    got = np.concatenate([evaluate(block, [args[0][i:i + 3], args[1]] + hoisted)[0]
                          for i in range(0, 12, 3)])
    np.testing.assert_allclose(got, evaluate(fn, args)[0], rtol=1e-14)


_HEAD = "def f(%0: float64[12,3], %1: float64[12,3], %2: float64[3,3]):\n"


@pytest.mark.parametrize("body", [
    # a reduction over the points (a loss)
    "    %3: float64[3] = reduce_sum(%0, axes=(0,))\n    return %3\n",
    # a product that contracts the points
    "    %3: float64[3,3] = dot_general(%0, %1, contracting=((0,),(0,)), batch=((),()))\n"
    "    return %3\n",
    # rows paired with rows (an outer product over points)
    "    %3: float64[12,12] = dot_general(%0, %1, contracting=((1,),(1,)), batch=((),()))\n"
    "    return %3\n",
    # points merged with another dimension
    "    %3: float64[36] = reshape(%0, shape=(36,))\n    return %3\n",
    # cumulative sums and gathers mix rows
    "    %3: float64[12,3] = cumsum(%0, axis=0, reverse=False)\n    return %3\n",
    # a constant with the points' size (captured data): not sliced, so never blocked
    "    %3: float64[12,3] = constant(index=0)\n    %4: float64[12,3] = add(%0, %3)\n"
    "    return %4\n",
    # an output without the points
    "    %3: float64[12,3] = exp(%0)\n    %4: float64[3,3] = exp(%2)\n    return %3, %4\n",
])
def test_programs_that_mix_rows_are_not_blocked(body):
    fn = parse(_HEAD + body, consts={0: np.zeros((12, 3))}) if "constant" in body else \
        parse(_HEAD + body)
    assert batch_axes(fn) is None


def test_a_size_that_occurs_twice_in_a_value_is_ambiguous():
    fn = parse("def f(%0: float64[5,5]):\n    %1: float64[5,5] = exp(%0)\n    return %1\n")
    assert batch_axes(fn) is None


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_blocked_jit_equals_eager_values_and_gradients(backend, monkeypatch, tmp_path):
    from primflow.compiler import _pipeline

    monkeypatch.setattr(pf.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(pf.config, "jit_tiered", False)
    monkeypatch.setattr(_pipeline, "BLOCK_BYTES", 4096)
    rng = np.random.default_rng(3)
    w1, w2 = (pf.to_tensor(rng.standard_normal(s) / 2) for s in ((2, 16), (16, 1)))
    x = pf.to_tensor(rng.uniform(0, 1, (96, 2)))

    def laplacian(x, w):
        return pf.autograd.laplacian(lambda p: (pf.tanh(p @ w) @ w2)[:, 0], x)

    jitted = pf.jit(laplacian, backend=backend)
    got = jitted(x, w1)
    (entry,) = jitted._cache.values()
    exe = getattr(entry.executable, "current", entry.executable)  # (the one for this count)
    assert type(exe).__name__ == "BlockedExecutable"
    assert entry.executable.n // entry.executable.rows > 1
    np.testing.assert_allclose(got.numpy(), laplacian(x, w1).numpy(), rtol=1e-13, atol=1e-13)
    # gradients through the blocked program (the pullback re-runs it)
    g_jit = pf.grad(lambda w: jitted(x, w).sum())(w1)
    g_eager = pf.grad(lambda w: laplacian(x, w).sum())(w1)
    assert float(np.abs(g_eager.numpy()).max()) > 1e-3
    np.testing.assert_allclose(g_jit.numpy(), g_eager.numpy(), rtol=1e-12, atol=1e-12)


def test_a_batch_size_without_a_fitting_divisor_runs_unblocked(monkeypatch):
    from primflow.compiler import _pipeline

    monkeypatch.setattr(_pipeline, "BLOCK_BYTES", 64)
    x = pf.to_tensor(np.linspace(0, 1, 97 * 3).reshape(97, 3))  # 97 is prime
    f = pf.jit(lambda x: pf.tanh(x) * 2.0, backend="numpy")
    np.testing.assert_allclose(f(x).numpy(), np.tanh(x.numpy()) * 2.0, rtol=1e-15)
    (entry,) = f._cache.values()
    assert type(getattr(entry.executable, "current", entry.executable)).__name__ == "Executable"


def test_a_program_with_many_values_per_row_runs_in_blocks_whose_buffers_fit_the_budget(
        monkeypatch):
    from primflow.compiler import _pipeline

    x = pf.to_tensor(np.linspace(0, 1, 96 * 4).reshape(96, 4))

    def f(x):  # a chain of values per row, none over BLOCK_BYTES (3 KB)
        y = x
        for _ in range(6):
            y = pf.tanh(y * 1.5 + 0.25)
        return y

    def blocks_of(jitted):
        (entry,) = jitted._cache.values()
        exe = getattr(entry.executable, "current", entry.executable)
        return None if exe.__class__.__name__ == "Executable" else exe.n // exe.rows

    assert blocks_of(_jit_and_call(f, x)) is None  # the default budget: one piece
    plan = _pipeline.plan_memory(_traced(f, x), can_write=_pipeline.npc.can_write).nbytes
    monkeypatch.setattr(_pipeline, "WORKSPACE_BYTES", plan // 3 - 1)
    got = _jit_and_call(f, x)
    assert blocks_of(got) == 4  # over 3 blocks' worth: 4 (24 rows, a divisor of 96)
    np.testing.assert_allclose(got(x).numpy(), f(x).numpy(), rtol=1e-15)
    monkeypatch.setattr(_pipeline, "WORKSPACE_BYTES", 1)
    monkeypatch.setattr(_pipeline, "MAX_BLOCKS", 8)
    assert blocks_of(_jit_and_call(f, x)) == 8  # never more than MAX_BLOCKS


def _jit_and_call(f, x):
    jitted = pf.jit(f, backend="numpy")
    jitted(x)
    return jitted


def _traced(f, x):
    from primflow.compiler import _pipeline

    (entry,) = _jit_and_call(f, x)._cache.values()
    return _pipeline.optimize_program(entry.program)


def test_random_draws_run_once_in_the_prologue(monkeypatch):
    from primflow.compiler import _pipeline

    monkeypatch.setattr(_pipeline, "BLOCK_BYTES", 256)
    x = pf.to_tensor(np.random.default_rng(4).uniform(1, 2, (64, 3)))

    def f(x):
        return x * pf.randn([3], "float64")

    blocked = pf.jit(f, backend="numpy")
    pf.seed(5)
    a = blocked(x).numpy()
    (entry,) = blocked._cache.values()
    assert "with a prologue" in repr(entry.executable)
    monkeypatch.setattr(pf.config, "jit_blocking", False)
    whole = pf.jit(f, backend="numpy")
    pf.seed(5)
    b = whole(x).numpy()
    np.testing.assert_array_equal(a, b)
    ratio = a / x.numpy()  # one draw shared by every row
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:1], ratio.shape), rtol=1e-14)


def test_small_per_row_values_are_computed_for_all_rows_before_the_blocks():
    # %3 (3 floats a row) is computed once for all 12 rows; %5 (24 a row) per block
    fn = parse("def f(%0: float64[12,3], %1: float64[3,3], %2: float64[3,8]):\n"
               "    %3: float64[12,3] = dot_general(%0, %1, contracting=((1,),(0,)), "
               "batch=((),()))\n"
               "    %4: float64[12,3,8] = broadcast_in_dim(%2, shape=(12,3,8), "
               "broadcast_dimensions=(1,2))\n"
               "    %5: float64[12,3,8] = broadcast_in_dim(%3, shape=(12,3,8), "
               "broadcast_dimensions=(0,1))\n"
               "    %6: float64[12,3,8] = mul(%4, %5)\n"
               "    return %6, %3\n")
    n, axis_of = batch_axes(fn)
    prologue, block = block_program(fn, axis_of, n, 4, early_row_bytes=3 * 8)
    verify(prologue)
    verify(block)
    assert [op.prim for op in prologue.ops] == ["dot_general"]
    assert [v.aval.shape for v in prologue.outputs] == [(12, 3)]  # all rows
    assert [v.aval.shape for v in block.inputs][-1] == (4, 3)  # a block of them
    assert block.outputs[1] is block.inputs[-1]  # an output computed early is passed on
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(v.aval.shape) for v in fn.inputs]
    (early,) = evaluate(prologue, args)
    parts = [evaluate(block, [args[0][i:i + 4], args[1], args[2], early[i:i + 4]])
             for i in range(0, 12, 4)]
    want = evaluate(fn, args)
    for k in range(2):
        np.testing.assert_allclose(np.concatenate([p[k] for p in parts]), want[k],
                                   rtol=1e-14)


# ---- programs that sum over their rows (training steps) ----------------------------------------

_LOSS = ("def f(%0: float64[12,3], %1: float64[3,5], %2: float64[12,5]):\n"
         "    %3: float64[12,5] = dot_general(%0, %1, contracting=((1,),(0,)), batch=((),()))\n"
         "    %4: float64[12,5] = tanh(%3)\n"
         "    %5: float64[12,5] = sub(%4, %2)\n"
         "    %6: float64[12,5] = mul(%5, %5)\n"
         "    %7: float64[] = reduce_sum(%6, axes=(0,1))\n"
         "    %8: float64[] = full(shape=(), value=0.5, dtype=float64)\n"
         "    %9: float64[] = mul(%7, %8)\n"
         "    %10: float64[3,5] = dot_general(%0, %5, contracting=((0,),(0,)), batch=((),()))\n"
         "    %11: float64[3,5] = exp(%1)\n"
         "    %12: float64[3,5] = add(%10, %11)\n"
         "    return %9, %12, %4\n")


def test_a_program_that_sums_over_its_rows_runs_as_blocks_partial_sums_and_an_epilogue():
    from primflow.ir.passes.blocking import block_sums_program

    fn = parse(_LOSS)
    assert batch_axes(fn) is None  # not without reductions
    n, axis_of = batch_axes(fn, reductions=True)
    assert n == 12 and [axis_of[v] for v in fn.outputs] == [None, None, 0]
    b = block_sums_program(fn, axis_of, n, 4)
    for part in (b.prologue, b.body, b.epilogue):
        verify(part)
    assert [op.prim for op in b.prologue.ops] == ["exp"]  # weights only: once
    assert [op.prim for op in b.epilogue.ops if op.prim != "full"] == ["mul", "add"]
    assert b.row_outputs == [2]
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(v.aval.shape) for v in fn.inputs]
    want = evaluate(fn, args)
    hoisted = evaluate(b.prologue, args)
    parts = [evaluate(b.body, [args[0][i:i + 4], args[1], args[2][i:i + 4]] + hoisted)
             for i in range(0, 12, 4)]
    sums = [sum(p[1 + k] for p in parts) for k in range(len(b.sums))]
    loss, grad = evaluate(b.epilogue, args + hoisted + sums)
    np.testing.assert_allclose(loss, want[0], rtol=1e-13)
    np.testing.assert_allclose(grad, want[1], rtol=1e-13)
    np.testing.assert_allclose(np.concatenate([p[0] for p in parts]), want[2], rtol=1e-15)


def test_what_only_the_epilogue_reads_can_move_to_a_side_program():
    from primflow.ir.passes.blocking import block_sums_program

    # a loss on 12 points (the rows) plus a term on 4 other points (%2), both through %3
    fn = parse("def f(%0: float64[12,3], %1: float64[3,5], %2: float64[4,3]):\n"
               "    %3: float64[3,5] = exp(%1)\n"
               "    %4: float64[12,5] = dot_general(%0, %3, contracting=((1,),(0,)), "
               "batch=((),()))\n"
               "    %5: float64[12,5] = mul(%4, %4)\n"
               "    %6: float64[] = reduce_sum(%5, axes=(0,1))\n"
               "    %7: float64[4,5] = dot_general(%2, %3, contracting=((1,),(0,)), "
               "batch=((),()))\n"
               "    %8: float64[] = reduce_sum(%7, axes=(0,1))\n"
               "    %9: float64[] = add(%6, %8)\n    return %9\n")
    n, axis_of = batch_axes(fn, reductions=True)
    assert n == 12
    assert block_sums_program(fn, axis_of, n, 4).side is None  # only when asked
    b = block_sums_program(fn, axis_of, n, 4, side=True)
    for part in (b.prologue, b.side, b.body, b.epilogue):
        verify(part)
    assert [op.prim for op in b.prologue.ops] == ["exp"]  # the body reads it: first
    assert [op.prim for op in b.side.ops] == ["dot_general", "reduce_sum"]
    assert [op.prim for op in b.body.ops] == ["dot_general", "mul", "reduce_sum"]
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(v.aval.shape) for v in fn.inputs]
    hoisted = evaluate(b.prologue, args)
    beside = evaluate(b.side, args + hoisted)
    parts = [evaluate(b.body, [args[0][i:i + 4], args[1], args[2]] + hoisted)
             for i in range(0, 12, 4)]
    (loss,) = evaluate(b.epilogue, args + hoisted + beside + [sum(p[0] for p in parts)])
    np.testing.assert_allclose(loss, evaluate(fn, args)[0], rtol=1e-13)


def test_a_sum_that_flows_back_into_the_rows_is_not_blocked():
    fn = parse(_HEAD + "    %3: float64[3] = reduce_sum(%0, axes=(0,))\n"
               "    %4: float64[12,3] = broadcast_in_dim(%3, shape=(12,3), "
               "broadcast_dimensions=(1,))\n"
               "    %5: float64[12,3] = sub(%0, %4)\n    return %5\n")
    assert batch_axes(fn, reductions=True) is None
    fn = parse(_HEAD + "    %3: float64[3] = reduce_max(%0, axes=(0,))\n    return %3\n")
    assert batch_axes(fn, reductions=True) is None  # only sums split into partial sums


def test_a_weight_as_large_as_the_batch_is_not_a_row():
    # the flattened 4 x 4 weight has 16 elements, as many as the batch has rows: it is
    # computed from row-free values only, so it has no rows (W3 at 4,096 points per rank
    # was not blocked because its flattened 64 x 64 weight gradient looked like a batch)
    fn = parse("def f(%0: float64[16,4], %1: float64[4,4]):\n"
               "    %2: float64[16,4] = dot_general(%0, %1, contracting=((1,),(0,)), "
               "batch=((),()))\n"
               "    %3: float64[4] = reduce_sum(%2, axes=(0,))\n"
               "    %4: float64[4,4] = mul(%1, %1)\n"
               "    %5: float64[16] = reshape(%4, shape=(16,))\n"
               "    return %3, %5\n")
    n, axis_of = batch_axes(fn, reductions=True)
    assert n == 16 and axis_of[fn.inputs[0]] == 0
    assert axis_of[fn.outputs[1]] is None
