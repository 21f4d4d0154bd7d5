"""The numba backend of pf.jit against eager execution and the reference interpreter.

Regressions: (1) a numba kernel runs its fusion group element by element, so memory
planning must not hand a buffer the kernel still reads (through a broadcast or transpose
view) to one of the kernel's own results; a PINN loss's first-layer weight gradient came out
wrong because a reduction's output reused the buffer of a value the same kernel read
broadcast. (2) Fusion groups must stay convex when a group grows a dependency after some of
its values were already read by another group (else the kernels cannot be scheduled).
"""

from __future__ import annotations


import math

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import requires_extra
from primflow.ir import evaluate, parse
from primflow.ir.passes import fuse, plan_memory


needs_numba = requires_extra("jit")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(pf.config, "cache_dir", str(tmp_path))


def _rel_err(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return np.abs(got - want).max() / (np.abs(want).max() + 1e-300)


def _compiled(fn, backend, args):
    from primflow.compiler import compile_program

    exe = compile_program(fn, backend=backend)
    return exe, exe(args)


# ---- the program that exposed it: the gradient of a biharmonic PINN residual ------------------

def _pinn_step(sizes, n, method):
    pf.seed(0)
    net = pf.nn.MLP(sizes, activation="tanh")
    net.to("float64")
    params = list(net.parameters())
    x = pf.to_tensor(np.random.default_rng(0).uniform(0, 1, (n, 2)))

    def loss_fn(x):
        r = pf.autograd.biharmonic(lambda p: net(p)[:, 0], x, method=method)
        return (r * r).mean()

    return pf.value_and_grad(loss_fn, None, params), x


@needs_numba
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_pinn_biharmonic_gradient_matches_eager(backend):
    # 2048 points x 16 hidden x 4 Taylor directions: groups above AUTO_MIN_ELEMENTS, so
    # "auto" uses numba kernels too
    step, x = _pinn_step([2, 16, 1], 2048, "collapsed")
    value, grads = step(x)
    jitted = pf.jit(step, backend=backend)
    results = [jitted(x)]  # with "auto": the NumPy code, while numba compiles aside
    assert jitted.lower(x).compile().wait(300)
    results.append(jitted(x))
    for value_j, grads_j in results:
        assert _rel_err(value_j.numpy(), value.numpy()) < 1e-12
        for g, gj in zip(grads, grads_j):
            assert _rel_err(gj.numpy(), g.numpy()) < 1e-12


_TIERED_PROGRAM = """def f(%0: float64[256,256], %1: float64[256,256]):
    %2: float64[256,256] = mul(%0, %1)
    %3: float64[256,256] = add(%2, %0)
    %4: float64[256,256] = mul(%3, %3)
    %5: float64[256,256] = sub(%4, %1)
    return %5
"""


def _tiered_args():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((256, 256)), rng.standard_normal((256, 256))]


@needs_numba
def test_auto_backend_runs_numpy_code_while_numba_compiles_in_the_background(monkeypatch):
    from primflow.compiler import compile_program

    fn, args = parse(_TIERED_PROGRAM), _tiered_args()
    want = evaluate(fn, args)[0]
    exe = compile_program(fn, backend="auto")
    assert not exe.kernels  # the first version is generated NumPy code
    first = exe(args)[0]
    assert exe.wait(300) and len(exe.kernels) == 1 and not exe.compiling
    np.testing.assert_allclose(first, want, rtol=1e-14)
    assert _rel_err(exe(args)[0], want) < 1e-13  # numba contracts a*b+c into an FMA
    # a second compile of the same program in this process reuses the loaded kernel
    again = compile_program(fn, backend="auto")
    assert len(again.kernels) == 1 and not again.compiling
    # a new process (no kernels loaded) loads it from the disk cache at once, in the calling
    # thread: a background thread loading kernels holds the GIL and slowed the next calls
    from primflow.compiler import numba_codegen

    monkeypatch.setattr(numba_codegen, "_kernels", {})
    queued = []
    monkeypatch.setattr(numba_codegen, "compile_in_background",
                        lambda *a, **k: queued.append(a))
    fresh = compile_program(fn, backend="auto")
    assert fresh._pending.ready.is_set() and not queued
    assert _rel_err(fresh(args)[0], want) < 1e-13
    assert len(fresh.kernels) == 1 and not fresh.compiling


