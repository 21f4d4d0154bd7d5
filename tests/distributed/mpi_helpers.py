"""Running worker scripts under mpiexec from pytest (skipped cleanly without MPI)."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from primflow.testing.extras import has_extra, skip_reason

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKERS = pathlib.Path(__file__).resolve().parent / "workers"


def mpi_command(n, program):
    """The launch command, or a skip when mpi4py or mpiexec is missing."""
    if not has_extra("mpi"):
        pytest.skip(skip_reason("mpi"))
    from primflow.distributed.launch import LaunchError, launch_command

    try:
        return launch_command(n, list(program))
    except LaunchError as e:
        pytest.skip(str(e))


def run_mpi(n, worker, *args, timeout=120, env=None):
    """Runs ``workers/<worker>`` on ``n`` ranks; returns the CompletedProcess."""
    script = worker if os.path.isabs(str(worker)) else str(WORKERS / worker)
    cmd = mpi_command(n, [script, *map(str, args)])
    from primflow.distributed.launch import launch_env

    full_env = launch_env()
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    try:
        return subprocess.run(cmd, env=full_env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{worker} on {n} ranks did not finish in {timeout} s:\n"
                             f"{e.stdout}\n{e.stderr}") from None


def check(proc):
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout
