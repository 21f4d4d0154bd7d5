"""Programs on small arrays: ``pf.jit`` fuses their elementwise chains, transcendental
functions included, into numba kernels (``compiler._pipeline.small_program_plan``), since
each operation's call costs more than its arithmetic there. The kernels must compute what
the generated NumPy code computes: values, gradients, dtypes, and a new program for a new
shape (a large one keeps the NumPy ufuncs for its transcendental functions)."""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.compiler._pipeline import small_program_plan
from primflow.ir import parse
from primflow.ir.passes import fuse
from primflow.testing.extras import requires_extra

needs_numba = requires_extra("jit")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(pf.config, "cache_dir", str(tmp_path))


def _chain(x):  # the W5 chain, shortened: sin, scale, shift
    for _ in range(6):
        x = pf.sin(x)
        x = x * 1.0001
        x = x + 0.1
    return pf.tanh(x) * pf.exp(-x * x) + pf.log1p(x * x)


def _numpy_chain(x):
    for _ in range(6):
        x = np.sin(x) * 1.0001 + 0.1
    return np.tanh(x) * np.exp(-x * x) + np.log1p(x * x)


def _numpy_grad(x, h=1e-6):  # central differences of the float64 chain (elementwise)
    return (_numpy_chain(x + h) - _numpy_chain(x - h)) / (2 * h)


@needs_numba
@pytest.mark.parametrize("n", [1, 7, 300])
def test_small_chain_runs_as_one_kernel_and_matches_numpy(n):
    x = np.random.default_rng(n).standard_normal(n)
    f = pf.jit(_chain)
    f(pf.to_tensor(x))
    assert f.wait_compiled(60)
    got = f(pf.to_tensor(x))
    exe = next(iter(f._cache.values())).executable
    assert len(exe.kernels) == 1 and "np.sin" in exe.kernels[0].source
    assert got.dtype == pf.float64 and got.shape == [n]
    np.testing.assert_allclose(got.numpy(), _numpy_chain(x), rtol=1e-13, atol=1e-14)