@needs_numba
def test_numbas_process_set_up_runs_in_the_calling_thread(monkeypatch):
    # numba's once-per-process set-up (0.15-0.25 s holding the GIL) made a call 20x slower
    # when the background thread did it while loading the first kernel
    import threading

    from primflow.compiler import compile_program, numba_codegen

    threads = []
    real = numba_codegen.prepare_process
    monkeypatch.setattr(numba_codegen, "prepare_process",
                        lambda: (threads.append(threading.current_thread()), real()))
    monkeypatch.setattr(numba_codegen, "_kernels", {})
    exe = compile_program(parse(_TIERED_PROGRAM), backend="auto")
    assert threads == [threading.current_thread()]
    assert numba_codegen._state["prepared"]
    assert exe.wait(300) and len(exe.kernels) == 1


@needs_numba
def test_tiered_compile_can_be_switched_off(monkeypatch):
    from primflow.compiler import compile_program

    monkeypatch.setattr(pf.config, "jit_tiered", False)
    exe = compile_program(parse(_TIERED_PROGRAM), backend="auto")
    assert len(exe.kernels) == 1 and not exe.compiling


@needs_numba
def test_a_failing_background_compile_warns_and_keeps_the_numpy_code(tmp_path, monkeypatch):
    from primflow.compiler import numba_codegen
    from primflow.compiler import compile_program

    broken = tmp_path / "broken_worker.py"
    broken.write_text("import sys\nsys.stderr.write('no compiler here')\nsys.exit(3)\n")
    monkeypatch.setattr(numba_codegen, "_WORKER", str(broken))
    monkeypatch.setattr(numba_codegen, "_kernels", {})  # nothing compiled in this process
    fn, args = parse(_TIERED_PROGRAM), _tiered_args()
    exe = compile_program(fn, backend="auto")
    exe._pending.ready.wait(300)
    with pytest.warns(RuntimeWarning, match="exited with code 3: no compiler here"):
        out = exe(args)[0]
    assert not exe.kernels and not exe.compiling
    np.testing.assert_allclose(out, evaluate(fn, args)[0], rtol=1e-14)


@needs_numba
@pytest.mark.parametrize("method", ["collapsed", "nested"])
def test_pinn_biharmonic_gradient_all_groups_numba(method):
    # every supported group a kernel (backend="numba"); nested Taylor mode builds the
    # fusion pattern that made non-convex groups
    step, x = _pinn_step([2, 16, 16, 1], 64, method)
    value, grads = step(x)
    value_j, grads_j = pf.jit(step, backend="numba")(x)
    assert _rel_err(value_j.numpy(), value.numpy()) < 1e-12
    for g, gj in zip(grads, grads_j):
        assert _rel_err(gj.numpy(), g.numpy()) < 1e-12


# ---- the miscompiled construct ----------------------------------------------------------------

# %2 lives in a buffer that the kernel (mul add reduce_sum) reads broadcast along axis 0; its
# last use is inside the kernel, so an op-by-op plan gave the reduction's output %6 the same
# buffer, and the kernel zeroed it (r[...] = 0) before reading it.
_BROADCAST_READ = (
    "def f(%0: float64[4,8], %1: float64[8]):\n"
    "    %2: float64[8] = exp(%1)\n"
    "    %3: float64[4,8] = broadcast_in_dim(%2, shape=(4,8), broadcast_dimensions=(1,))\n"
    "    %4: float64[4,8] = mul(%0, %3)\n"
    "    %5: float64[4,8] = add(%4, %0)\n"
    "    %6: float64[8] = reduce_sum(%5, axes=(0,))\n"
    "    %7: float64[8] = exp(%6)\n"
    "    return %7\n")

