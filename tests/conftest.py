"""Test-session settings: pf.jit's numba kernels (when numba is installed) go to a fresh
temporary cache folder, not the user's ~/.cache/primflow, and every test session compiles
them anew (so the compile and background-compile paths are what is tested)."""

from __future__ import annotations

import shutil
import tempfile

import primflow as pf

_CACHE = tempfile.mkdtemp(prefix="primflow-test-cache-")
pf.config.cache_dir = _CACHE


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_CACHE, ignore_errors=True)
