"""``primflow launch -n N [--] script.py args`` / ``python -m primflow.distributed.launch``:
start N processes of a script under MPI.

It runs ``mpiexec -n N python -m mpi4py script.py args``: ``-m mpi4py`` makes an uncaught
exception on any rank call ``MPI_Abort``, so the whole job ends with that rank's traceback
instead of the others waiting forever. The directory of the running Python is put first on
``PATH`` (the MPICH wheel installs ``mpiexec`` there, and MPI needs it to find itself).
``-m module`` runs a module instead of a script (``primflow launch -n 2 -m primflow demo
plate``).

Paddle's launch flags work too: ``--nproc_per_node N`` is ``-n N``, and a device list
(``--gpus "0,1"``, ``--devices "0,1"``) starts one process per device (primflow computes
on the CPU, so the list only sets the count), so ``python -m primflow.distributed.launch
--gpus "0,1" train.py`` runs as Paddle's line does.

SIGTERM and SIGINT (what ``timeout``, batch schedulers and Ctrl-C send) are forwarded to
every process of the job; a job that has not ended ``GRACE_S`` seconds later is killed, so
no rank outlives the launcher.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import time

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


GRACE_S = 10.0  # how long a signalled job may take to end before it is killed
_FORWARDED = (signal.SIGTERM, signal.SIGINT)


def _signal_job(proc, signum):
    """Sends ``signum`` to the job's process group (mpiexec, its proxies and the ranks)."""
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def run(nprocs, program, timeout=None) -> int:
    """Starts the job and waits for it; returns its exit status. SIGTERM/SIGINT received
    meanwhile go to every rank (see the module docstring); the status is then 128 + the
    signal's number.

    Example:
        >>> run(2, ["train.py"])  # doctest: +SKIP
        0
    """
    cmd = launch_command(nprocs, list(program))
    # its own session: the job is one process group the launcher can signal as a whole
    proc = subprocess.Popen(cmd, env=launch_env(), start_new_session=True)
    received = []

    def forward(signum, _frame):
        if not received:
            received.append((signum, time.monotonic()))
        _signal_job(proc, signum)

    previous = {}
    try:
        for signum in _FORWARDED:
            previous[signum] = signal.signal(signum, forward)
    except ValueError:  # not the main thread: the caller handles signals
        pass
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if received and now - received[0][1] > GRACE_S:
                _signal_job(proc, signal.SIGKILL)
            if deadline is not None and now > deadline:
                _signal_job(proc, signal.SIGTERM)
                received.append((signal.SIGTERM, now))
                deadline = None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if proc.poll() is None:  # the launcher itself failed: take the job with it
            _signal_job(proc, signal.SIGKILL)
            proc.wait()
    if received:
        return 128 + int(received[0][0])
    return code


def add_arguments(parser):
    """The launcher's options (shared by ``primflow launch``), Paddle's flags included."""
    parser.add_argument("-n", "--nprocs", "--nproc_per_node", dest="nprocs", type=int,
                        default=None, help="number of processes (default 2, or one per "
                                           "device of --gpus/--devices)")
    parser.add_argument("--gpus", "--devices", dest="devices", default=None,
                        help="Paddle's device list, e.g. \"0,1\": one process per device "
                             "(primflow computes on the CPU: the list sets the count)")
    parser.add_argument("program", nargs=argparse.REMAINDER,
                        help="script.py [args...], or -m module [args...]")


def process_count(nprocs=None, devices=None) -> int:
    """The number of processes from ``-n``/``--nproc_per_node`` and a device list.

    Example:
        >>> process_count(devices="0,1"), process_count(4), process_count()
        (2, 4, 2)
    """
    count = None
    if devices is not None:
        ids = [d.strip() for d in str(devices).split(",") if d.strip()]
        if not ids or not all(d.isdigit() for d in ids):
            raise LaunchError(f"--gpus/--devices takes a comma-separated list of device "
                              f"ids such as \"0,1\", got {devices!r}")
        if len(set(ids)) != len(ids):
            raise LaunchError(f"--gpus/--devices lists a device twice: {devices!r}")
        count = len(ids)
    if nprocs is not None:
        if count is not None and nprocs != count:
            raise LaunchError(f"-n/--nproc_per_node {nprocs} and --gpus/--devices {devices!r} "
                              f"({count} devices) disagree; give one of them")
        count = nprocs
    return 2 if count is None else count


def program_of(args):
    """The script and its arguments from parsed arguments (a leading ``--`` dropped)."""
    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    return program


def main(argv=None) -> int:
    """``python -m primflow.distributed.launch -n N script.py args``."""
    parser = argparse.ArgumentParser(prog="python -m primflow.distributed.launch",
                                     description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(process_count(args.nprocs, args.devices), program_of(args))
    except LaunchError as e:
        print(f"primflow launch: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