# the kernel (mul add) reads %1 transposed; writing its output %4 into %1's buffer would
# overwrite elements [j, i] it has yet to read
_TRANSPOSED_READ = (
    "def f(%0: float64[8,8]):\n"
    "    %1: float64[8,8] = exp(%0)\n"
    "    %2: float64[8,8] = transpose(%1, perm=(1,0))\n"
    "    %3: float64[8,8] = mul(%2, %0)\n"
    "    %4: float64[8,8] = add(%3, %0)\n"
    "    %5: float64[8,8] = transpose(%4, perm=(1,0))\n"
    "    %6: float64[8,8] = exp(%5)\n"
    "    return %6\n")


@needs_numba
@pytest.mark.parametrize("src, shapes", [(_BROADCAST_READ, [(4, 8), (8,)]),
                                         (_TRANSPOSED_READ, [(8, 8)])],
                         ids=["broadcast", "transpose"])
def test_kernel_never_writes_a_buffer_it_reads_through_a_view(src, shapes):
    fn = parse(src)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in shapes]
    want = evaluate(fn, args)
    exe, got = _compiled(fn, "numba", args)
    assert exe.kernels
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    got_again = exe(args)  # the workspace is reused on the next call
    for g, w in zip(got_again, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_plan_memory_treats_a_unit_as_one_operation():
    fn = parse(_BROADCAST_READ)
    ops = fn.ops
    # op by op, the reduction may take exp's buffer (numpy's reduce reads before it writes)
    plan = plan_memory(fn)
    assert plan.buffer_of[ops[4].out] == plan.buffer_of[ops[0].out]
    # as one unit (a kernel): exp's buffer stays alive until the unit has run
    plan = plan_memory(fn, units=[ops[2:5]])
    assert plan.buffer_of[ops[4].out] != plan.buffer_of[ops[0].out]

    fn = parse(_TRANSPOSED_READ)
    ops = fn.ops
    def kernel_can_write(op):  # as the compiler plans it: the kernel stores only its output
        return op.prim in ("exp", "add")

    plan = plan_memory(fn, can_write=kernel_can_write)
    assert plan.buffer_of[ops[3].out] == plan.buffer_of[ops[0].out]
    plan = plan_memory(fn, can_write=kernel_can_write, units=[ops[2:4]])
    assert plan.buffer_of[ops[3].out] != plan.buffer_of[ops[0].out]


def test_plan_memory_unit_may_still_write_over_a_direct_operand():
    # a unit reading %1 directly (same index as it writes) can update it in place
    fn = parse("def f(%0: float64[8]):\n"
               "    %1: float64[8] = exp(%0)\n"
               "    %2: float64[8] = mul(%1, %0)\n"
               "    %3: float64[8] = add(%2, %1)\n"
               "    %4: float64[8] = exp(%3)\n"
               "    return %4\n")
    ops = fn.ops
    plan = plan_memory(fn, units=[ops[1:3]])
    assert plan.buffer_of[ops[2].out] == plan.buffer_of[ops[0].out]
    assert plan.in_place >= 1


def test_plan_memory_rejects_a_unit_that_is_not_contiguous():
    fn = parse(_TRANSPOSED_READ)
    with pytest.raises(ValueError, match="contiguous"):
        plan_memory(fn, units=[[fn.ops[0], fn.ops[2]]])


# ---- convex fusion groups --------------------------------------------------------------------

# group {%3, %6} comes to depend on group {%2} through the reshapes only when %6 joins it,
# after %3 was computed; %7 reads %3 and must not join %2's group (that would be a cycle)
_LATE_DEPENDENCY = (
    "def f(%0: float64[8], %1: float64[8]):\n"
    "    %2: float64[8] = mul(%0, %0)\n"
    "    %3: float64[8] = mul(%1, %1)\n"
    "    %4: float64[2,4] = reshape(%2, shape=(2,4))\n"
    "    %5: float64[8] = reshape(%4, shape=(8,))\n"
    "    %6: float64[8] = add(%3, %5)\n"
    "    %7: float64[8] = add(%2, %3)\n"
    "    return %6, %7\n")


def test_fusion_groups_stay_convex_when_a_group_gains_a_dependency():
    fn = parse(_LATE_DEPENDENCY)
    groups = fuse(fn, min_size=1)
    group_of = {op.out: g for g in groups for op in g.ops}
    ops = fn.ops
    assert group_of[ops[5].out] is not group_of[ops[0].out]  # %7 does not join %2
    # the graph of groups and the operations outside them is acyclic
    unit = {id(op): ("group", g.gid) for g in groups for op in g.ops}
    producer = {op.out: op for op in ops}
    edges = {}
    for op in ops:
        to = unit.get(id(op), ("op", id(op)))
        for v in op.inputs:
            if v in producer:
                src = unit.get(id(producer[v]), ("op", id(producer[v])))
                if src != to:
                    edges.setdefault(src, set()).add(to)
    state = {}

    def acyclic(n):
        state[n] = "open"
        for m in edges.get(n, ()):
            if state.get(m) == "open" or (m not in state and not acyclic(m)):
                return False
        state[n] = "done"
        return True

    assert all(acyclic(n) for n in list(edges) if n not in state)


@needs_numba
def test_numba_schedules_groups_with_late_dependencies():
    fn = parse(_LATE_DEPENDENCY)
    args = [np.arange(8.0), np.arange(8.0) + 1.0]
    exe, got = _compiled(fn, "numba", args)
    assert exe.kernels
    for g, w in zip(got, evaluate(fn, args)):
        np.testing.assert_array_equal(g, w)


@needs_numba
def test_a_strided_program_input_reaches_a_contiguous_kernel_argument_correctly():
    # kernel inputs that are not views are compiled as C-contiguous; a strided program input
    # must be copied by the launcher, not read as if it were contiguous
    fn, _ = parse(_TIERED_PROGRAM), None
    rng = np.random.default_rng(2)
    a = rng.standard_normal((256, 512))[:, ::2]  # strided
    b = rng.standard_normal((256, 256)).T  # transposed
    exe, got = _compiled(fn, "numba", [a, b])
    assert exe.kernels
    assert _rel_err(got[0], evaluate(fn, [a, b])[0]) < 1e-13


@needs_numba
def test_jitted_wait_compiled_switches_to_the_numba_kernels():
    fn_text_args = _tiered_args()
    x, y = (pf.to_tensor(a) for a in fn_text_args)

    def f(a, b):
        return (a * b + a) * (a * b + a) - b

    jitted = pf.jit(f)
    first = jitted(x, y).numpy()
    assert jitted.wait_compiled(300)
    assert jitted.lower(x, y).compile().kernels
    want = f(x, y).numpy()
    assert _rel_err(first, want) < 1e-13  # NumPy code, or numba when loaded already
    assert _rel_err(jitted(x, y).numpy(), want) < 1e-13


@needs_numba
def test_an_unwritable_kernel_cache_warns_and_runs_numpy_code(tmp_path, monkeypatch):
    from primflow.compiler import numba_codegen
    from primflow.compiler import compile_program

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setattr(pf.config, "cache_dir", str(blocker))
    monkeypatch.setattr(numba_codegen, "_kernels", {})
    fn, args = parse(_TIERED_PROGRAM), _tiered_args()
    with pytest.warns(RuntimeWarning, match="cannot write numba kernels"):
        exe = compile_program(fn, backend="auto")
    assert not exe.kernels and not exe.compiling
    np.testing.assert_allclose(exe(args)[0], evaluate(fn, args)[0], rtol=1e-14)


@needs_numba
def test_a_hanging_compile_worker_is_killed_after_the_timeout(tmp_path, monkeypatch):
    from primflow.compiler import numba_codegen
    from primflow.compiler import compile_program

    hang = tmp_path / "hanging_worker.py"
    hang.write_text("import time\ntime.sleep(600)\n")
    monkeypatch.setattr(numba_codegen, "_WORKER", str(hang))
    monkeypatch.setattr(numba_codegen, "WORKER_TIMEOUT_S", 1)
    monkeypatch.setattr(numba_codegen, "_kernels", {})
    fn, args = parse(_TIERED_PROGRAM), _tiered_args()
    exe = compile_program(fn, backend="auto")
    assert exe._pending.ready.wait(300)  # (after the job being served, if any)
    with pytest.warns(RuntimeWarning, match="TimeoutExpired"):
        exe(args)
    assert not exe.kernels and numba_codegen._background["process"] is None


def _hold_the_compile_queue(tmp_path, monkeypatch):
    """Queues a job whose worker waits until the returned function is called (the queue's
    one worker is busy with it meanwhile, so later jobs wait); returns once it runs."""
    import time

    from primflow.compiler import numba_codegen

    started, release = tmp_path / "gate-started", tmp_path / "gate-release"
    gate = tmp_path / "gate.py"
    gate.write_text(f"import os, time\nopen({str(started)!r}, 'w').close()\n"
                    f"while not os.path.exists({str(release)!r}): time.sleep(0.01)\n"
                    f"print('[]')\n")
    real_worker = numba_codegen._WORKER
    monkeypatch.setattr(numba_codegen, "_WORKER", str(gate))
    numba_codegen.compile_in_background(
        [{"path": str(tmp_path / "gate_job"), "sig": "()"}], lambda e: None)
    monkeypatch.setattr(numba_codegen, "_WORKER", real_worker)
    deadline = time.monotonic() + 300  # (after the job being served, if any)
    while not started.exists():
        assert time.monotonic() < deadline, "the compile queue never served the gate job"
        time.sleep(0.01)
    return lambda: release.write_text("")


@needs_numba
def test_a_queued_job_keeps_the_worker_settings_it_was_queued_with(tmp_path, monkeypatch):
    # a job served after others (a cold cache queues many) once read the module's settings
    # when it started: a test's patched worker script ran with the restored 30-minute
    # timeout and blocked the queue
    import threading

    from primflow.compiler import numba_codegen

    record = tmp_path / "record.py"
    record.write_text("import sys\nopen(sys.argv[0] + '.ran', 'w').write(sys.argv[1])\n"
                      "print('[]')\n")
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import sys\nopen(sys.argv[0] + '.ran', 'w').write('x')\nprint('[]')\n")
    release = _hold_the_compile_queue(tmp_path, monkeypatch)
    done, errors = threading.Event(), []
    monkeypatch.setattr(numba_codegen, "WORKER_TIMEOUT_S", 60)
    monkeypatch.setattr(numba_codegen, "_WORKER", str(record))
    monkeypatch.setattr(numba_codegen, "WORKER_NICENESS", 7)
    numba_codegen.compile_in_background(
        [{"path": str(tmp_path / "job"), "sig": "()"}],
        lambda e: (errors.append(e), done.set()))
    monkeypatch.setattr(numba_codegen, "_WORKER", str(wrong))
    monkeypatch.setattr(numba_codegen, "WORKER_NICENESS", 3)
    release()
    assert done.wait(300) and errors == [None]
    assert (tmp_path / "record.py.ran").read_text() == "7"
    assert not (tmp_path / "wrong.py.ran").exists()


@needs_numba
def test_kernels_load_from_the_folder_they_were_compiled_into(tmp_path, monkeypatch):
    # pf.config.cache_dir changed while the job waited in the queue: the load looked in the
    # new folder, found nothing and compiled every kernel again in this process
    from primflow.compiler import numba_codegen
    from primflow.compiler import compile_program

    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setattr(pf.config, "cache_dir", str(first))
    monkeypatch.setattr(numba_codegen, "_kernels", {})
    release = _hold_the_compile_queue(tmp_path, monkeypatch)
    fn, args = parse(_TIERED_PROGRAM), _tiered_args()
    exe = compile_program(fn, backend="auto")
    monkeypatch.setattr(pf.config, "cache_dir", str(second))
    release()
    assert exe.wait(300) and exe.kernels
    assert _rel_err(exe(args)[0], evaluate(fn, args)[0]) < 1e-13
    assert list((first / "numba").glob("k_*.py"))
    assert not (second / "numba").exists() or not list((second / "numba").glob("k_*.py"))


@needs_numba
def test_a_tampered_kernel_source_in_the_cache_is_rewritten_not_run(tmp_path, monkeypatch):
    from primflow.compiler import numba_codegen
    from primflow.compiler import compile_program
    from primflow.ir.passes import fuse as fuse_groups

    fn, args = parse(_TIERED_PROGRAM), _tiered_args()
    (group,) = fuse_groups(fn)
    sha, path = numba_codegen.write_source(group)
    with open(path, "w", encoding="utf-8") as f:
        f.write("raise SystemExit('tampered cache file ran')\n")
    monkeypatch.setattr(numba_codegen, "_kernels", {})
    exe = compile_program(fn, backend="numba")
    assert _rel_err(exe(args)[0], evaluate(fn, args)[0]) < 1e-13
    with open(path, encoding="utf-8") as f:
        assert f.read() == numba_codegen.kernel_source(group)


@needs_numba
def test_calls_from_several_threads_across_the_switch_to_numba_are_correct(monkeypatch):
    import threading

    from primflow.compiler import numba_codegen
    from primflow.compiler import compile_program

    monkeypatch.setattr(numba_codegen, "_kernels", {})
    fn, args = parse(_TIERED_PROGRAM), _tiered_args()
    want = evaluate(fn, args)[0]
    exe = compile_program(fn, backend="auto")
    errors = []

    def work():
        try:
            for _ in range(400):
                if _rel_err(exe(args)[0], want) > 1e-13:
                    errors.append("wrong result")
                if not exe.compiling:
                    break
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert exe.wait(300) and exe.kernels
    assert not errors
    assert _rel_err(exe(args)[0], want) < 1e-13


# ---- kernels across unit dimensions, merged groups and recomputed broadcast products ---------

_UNIT_DIMS = (
    "def f(%0: float64[32,128], %1: float64[256,128], %2: float64[128,128], "
    "%3: float64[256,128], %4: float64[1,128]):\n"
    "    %5: float64[256,32,128] = broadcast_in_dim(%0, shape=(256,32,128), "
    "broadcast_dimensions=(1,2))\n"
    "    %6: float64[256,32,128] = broadcast_in_dim(%1, shape=(256,32,128), "
    "broadcast_dimensions=(0,2))\n"
    "    %7: float64[256,32,128] = mul(%5, %6)\n"
    "    %8: float64[8192,128] = reshape(%7, shape=(8192,128))\n"
    "    %9: float64[8192,128] = dot_general(%8, %2, contracting=((1,),(0,)), "
    "batch=((),()))\n"
    "    %10: float64[256,32,1,128] = reshape(%9, shape=(256,32,1,128))\n"
    "    %11: float64[256,32,128] = broadcast_in_dim(%3, shape=(256,32,128), "
    "broadcast_dimensions=(0,2))\n"
    "    %12: float64[256,32,128] = mul(%7, %11)\n"
    "    %13: float64[256,32,128] = neg(%12)\n"
    "    %14: float64[256,32,1,128] = broadcast_in_dim(%13, shape=(256,32,1,128), "
    "broadcast_dimensions=(0,1,3))\n"
    "    %15: float64[256,32,1,128] = broadcast_in_dim(%4, shape=(256,32,1,128), "
    "broadcast_dimensions=(2,3))\n"
    "    %16: float64[256,32,1,128] = mul(%15, %10)\n"
    "    %17: float64[256,32,1,128] = add(%16, %14)\n"
    "    %18: float64[256,32] = reduce_sum(%12, axes=(2,))\n"
    "    %19: float64[256,32,128] = reshape(%17, shape=(256,32,128))\n"
    "    %20: float64[256,32,128] = mul(%19, %19)\n"
    "    return %17, %18, %20\n")


@needs_numba
def test_kernels_across_unit_dims_with_recomputed_products_equal_the_interpreter():
    fn = parse(_UNIT_DIMS)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.aval.shape) for v in fn.inputs]
    want = evaluate(fn, args)
    exe, got = _compiled(fn, "numba", args)
    for _ in range(2):  # planned buffers are reused across calls
        got = exe(args)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            assert _rel_err(g, w) < 1e-14
    # the add and the multiply after its unit reshape run in one kernel that recomputes the
    # broadcast product %7 (the matmul's operand is the only [256,32,128] value stored
    # before the matmul)
    final = [g for g in exe.groups if "add" in [op.prim for op in g.ops]]
    assert len(final) == 1 and [op.prim for op in final[0].ops].count("mul") >= 3
    assert any(op.prim == "reshape" for op in final[0].ops)


