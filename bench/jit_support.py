"""Child-side helpers for the ``pf.jit`` cells (W1-W4, W7): compile time, its phases, and a
second process that finds the disk cache.

A jit cell runs like any other (first call, warm-up, timed repetitions) with three additions:

* ``prepare()`` before the step is built: an empty numba cache directory for this cell
  (``pf.config.cache_dir``, handed to the second process in ``PRIMFLOW_BENCH_CACHE_DIR``;
  a cold start, removed at the end), ``pf.config.jit_backend`` from
  ``PRIMFLOW_BENCH_JIT_BACKEND`` (default "auto") and ``import numba`` done up
  front and timed on its own (``numba_import_ms``: paid once per process, like ``import jax``
  for the JAX cells, and kept out of the memory baseline's delta for the same reason);
* ``first_call(step)``: the first call, with its phases (tracing, IR passes, code
  generation, numba kernels' first run = compile or cache load + run). With the default
  backend, numba kernels that are not in the disk cache compile in a background process
  while the first calls run generated NumPy code; ``first_call`` then waits for them
  (phase ``background_numba``: when they were ready, counted from the first call's start)
  so that the timed calls measure the numba version;
* ``cached_first_call(...)``: the same first call in a *second process* that reuses the
  cell's cache directory, i.e. what a new process pays once the disk cache is warm. Only
  numba kernels are cached on disk; tracing, the passes and NumPy code generation run again.

``compile_ms`` is first call minus a warm call (the median of the timed repetitions).

The second process is ``python -m bench.jit_support W2 primflow jit_collapsed_1024`` with
``PRIMFLOW_BENCH_JIT_SECOND=1``: it builds the step with the workload's ``make_step``, times
its first call and a few warm calls, and prints one JSON line.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# the bench's own variables (parent -> cell processes); primflow itself reads none
CACHE_ENV = "PRIMFLOW_BENCH_CACHE_DIR"
BACKEND_ENV = "PRIMFLOW_BENCH_JIT_BACKEND"
SECOND_ENV = "PRIMFLOW_BENCH_JIT_SECOND"
MARK = "JIT_FIRST "
TARGET_COMPILE_S = 2.0
TARGET_CACHED_S = 0.5


def prepare() -> dict:
    """Call before building the jitted step. Returns the setup facts (cache dir, numba)."""
    info = {}
    if os.environ.get(SECOND_ENV) and os.environ.get(CACHE_ENV):
        info["cache_dir"] = os.environ[CACHE_ENV]
        info["cache_dir_owned"] = False
    else:
        info["cache_dir"] = os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="pf-bench-jit-")
        info["cache_dir_owned"] = True
        atexit.register(shutil.rmtree, info["cache_dir"], ignore_errors=True)  # on errors too
    import primflow as pf
    from primflow.compiler import numba_codegen

    pf.config.cache_dir = info["cache_dir"]
    pf.config.jit_backend = os.environ.get(BACKEND_ENV) or "auto"

    t0 = time.perf_counter()
    info["numba"] = bool(numba_codegen.available())
    info["numba_import_ms"] = (time.perf_counter() - t0) * 1e3
    info["backend_env"] = pf.config.jit_backend
    return info


class _Phases:
    """Accumulates the time spent in the jit pipeline's stages while active (monkeypatches
    ``Jitted._trace``, ``compiler.optimize_program`` / ``compile_program`` and the numba
    kernels' launcher; everything is restored on exit)."""

    def __enter__(self):
        import importlib

        comp = importlib.import_module("primflow.compiler")
        numba_codegen = importlib.import_module("primflow.compiler.numba_codegen")
        jit_mod = importlib.import_module("primflow.transforms.jit")

        self.ms = {"trace_total": 0.0, "optimize": 0.0, "codegen": 0.0, "numba_first_run": 0.0}
        self.counts = {"traces": 0, "kernel_calls": 0}
        self._saved = [(jit_mod.Jitted, "_trace", jit_mod.Jitted._trace),
                       (comp, "optimize_program", comp.optimize_program),
                       (comp, "compile_program", comp.compile_program),
                       (numba_codegen._Launcher, "__call__", numba_codegen._Launcher.__call__)]
        ms, counts = self.ms, self.counts

        self.executables = executables = []

        def timed(orig, key, count=None):
            def wrapper(*a, **k):
                t0 = time.perf_counter()
                try:
                    out = orig(*a, **k)
                    if key == "codegen":
                        executables.append(out)
                    return out
                finally:
                    ms[key] += (time.perf_counter() - t0) * 1e3
                    if count:
                        counts[count] += 1
            return wrapper

        jit_mod.Jitted._trace = timed(jit_mod.Jitted._trace, "trace_total", "traces")
        comp.optimize_program = timed(comp.optimize_program, "optimize")
        comp.compile_program = timed(comp.compile_program, "codegen")
        numba_codegen._Launcher.__call__ = timed(numba_codegen._Launcher.__call__,
                                                 "numba_first_run", "kernel_calls")
        return self

    def __exit__(self, *exc):
        for obj, name, orig in self._saved:
            setattr(obj, name, orig)
        return False

    def result(self):
        ms = dict(self.ms)
        # tracing proper = the trace minus the passes and code generation it calls
        ms["trace"] = ms.pop("trace_total") - ms["optimize"] - ms["codegen"]
        return {k: round(v, 2) for k, v in ms.items()}, dict(self.counts)


