"""Autodiff, training, the seed demos and faults under mpiexec (each run has a timeout)."""

import json
import re
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


def test_to_static_compiles_the_step_with_collectives_as_ops():
    # losses equal to the eager step's; lower().as_text() shows all_gather, all_reduce and
    # reduce_scatter (tensor parallel) and all_reduce (data parallel); eval/predict too
    assert "to_static ok" in check(run_mpi(2, "to_static.py"))
    # a 2x2 mesh: data parallel x tensor parallel, collectives in the sub-groups
    assert "to_static 2d ok" in check(run_mpi(4, "to_static_2d.py"))


def test_jit_of_a_function_on_dtensors_compiles_with_collectives_2_ranks():
    # results equal the eager call's; the program shows the all_reduce; the layouts key the
    # cache; an argument that requires grad falls back to eager once noted, tape intact
    assert "jit on dtensors ok" in check(run_mpi(2, "jit_dtensor.py"))


def test_local_map_and_grad_placements_2_ranks():
    assert "local_map ok" in check(run_mpi(2, "local_map.py"))


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
    ("collective", ["ranks disagree", "rank 0: shape [3] float32", "rank 1: shape [4] float32"]),
    ("dtype", ["ranks disagree", "rank 0: shape [3] float32", "rank 1: shape [3] float64"]),
    ("recv_size", ["recv: rank 1 receives into a tensor of shape [5] float32",
                   "rank 0 sent a tensor of shape [4] float32"]),
    ("recv_dtype", ["shape [4] float64", "rank 0 sent a tensor of shape [4] float32"]),
    ("mesh_too_big", ["ProcessMesh(shape=[2, 2]", "has 4 processes", "world has 2 processes"]),
])
def test_mismatched_ranks_give_a_clear_error(mode, words):
    proc = run_mpi(2, "faults.py", mode, timeout=60)
    assert proc.returncode != 0
    for w in words:
        assert w in proc.stderr, proc.stderr
    assert "not reached" not in proc.stdout and "received" not in proc.stdout
    assert "Invalid rank" not in proc.stderr and "truncated" not in proc.stderr


def test_a_collective_another_rank_never_enters_times_out_on_every_rank():
    """Rank 1 is stuck in computation; rank 0 waits in all_reduce: after the timeout the
    job ends (rank 1 too) with a message naming the rank and the collective."""
    start = time.monotonic()
    proc = run_mpi(2, "faults.py", "timeout", timeout=60, env={"FAULT_TIMEOUT": "2"})
    assert time.monotonic() - start < 30  # rank 1 would sleep 60 s
    assert proc.returncode != 0
    assert "rank 0 waited 2 s in all_reduce over ranks [0, 1]" in proc.stderr, proc.stderr
    assert "pf.config.dist_timeout" in proc.stderr
    assert "not reached" not in proc.stdout