@needs_numba
def test_jitted_batched_hessian_with_numba_matches_the_closed_form(monkeypatch):
    monkeypatch.setattr(pf.config, "jit_tiered", False)
    rng = np.random.default_rng(1)
    w1, b1 = rng.standard_normal((8, 64)) / 3, rng.standard_normal(64) / 10
    w2, b2 = rng.standard_normal((64, 64)) / 8, rng.standard_normal(64) / 10
    w3 = rng.standard_normal(64) / 8
    x = rng.uniform(0, 1, (300, 8))
    p = [pf.to_tensor(a) for a in (w1, b1, w2, b2, w3)]

    def f(v):
        h = pf.tanh(v @ p[0] + p[1])
        return (pf.tanh(h @ p[2] + p[3]) * p[4]).sum()

    hess = pf.jit(pf.vmap(pf.hessian(f)))
    got = hess(pf.to_tensor(x)).numpy()
    (entry,) = hess._cache.values()
    assert entry.executable.kernels  # the tangent products ran in numba kernels
    h1 = np.tanh(x @ w1 + b1)
    s1 = 1 - h1 ** 2
    h2 = np.tanh(h1 @ w2 + b2)
    s2 = 1 - h2 ** 2
    a = (w3 * s2) @ w2.T
    m = (w1 * s1[:, None, :]) @ w2
    want = ((w1 * (-2 * a * h1 * s1)[:, None, :]) @ w1.T
            + (m * (-2 * w3 * h2 * s2)[:, None, :]) @ m.transpose(0, 2, 1))
    assert _rel_err(got, want) < 1e-12
    assert _rel_err(hess(pf.to_tensor(x)).numpy(), want) < 1e-12


