"""GPU code generation for fused groups (compiler/cupy_codegen.py): CuPy's CUDA kernels.

CI has no GPU: the generated CUDA kernel source is checked as text, and the whole compiled
program (scheduling, buffers, kernel calls) runs with each kernel replaced by a NumPy
stand-in that executes the same group on the array-API backend over NumPy. With CuPy and a
GPU the real kernels run against the NumPy backend (skipped otherwise).
"""

import numpy as np
import pytest

import primflow as pf
from primflow.backends import get_backend
from primflow.compiler import cupy_codegen
from primflow.ir import parse
from primflow.ir.passes import fuse
from primflow.testing.extras import import_extra

import_extra("array-api", "array_api_compat")


def _group(text):
    groups = fuse(parse(text))
    assert len(groups) == 1, groups
    return groups[0]


def test_kernel_source_of_a_fused_chain():
    g = _group("def f(%0: float64[4,8], %1: float64[8]):\n"
               "    %2: float64[4,8] = broadcast_in_dim(%1, shape=(4,8),"
               " broadcast_dimensions=(1,))\n"
               "    %3: float64[4,8] = add(%0, %2)\n"
               "    %4: float64[4,8] = tanh(%3)\n"
               "    %5: float64[4,8] = integer_pow(%4, y=2)\n"
               "    %6: float64[4,8] = maximum(%5, %0)\n"
               "    return %4, %6\n")
    assert cupy_codegen.supports(g)
    src = cupy_codegen.kernel_source(g)
    assert src.in_params == "float64 i0, float64 i1"  # the broadcast is read as a view
    assert src.out_params == "float64 o0, float64 o1"
    assert src.operation.splitlines() == [
        "double t2 = i0 + i1;",
        "double t3 = tanh(t2);",
        "double t4 = (t3 * t3);",
        "double t5 = (t4 > i0 || isnan(t4)) ? t4 : i0;",  # NumPy's NaN-propagating maximum
        "o0 = t3;",
        "o1 = t5;",
    ]
    assert src.name.startswith("primflow_fused_")
    assert cupy_codegen.kernel_source(g) == src  # one name per kernel text (CuPy's cache)


def test_kernel_source_float32_casts_selects_and_what_stays_out():
    g = _group("def f(%0: float32[6], %1: float32[6]):\n"
               "    %2: bool[6] = lt(%0, %1)\n"
               "    %3: float32[6] = logistic(%0)\n"
               "    %4: float32[6] = select(%2, %3, %1)\n"
               "    %5: float64[6] = convert_element_type(%4, dtype=float64)\n"
               "    return %5\n")
    ops = cupy_codegen.kernel_source(g).operation.splitlines()
    assert ops[:4] == ["bool t2 = i0 < i1;", "float t3 = 1.0f / (1.0f + exp(-i0));",
                       "float t4 = t2 ? t3 : i1;", "double t5 = (double)(t4);"]
    # a reduction or integer arithmetic stays a CuPy call
    fn = parse("def f(%0: float64[6]):\n    %1: float64[6] = exp(%0)\n"
               "    %2: float64[] = reduce_sum(%1, axes=(0,))\n    return %2\n")
    assert [cupy_codegen.computes(op) for op in fn.ops] == [True, False]
    ints = parse("def f(%0: int64[6]):\n    %1: int64[6] = mul(%0, %0)\n"
                 "    %2: int64[6] = add(%1, %0)\n    return %2\n")
    assert not cupy_codegen.supports(fuse(ints)[0])


def _numpy_stand_in(group):
    """Runs ``group`` like its CUDA kernel would (inputs, then outputs to write)."""
    backend = get_backend()
    source = cupy_codegen.kernel_source(group)  # generated for every kernel, as on a GPU

    def run(*arrays):
        ins, outs = arrays[:len(group.inputs)], arrays[len(group.inputs):]
        env = dict(zip(group.inputs, ins))
        for op in group.ops:
            env[op.out] = backend.kernels[op.prim](*[env[v] for v in op.inputs], **op.params)
        for out, v in zip(outs, group.outputs):
            out[...] = env[v]
        return tuple(outs)

    run.source = source
    return run


def test_compiled_program_with_kernels_for_its_groups_matches_numpy(monkeypatch):
    monkeypatch.setattr(cupy_codegen, "uses_kernels", lambda backend: True)
    monkeypatch.setattr(cupy_codegen, "compile_group", _numpy_stand_in)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in [(8, 3), (3, 4), (4,)]]

    def loss(x, w, b):
        h = pf.tanh(x @ w + b)
        return (h * h).sum() + pf.exp(-x).mean()

    expected = pf.jit(pf.value_and_grad(loss, (0, 1, 2)))(*[pf.to_tensor(a) for a in args])
    from primflow.backends import make_backend

    over_numpy = make_backend("array_api", namespace=np)
    monkeypatch.setattr(over_numpy, "arrays_are_numpy", False)  # as on CuPy: no numba
    with pf.backend(over_numpy):
        f = pf.jit(pf.value_and_grad(loss, (0, 1, 2)))
        tensors = [pf.to_tensor(a) for a in args]
        value, grads = f(*tensors)
        lowered = f.lower(*tensors)
    exe = lowered.compile()
    assert exe.backend == "cupy" and len(exe.kernels) >= 2
    source = lowered.as_text("compiled")
    assert "# cupy kernel 0: group" in source and "tanh" in exe.kernels[0].source.operation
    np.testing.assert_allclose(float(value), float(expected[0]), rtol=1e-14)
    for g, e in zip(grads, expected[1]):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-13, atol=1e-14)


@pytest.mark.skipif(not pf.device.is_compiled_with_cuda(), reason="needs CuPy and a GPU")
def test_cupy_kernels_on_a_gpu():  # pragma: no cover - no GPU in CI
    import cupy

    rng = np.random.default_rng(1)
    x0, w0 = rng.standard_normal((256, 3)), rng.standard_normal((3, 64))

    def loss(x, w):
        return (pf.tanh(x @ w) ** 2).sum()

    expected = pf.jit(pf.grad(loss, 1))(pf.to_tensor(x0), pf.to_tensor(w0)).numpy()
    with pf.backend("array_api", namespace=cupy):
        f = pf.jit(pf.grad(loss, 1))
        args = pf.to_tensor(x0), pf.to_tensor(w0)
        got = f(*args).numpy()
        assert f.lower(*args).compile().backend == "cupy"
    np.testing.assert_allclose(got, expected, rtol=1e-10)
