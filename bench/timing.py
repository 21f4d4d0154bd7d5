"""Child-side helpers: thread settings, a wall-clock timer, resident memory.

Imports nothing heavy; ``set_thread_env`` must run before NumPy/torch/jax are imported.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


THREADS_ENV = "PRIMFLOW_BENCH_THREADS"  # the thread count the harness gives a child


def bench_threads(env=None) -> int:
    """The thread count of this configuration (``python -m bench --threads``; default 1)."""
    env = os.environ if env is None else env
    try:
        return max(1, int(env.get(THREADS_ENV) or 1))
    except ValueError:
        return 1


def set_thread_env(env=None, threads=None):
    """``threads`` threads per framework (default: ``bench_threads(env)``; the benchmark
    rule is one): the thread variables of OpenMP, MKL and OpenBLAS (primflow's default
    follows ``OMP_NUM_THREADS``), and on one thread XLA's one-thread flags. Mutates and
    returns ``env``."""
    env = os.environ if env is None else env
    threads = bench_threads(env) if threads is None else threads
    env[THREADS_ENV] = str(threads)
    for var in THREAD_VARS:
        env[var] = str(threads)
    env.setdefault("JAX_PLATFORMS", "cpu")
    flags = env.get("XLA_FLAGS", "").replace(XLA_ONE_THREAD, "").strip()
    if threads == 1 and "intra_op_parallelism_threads" not in flags:
        flags = (flags + " " + XLA_ONE_THREAD).strip()
    env["XLA_FLAGS"] = flags
    return env


def pin_to_one_core():
    """Confines this process to ``bench_threads()`` CPUs (used for JAX, whose runtime keeps
    its own pools; one CPU by the benchmark rule)."""
    if hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        n = bench_threads()
        if len(cpus) > n:
            os.sched_setaffinity(0, set(cpus[-n:]))
            return cpus[-n:]
    return None


def torch_single_thread(torch):
    """``torch.set_num_threads(bench_threads())`` (one by the benchmark rule)."""
    torch.set_num_threads(bench_threads())
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work already started
        pass


# Repetitions: at least 5 after warm-up (the benchmark rule).
FULL = dict(reps=9, target_s=0.10, warmup_s=0.30)
QUICK = dict(reps=5, target_s=0.02, warmup_s=0.05)


def measure(fn, *, reps: int, target_s: float, warmup_s: float, min_warmup_calls: int = 3):
    """Times ``fn()``: warm-up for ``warmup_s`` (and at least ``min_warmup_calls`` calls), then
    ``reps`` repetitions, each calling ``fn`` ``inner`` times where ``inner`` is chosen so that a
    repetition lasts about ``target_s``. Returns seconds per call: median, min, all reps.

    The garbage collector stays enabled: its cost is part of what a user pays.
    """
    t0 = time.perf_counter()
    n = 0
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - t0
        if n >= min_warmup_calls and elapsed >= warmup_s:
            break
    inner = max(1, math.ceil(target_s / (elapsed / n)))
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return {"median_s": statistics.median(times), "min_s": min(times), "times_s": times,
            "inner": inner, "reps": reps, "warmup_calls": n}


def rss_bytes() -> int:
    """Current resident set size (``/proc/self/statm``); peak RSS where /proc is missing."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def reset_peak_rss() -> bool:
    """Resets this process's peak-RSS mark (Linux >= 4.0: ``5 > /proc/self/clear_refs``), so
    that ``peak_rss_bytes`` measures from here on. False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """This process's peak resident set size: ``VmHWM`` on Linux (the mark that
    ``5 > /proc/self/clear_refs`` resets), else ``ru_maxrss``. ``ru_maxrss`` is not reset by
    clear_refs and, in a process started by fork + exec, can still hold the parent's RSS
    from before the exec (the second-process cells read 2x their real peak that way)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
