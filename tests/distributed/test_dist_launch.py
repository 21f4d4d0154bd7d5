"""The launcher: Paddle's flags, and SIGTERM/SIGINT reaching every rank (no orphans)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from mpi_helpers import ROOT, WORKERS, mpi_command
from primflow.distributed import launch


def test_paddle_launch_flags_map_to_a_process_count():
    parser = __import__("argparse").ArgumentParser()
    launch.add_arguments(parser)

    def count(*argv):
        args = parser.parse_args([*argv, "train.py", "--lr", "1"])
        assert launch.program_of(args) == ["train.py", "--lr", "1"]
        return launch.process_count(args.nprocs, args.devices)

    assert count("--gpus", "0,1") == 2
    assert count("--devices", "0,1,2") == 3
    assert count("--nproc_per_node", "4") == 4
    assert count("-n", "3") == 3
    assert count() == 2
    assert count("--gpus", "0,1", "--nproc_per_node", "2") == 2
    with pytest.raises(launch.LaunchError, match="disagree"):
        count("--gpus", "0,1", "-n", "3")
    with pytest.raises(launch.LaunchError, match="comma-separated list of device ids"):
        count("--gpus", "gpu0")
    with pytest.raises(launch.LaunchError, match="twice"):
        count("--devices", "1,1")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum, flags", [(signal.SIGTERM, ["--gpus", "0,1"]),
                                           (signal.SIGINT, ["--nproc_per_node", "2"])])
def test_a_signal_to_the_launcher_ends_every_rank(signum, flags, tmp_path):
    mpi_command(2, ["x.py"])  # skips without MPI
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "primflow.distributed.launch", *flags,
         str(WORKERS / "sleeper.py"), str(tmp_path)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL)
    pids = []
    try:
        deadline = time.monotonic() + 60
        files = [tmp_path / f"rank{r}.pid" for r in range(2)]
        while not all(f.exists() for f in files) and time.monotonic() < deadline:
            assert proc.poll() is None, f"the job ended early ({proc.returncode})"
            time.sleep(0.1)
        for f in files:
            pid, size = f.read_text().split()
            assert size == "2"  # the flags started two ranks
            pids.append(int(pid))
        start = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=30)
        assert time.monotonic() - start < 30
        assert code == 128 + signum
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids), "a rank outlived the launcher"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        proc.wait()