def first_call(step, jit=True):
    """Runs ``step()`` once (the first call). Returns (seconds, phases in ms, counts); for
    a cell that is not primflow jit (``jit=False``) just the time, with empty phases (for
    JAX jit that time is trace + compile + first run)."""
    if not jit:
        t0 = time.perf_counter()
        step()
        return time.perf_counter() - t0, {}, {}
    with _Phases() as ph:
        t0 = time.perf_counter()
        step()
        first = time.perf_counter() - t0
    ms, counts = ph.result()
    counts["early_calls_ms"] = [round(first * 1e3, 3)]
    counts["early_tiers"] = [_tier(ph.executables)]
    # the next calls (up to EARLY_CALLS in all) are timed as they come, each with the tier
    # it ran on, as a user's first calls would run (also without a background compile: the
    # NumPy tier alone, PRIMFLOW_BENCH_JIT_BACKEND=numpy, is the baseline they are compared
    # with, warm-up included). Numba kernels not in the disk cache compile in a background
    # process while the NumPy version runs: then the cell waits for the kernels, so that the
    # timed calls measure the numba version ("background_numba": when they were in use, from
    # the first call's start = the time to steady state)
    for _ in range(EARLY_CALLS - 1):
        t1 = time.perf_counter()
        step()
        counts["early_calls_ms"].append(round((time.perf_counter() - t1) * 1e3, 3))
        counts["early_tiers"].append(_tier(ph.executables))
    if any(exe.compiling for exe in ph.executables):
        for exe in ph.executables:
            exe.wait()
        ms["background_numba"] = round((time.perf_counter() - t0) * 1e3, 2)
    counts["steady_tier"] = _tier(ph.executables)  # what the timed calls run on
    return first, ms, counts


EARLY_CALLS = 20  # the first calls, timed one by one (kernels may compile meanwhile)


def _tier(executables):
    """What the programs ran on: "numba" (kernels in use), "numpy" (generated NumPy code),
    "mixed", or "-" (no program)."""
    tiers = {"numba" if exe.kernels else "numpy" for exe in executables
             if hasattr(exe, "kernels")}
    return tiers.pop() if len(tiers) == 1 else ("mixed" if tiers else "-")


def executables(*jitted):
    """Short descriptions of the compiled programs of ``jitted`` functions (after a call)."""
    out = []
    for j in jitted:
        for entry in getattr(j, "_cache", {}).values():
            out.append(repr(entry.executable))
    return out