@needs_numba
def test_small_chain_gradient_matches_finite_differences_and_the_numpy_tier():
    x = np.random.default_rng(0).standard_normal(5)
    g = pf.jit(pf.grad(lambda t: _chain(t).sum()))
    first = g(pf.to_tensor(x)).numpy()  # the NumPy tier (kernels compile meanwhile)
    assert g.wait_compiled(60)
    fused = g(pf.to_tensor(x))
    assert next(iter(g._cache.values())).executable.kernels
    np.testing.assert_allclose(fused.numpy(), _numpy_grad(x), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(fused.numpy(), first, rtol=1e-13, atol=1e-14)
    with pf.config.override(jit_backend="numpy"):
        plain = pf.jit(pf.grad(lambda t: _chain(t).sum()))(pf.to_tensor(x)).numpy()
    np.testing.assert_allclose(fused.numpy(), plain, rtol=1e-13, atol=1e-14)


@needs_numba
def test_float32_small_chain_keeps_its_dtype():
    x = np.random.default_rng(1).standard_normal(4).astype(np.float32)
    f = pf.jit(_chain)
    f(pf.to_tensor(x))
    f.wait_compiled(60)
    got = f(pf.to_tensor(x))
    assert got.dtype == pf.float32
    np.testing.assert_allclose(got.numpy(), _numpy_chain(x.astype(np.float64)), rtol=2e-5,
                               atol=2e-6)


@needs_numba
def test_a_new_shape_retraces_and_a_large_one_keeps_numpy_ufuncs():
    f = pf.jit(_chain)
    small = np.random.default_rng(2).standard_normal(3)
    f(pf.to_tensor(small))
    f.wait_compiled(60)
    np.testing.assert_allclose(f(pf.to_tensor(small)).numpy(), _numpy_chain(small),
                               rtol=1e-13, atol=1e-14)
    large = np.random.default_rng(3).standard_normal(50_000)
    got = f(pf.to_tensor(large))
    f.wait_compiled(60)
    assert f.cache_info()["traces"] == 2
    np.testing.assert_allclose(f(pf.to_tensor(large)).numpy(), _numpy_chain(large),
                               rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got.numpy(), _numpy_chain(large), rtol=1e-13, atol=1e-14)
    exe = [e.executable for e in f._cache.values()][1]
    assert all("np.tanh" not in k.source for k in exe.kernels)


def _sins(n, size, dtype="float64"):
    lines = [f"    %{i + 1}: {dtype}[{size}] = sin(%{i})\n" for i in range(n)]
    return parse(f"def f(%0: {dtype}[{size}]):\n" + "".join(lines) + f"    return %{n}\n")


@needs_numba
def test_the_cost_model_fuses_small_programs_only():
    fn = _sins(8, 1)
    assert small_program_plan(fn, fuse(fn)) is not None
    big = _sins(8, 100_000, "float32")  # NumPy's SIMD sin beats scalar libm here
    assert small_program_plan(big, fuse(big)) is None
    single = _sins(1, 1)  # one call either way: nothing to gain
    assert small_program_plan(single, fuse(single)) is None


def _count_queued_compiles(monkeypatch):
    """A list that gets each background compile's group count as it is queued."""
    from primflow.compiler import numba_codegen

    submitted = []
    real = numba_codegen.compile_in_background

    def spy(jobs, done):
        submitted.append(len(jobs))
        return real(jobs, done)

    monkeypatch.setattr(numba_codegen, "compile_in_background", spy)
    return submitted


@needs_numba
def test_small_program_kernels_compile_only_after_many_calls(monkeypatch):
    """Under tiered compilation a small program's kernels are queued for the background
    worker only after SMALL_PROGRAM_DEFERRED_CALLS calls (or at wait_compiled): a function
    called a few times never costs a compile, one run on and on gets its kernels."""
    from primflow.compiler import _pipeline

    submitted = _count_queued_compiles(monkeypatch)
    monkeypatch.setattr(_pipeline, "SMALL_PROGRAM_DEFERRED_CALLS", 5)
    x = pf.to_tensor(np.random.default_rng(1).standard_normal(3))
    # (constants no other test uses: a kernel loaded in this process already is used at once)
    f = pf.jit(lambda t: _chain(t) * 0.8125)
    for _ in range(4):
        f(x)
    exe = next(iter(f._cache.values())).executable
    assert submitted == [] and not exe.kernels and exe.compiling  # deferred, NumPy tier
    f(x)  # the fifth call queues the compile
    assert submitted == [1]
    assert f.wait_compiled(60) and exe.kernels
    np.testing.assert_allclose(f(x).numpy(), _numpy_chain(x.numpy()) * 0.8125, rtol=1e-13)

    g = pf.jit(lambda t: _chain(t) * 0.6875)  # wait_compiled starts a deferred compile at once
    g(x)
    assert g.wait_compiled(60) and next(iter(g._cache.values())).executable.kernels
    assert len(submitted) == 2


@needs_numba
def test_a_deferred_compile_reached_from_several_threads_is_queued_once(monkeypatch):
    import threading

    from primflow.compiler import _pipeline

    submitted = _count_queued_compiles(monkeypatch)
    monkeypatch.setattr(_pipeline, "SMALL_PROGRAM_DEFERRED_CALLS", 1000)
    x = pf.to_tensor(np.random.default_rng(2).standard_normal(3))
    f = pf.jit(lambda t: _chain(t) * 0.59375)
    f(x)  # traced and compiled (the NumPy tier); the compile is not queued yet
    exe = next(iter(f._cache.values())).executable
    pending = exe._pending
    assert submitted == [] and pending is not None
    barrier = threading.Barrier(8)

    def start():  # as the calls that reach the count, or wait_compiled(), in eight threads
        barrier.wait()
        pending.begin()

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert submitted == [1]
    assert f.wait_compiled(60) and exe.kernels
