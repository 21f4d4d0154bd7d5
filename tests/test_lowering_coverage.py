"""Every elementwise primitive can be lowered by every code generator and backend, from its
declaration alone (``Lowering``, core/lowering.py), and a complete public elementwise op
(``erfc``) is its declaration plus its OpInfo entry: ``pf.erfc``, ``Tensor.erfc``,
``prims.erfc``, the CUDA and numba kernels, the array-API kernel and the wrappers that
make eager, jit, complex and bfloat16 inputs behave alike."""

from __future__ import annotations

import math

import numpy as np
import pytest

import primflow as pf
from primflow import prims
from primflow.backends import get_backend, make_backend
from primflow.compiler import cupy_codegen, spellings
from primflow.core.primitive import get_primitive
from primflow.ir import parse
from primflow.ir.passes import fuse
from primflow.testing.extras import import_extra

ELEMENTWISE = [n for n in pf.primitives() if get_primitive(n).family.elementwise]
# numba has no array form of these: loops that use them run as NumPy code instead
NO_NUMBA_LOOP_FORM = {"erf": "numba has no vectorised erf",
                      "erfc": "numba has no vectorised erfc"}


def _lowering_gaps(name, strict_backend):
    p, gaps = get_primitive(name), []
    if name in spellings.BY_CODE:
        return gaps
    if p.lowering.c is None:
        gaps.append("c= (CuPy's CUDA form)")
    if p.lowering.numba is None and name not in NO_NUMBA_LOOP_FORM:
        gaps.append("numba= (numba loop kernels' form)")
    if name not in get_backend().kernels:
        gaps.append("a NumPy kernel (a ufunc named by numpy=, or reference=)")
    strict_backend.kernel_for(name)
    if name in strict_backend.host_fallbacks:
        gaps.append("an array-API kernel (array_api= a standard name or build(xp))")
    return gaps


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_every_elementwise_primitive_is_lowered_everywhere(name):
    strict = import_extra("test", "array_api_strict")
    backend = make_backend("array_api", namespace=strict)
    gaps = _lowering_gaps(name, backend)
    assert not gaps, f"primitive {name!r} declares no {', '.join(gaps)}"


def test_the_coverage_check_names_what_is_missing(monkeypatch):
    from primflow.core.lowering import Lowering

    strict = import_extra("test", "array_api_strict")
    backend = make_backend("array_api", namespace=strict)
    monkeypatch.setattr(get_primitive("tanh"), "lowering", Lowering(numba="tanh_({0})"))
    assert _lowering_gaps("tanh", backend) == ["c= (CuPy's CUDA form)"]


# ---- erfc: a complete public op from its declaration and its OpInfo entry -----------------

def test_erfc_is_public_everywhere():
    from primflow.ops.tensor_methods import TENSOR_METHODS
    from primflow.testing.opinfo import OP_DB

    assert pf.erfc is pf.ops.erfc and "erfc" in pf.__all__
    assert prims.erfc is get_primitive("erfc")
    x = pf.to_tensor([0.5, 2.5], "float64")
    np.testing.assert_allclose(x.erfc().numpy(), [math.erfc(0.5), math.erfc(2.5)], rtol=1e-14)
    assert TENSOR_METHODS["erfc"] is pf.erfc
    assert any(info.name == "erfc" for info in OP_DB)


def test_erfc_is_one_cuda_and_one_numba_kernel_statement():
    fn = parse("def f(%0: float32[8], %1: float32[8]):\n"
               "    %2: float32[8] = mul(%0, %1)\n    %3: float32[8] = erfc(%2)\n"
               "    %4: float32[8] = add(%3, %1)\n    return %4\n")
    (group,) = fuse(fn)
    assert cupy_codegen.supports(group)
    assert "float t3 = erfc(t2);" in cupy_codegen.kernel_source(group).operation


def test_erfc_of_complex_is_refused_eager_and_jitted_alike():
    """A reference kernel skipped the NumPy backend's real-only wrapper: eager erfc(1+1j)
    returned a value while pf.jit raised."""
    z = pf.to_tensor([1 + 1j])
    refused = (TypeError, pf.PrimitiveError)  # (eager: the kernel's error, wrapped by bind)
    with pytest.raises(refused, match="erfc is not defined for complex"):
        pf.erfc(z)
    with pytest.raises(refused, match="erfc is not defined for complex"):
        pf.jit(pf.erfc)(z)


def test_bfloat16_erfc_comes_back_bfloat16():
    """A reference kernel skipped the dtype-restoring float32 path: bfloat16 came back
    float64 (SciPy has no bfloat16 loop)."""
    import_extra("bfloat16", "ml_dtypes")
    x = pf.to_tensor([0.25, 1.5], "float32").astype("bfloat16")
    out = pf.erfc(x)
    assert out.dtype.name == "bfloat16"
    np.testing.assert_allclose(out.astype("float32").numpy(), [math.erfc(0.25),
                                                               math.erfc(1.5)], rtol=1e-2)
    half = pf.erfc(pf.to_tensor([0.25], "float16"))
    assert half.dtype.name == "float16"


def test_array_api_erfc_is_native_and_stays_positive_in_float32():
    """Computing erfc as 1 - erf on the array-API backend gave negative float32 values on
    [2.3, 3]; its kernel is native (no host round trip) and accurate there."""
    strict = import_extra("test", "array_api_strict")
    backend = make_backend("array_api", namespace=strict)
    backend.kernel_for("erfc")
    assert "erfc" not in backend.host_fallbacks
    xs = np.linspace(-4.0, 6.0, 401)
    with pf.backend(backend):
        out32 = pf.erfc(pf.to_tensor(np.linspace(2.3, 3.0, 50), "float32")).numpy()
        out64 = pf.erfc(pf.to_tensor(xs, "float64")).numpy()
    assert (out32 > 0).all()
    exact = np.array([math.erfc(v) for v in np.linspace(2.3, 3.0, 50)])
    np.testing.assert_allclose(out32, exact, rtol=2e-5)
    np.testing.assert_allclose(out64, [math.erfc(v) for v in xs], rtol=1e-12)