def cached_first_call(workload_id, framework, config, quick, timeout=600.0):
    """The first call in a new process that reuses this cell's disk cache."""
    if os.environ.get(SECOND_ENV):
        return None
    env = dict(os.environ)
    env[SECOND_ENV] = "1"
    cmd = [sys.executable, "-m", "bench.jit_support", workload_id, framework, config]
    if quick:
        cmd.append("--quick")
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False, cwd=root)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-4:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def fields(info, first_s, phases, counts, steady_s, workload_id, framework, config, quick,
           jitted=()):
    """The jit keys of a cell's result: compile time and phases, the second process's first
    call, the programs. Removes the cell's cache directory at the end."""
    res = {"jit": True, "compile_ms": (first_s - steady_s) * 1e3,
           "first_call_ms": first_s * 1e3, "steady_ms": steady_s * 1e3,
           "steady_tier": counts.get("steady_tier"),
           "early_calls_ms": counts.get("early_calls_ms"),
           "early_tiers": counts.get("early_tiers"),
           "time_to_steady_ms": phases.get("background_numba", first_s * 1e3),
           "phases_ms": phases, "jit_counts": counts,
           "numba": info["numba"], "numba_import_ms": info["numba_import_ms"],
           "backend_env": info["backend_env"], "executables": executables(*jitted)}
    try:
        cached = cached_first_call(workload_id, framework, config, quick)
        if cached is not None:
            res["cached"] = cached
            if "first_call_ms" in cached:
                res["cached_compile_ms"] = cached["first_call_ms"] - cached["steady_ms"]
    finally:
        if info.get("cache_dir_owned"):
            try:
                files = sum(len(f) for _, _, f in os.walk(info["cache_dir"]))
                res["cache_files"] = files
            finally:
                shutil.rmtree(info["cache_dir"], ignore_errors=True)
    return res


def compile_cells(rows):
    """Report lines for compile times: ``rows`` is a list of (label, result)."""
    from . import report as rp

    parts, worst, worst_cached = [], None, None
    for label, res in rows:
        if not rp.ok(res) or "compile_ms" not in res:
            continue
        c = res["compile_ms"]
        cc = res.get("cached_compile_ms")
        worst = c if worst is None else max(worst, c)
        if cc is not None:
            worst_cached = cc if worst_cached is None else max(worst_cached, cc)
        parts.append(f"{label} {c:.0f}/{'n/a' if cc is None else f'{cc:.0f}'}")
    return parts, worst, worst_cached


def compile_report(rows, indent="  "):
    """Lines: per-cell compile ms (cold / second process), phases of the slowest, verdicts."""
    from . import report as rp

    parts, worst, worst_cached = compile_cells(rows)
    if not parts:
        return []
    out = [f"{indent}pf jit compile ms = first call - warm call, cold (empty numba cache) / "
           f"in a 2nd process reusing the disk cache: " + ", ".join(parts)]
    slow = max(((label, res) for label, res in rows if rp.ok(res) and "compile_ms" in res),
               key=lambda lr: lr[1]["compile_ms"])
    ph = slow[1].get("phases_ms", {})
    cph = slow[1].get("cached", {}).get("phases_ms", {})
    imp = [res.get("numba_import_ms") for _, res in rows if rp.ok(res)
           and res.get("numba_import_ms") is not None]

    def fmt(p):
        return ", ".join(f"{k} {v:.0f}" for k, v in p.items())
    out.append(f"{indent}  slowest ({slow[0]}) first-call phases ms: cold: {fmt(ph)}"
               + (f"; 2nd process: {fmt(cph)}" if cph else "")
               + (f"  (+ import numba {max(imp):.0f} ms once per process, not included)"
                  if imp else ""))
    background = [(res["phases_ms"]["background_numba"], label) for label, res in rows
                  if rp.ok(res) and "background_numba" in res.get("phases_ms", {})]
    if background:
        ms, label = max(background)
        out.append(f"{indent}  numba kernels compiled in a background process (the NumPy "
                   f"version ran meanwhile); the slowest were in use {ms / 1e3:.1f} s after "
                   f"the first call started ({label})")
    out += early_report(rows, indent)
    v1 = f"{worst / 1e3:.2f} s -> {'met' if worst < TARGET_COMPILE_S * 1e3 else 'NOT met'}"
    v2 = ("n/a" if worst_cached is None else
          f"{worst_cached / 1e3:.2f} s -> "
          f"{'met' if worst_cached < TARGET_CACHED_S * 1e3 else 'NOT met'}")
    out.append(f"{indent}target: first-call compile < {TARGET_COMPILE_S:g} s (worst cell): {v1}; "
               f"< {TARGET_CACHED_S:g} s from the disk cache (2nd process, worst cell): {v2}")
    return out


