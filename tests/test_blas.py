"""backends/blas.py: matrix products through MKL (when the optional ``mkl`` package is
installed) must equal NumPy's matmul for every layout, dtype and ``out`` it accepts, and
everything else must fall back to NumPy. Without MKL these tests check the fallback."""

from __future__ import annotations

import numpy as np
import pytest

from primflow.backends import blas


def _spy(monkeypatch, name):
    """Records what ``blas.<name>`` (``_gemm`` or ``_batched_matmul``) returns: True when MKL
    computed the product."""
    taken, real = [], getattr(blas, name)

    def spy(*xs):
        taken.append(real(*xs))
        return taken[-1]

    monkeypatch.setattr(blas, name, spy)
    return taken


def _mkl_has(kind):
    return blas.backend_name() == "mkl" and bool(blas._state[kind])


def _operands(rng, m, k, n, dtype, a_transposed, b_transposed):
    a = rng.standard_normal((k, m) if a_transposed else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if b_transposed else (k, n)).astype(dtype)
    return (a.T if a_transposed else a), (b.T if b_transposed else b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a_transposed", [False, True])
@pytest.mark.parametrize("b_transposed", [False, True])
@pytest.mark.parametrize("with_out", [False, True])
def test_matmul_equals_numpy_for_every_layout(dtype, a_transposed, b_transposed, with_out,
                                              monkeypatch):
    monkeypatch.setattr(blas, "MKL_MIN_WORK", 1)  # small products through MKL too
    rng = np.random.default_rng(0)
    a, b = _operands(rng, 37, 19, 23, dtype, a_transposed, b_transposed)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = np.full((37, 23), np.nan, dtype=dtype) if with_out else None
    taken = _spy(monkeypatch, "_gemm")
    got = blas.matmul(a, b, out=out)
    if _mkl_has("gemm"):
        assert taken == [True], "MKL's GEMM was not used"
    assert got.dtype == dtype and got.shape == (37, 23)
    if with_out:
        assert got is out
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a_transposed", [False, True])
@pytest.mark.parametrize("b_transposed", [False, True])
@pytest.mark.parametrize("with_out", [False, True])
def test_stacked_matmul_equals_numpy_for_every_layout(dtype, a_transposed, b_transposed,
                                                      with_out, monkeypatch):
    """3-d stacks go to MKL's strided batch GEMM (matrices read in place, transposed or
    not); the result equals NumPy's."""
    monkeypatch.setattr(blas, "MKL_MIN_WORK", 1)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 11, 7) if a_transposed else (4, 7, 11)).astype(dtype)
    b = rng.standard_normal((4, 5, 11) if b_transposed else (4, 11, 5)).astype(dtype)
    a = a.transpose(0, 2, 1) if a_transposed else a
    b = b.transpose(0, 2, 1) if b_transposed else b
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = np.full((4, 7, 5), np.nan, dtype=dtype) if with_out else None
    taken = _spy(monkeypatch, "_batched_matmul")
    got = blas.matmul(a, b, out=out)
    if _mkl_has("batched"):
        assert taken == [True], "MKL's batch GEMM was not used"
    assert got.dtype == dtype and got.shape == (4, 7, 5)
    if with_out:
        assert got is out
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["strided", "batched_4d", "int", "mixed", "empty", "vector",
                                  "aliased_out", "batch_broadcast"])
def test_matmul_falls_back_to_numpy_for_everything_else(case, monkeypatch):
    monkeypatch.setattr(blas, "MKL_MIN_WORK", 1)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 8))
    b = rng.standard_normal((8, 5))
    out = None
    if case == "strided":
        a = rng.standard_normal((12, 8))[::2]
    elif case == "batched_4d":
        a, b = rng.standard_normal((2, 3, 6, 8)), rng.standard_normal((2, 3, 8, 5))
    elif case == "batch_broadcast":  # a stack times one matrix: NumPy broadcasts it
        a, b = rng.standard_normal((3, 6, 8)), rng.standard_normal((1, 8, 5))
    elif case == "int":
        a, b = np.arange(48).reshape(6, 8), np.arange(40).reshape(8, 5)
    elif case == "mixed":
        a = a.astype(np.float32)
    elif case == "empty":
        a, b = np.zeros((6, 0)), np.zeros((0, 5))
    elif case == "vector":
        b = b[:, 0]
    elif case == "aliased_out":
        a = rng.standard_normal((8, 8))
        b = rng.standard_normal((8, 8))
        want = np.matmul(a, b)
        np.testing.assert_allclose(blas.matmul(a, b, out=a), want, rtol=1e-13, atol=1e-13)
        return
    np.testing.assert_allclose(blas.matmul(a, b, out=out), np.matmul(a, b), rtol=1e-6)


