"""Layering (docs/architecture.md, "Layers"): lower layers never import higher ones, only
primflow/backends/ touches NumPy, no module uses another package's private names, and no
layer above core attaches attributes to Tensor. Checked by parsing every module with ast."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "primflow"

# package (or top-level module) -> rank; a package imports only packages of lower rank.
# ir and compiler sit below transforms: pf.jit (a transform) traces to the IR and compiles
# it; io (datasets, loaders) sits beside nn and may not import it. A package missing here
# counts as top-level (it may import anything listed, and no listed package may import it).
LAYERS = {
    "core": 0, "backends": 1, "prims": 2, "ops": 3, "autodiff": 4, "ir": 5, "compiler": 6,
    "transforms": 7, "autograd": 8, "static": 8, "serialization": 8, "distributed": 8,
    "amp": 8, "device": 8, "incubate": 8,
    "nn": 9, "io": 9, "optimizer": 10, "science": 11, "testing": 11, "compat": 11, "cli": 12,
    "__main__": 13,
}
TOP = max(LAYERS.values()) + 1
CORE_CLASSES = {"Tensor", "Tracer"}  # core's classes no other layer may add attributes to


def _modules():
    files = sorted(ROOT.rglob("*.py"))
    assert files, f"no modules found under {ROOT}"
    return files


def _package_of(path, root=ROOT):
    """First component under primflow/ ('' for primflow/__init__.py), without '.py'."""
    parts = path.relative_to(root).parts
    return "" if parts == ("__init__.py",) else parts[0].removesuffix(".py")


def _resolve(path, node, root=ROOT):
    """The absolute module an ``ImportFrom`` node names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    package = parts[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path, root=ROOT):
    """(module, name, node) for every import in ``path``: ``from m import n`` gives (m, n),
    ``import m`` gives (m, None)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, None, alias) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(path, node, root)
            out.extend((mod, alias.name, alias) for alias in node.names)
    return tree, out


def _imported_modules(path):
    """Absolute dotted names of everything ``path`` imports (``from m import n`` gives both
    ``m`` and ``m.n``, since ``n`` may be a submodule)."""
    names = []
    for mod, name, _ in _imports(path)[1]:
        names.append(mod)
        if name is not None:
            names.append(f"{mod}.{name}")
    return names


def _primflow_subpackage(name):
    parts = name.split(".")
    if parts[0] != "primflow" or len(parts) < 2:
        return None
    return parts[1]


def _is_private(name):
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted):
    rel = pathlib.Path(*dotted.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def test_the_resolver_sees_relative_imports():
    # guard against a vacuous pass: primitive.py imports core siblings relatively
    names = _imported_modules(ROOT / "core" / "primitive.py")
    assert "primflow.core.state" in names
    assert _imported_modules(ROOT / "ops" / "math.py"), "ops/math.py imports nothing?"


def test_the_code_generators_live_in_the_compiler():
    # they read the IR: a backend is a table of kernels (backends/ sits below ir/)
    for name in NUMPY_CODEGEN:
        assert (ROOT / name).exists(), name
    assert not list((ROOT / "backends").glob("*codegen*"))


@pytest.mark.parametrize("layer", sorted(k for k in LAYERS if k != "__main__"))
def test_import_direction(layer):
    files = [p for p in _modules() if _package_of(p) == layer]
    if layer not in ("core", "backends", "prims", "ops", "autodiff", "ir", "compiler",
                     "transforms", "nn", "optimizer", "autograd", "serialization"):
        if not files:
            pytest.skip(f"primflow/{layer} does not exist (yet)")
    assert files, f"no modules in primflow/{layer}"
    bad = []
    for path in files:
        for name in _imported_modules(path):
            sub = _primflow_subpackage(name)
            if sub is None or sub == layer:
                continue
            if LAYERS.get(sub, TOP) >= LAYERS[layer]:
                bad.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not bad, ("imports against the layering (a package may import only lower "
                     "layers; see LAYERS in this file and docs/architecture.md):\n"
                     + "\n".join(bad))


def test_core_and_backends_are_self_contained():
    """core imports nothing else from primflow; backends imports only core."""
    allowed = {"core": {"core"}, "backends": {"core", "backends"}}
    bad = []
    for path in _modules():
        layer = _package_of(path)
        if layer not in allowed:
            continue
        for name in _imported_modules(path):
            sub = _primflow_subpackage(name)
            if sub is not None and sub not in allowed[layer]:
                bad.append(f"{path.relative_to(ROOT.parent)} imports {name}")
        # a name-based import (importlib, __import__) is an import too
        text = path.read_text(encoding="utf-8")
        for trick in ('import_module("primflow', "import_module('primflow",
                      '__import__("primflow', "__import__('primflow"):
            if trick in text:
                bad.append(f"{path.relative_to(ROOT.parent)} uses {trick}")
    assert not bad, "\n".join(bad)


def _private_uses(path, root=ROOT):
    """Where ``path`` uses a private name of another primflow package: imports of
    ``_name``s or from ``_module``s, and ``module._name`` on a module it imported."""
    own = _package_of(path, root)
    tree, imports = _imports(path, root)
    bad, foreign_modules = [], set()
    for mod, name, alias in imports:
        sub = _primflow_subpackage(mod)
        if sub is None or sub == own:
            continue
        where = f"{path.relative_to(root.parent)}:{alias.lineno}"
        parts = mod.split(".")[2:] + ([name] if name else [])
        private = [p for p in parts if _is_private(p)]
        if private:
            what = f"from {mod} import {name}" if name else f"import {mod}"
            bad.append(f"{where}: {what} (private: {', '.join(private)})")
        full = f"{mod}.{name}" if name else mod
        if _is_module(full):
            foreign_modules.add(alias.asname or (name if name else mod.split(".")[0]))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _is_private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in foreign_modules):
            bad.append(f"{path.relative_to(root.parent)}:{node.lineno}: "
                       f"{node.value.id}.{node.attr}")
    return bad


def test_the_private_name_check_is_not_vacuous(tmp_path):
    root = tmp_path / "primflow"
    (root / "nn").mkdir(parents=True)
    probe = root / "nn" / "probe.py"
    probe.write_text("from ..ops._fused import call\nfrom ..autodiff.tape import "
                     "_saved\nfrom ..core import random\nrandom._SEED\n", encoding="utf-8")
    found = _private_uses(probe, root)
    assert len(found) == 3, found


def test_no_private_names_across_packages():
    """A package's internal API for the others is its non-underscore names (the tape's
    ``apply_vjp``, ``core.random.get_state``, ``ops.helpers.as_tensor``, ...), never ``_name``s
    or ``_modules``. Tensor's few internal attributes (``_value``, ``_node``, ``_shape``,
    ``_version``, ``_wrap``) are documented in core/tensor.py as that API."""
    bad = []
    for path in _modules():
        bad.extend(_private_uses(path))
    assert not bad, "private names used across packages:\n" + "\n".join(bad)


# Tensor's and Tracer's internal attributes that other layers may use, documented as such in
# core/tensor.py's and core/trace.py's docstrings
CORE_INTERNAL_API = {"_value", "_shape", "_node", "_version", "_wrap", "_set_value", "_trace",
                     "_init_tracer", "_check_inplace"}


def test_only_the_documented_internals_of_core_classes_are_used_outside_core():
    import inspect

    import primflow.core.primitive
    import primflow.core.state
    import primflow.core.tensor
    import primflow.core.trace

    private = set()
    modules = (primflow.core.tensor, primflow.core.trace, primflow.core.primitive,
               primflow.core.state)
    for module in modules:
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                names = list(vars(cls)) + list(getattr(cls, "__slots__", ()))
                private |= {n for n in names if _is_private(n)}
    bad = []
    for path in _modules():
        if _package_of(path) == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and node.attr not in CORE_INTERNAL_API
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))):
                bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: .{node.attr}")
    assert not bad, ("private attributes of core classes used outside core (use a public "
                     "API, or document the name as internal API in core):\n" + "\n".join(bad))
    documented = (primflow.core.tensor.__doc__ or "") + (primflow.core.trace.Tracer.__doc__ or "")
    assert all(n in documented for n in CORE_INTERNAL_API), "undocumented internal API"


def _core_class_patches(path, root=ROOT):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set(CORE_CLASSES)  # and what they are imported as (Tensor as _Tensor)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname for a in node.names if a.name in CORE_CLASSES and a.asname}
    bad = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id in names):
                bad.append(f"{path.relative_to(root.parent)}:{node.lineno}: "
                           f"{t.value.id}.{t.attr} = ...")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "delattr") and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id in names):
            bad.append(f"{path.relative_to(root.parent)}:{node.lineno}: "
                       f"{node.func.id}({node.args[0].id}, ...)")
    return bad


def test_nothing_patches_tensor_from_above():
    """Tensor's methods are declared in core/tensor.py (see ``OP_METHODS`` there); no
    higher layer assigns attributes onto Tensor or Tracer."""
    bad = []
    for path in _modules():
        if _package_of(path) != "core":
            bad.extend(_core_class_patches(path))
    assert not bad, "attributes set on core classes outside core:\n" + "\n".join(bad)


def test_core_names_higher_modules_only_in_its_deferred_method_tables():
    """core/tensor.py declares which higher module implements each Tensor method (looked up
    by name on first use); no other string in core names a primflow module."""
    import re

    from primflow.core.tensor import DEFERRED_METHODS

    allowed = set(DEFERRED_METHODS)
    bad = []
    for path in _modules():
        if _package_of(path) != "core":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and re.fullmatch(r"primflow(\.\w+)+", node.value)
                    and not node.value.startswith("primflow.core")
                    and node.value not in allowed):
                bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r}")
    assert not bad, "\n".join(bad)


def test_deferred_tensor_methods_match_their_implementations():
    import importlib

    import primflow  # noqa: F401 - loads every layer
    from primflow.core.tensor import DEFERRED_METHODS, Tensor
    from primflow.core.trace import Tracer

    for module, names in DEFERRED_METHODS.items():
        table = importlib.import_module(module).TENSOR_METHODS
        assert sorted(names) == sorted(table), (
            f"core/tensor.py's DEFERRED_METHODS[{module!r}] and {module}.TENSOR_METHODS "
            f"differ: declared only: {sorted(set(names) - set(table))}, implemented only: "
            f"{sorted(set(table) - set(names))}")
        for name in names:
            assert hasattr(Tensor, name)
    tracer_table = importlib.import_module("primflow.ops.tensor_methods").TRACER_METHODS
    for name in tracer_table:
        assert name in vars(Tracer) or getattr(Tracer, name) is tracer_table[name]


def test_the_patch_check_is_not_vacuous(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from ..core.tensor import Tensor as _T\nTensor.foo = 1\n"
                     "setattr(Tracer, 'bar', 2)\n_T.baz = 3\n", encoding="utf-8")
    assert len(_core_class_patches(probe, tmp_path)) == 3


# the code generators read the IR (so they live in compiler/) and write NumPy/numba source
NUMPY_CODEGEN = {"compiler/numpy_codegen.py", "compiler/numba_codegen.py",
                 "compiler/numba_worker.py"}
# the FNO data generators: PDE solvers producing training data with numpy.fft,
# never differentiated or traced
NUMPY_CODEGEN |= {"science/neural_operators/data.py"}
# whole-loop numba kernels for scan/while
NUMPY_CODEGEN |= {"compiler/numba_loops.py"}


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