def test_a_reshape_of_a_view_is_a_strided_kernel_input():
    """np.reshape of a broadcast stays a strided view: the kernel signature must accept any
    layout for it ("A"), else the launcher copies the array on every call; a reshape of a
    plain input stays contiguous ("C")."""
    from primflow.compiler import numba_codegen as nc

    fn = parse("def f(%0: float64[4,8], %1: float64[8], %2: float64[32]):\n"
               "    %3: float64[4,8] = broadcast_in_dim(%1, shape=(4,8), "
               "broadcast_dimensions=(1,))\n"
               "    %4: float64[32] = reshape(%3, shape=(32,))\n"
               "    %5: float64[32] = reshape(%0, shape=(32,))\n"
               "    %6: float64[32] = mul(%4, %5)\n"
               "    %7: float64[32] = add(%6, %2)\n"
               "    return %7\n")
    (group,) = fuse(fn, min_size=1)
    layouts = [layout for _, _, layout, is_input in nc.kernel_signature(group) if is_input]
    assert layouts == ["A", "C", "C"]


# ---- float32 erf inside kernels (GELU): a rational approximation, float64 stays SciPy's ---------

_ERF_PROGRAM = """def f(%0: {t}[4001], %1: {t}[4001]):
    %2: {t}[4001] = mul(%0, %1)
    %3: {t}[4001] = erf(%2)
    %4: {t}[4001] = add(%3, %0)
    return %4
"""


