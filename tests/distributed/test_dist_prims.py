"""Every primitive under every placement combination on 1-D (2 ranks) and 2-D (4 ranks)
meshes matches the single-process result (values and gradients)."""

from primflow.prims.sharding import SHARDING_RULES

import primflow as pf

from mpi_helpers import check, run_mpi


def test_every_primitive_has_a_sharding_rule():
    missing = sorted(set(pf.primitives()) - set(SHARDING_RULES))
    assert not missing, f"primitives without a sharding rule in prims/sharding.py: {missing}"


def test_table_one_process():
    # a world of one: every mesh dim counts as size 1, the same script runs
    out = check(run_mpi(1, "prim_table.py", "1d"))
    assert "0 failures" in out


def test_table_1d_mesh_2_ranks():
    out = check(run_mpi(2, "prim_table.py", "1d"))
    assert "0 failures" in out


def test_table_2d_mesh_4_ranks():
    out = check(run_mpi(4, "prim_table.py", "2d", timeout=180))
    assert "0 failures" in out
