"""``primflow launch -n N [--] script.py args`` / ``python -m primflow.distributed.launch``:
start N processes of a script under MPI.

It runs ``mpiexec -n N python -m mpi4py script.py args``: ``-m mpi4py`` makes an uncaught
exception on any rank call ``MPI_Abort``, so the whole job ends with that rank's traceback
instead of the others waiting forever. The directory of the running Python is put first on
``PATH`` (the MPICH wheel installs ``mpiexec`` there, and MPI needs it to find itself).
``-m module`` runs a module instead of a script (``primflow launch -n 2 -m primflow demo
plate``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys

from ..backends.communicator import MPI_EXTRA_HINT, find_mpiexec


class LaunchError(RuntimeError):
    """The job cannot be started (MPI missing, no mpiexec, bad arguments)."""


def launch_command(nprocs, program, python=None):
    """The command line that starts ``nprocs`` ranks of ``program`` (a list: a script and
    its arguments, or ``["-m", module, ...]``).

    Example:
        >>> cmd = launch_command(2, ["train.py", "--steps", "5"])  # doctest: +SKIP
        >>> cmd[1:3], cmd[-3:]  # doctest: +SKIP
        (['-n', '2'], ['train.py', '--steps', '5'])
    """
    if nprocs < 1:
        raise LaunchError(f"the number of processes must be >= 1, got {nprocs}")
    if not program:
        raise LaunchError("name the script to run: primflow launch -n N script.py [args]")
    if importlib.util.find_spec("mpi4py") is None:
        raise LaunchError(f"primflow launch needs MPI, but mpi4py is not installed; "
                          f"{MPI_EXTRA_HINT}")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise LaunchError(f"primflow launch needs an MPI launcher, but no mpiexec was found "
                          f"next to {sys.executable} or on PATH; {MPI_EXTRA_HINT} (or put your "
                          f"MPI's bin directory on PATH)")
    if program[0] == "primflow" and not os.path.isfile("primflow"):
        program = ["-m", "primflow", *program[1:]]  # the primflow command itself
    python = python or sys.executable
    return [mpiexec, "-n", str(nprocs), python, "-m", "mpi4py", *program]


def launch_env():
    """The environment for the ranks: the running Python's directory first on PATH."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def run(nprocs, program, timeout=None) -> int:
    """Starts the job and waits for it; returns its exit status.

    Example:
        >>> run(2, ["train.py"])  # doctest: +SKIP
        0
    """
    cmd = launch_command(nprocs, list(program))
    try:
        return subprocess.run(cmd, env=launch_env(), timeout=timeout).returncode
    except KeyboardInterrupt:
        return 130


def add_arguments(parser):
    """The launcher's options (shared by ``primflow launch``)."""
    parser.add_argument("-n", "--nprocs", "--nproc_per_node", dest="nprocs", type=int,
                        default=2, help="number of processes (default 2)")
    parser.add_argument("program", nargs=argparse.REMAINDER,
                        help="script.py [args...], or -m module [args...]")


def main(argv=None) -> int:
    """``python -m primflow.distributed.launch -n N script.py args``."""
    parser = argparse.ArgumentParser(prog="python -m primflow.distributed.launch",
                                     description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    try:
        return run(args.nprocs, program)
    except LaunchError as e:
        print(f"primflow launch: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