def early_report(rows, indent="  "):
    """Lines: per jit cell, the first call, the slowest of the other early calls, the steady
    median and the tier each ran on, and the time to steady state."""
    from . import report as rp

    out = []
    for label, res in rows:
        early = res.get("early_calls_ms") if rp.ok(res) else None
        if not early:
            continue
        tiers = res.get("early_tiers") or []
        later = early[1:]
        slow = (f", slowest of calls 2-{len(early)} {max(later):.1f} ms "
                f"({tiers[1 + later.index(max(later))]})" if later else "")
        out.append(f"{indent}  {label}: first call {early[0]:.1f} ms ({tiers[0] if tiers else '?'})"
                   f"{slow}, steady median {res['steady_ms']:.3g} ms "
                   f"({res.get('steady_tier') or '?'}), steady after "
                   f"{res['time_to_steady_ms'] / 1e3:.2f} s")
    if out:
        out.insert(0, f"{indent}first calls (tier: numpy = generated NumPy code while kernels "
                      f"compile, numba = kernels in use) and time to steady state:")
    return out


def rel_diff(got, want):
    """max |got - want| / max |want| over arrays (or lists of arrays)."""
    import numpy as np

    if isinstance(got, (list, tuple)):
        return max(rel_diff(g, w) for g, w in zip(got, want))
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-300))


def check_lines(cells, what, tol, tol_label="tolerance") -> list:
    """The report's jit-vs-eager check over ``cells`` (``[(label, result)]``, each result
    with its ``jit_vs_eager`` relative difference): the cells off by more than ``tol``, or
    that ``what`` held and how closely."""
    from . import report as rp

    bad, diffs = [], []
    for label, res in cells:
        if rp.ok(res) and res.get("jit_vs_eager") is not None:
            diffs.append(res["jit_vs_eager"])
            if not res["jit_vs_eager"] <= tol:
                bad.append(f"{label} differs from eager by {res['jit_vs_eager']:.2e}")
    if bad:
        return ["  CHECK FAILED (jit vs eager): " + "; ".join(bad)]
    if diffs:
        return [f"  check: {what} (max relative difference {max(diffs):.1e}, "
                f"{tol_label} {tol:g})"]
    return []


def _second_main(argv=None) -> int:
    import argparse

    from .timing import set_thread_env

    set_thread_env()
    p = argparse.ArgumentParser(prog="python -m bench.jit_support")
    p.add_argument("workload")
    p.add_argument("framework")
    p.add_argument("config")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    import gc

    from . import registry
    from .timing import peak_rss_bytes, reset_peak_rss, rss_bytes

    out = {}
    try:
        mod = registry.load(a.workload)
        info = prepare()
        step = mod.make_step(a.framework, a.config)[0]
        gc.collect()
        base = rss_bytes()
        first, phases, counts = first_call(step)
        reset = reset_peak_rss()
        warm = []
        for _ in range(3 if a.quick else 5):
            t0 = time.perf_counter()
            step()
            warm.append(time.perf_counter() - t0)
        peak = peak_rss_bytes()
        warm.sort()
        out = {"first_call_ms": first * 1e3, "steady_ms": warm[len(warm) // 2] * 1e3,
               "phases_ms": phases, "jit_counts": counts,
               "numba_import_ms": info["numba_import_ms"]}
        if reset:  # as W2 measures it: peak over the warm calls above the post-setup RSS
            out["peak_mb"] = (peak - base) / 2**20
    except Exception as e:  # noqa: BLE001 - reported in the parent's result
        out = {"error": f"{type(e).__name__}: {e}"}
    print(MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_second_main())
