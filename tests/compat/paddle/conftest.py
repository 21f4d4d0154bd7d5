"""The compat suite imports ``paddle``: put the alias package (alias/paddle, which only
re-exports primflow) first on sys.path, and seed NumPy as Paddle's test mains do."""

import pathlib
import sys

import numpy as np
import pytest

_ALIAS = str(pathlib.Path(__file__).resolve().parent / "alias")
if _ALIAS not in sys.path:
    sys.path.insert(0, _ALIAS)
for _name in [m for m in sys.modules if m == "paddle" or m.startswith("paddle.")]:
    del sys.modules[_name]  # an installed Paddle imported earlier must not be used


@pytest.fixture(autouse=True)
def _seeded():
    np.random.seed(2022)
    yield