def test_numpy_can_be_chosen_even_with_mkl_installed(monkeypatch):
    import primflow as pf

    monkeypatch.setattr(pf.config, "blas", "numpy")
    assert blas.backend_name() == "numpy"
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(blas.matmul(a, a.T), a @ a.T)
    big = np.ones((1024, 1024))  # large enough for MKL: still NumPy's (no MKL call)
    monkeypatch.setattr(blas, "_gemm", None)  # calling it would raise
    monkeypatch.setattr(blas, "_batched_matmul", None)
    np.testing.assert_array_equal(blas.matmul(big, big), big @ big)
    # set before the first product, the option keeps MKL from being loaded at all
    monkeypatch.setattr(blas, "_state", {**blas._state, "checked": False, "gemm": None,
                                         "name": "numpy", "lib": None})
    np.testing.assert_array_equal(blas.matmul(big, big), big @ big)
    assert blas._state["checked"] and blas._state["lib"] is None


@pytest.mark.parametrize("batched", [False, True])
def test_eager_dot_general_uses_the_same_products(batched, monkeypatch):
    """Eager dot_general reshapes to one 2-d product (or a stack of them, for batch dims)
    and sends it through blas.matmul, so MKL computes it when installed."""
    import primflow as pf
    from primflow.prims import dot_general

    monkeypatch.setattr(blas, "MKL_MIN_WORK", 1)
    taken = _spy(monkeypatch, "_batched_matmul" if batched else "_gemm")
    rng = np.random.default_rng(2)
    if batched:
        x, w = rng.standard_normal((6, 5, 4)), rng.standard_normal((6, 4, 3))
        dims = dict(contracting=((2,), (1,)), batch=((0,), (0,)))
        want = np.einsum("bik,bkj->bij", x, w)
    else:
        x, w = rng.standard_normal((5, 4, 3)), rng.standard_normal((3, 4, 2))
        dims = dict(contracting=((1, 2), (1, 0)), batch=((), ()))
        want = np.tensordot(x, w, axes=([1, 2], [1, 0]))
    got = dot_general(pf.to_tensor(x), pf.to_tensor(w), **dims).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-13)
    if _mkl_has("batched" if batched else "gemm"):
        assert taken == [True]


def test_thread_limit_reaches_mkl_also_when_it_loads_inside_the_block(monkeypatch):
    """blas.limit_threads (used by the trainer's blas_threads) sets MKL's thread count, also
    when the first product inside the block is what loads MKL, and restores it after."""
    from primflow.science.threads import blas_threads

    monkeypatch.setattr(blas, "_state", dict(blas._state, checked=False, lib=None,
                                             thread_limit=None))
    with blas_threads(1):
        assert blas._state["thread_limit"] == 1
        blas.matmul(np.ones((256, 64)), np.ones((64, 128)))  # loads MKL if installed
        lib = blas._state["lib"]
        if lib is not None:
            assert lib.MKL_Get_Max_Threads() == 1
    assert blas._state["thread_limit"] is None
    if lib is not None:
        assert lib.MKL_Get_Max_Threads() == blas.max_threads()  # (pf.get_num_threads())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_out", [False, True])
def test_outer_products_are_exact_broadcast_multiplies(dtype, with_out):
    """k = 1 products large enough take the broadcast-multiply path: each entry is one
    product, so the result equals NumPy's matmul bit for bit (also for strided operands)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2 * 700, 1)).astype(dtype)[::2]  # strided rows
    b = rng.standard_normal((1, 130)).astype(dtype)
    assert a.size * b.size >= blas._OUTER_MIN_WORK
    out = np.full((700, 130), np.nan, dtype=dtype) if with_out else None
    got = blas.matmul(a, b, out=out)
    if with_out:
        assert got is out
    assert got.dtype == dtype and got.shape == (700, 130)
    np.testing.assert_array_equal(got, np.matmul(a, b))