def test_a_rank_that_finishes_without_the_collective_ends_the_job_at_once():
    """No need to wait out the (default, 30 minute) timeout: the finished rank's exit
    notice fails the waiting one."""
    start = time.monotonic()
    proc = run_mpi(2, "faults.py", "finished", timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode != 0
    assert "rank 0 waits in all_reduce over ranks [0, 1], but rank(s) [1] finished" in \
        proc.stderr, proc.stderr


def test_checkpoint_saved_on_4_ranks_loads_on_2_and_1(tmp_path):
    folder = tmp_path / "ckpt"
    assert "saved" in check(run_mpi(4, "checkpoint.py", "save", folder))
    files = sorted(p.name for p in folder.iterdir())
    assert files[-1] == "metadata.json" and len(files) == 5
    assert [re.fullmatch(r"(\d)_[0-9a-f]{16}\.distcp", f).group(1) for f in files[:4]] == \
        ["0", "1", "2", "3"]
    assert "loaded" in check(run_mpi(2, "checkpoint.py", "load", folder))
    assert "loaded" in check(run_mpi(1, "checkpoint.py", "load", folder))
    (folder / "metadata.json").unlink()  # an interrupted save is refused, not half-read
    proc = run_mpi(1, "checkpoint.py", "load", folder)
    assert proc.returncode != 0 and "no metadata.json" in proc.stderr


def test_a_save_killed_on_one_rank_leaves_the_previous_checkpoint_whole(tmp_path):
    """Rank 1 dies while writing its archive after rank 0 wrote its own: the folder still
    loads, as the first save on every rank (before: rank 0's new block and rank 1's old one,
    silently). An archive of the interrupted save put in place of the first save's is
    refused, naming the file."""
    folder = tmp_path / "ckpt"
    proc = run_mpi(2, "checkpoint.py", "killed", folder, timeout=60)
    assert proc.returncode != 0 and "not reached" not in proc.stdout
    assert "first save whole" in check(run_mpi(2, "checkpoint.py", "check_first", folder))
    meta = json.loads((folder / "metadata.json").read_text())
    committed = {f["name"] for f in meta["files"]}
    stray = [p for p in folder.glob("0_*.distcp") if p.name not in committed]
    assert len(stray) == 1  # rank 0's archive of the interrupted save
    first = folder / sorted(n for n in committed if n.startswith("0_"))[0]
    first.write_bytes(stray[0].read_bytes())  # the mix the old format loaded silently
    proc = run_mpi(2, "checkpoint.py", "check_first", folder, timeout=60)
    assert proc.returncode != 0
    assert f"the archive {first.name} is not the one this save wrote" in proc.stderr, \
        proc.stderr


def test_a_training_run_is_checkpointed_whole_and_resumed(tmp_path):
    """Model (sharded and replicated parameters) and a plain Adam (moments and int step
    counts) saved with dist.save_state_dict, loaded into a fresh model and optimizer: the
    next losses are the ones the uninterrupted run had. (Not bit for bit: a moment that
    was Partial, a sum over ranks, is stored reduced, so its later arithmetic rounds
    differently in the last bit.) The worker also checks pf.save/pf.load of the sharded
    state dict."""
    folder = tmp_path / "ckpt"
    first = check(run_mpi(2, "resume.py", "train", folder))
    resumed = check(run_mpi(2, "resume.py", "resume", folder))
    want = [float(v) for v in first.split("losses")[1].split()]
    got = [float(v) for v in resumed.split("losses")[1].split()]
    assert len(want) == len(got) == 3
    for a, b in zip(want, got):
        assert abs(a - b) <= 1e-12 * abs(a), (want, got)


def test_plate_demo_data_parallel_matches_one_process(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from mpi_helpers import ROOT, mpi_command

    common = ["demo", "plate", "--quick", "--steps", "50", "--lbfgs-steps", "0",
              "--points", "64", "--no-plots", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    one = subprocess.run([sys.executable, "-m", "primflow", *common, "--eager",
                          "--out", str(tmp_path / "one")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert one.returncode == 0, one.stderr
    cmd = mpi_command(2, ["primflow", *common, "--distributed", "--out", str(tmp_path / "two")])
    from primflow.distributed.launch import launch_env

    two = subprocess.run(cmd, env={**launch_env(), "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert two.returncode == 0, two.stderr
    assert "data parallel on 2 process(es)" in two.stdout
    a = json.loads((tmp_path / "one" / "history.json").read_text())["loss"]
    b = json.loads((tmp_path / "two" / "history.json").read_text())["loss"]
    assert len(a) == len(b) == 50
    for (_, x), (_, y) in zip(a, b):
        assert abs(x - y) <= 1e-10 * abs(x)
    err = [json.loads((tmp_path / d / "summary.json").read_text())["relative_l2"]
           for d in ("one", "two")]
    assert abs(err[0] - err[1]) <= 1e-8 * err[0]


def test_distributed_demo_error_ends_every_rank(tmp_path):
    """A bad option in a distributed demo ends the job with the message, not a hang (the
    ranks joined the world first; an error on one would leave the other waiting)."""
    import os
    import subprocess

    from mpi_helpers import ROOT, mpi_command
    from primflow.distributed.launch import launch_env

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cmd = mpi_command(2, ["primflow", "demo", "plate", "--quick", "--distributed",
                          "--no-plots", "--out", str(blocker)])
    run = subprocess.run(cmd, env={**launch_env(), "PYTHONPATH": str(ROOT),
                                   "PATH": os.environ.get("PATH", "")},
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode != 0
    assert "exists and is not a folder" in run.stderr, run.stderr