@needs_numba
def test_float32_erf_is_computed_in_a_kernel_to_a_few_ulp():
    from scipy import special

    x = np.linspace(-7.0, 7.0, 4001)
    args = [x.astype(np.float32), np.full(4001, 0.9, np.float32)]
    exe, got = _compiled(parse(_ERF_PROGRAM.format(t="float32")), "numba", args)
    assert "(mul erf add)" in exe.source and "K_erf" not in exe.source  # one kernel
    scaled = args[0].astype(np.float64) * np.float32(0.9).astype(np.float64)
    want = special.erf(scaled) + args[0]
    assert got[0].dtype == np.float32
    # XLA's / Eigen's float32 erf: within 3.4e-7 of the exact one; the sum adds rounding
    np.testing.assert_allclose(got[0], want, rtol=0, atol=4e-7 + 2 * np.spacing(np.float32(7)))
    np.testing.assert_array_equal(np.abs(got[0][np.abs(scaled) > 4] - args[0][
        np.abs(scaled) > 4]), np.float32(1))  # clamped: erf = +-1 exactly


@needs_numba
def test_float64_erf_stays_scipys_exact_one():
    from scipy import special

    x = np.linspace(-7.0, 7.0, 4001)
    args = [x, np.full(4001, 0.9)]
    exe, got = _compiled(parse(_ERF_PROGRAM.format(t="float64")), "numba", args)
    assert "K_erf" in exe.source  # SciPy's erf between the kernels
    np.testing.assert_allclose(got[0], special.erf(x * 0.9) + x, rtol=1e-15, atol=1e-15)


