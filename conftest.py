"""Test-session settings, for tests/ and the doctests of primflow/ (pyproject's
``--doctest-modules``): pf.jit's numba kernels (when numba is installed) go to a fresh
temporary cache folder, not the user's ~/.cache/primflow, and every test session compiles
them anew (so the compile and background-compile paths are what is tested). Modules that
import an optional dependency when imported are not collected for doctests without it."""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import tempfile

import primflow as pf

_CACHE = tempfile.mkdtemp(prefix="primflow-test-cache-")
pf.config.cache_dir = _CACHE

# module -> the optional package it imports at import time
_NEEDS = {"primflow/testing/opinfo.py": "scipy"}
collect_ignore = [path for path, package in _NEEDS.items()
                  if importlib.util.find_spec(package) is None]


_TESTS = pathlib.Path(__file__).resolve().parent / "tests"


def pytest_ignore_collect(collection_path, config):
    """--doctest-modules collects every .py file; under tests/ only the test files (and
    conftest.py) are collected, not the helper scripts (the distributed tests run those
    under mpiexec: importing one would run it)."""
    path = pathlib.Path(collection_path)
    if (path.suffix == ".py" and _TESTS in path.parents and not path.name.startswith("test_")
            and path.name != "conftest.py"):
        return True
    return None


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_CACHE, ignore_errors=True)
