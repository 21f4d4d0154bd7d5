"""The public surface (docs/architecture.md, "Public surface"): ``primflow.__all__`` lists
exactly the public names, no submodule is leaked under another name, every alias comes
from the one table in ops/aliases.py, and every public function and class has a docstring
with an example (run by the doctests, pyproject's ``--doctest-modules``)."""

import inspect
import pathlib
import sys
import types

import pytest

import primflow as pf
import primflow.nn.functional as F
from primflow.ops import aliases

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMESPACES = {"primflow": pf, "primflow.nn": pf.nn, "primflow.nn.functional": F,
              "primflow.optimizer": pf.optimizer, "primflow.optimizer.lr": pf.optimizer.lr,
              "primflow.autograd": pf.autograd, "primflow.regularizer": pf.regularizer,
              "primflow.nn.initializer": pf.nn.initializer, "primflow.static.nn": pf.static.nn}


def test_all_lists_exactly_the_public_names():
    missing = sorted(n for n in pf.__all__ if not hasattr(pf, n))
    assert not missing, f"in primflow.__all__ but not defined: {missing}"
    assert len(set(pf.__all__)) == len(pf.__all__)
    unlisted = []
    for name, value in vars(pf).items():
        if name.startswith("_") or name in pf.__all__:
            continue
        # a subpackage is an attribute of its package under its own name: not a leak
        if isinstance(value, types.ModuleType) and sys.modules.get(f"primflow.{name}") is value:
            continue
        unlisted.append(name)
    assert not unlisted, (f"public names of primflow missing from __all__ (add them in "
                          f"primflow/__init__.py, or make them private): {sorted(unlisted)}")


def test_no_module_is_exported_under_another_name():
    # pf.math used to be primflow.ops.math (a star import); pf.dtypes primflow.core.dtypes
    for name in ("math", "dtypes", "activation", "creation", "manipulation", "reduction",
                 "tensor_methods", "complex_ops", "copying", "decompositions", "indexing"):
        value = getattr(pf, name, None)
        assert value is None or (isinstance(value, types.ModuleType)
                                 and value.__name__ == f"primflow.{name}"), name
    intended = {"autograd", "nn", "optimizer", "regularizer", "static", "fft", "linalg", "amp"}
    for name in pf.__all__:
        if isinstance(getattr(pf, name), types.ModuleType):
            assert name in intended, f"pf.{name} is a module: a namespace on purpose?"


def test_star_import_gives_all():
    namespace = {}
    exec("from primflow import *", namespace)  # noqa: S102 - what users write
    assert set(namespace) - {"__builtins__"} == set(pf.__all__)


@pytest.mark.parametrize("alias,canonical,follows", aliases.ALIASES,
                         ids=[a for a, _, _ in aliases.ALIASES])
def test_every_alias_is_its_canonical_object(alias, canonical, follows):
    assert getattr(pf, alias) is getattr(pf, canonical)
    assert alias in pf.__all__ and canonical in pf.__all__
    assert follows


def test_aliases_are_made_only_from_the_table():
    """No module outside the table binds a second public name to an op (``cat = concat``
    was in manipulation.py): every pair of names for one object in pf is in the table."""
    table = {alias: canonical for alias, canonical, _ in aliases.ALIASES}
    by_object = {}
    for name in pf.__all__:
        value = getattr(pf, name)
        if callable(value) and not isinstance(value, type):
            by_object.setdefault(id(value), []).append(name)
    untabled = []
    for names in by_object.values():
        canonical = [n for n in names if n not in table]
        if len(names) > 1 and not (len(canonical) == 1 and all(
                table[n] == canonical[0] for n in names if n in table)):
            untabled.append(names)
    assert not untabled, f"names sharing one object outside ops/aliases.py: {untabled}"


def test_the_two_hessians_document_each_other():
    assert "pf.autograd.hessian" in pf.hessian.__doc__
    assert "pf.hessian" in pf.autograd.hessian.__doc__


def test_doctests_run_over_primflow():
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    options = options["ini_options"]
    assert "primflow" in options["testpaths"] and "--doctest-modules" in options["addopts"]


def test_the_architecture_page_shows_the_alias_table():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert aliases.as_markdown() in page, (
        "docs/architecture.md's alias table differs from primflow/ops/aliases.py: paste "
        "the output of primflow.ops.aliases.as_markdown() between its alias-table markers")


def test_the_readme_links_the_architecture_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/architecture.md" in readme and "shared/DESIGN.md" not in readme
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for path in ("core/primitive.py", "core/tensor.py", "ops/aliases.py", "ir/passes/fuse.py",
                 "backends/base.py", "testing/opinfo/elementwise.py", "prims/families.py"):
        assert path in page and (ROOT / "primflow" / path).exists(), path


def _public_callables():
    seen = {}
    for ns_name, ns in NAMESPACES.items():
        names = getattr(ns, "__all__", None)
        if names is None:  # a module without __all__: the functions and classes it defines
            names = [n for n, v in vars(ns).items() if not n.startswith("_")
                     and getattr(v, "__module__", None) == ns.__name__]
        for name in names:
            value = getattr(ns, name)
            if callable(value) and not isinstance(value, types.ModuleType):
                seen.setdefault(id(value), (f"{ns_name}.{name}", value))
    return sorted(seen.values(), key=lambda item: item[0])


def test_every_public_function_and_class_has_an_example():
    """Each has a ``>>>`` example in its docstring, which the doctest run executes."""
    items = _public_callables()
    assert len(items) > 200, len(items)
    missing = [name for name, value in items if ">>>" not in (inspect.getdoc(value) or "")]
    assert not missing, ("public functions/classes without a docstring example (add "
                         "'Example:' with a >>> line): " + ", ".join(missing))


def test_readme_states_the_number_of_primitives_the_registry_has():
    """README's count of primitives comes from the registry: adding a primitive without
    updating README fails here, naming both numbers."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"`pf\.primitives\(\)`, (\d+) today", readme)
    assert found, "README.md no longer states `pf.primitives()`, N today"
    assert int(found.group(1)) == len(pf.primitives()), (
        f"README.md says {found.group(1)} primitives, pf.primitives() has "
        f"{len(pf.primitives())}: update the number in README.md")
