"""Test-session settings, for tests/ and the doctests of primflow/ (pyproject's
``--doctest-modules``): pf.jit's numba kernels (when numba is installed) go to a fresh
temporary cache folder, not the user's ~/.cache/primflow, and every test session compiles
them anew (so the compile and background-compile paths are what is tested). Tests that
take an OpInfo entry whose op needs an optional extra skip without it (naming the extra);
other tests name theirs with ``primflow.testing.extras.requires_extra``."""

from __future__ import annotations

import pathlib
import re
import shutil
import tempfile

import pytest

import primflow as pf
from primflow.testing.extras import EXTRAS, has_extra, skip_reason
from primflow.testing.opinfo import OpInfo

_CACHE = tempfile.mkdtemp(prefix="primflow-test-cache-")
pf.config.cache_dir = _CACHE

_TESTS = pathlib.Path(__file__).resolve().parent / "tests"


def pytest_addoption(parser):
    parser.addoption("--matrix", choices=("default", "full"), default="default",
                     help="the OpInfo dtype x mode x backend matrix (tests/test_opinfo_matrix.py): "
                          "'default' runs float64/float32 on every mode and backend and one "
                          "cell per extra dtype; 'full' runs every cell")


def pytest_ignore_collect(collection_path, config):
    """--doctest-modules collects every .py file; under tests/ only the test files (and
    conftest.py) are collected, not the helper scripts (the distributed tests run those
    under mpiexec: importing one would run it)."""
    path = pathlib.Path(collection_path)
    if (path.suffix == ".py" and _TESTS in path.parents and not path.name.startswith("test_")
            and path.name != "conftest.py"):
        return True
    return None


# a docstring saying "needs the ``fast`` extra"; an example importing an optional module
_NEEDS_EXTRA = re.compile(r"needs the ``([\w-]+)`` extra")
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.MULTILINE)
# optional module -> the extra that installs it (the first listed; "test" only for modules
# nothing else installs, such as array_api_strict)
_EXTRA_OF = {}
for _extra, _modules in sorted(EXTRAS.items(), key=lambda kv: kv[0] == "test"):
    for _module in _modules:
        _EXTRA_OF.setdefault(_module, _extra)


def _extras_needed(item):
    """The extras a collected test needs: those of the OpInfo entries it is parametrized
    with (``OpInfo.extras``), and for a docstring example, the extras its docstring names
    and those of the optional modules its example imports."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    needed = [e for value in params.values() if isinstance(value, OpInfo) for e in value.extras]
    if isinstance(item, pytest.DoctestItem):
        needed += _NEEDS_EXTRA.findall(item.dtest.docstring or "")
        for example in item.dtest.examples:
            needed += [_EXTRA_OF[m] for m in _IMPORT.findall(example.source) if m in _EXTRA_OF]
    return needed


def pytest_collection_modifyitems(config, items):
    """A test that needs an optional extra (see ``_extras_needed``) skips, naming it, where
    it is not installed; other tests mark theirs with ``requires_extra``."""
    for item in items:
        missing = [e for e in _extras_needed(item) if not has_extra(e)]
        if missing:
            item.add_marker(pytest.mark.skip(reason=skip_reason(missing[0])))


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_CACHE, ignore_errors=True)
