"""Import direction (DESIGN section 2): lower layers never import higher ones, and only
primflow/backends/ touches NumPy. Checked by parsing every module's imports with ast."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "primflow"

# layer -> packages it must never import (directly, relative or absolute)
FORBIDDEN = {
    "core": {"ops", "autodiff", "nn", "prims", "transforms", "ir", "compiler", "optimizer",
             "distributed", "science"},
    "backends": {"ops", "autodiff", "nn", "prims", "transforms", "ir", "compiler",
                 "optimizer", "distributed", "science"},
    "prims": {"ops", "autodiff", "nn", "transforms", "ir", "compiler", "optimizer",
              "distributed", "science"},
    "ops": {"autodiff", "nn", "transforms", "ir", "compiler", "optimizer", "distributed",
            "science"},
    # distributed tensors, collectives and data loading
    "distributed": {"science"},
    "io": {"science", "nn"},
}


def _modules():
    files = sorted(ROOT.rglob("*.py"))
    assert files, f"no modules found under {ROOT}"
    return files


def _package_of(path):
    return path.relative_to(ROOT).parts[0] if len(path.relative_to(ROOT).parts) > 1 else ""


def _imported_modules(path):
    """Absolute dotted names of everything ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names.append(mod)
            # `from . import ops` / `from .. import prims`: the names are submodules
            for alias in node.names:
                names.append(f"{mod}.{alias.name}")
    return names


def _primflow_subpackage(name):
    parts = name.split(".")
    if parts[0] != "primflow" or len(parts) < 2:
        return None
    return parts[1]


def test_the_resolver_sees_relative_imports():
    # guard against a vacuous pass: primitive.py imports core siblings relatively
    names = _imported_modules(ROOT / "core" / "primitive.py")
    assert "primflow.core.state" in names
    assert "primflow.backends" in names or "primflow.backends.get_backend" in names


def test_the_code_generators_live_in_the_compiler():
    # they read the IR: a backend is a table of kernels (backends/ sits below ir/)
    for name in NUMPY_CODEGEN:
        assert (ROOT / name).exists(), name
    assert not list((ROOT / "backends").glob("*codegen*"))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_import_direction(layer):
    bad = []
    files = [p for p in _modules() if _package_of(p) == layer]
    assert files, f"no modules in primflow/{layer}"
    for path in files:
        for name in _imported_modules(path):
            sub = _primflow_subpackage(name)
            if sub in FORBIDDEN[layer]:
                bad.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not bad, "imports against the layering (DESIGN section 2):\n" + "\n".join(bad)


# the code generators read the IR (so they live in compiler/) and write NumPy/numba source
NUMPY_CODEGEN = {"compiler/numpy_codegen.py", "compiler/numba_codegen.py",
                 "compiler/numba_worker.py"}
# the FNO data generators (issue 19): PDE solvers producing training data with numpy.fft,
# never differentiated or traced
NUMPY_CODEGEN |= {"science/neural_operators/data.py"}


def test_only_backends_import_numpy():
    bad = []
    for path in _modules():
        top = _package_of(path)
        if top in ("backends", "testing") or path.relative_to(ROOT).as_posix() in NUMPY_CODEGEN:
            continue
        for name in _imported_modules(path):
            if name.split(".")[0] == "numpy":
                bad.append(f"{path.relative_to(ROOT.parent)} imports {name}")
        # importlib / __import__ tricks count too
        text = path.read_text(encoding="utf-8")
        for trick in ('import_module("numpy', "import_module('numpy", '__import__("numpy',
                      "__import__('numpy"):
            if trick in text:
                bad.append(f"{path.relative_to(ROOT.parent)} uses {trick}")
    assert not bad, "only primflow/backends may import numpy:\n" + "\n".join(bad)
