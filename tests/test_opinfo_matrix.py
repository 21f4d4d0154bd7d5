"""The OpInfo table on the dtype x mode x backend matrix generated from it
(``primflow/testing/opinfo/matrix.py``): output dtypes as ``infer`` says, values across
cells and against float64 within each dtype's tolerance, gradients against the float64
eager ones. The default run covers float64/float32 on every mode and backend and eager
NumPy in float16/bfloat16; ``pytest --matrix=full`` runs every cell. Cells that cannot run
skip naming why (a limitation declared in the entry, a missing library, no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from primflow.testing.extras import requires_extra
from primflow.testing.opinfo import matrix

needs_bfloat16 = requires_extra("bfloat16")


def pytest_generate_tests(metafunc):
    if "cell" in metafunc.fixturenames:
        full = metafunc.config.getoption("--matrix") == "full"
        metafunc.parametrize("cell", [pytest.param(c, id=c.id) for c in matrix.cells(full)])


def test_cell(cell):
    reason = matrix.skip_reason(cell)
    if reason:
        pytest.skip(reason)
    matrix.run_cell(cell)


# ---- the matrix itself ----------------------------------------------------------------------

def test_the_matrix_is_generated_from_the_table():
    from primflow.testing.opinfo import OP_DB  # noqa: PLC0415

    entries = [i for i in OP_DB if i.kind in matrix.KINDS]
    full = list(matrix.cells(full=True))
    assert len(full) == sum(len(matrix.DTYPES) * len(matrix.modes_of(i)) * len(matrix.BACKENDS)
                            for i in entries)
    default = list(matrix.cells())
    assert {c.dtype for c in default} == set(matrix.DTYPES)
    assert {(c.mode, c.backend) for c in default if c.dtype in matrix.LOW_PRECISION} == {
        matrix.DEFAULT_LOW_PRECISION_CELL}
    assert len({c.id for c in full}) == len(full)
    labels = {c.dtype_label for c in full}
    assert {"complex64", "complex128"} <= labels


def test_a_declared_limit_skips_its_cells_naming_the_reason():
    cell = next(c for c in matrix.cells(full=True)
                if c.id == "linalg.inv-float16-eager-numpy")
    assert "LAPACK has no half precision" in matrix.skip_reason(cell)
    numba_elsewhere = next(c for c in matrix.cells() if c.mode == "jit_numba"
                           and c.backend == "array_api_strict")
    assert "NumPy-backend only" in matrix.skip_reason(numba_elsewhere)


# ---- what the matrix found (each failed before its fix) -------------------------------------

def test_erf_keeps_float16():
    """SciPy's erf has no float16 loop: the kernel returned float64 where infer says
    float16 (gelu too)."""
    import primflow as pf  # noqa: PLC0415

    x = pf.to_tensor([0.5, -1.0], dtype="float16")
    assert pf.erf(x).dtype == pf.float16 and pf.erf(x).numpy().dtype == np.float16
    assert pf.nn.functional.gelu(x).numpy().dtype == np.float16


@pytest.mark.parametrize("dtype", ["float16", pytest.param("bfloat16", marks=needs_bfloat16)])
def test_random_draws_in_16_bit_floats(dtype):
    """NumPy's generator draws float32/float64 only: pf.rand raised for float16."""
    import primflow as pf  # noqa: PLC0415

    u = pf.rand([20000], dtype=dtype)
    z = pf.randn([20000], dtype=dtype)
    assert u.dtype.name == dtype and z.dtype.name == dtype
    u, z = u.numpy().astype(np.float64), z.numpy().astype(np.float64)
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.02
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1.0) < 0.05


@needs_bfloat16
def test_bfloat16_backward_of_fused_norms_and_lstsq():
    """einsum has no bfloat16 loop (the fused softmax/layer_norm/rms_norm backward raised),
    and lstsq's cutoff had no bfloat16 epsilon (a KeyError)."""
    import primflow as pf  # noqa: PLC0415

    rng = np.random.default_rng(0)
    x64, w64 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for fn in (pf.nn.functional.softmax, lambda v: pf.nn.functional.layer_norm(v, 4),
               lambda v: pf.nn.functional.rms_norm(v, 4)):
        grads = []
        for dtype in ("bfloat16", "float64"):
            x = pf.to_tensor(x64, dtype=dtype, stop_gradient=False)
            (fn(x) * pf.to_tensor(w64, dtype=dtype)).sum().backward()
            grads.append(x.grad.numpy().astype(np.float64))
        np.testing.assert_allclose(grads[0], grads[1], atol=0.1 * np.abs(grads[1]).max())
    a = pf.to_tensor(x64[:, :2], dtype="bfloat16")
    b = pf.to_tensor(x64[:, 2:], dtype="bfloat16")
    sol = pf.linalg.lstsq(a, b)[0]
    expected = np.linalg.lstsq(x64[:, :2], x64[:, 2:], rcond=None)[0]
    np.testing.assert_allclose(sol.numpy().astype(np.float64), expected, atol=0.1)


@needs_bfloat16
def test_bfloat16_jet_through_the_taylor_kernels():
    """The Taylor fast path summed runs of products with einsum: a SystemError on bfloat16."""
    import primflow as pf  # noqa: PLC0415

    x0 = np.array([0.3, -0.5])
    out = []
    for dtype in ("bfloat16", "float64"):
        x = pf.to_tensor(x0, dtype=dtype)
        _, ys = pf.jet(pf.exp, (x,), ([pf.ones_like(x)] * 4,))  # a curved path
        out.append([y.numpy().astype(np.float64) for y in ys])
    for got, expected in zip(*out):
        np.testing.assert_allclose(got, expected, rtol=5e-2)
