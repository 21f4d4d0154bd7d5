"""Threads (backends/threads.py, backends/blas.py, the compiler's threaded row blocks):
the knob and its errors, the pool, the BLAS pools' limits, and compiled training steps run
as partial sums over row blocks (equal to the whole program, deterministic)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import primflow as pf
from primflow.backends import blas, threads
from primflow.compiler import _pipeline


@pytest.fixture
def restore_threads():
    before = pf.get_num_threads()
    yield
    pf.set_num_threads(before)


# ---- the knob ------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (2.0, TypeError),
                                        ("2", TypeError), (True, TypeError), (None, TypeError)])
def test_set_num_threads_rejects_what_is_not_a_positive_integer(bad, error, restore_threads):
    with pytest.raises(error, match="number of threads must be"):
        pf.set_num_threads(bad)


def test_more_threads_than_cores_warns_once(monkeypatch, restore_threads):
    monkeypatch.setattr(threads, "available_cores", lambda: 1)
    monkeypatch.setitem(threads._state, "warned", False)
    with pytest.warns(RuntimeWarning, match="more threads than the 1 cores"):
        pf.set_num_threads(2)
    assert pf.get_num_threads() == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pf.set_num_threads(3)  # once is enough
    pf.set_num_threads(np.int64(1))  # NumPy integers are integers
    assert pf.get_num_threads() == 1


def test_the_default_honours_omp_num_threads_and_shares_a_host_among_mpi_ranks(monkeypatch):
    for var in ("OMP_NUM_THREADS",) + threads.MPI_LOCAL_SIZE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 8)
    assert threads.default_num_threads() == 8
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4")
    assert threads.default_num_threads() == 2
    monkeypatch.setattr(threads, "available_cores", lambda: 2)  # the launcher bound the rank
    assert threads.default_num_threads() == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.default_num_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "zero")  # unusable: ignored
    assert threads.default_num_threads() == 2
    assert "MPI ranks" in threads.describe()


def test_primflow_info_shows_the_setting(capsys):
    from primflow.cli import main

    assert main(["info"]) == 0
    assert f"threads: {pf.get_num_threads()} " in capsys.readouterr().out


# ---- the pool --------------------------------------------------------------------------------

def test_parallel_map_keeps_the_order_and_raises_the_first_failure():
    seen = set()

    def square(i):
        seen.add(threading.get_ident())
        return i * i

    assert threads.parallel_map(square, 50, threads=2) == [i * i for i in range(50)]

    def fail(i):
        if i in (7, 30):
            raise KeyError(i)
        return i

    with pytest.raises(KeyError, match="7"):
        threads.parallel_map(fail, 40, threads=2)
    # nested: the inner map runs on the thread that calls it
    inner = threads.parallel_map(lambda i: threads.parallel_map(lambda j: (i, j), 3), 2,
                                 threads=2)
    assert inner == [[(i, j) for j in range(3)] for i in range(2)]


def test_blas_runs_on_one_thread_inside_blocks_and_for_products_too_small_to_gain(
        monkeypatch, restore_threads):
    pools = blas.openblas_libraries()
    if not pools:
        pytest.skip("no OpenBLAS library in this process")
    pf.set_num_threads(2)
    assert all(get() == 2 for get, _ in pools)  # the knob sets the BLAS pools
    seen = []
    real = blas._matmul

    def spy(a, *rest):
        seen.append((a.shape[0], [get() for get, _ in pools]))
        return real(a, *rest)

    monkeypatch.setattr(blas, "_matmul", spy)
    one = [1] * len(pools)
    small = np.ones((512, 64)), np.ones((64, 64))  # 2^21 multiply-adds: one thread
    large = np.arange(2048 * 64.0).reshape(2048, 64), np.ones((64, 128))  # 2^24: two
    blas.matmul(*small)
    assert seen == [(512, one)]
    seen.clear()
    np.testing.assert_array_equal(blas.matmul(*large), large[0] @ large[1])
    # two slabs of rows on primflow's threads, each a one-thread BLAS call
    assert sorted(seen) == [(1024, one), (1024, one)]
    assert all(get() == 2 for get, _ in pools)  # restored after each product
    seen.clear()
    # a product 4x larger again: more slabs than threads (a descheduled thread holds up one)
    larger = np.arange(4096 * 128.0).reshape(4096, 128) / 4096, np.ones((128, 128))
    np.testing.assert_allclose(blas.matmul(*larger), larger[0] @ larger[1], rtol=1e-15)
    assert sorted(seen) == [(512, one)] * 8
    seen.clear()
    threads.parallel_map(lambda i: blas.matmul(*large), 2, threads=2)
    assert seen == [(2048, one)] * 2  # inside blocks: not split, one thread each
    assert all(get() == 2 for get, _ in pools)
    pf.set_num_threads(1)
    assert all(get() == 1 for get, _ in pools)


def test_small_decompositions_run_on_one_blas_thread(monkeypatch, restore_threads):
    """NumPy's LAPACK follows the BLAS pools: an eigh, svd, solve, ... too small to gain
    from two threads runs on one (on a busy machine two were 60-130x slower), a large one on
    the pools' threads, and the pools are restored after. Checked on the thread count
    primflow sets the pools to (the pools themselves follow it: the test above)."""
    pf.set_num_threads(2)
    seen = []
    real = np.linalg.eigh

    def spy(a):
        seen.append((a.shape[-1], blas._state["pool_threads"]))
        return real(a)

    monkeypatch.setattr(np.linalg, "eigh", spy)
    rng = np.random.default_rng(0)
    for n in (8, 256):  # 2^9 and 2^24 multiply-adds
        m = rng.standard_normal((n, n))
        w, _ = pf.linalg.eigh(pf.to_tensor(m + m.T))
        np.testing.assert_allclose(np.sort(w.numpy()), real(m + m.T)[0], atol=1e-10)
    assert seen == [(8, 1), (256, 2)]
    assert blas._state["pool_threads"] == 2


# ---- compiled training steps in row blocks ----------------------------------------------------

def _training_step(boundary=False):
    """A PINN-like step: value and gradient of a loss that sums over 256 points (and, with
    ``boundary``, a term on 48 other points: it does not depend on the 256 rows)."""
    rng = np.random.default_rng(7)
    x = pf.to_tensor(rng.uniform(-1, 1, (256, 2)))
    target = pf.to_tensor(rng.standard_normal((256, 1)))
    xb = pf.to_tensor(rng.uniform(-1, 1, (48, 2)))
    w1, b1 = pf.to_tensor(rng.standard_normal((2, 16)) / 2), pf.to_tensor(np.zeros(16))
    w2 = pf.to_tensor(rng.standard_normal((16, 1)) / 4)

    def loss(w1, b1, w2):
        h = pf.tanh(x @ w1 + b1)
        u = h @ w2
        du = pf.grad(lambda p: (pf.tanh(p @ w1 + b1) @ w2).sum())(x)  # a derivative per point
        total = ((u - target) ** 2).mean() + (du ** 2).sum(axis=1).mean()
        if boundary:
            total = total + ((pf.tanh(xb @ w1 + b1) @ w2) ** 2).mean()
        return total

    return pf.value_and_grad(loss, argnums=(0, 1, 2)), (w1, b1, w2)


def _run_compiled(fn, program_threads, args):
    program = _pipeline.optimize_program(fn)
    exe = _pipeline.compile_program(program, backend="numpy", threads=program_threads)
    return exe, exe([a.numpy() for a in args])


@pytest.mark.parametrize("boundary", [False, True])
def test_a_training_step_runs_as_threaded_blocks_equal_to_the_whole_step_and_deterministic(
        boundary, monkeypatch, restore_threads):
    monkeypatch.setattr(_pipeline, "MIN_THREAD_GAIN", 0.0)  # block even this small step
    step, params = _training_step(boundary)
    jitted = pf.jit(step)
    jitted(*params)
    (entry,) = jitted._cache.values()
    fn = entry.program
    inputs = list(params) + entry.captures  # (the points and targets are captured)
    whole, want = _run_compiled(fn, 1, inputs)
    assert type(whole).__name__ == "Executable"  # one thread: the step is not blocked
    blocked, got = _run_compiled(fn, 2, inputs)
    assert type(blocked).__name__ == "BlockedExecutable" and blocked.epilogue is not None
    assert blocked.threads == 2 and blocked.n // blocked.rows >= 2
    # the boundary term runs as one more task beside the blocks
    assert (blocked.side is not None) == boundary
    # the same to rounding as the whole program and as eager
    loss, grads = step(*params)
    for a, b, c in zip(got, want, [loss] + list(grads)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(a, c.numpy(), rtol=1e-12, atol=1e-14)
    # the gradient against central finite differences of the loss (an independent oracle)
    w1 = params[0].numpy()
    for idx in [(0, 0), (1, 5)]:
        e = np.zeros_like(w1)
        e[idx] = 1e-6
        up = step(pf.to_tensor(w1 + e), *params[1:])[0].item()
        down = step(pf.to_tensor(w1 - e), *params[1:])[0].item()
        assert abs((up - down) / 2e-6 - got[1][idx]) < 1e-6 * max(1.0, abs(got[1][idx]))
    # bitwise the same at each call, whichever thread runs which block
    args = [a.numpy() for a in inputs]
    for _ in range(5):
        again = blocked(args)
        assert all(np.array_equal(a, b) for a, b in zip(again, got))
    # the same blocks on one thread: the same bits (the order of the sums is fixed)
    blocked.threads = 1
    assert all(np.array_equal(a, b) for a, b in zip(blocked(args), got))


def test_jit_follows_set_num_threads(monkeypatch, restore_threads):
    monkeypatch.setattr(_pipeline, "MIN_THREAD_GAIN", 0.0)
    step, params = _training_step()
    jitted = pf.jit(step)
    pf.set_num_threads(1)
    one = jitted(*params)
    pf.set_num_threads(2)
    two = jitted(*params)
    (entry,) = jitted._cache.values()
    assert type(entry.executable.current).__name__ == "BlockedExecutable"
    pf.set_num_threads(1)
    assert type(entry.executable.current).__name__ == "Executable"
    for a, b in zip(pf.tree_flatten(one)[0], pf.tree_flatten(two)[0]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)


def test_small_programs_stay_on_one_thread(restore_threads):
    step, params = _training_step()
    jitted = pf.jit(step)
    pf.set_num_threads(2)
    jitted(*params)
    (entry,) = jitted._cache.values()
    # too little work for threads at any count: one plain executable for every count
    assert type(entry.executable).__name__ == "Executable"
