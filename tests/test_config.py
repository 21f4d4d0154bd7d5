"""pf.config and pf.jit's options: every switch is an option with a fixed default, nothing
reads PRIMFLOW_* environment variables, and pf.jit(f, backend=, tiered=, blocking=)
overrides the config for one function."""

import ast
import pathlib

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import requires_extra
from primflow.core.config import Config

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_nothing_in_primflow_names_a_primflow_environment_variable():
    bad = []
    for path in sorted((ROOT / "primflow").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and "PRIMFLOW_" in node.value):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "PRIMFLOW_* environment variables (use pf.config):\n" + "\n".join(bad)


def test_the_defaults_do_not_depend_on_the_environment(monkeypatch):
    for name in ("PRIMFLOW_JIT_BACKEND", "PRIMFLOW_JIT_TIERED", "PRIMFLOW_JIT_BLOCKING",
                 "PRIMFLOW_BLAS"):
        monkeypatch.setenv(name, "0")
    monkeypatch.setenv("PRIMFLOW_CACHE_DIR", "/somewhere/else")
    options = Config()
    assert options.as_dict() == {
        "jit_backend": "auto", "jit_tiered": True, "jit_blocking": True,
        "jit_block_bytes": None, "blas": "auto", "jit_max_trace_ops": 100_000,
        "cache_dir": str(pathlib.Path.home() / ".cache" / "primflow"),
        "dist_timeout": 1800.0}


def test_options_are_checked_when_set():
    options = Config()
    with pytest.raises(ValueError, match="jit_backend must be one of"):
        options.jit_backend = "gpu"
    with pytest.raises(TypeError, match="jit_tiered must be True or False"):
        options.jit_tiered = "0"
    with pytest.raises(ValueError, match="positive int"):
        options.jit_block_bytes = -1
    with pytest.raises(AttributeError, match="no option 'jit_backnd'; the options are"):
        options.jit_backnd = "numpy"
    assert options.jit_backend == "auto" and options.jit_tiered is True


def test_override_restores_the_previous_values_even_after_an_error():
    with pytest.raises(RuntimeError):
        with pf.config.override(jit_backend="numpy", jit_blocking=False):
            assert (pf.config.jit_backend, pf.config.jit_blocking) == ("numpy", False)
            raise RuntimeError
    assert (pf.config.jit_backend, pf.config.jit_blocking) == ("auto", True)


def _rowwise(x):
    return pf.tanh(x * 2.0) * x + 1.0


def _executable(jitted, x):
    out = jitted(x)
    (entry,) = jitted._cache.values()
    return out, entry.executable


def test_jit_blocking_option_and_config(monkeypatch):
    from primflow.compiler import _pipeline

    monkeypatch.setattr(_pipeline, "BLOCK_BYTES", 4096)
    x = pf.to_tensor(np.linspace(0, 1, 96 * 8).reshape(96, 8))
    want = _rowwise(x).numpy()
    out, exe = _executable(pf.jit(_rowwise, backend="numpy"), x)
    assert repr(exe).startswith("BlockedExecutable")
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-14)
    out, exe = _executable(pf.jit(_rowwise, backend="numpy", blocking=False), x)
    assert repr(exe).startswith("Executable")
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-14)
    with pf.config.override(jit_blocking=False):
        _, exe = _executable(pf.jit(_rowwise, backend="numpy"), x)
    assert repr(exe).startswith("Executable")
    # the explicit argument wins over the config
    with pf.config.override(jit_blocking=False):
        _, exe = _executable(pf.jit(_rowwise, backend="numpy", blocking=True), x)
    assert repr(exe).startswith("BlockedExecutable")
    # the block budget is an option too: a budget above the program's size: no blocks
    with pf.config.override(jit_block_bytes=1 << 30):
        _, exe = _executable(pf.jit(_rowwise, backend="numpy"), x)
    assert repr(exe).startswith("Executable")


def test_jit_backend_from_the_config():
    x = pf.to_tensor(np.linspace(0, 1, 6))
    with pf.config.override(jit_backend="interpret"):
        out, exe = _executable(pf.jit(_rowwise), x)
    assert exe.backend == "interpret"
    np.testing.assert_allclose(out.numpy(), _rowwise(x).numpy(), rtol=1e-14)
    _, exe = _executable(pf.jit(_rowwise, backend="numpy"), x)
    assert exe.backend == "numpy"


@requires_extra("jit")
def test_jit_tiered_false_compiles_numba_kernels_in_the_first_call(tmp_path, monkeypatch):
    from primflow.compiler import numba_codegen

    monkeypatch.setattr(pf.config, "cache_dir", str(tmp_path))  # nothing cached yet
    monkeypatch.setattr(numba_codegen, "AUTO_MIN_ELEMENTS", 1)

    def f(x, y):
        return x * y + x * 3.0 - y

    x = pf.to_tensor(np.linspace(0, 1, 64))
    y = pf.to_tensor(np.linspace(1, 2, 64))
    jitted = pf.jit(f, backend="auto", tiered=False, blocking=False)
    out = jitted(x, y)
    (entry,) = jitted._cache.values()
    assert entry.executable.kernels and not entry.executable.compiling
    np.testing.assert_allclose(out.numpy(), f(x, y).numpy(), rtol=1e-12, atol=1e-15)
