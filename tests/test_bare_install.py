"""A bare install (``pip install -e .``: NumPy only) runs every feature that needs no extra,
and the suite passes there with the extras' tests skipped naming the extra (CI runs that leg
too, ``.ci/run``). These tests keep the pieces that make it so honest where the extras are
installed: the extras table of ``primflow.testing.extras`` against ``pyproject.toml``, the
OpInfo table's NumPy references against SciPy, and the fallbacks that run without SciPy."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import EXTRAS, has_extra, import_extra, skip_reason
from primflow.testing.opinfo import OPS_BY_NAME

ROOT = pathlib.Path(__file__).resolve().parent.parent
# distributions that install no module of their own name (shared libraries, executables)
_NOT_MODULES = {"mkl", "mpich"}
_MODULE_OF = {"cupy-cuda12x": "cupy"}


def _pyproject_extras():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["project"]["optional-dependencies"]


def test_the_extras_table_lists_pyprojects_extras_and_their_modules():
    declared = _pyproject_extras()
    assert set(EXTRAS) == set(declared)
    for extra, requirements in declared.items():
        names = {re.split(r"[<>=!~; \[]", r, maxsplit=1)[0] for r in requirements}
        modules = {_MODULE_OF.get(n, n.replace("-", "_")) for n in names - _NOT_MODULES}
        assert set(EXTRAS[extra]) == modules, extra


def test_extras_helpers_name_the_extra_and_reject_unknown_names():
    assert skip_reason("jit") == "needs the 'jit' extra (pip install -e '.[jit]')"
    assert has_extra("test", "pytest") and has_extra("mkl")  # mkl: nothing to import
    with pytest.raises(ValueError, match="unknown extra 'fats'.*'fast'"):
        has_extra("fats")
    with pytest.raises(ValueError, match="extra 'plot' installs"):
        has_extra("plot", "scipy")


# ---- the OpInfo table's NumPy references against SciPy -------------------------------------

def _scipy_references():
    special = import_extra("test", "scipy.special")
    linalg = import_extra("test", "scipy.linalg")

    def lu(a):
        factors, piv = linalg.lu_factor(a + 3.0 * np.eye(a.shape[-1]))
        return factors, piv + 1

    return {
        "erf": special.erf, "logistic": special.expit,
        "silu": lambda x: x * special.expit(x),
        "gelu": lambda x, approximate=False: (
            None if approximate else 0.5 * x * (1 + special.erf(x / np.sqrt(2)))),
        "logsumexp": lambda x, axis=None, keepdim=False: special.logsumexp(
            x, axis=axis if axis is None or isinstance(axis, int) else tuple(axis),
            keepdims=keepdim),
        "softmax": lambda x, axis=-1: special.softmax(x, axis=axis),
        "log_softmax": lambda x, axis=-1: special.log_softmax(x, axis=axis),
        "linalg.lu": lu, "linalg.lu_unpack": linalg.lu,
        "linalg.matrix_exp": lambda a: np.stack(
            [linalg.expm(m) for m in a.reshape(-1, *a.shape[-2:])]).reshape(a.shape),
    }


@pytest.mark.parametrize("name", ["erf", "logistic", "silu", "gelu", "logsumexp", "softmax",
                                  "log_softmax", "linalg.lu", "linalg.lu_unpack",
                                  "linalg.matrix_exp"])
def test_numpy_references_match_scipy(name):
    """The table's references were SciPy's; they are NumPy's now, so that it runs on a bare
    install. On every sample of the entry they agree with SciPy to float64 rounding."""
    scipy_ref = _scipy_references()[name]
    info = OPS_BY_NAME[name]
    for sample in info.samples():
        want = scipy_ref(*sample.args, **sample.kwargs)
        if want is None:
            continue
        got = info.ref(*sample.args, **sample.kwargs)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=1e-13, atol=1e-15, err_msg=f"{name} {sample!r}")


def test_numpy_references_are_stable_at_extremes():
    x = np.array([-800.0, -30.0, 0.0, 30.0, 800.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        sig = OPS_BY_NAME["logistic"].ref(x)
        lse = OPS_BY_NAME["logsumexp"].ref(np.stack([x, x]), axis=1)
        soft = OPS_BY_NAME["softmax"].ref(np.array([1000.0, 1001.0]))
    np.testing.assert_allclose(sig, [0.0, 1 / (1 + math.exp(30)), 0.5, 1 / (1 + math.exp(-30)),
                                     1.0], rtol=1e-15)
    np.testing.assert_allclose(lse, [800.0 + math.log1p(2 * math.exp(-770))] * 2, rtol=1e-15)
    np.testing.assert_allclose(soft, [1 / (1 + math.e), math.e / (1 + math.e)], rtol=1e-15)


# ---- what runs without SciPy ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_erf_without_scipy_keeps_arrays_for_0d_inputs(dtype):
    """The NumPy backend's erf without SciPy (math.erf per element through np.frompyfunc)
    returned a Python float for a 0-d input, and ``.astype`` on it failed. The fallback of
    any ``"scipy.special:<name>"`` reference is that per-element kernel."""
    from primflow.backends import references

    erf = references.per_element(math.erf)
    out = erf(np.array(0.5, dtype=dtype))
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype) and out.shape == ()
    assert float(out) == pytest.approx(math.erf(0.5), rel=1e-7)
    many = erf(np.array([[-1.0, 2.0]], dtype=dtype))
    np.testing.assert_allclose(many, [[math.erf(-1.0), math.erf(2.0)]], rtol=1e-7)


def test_a_reference_to_a_missing_library_falls_back_or_names_the_extra(monkeypatch):
    """``"scipy.special:<name>"`` references resolve without SciPy: to the math module's
    function per element where it has one, else to a kernel naming the extra."""
    import builtins

    from primflow.backends import references

    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.split(".")[0] == "scipy":
            raise ImportError("no scipy here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    monkeypatch.setattr(references.importlib, "import_module",
                        lambda name: no_scipy(name))
    erfc = references.resolve("erfc", "scipy.special:erfc")
    np.testing.assert_allclose(erfc(np.array([0.5, 2.0])), [math.erfc(0.5), math.erfc(2.0)])
    kernel = references.resolve("i0", "scipy.special:i0e")
    with pytest.raises(ImportError, match=r"pip install 'primflow\[fast\]'"):
        kernel(np.array([1.0]))


def test_lu_without_scipy_names_the_extra(monkeypatch):
    from primflow.backends import numpy_numerics

    monkeypatch.setattr(numpy_numerics, "_scipy_linalg", None)
    with pytest.raises(pf.core.primitive.PrimitiveError, match=r"primflow\[fast\]"):
        pf.linalg.lu(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]]))


def test_darcy_sparse_solver_without_scipy_names_the_extra(monkeypatch):
    import sys

    from primflow.science.neural_operators import data

    monkeypatch.setitem(sys.modules, "scipy.sparse", None)  # import scipy.sparse fails
    a = np.full((5, 5), 3.0)
    with pytest.raises(ImportError, match=r"primflow\[fast\].*solver='cg'"):
        data.darcy_solve(a, solver="sparse")
    assert np.isfinite(data.darcy_solve(a, solver="cg")).all()
