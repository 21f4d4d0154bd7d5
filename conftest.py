"""Test-session settings, for tests/ and the doctests of primflow/ (pyproject's
``--doctest-modules``): pf.jit's numba kernels (when numba is installed) go to a fresh
temporary cache folder, not the user's ~/.cache/primflow, and every test session compiles
them anew (so the compile and background-compile paths are what is tested). Tests that
take an OpInfo entry whose op needs an optional extra skip without it (naming the extra);
other tests name theirs with ``primflow.testing.extras.requires_extra``."""

from __future__ import annotations

import pathlib
import shutil
import tempfile

import pytest

import primflow as pf
from primflow.testing.extras import has_extra, skip_reason
from primflow.testing.opinfo import OpInfo

_CACHE = tempfile.mkdtemp(prefix="primflow-test-cache-")
pf.config.cache_dir = _CACHE

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


def pytest_collection_modifyitems(config, items):
    """A test parametrized with an OpInfo entry whose op needs an extra (``OpInfo.extras``)
    skips, naming the extra, where it is not installed."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for value in params.values():
            missing = [e for e in getattr(value, "extras", ()) if isinstance(value, OpInfo)
                       and not has_extra(e)]
            if missing:
                item.add_marker(pytest.mark.skip(reason=skip_reason(missing[0])))


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_CACHE, ignore_errors=True)
