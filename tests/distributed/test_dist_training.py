"""Autodiff, training, the seed demos and faults under mpiexec (each run has a timeout)."""

import time

import pytest

from mpi_helpers import check, run_mpi


def test_autodiff_1_2_4_ranks():
    for n in (1, 2, 4):
        assert "autodiff ok" in check(run_mpi(n, "autodiff.py"))


def test_seed_demo_same_losses_on_1_and_2_ranks():
    one = check(run_mpi(1, "seed_demo.py"))
    two = check(run_mpi(2, "seed_demo.py"))
    assert one.count("loss") == 8 and two.count("loss") == 8

    def losses(text):
        return [float(line.split()[-1]) for line in text.splitlines() if "loss" in line]

    # float32: the sharded sums add in another order
    assert losses(one) == pytest.approx(losses(two), rel=1e-5)


def test_hybrid_two_meshes_4_ranks():
    out = check(run_mpi(4, "hybrid.py"))
    assert out.count("hybrid ok") == 2  # printed by the two ranks of the second mesh


def test_a_raising_rank_ends_the_job_with_its_traceback():
    start = time.monotonic()
    proc = run_mpi(2, "faults.py", "raise", timeout=60)
    assert time.monotonic() - start < 10
    assert proc.returncode != 0
    assert "rank one failed on purpose" in proc.stderr
    assert "not reached" not in proc.stdout


def test_a_killed_rank_ends_the_others():
    start = time.monotonic()
    proc = run_mpi(2, "faults.py", "kill", timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode != 0


@pytest.mark.parametrize("mode, words", [
    ("mismatch", ["ranks disagree", "rank 0: [4, 2]", "rank 1: [5, 2]"]),
    ("placements", ["ranks disagree", "Shard(dim=0)", "Shard(dim=1)"]),
    ("collective", ["ranks disagree", "rank 0: shape [3]", "rank 1: shape [4]"]),
])
def test_mismatched_ranks_give_a_clear_error(mode, words):
    proc = run_mpi(2, "faults.py", mode, timeout=60)
    assert proc.returncode != 0
    for w in words:
        assert w in proc.stderr, proc.stderr