def test_the_compile_worker_lowers_its_own_priority(monkeypatch):
    """The background compile must never slow the program down: the worker process asks
    for a low CPU priority before compiling."""
    import io
    import sys

    from primflow.compiler import numba_codegen, numba_worker

    calls = []
    monkeypatch.setattr(numba_worker.os, "nice", calls.append, raising=False)
    monkeypatch.setattr(sys, "argv", ["numba_worker.py", str(numba_codegen.WORKER_NICENESS)])
    monkeypatch.setattr(sys, "stdin", io.StringIO("[]"))
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    numba_worker.main()
    assert calls == [numba_codegen.WORKER_NICENESS] and 0 < numba_codegen.WORKER_NICENESS < 20


@needs_numba
def test_the_background_compile_starts_the_worker_with_the_niceness(monkeypatch):
    import subprocess

    from primflow.compiler import numba_codegen

    started = []
    real = subprocess.Popen

    def popen(cmd, *a, **k):
        started.append(list(cmd))
        return real(cmd, *a, **k)

    monkeypatch.setattr(subprocess, "Popen", popen)
    f = pf.jit(lambda x: (x * 2.0 + 1.0) * x - 3.0)
    f(pf.ones([1 << 15]))
    assert f.wait_compiled(120)
    assert started and started[-1][-1] == str(numba_codegen.WORKER_NICENESS)


@needs_numba
@pytest.mark.parametrize("shape", [(7,), (8,), (3, 5), (4, 1), (1, 6), (3, 1, 5), (1,)])
def test_a_kernel_with_libm_calls_interleaves_two_elements_and_matches_numpy(shape):
    # chains of sin/exp run two elements side by side (the CPU overlaps the calls' latency);
    # odd lengths finish with one element, unit dims and broadcast inputs keep their indexing
    from primflow.compiler import numba_codegen

    t = f"float64{list(shape)}".replace(" ", "")
    last, n = shape[-1], len(shape)
    program = (f"def f(%0: {t}, %1: float64[{last}]):\n"
               f"    %2: {t} = broadcast_in_dim(%1, shape={tuple(shape)}, "
               f"broadcast_dimensions=({n - 1},))\n"
               f"    %3: {t} = sin(%0)\n"
               f"    %4: {t} = add(%3, %2)\n"
               f"    %5: {t} = exp(%4)\n"
               f"    %6: {t} = sub(%5, %3)\n"
               f"    return %6, %3\n")
    groups = fuse(parse(program))
    assert len(groups) == 1 and numba_codegen.supports(groups[0], transcendental=True)
    source = numba_codegen.kernel_source(groups[0])
    assert ("t3_1 = " in source) == (math.prod(shape) >= 2)
    rng = np.random.default_rng(3)
    x, row = rng.standard_normal(shape), rng.standard_normal(last)
    outs = numba_codegen.compile_group(groups[0])(x, row, np.empty(shape), np.empty(shape))
    want = {"sin": np.sin(x), "sub": np.exp(np.sin(x) + row) - np.sin(x)}
    for v, got in zip(groups[0].outputs, outs):
        np.testing.assert_allclose(got, want[v.op.prim], rtol=1e-14)
