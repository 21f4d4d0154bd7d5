"""``python -m bench``: runs every configuration of the selected workloads, each in its own
process, and prints one table per workload with primflow / peer ratios from this run."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import registry
from .run_one import MARK
from .timing import THREAD_VARS, set_thread_env

REPO_ROOT = Path(__file__).resolve().parent.parent


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__,
        epilog="Ratios are only meaningful inside one run: absolute times vary by ~25%% from "
               "run to run. See bench/README.md.")
    p.add_argument("--only", action="append", metavar="ID",
                   help="workload(s) to run, e.g. --only W5 (repeatable, or comma-separated); "
                        f"default: all implemented ({', '.join(registry.WORKLOADS)})")
    p.add_argument("--quick", action="store_true", help="fewer, shorter repetitions (still >= 5)")
    p.add_argument("--python", metavar="PATH", default=os.environ.get("PRIMFLOW_BENCH_PYTHON"),
                   help="interpreter for the peer configurations (torch, jax), e.g. "
                        "/work/benchenv/bin/python; default: $PRIMFLOW_BENCH_PYTHON or this one")
    p.add_argument("--primflow-python", metavar="PATH", default=sys.executable,
                   help="interpreter for the primflow and NumPy configurations (default: this "
                        "one; the repository root is put on its PYTHONPATH)")
    p.add_argument("--frameworks", metavar="LIST",
                   help="comma-separated subset of: " + ", ".join(registry.FRAMEWORKS))
    p.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="run every configuration's process N times, round-robin, and report the "
                        "median over rounds (damps load from other work on the machine; "
                        "default 1)")
    p.add_argument("--threads", default="1", metavar="N[,N...]",
                   help="threads per framework, e.g. --threads 2, or --threads 1,2 for every "
                        "cell at 1 and at 2 threads (each in its own process, the counts run "
                        "back to back per cell) and a table of the speedups; default 1")
    p.add_argument("--json", metavar="FILE", help="save all results (and metadata) as JSON")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds allowed for one configuration's process (default 900)")
    p.add_argument("--list", action="store_true", help="list workloads and configurations")
    p.add_argument("-v", "--verbose", action="store_true", help="print each process as it runs")
    return p.parse_args(argv)


def _child_env(threads=1):
    env = set_thread_env(dict(os.environ), threads)
    parts = [str(REPO_ROOT)] + [q for q in env.get("PYTHONPATH", "").split(os.pathsep) if q]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _run_child(python, wid, cfg, quick, timeout, env):
    cmd = [python, "-m", "bench.run_one", wid, cfg.framework, cfg.name]
    if quick:
        cmd.append("--quick")
    base = {"workload": wid, "framework": cfg.framework, "config": cfg.name, "executable": python}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**base, "status": "error", "error": f"timed out after {timeout:.0f} s"}
    except OSError as e:
        return {**base, "status": "error", "error": f"cannot start {python}: {e}"}
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            res = json.loads(line[len(MARK):])
            res["process_wall_s"] = wall
            return res
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
    return {**base, "status": "error", "process_wall_s": wall,
            "error": f"exit {proc.returncode}, no result line: " + " | ".join(tail)}


def _interpreter_info(python, env):
    code = ("import sys, platform; print(platform.python_version(), sys.executable)")
    try:
        out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True,
                             timeout=60).stdout.strip()
        return out or "?"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unusable ({e})"


def _primflow_blas(python, env):
    """Which BLAS primflow's matrix products use in the primflow interpreter."""
    code = "from primflow.backends import blas; print(blas.describe())"
    try:
        out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True,
                             timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    return out or "?"


def _run_config(a, wid, cfg, pythons, env, skipped, rnd, rounds, threads=1):
    fw = registry.FRAMEWORKS[cfg.framework]
    python = pythons[fw.side]
    key = (python, fw.module)
    if key in skipped:
        return {"workload": wid, "framework": cfg.framework, "config": cfg.name,
                "executable": python, "status": "skipped", "reason": skipped[key]}
    if a.verbose:
        tag = f" [round {rnd + 1}/{rounds}]" if rounds > 1 else ""
        tag += f" [{threads} threads]" if threads > 1 else ""
        print(f"  running {wid} {cfg.framework} {cfg.name}{tag} ...", end="", flush=True)
    res = _run_child(python, wid, cfg, a.quick, a.timeout, env)
    if a.verbose:
        detail = (f"{res['value']:.4g} {res.get('unit', '')}" if res["status"] == "ok"
                  else res.get("reason") or res.get("error"))
        print(f" {res['status']}: {detail} ({res.get('process_wall_s', 0):.1f} s)")
    if res["status"] == "skipped":
        skipped[key] = res.get("reason", "not importable")
    return res


def _combine(runs):
    """One result from a configuration's rounds: the run holding the median value (an error in
    any round makes the whole an error)."""
    if len(runs) == 1:
        return runs[0]
    for res in runs:
        if res["status"] != "ok":
            return res
    ranked = sorted(runs, key=lambda r: r["value"])
    res = dict(ranked[(len(ranked) - 1) // 2])
    res["value"] = statistics.median(r["value"] for r in runs)
    res["rounds_values"] = [r["value"] for r in runs]
    return res


def _load_average():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _scaling_table(wid, configs, counts, by_count):
    """Every cell's value at each thread count, and its speedup over the first count."""
    from . import report as rp

    base = counts[0]
    # cells that measure peak memory (W2) also show it per count, and its ratio to the first
    memory = any(rp.ok(r) and r.get("peak_mb") is not None
                 for n in counts for r in by_count[n].values())
    rows = []
    for cfg in configs:
        key = (cfg.framework, cfg.name)
        results = [by_count[n].get(key) for n in counts]
        values = [rp.value(r) for r in results]
        unit = next((r.get("unit", "") for r in results if rp.ok(r)), "")
        higher_is_better = "/s" in unit
        speedups = []
        for n, v in zip(counts[1:], values[1:]):
            a, b = (v, values[0]) if higher_is_better else (values[0], v)
            speedups.append(rp.ratio(a, b))
        row = ([f"{registry.FRAMEWORKS[cfg.framework].label} {cfg.name}", unit]
               + [rp.cell(r, "{:.4g}") for r in results] + speedups)
        if memory:
            mbs = [r.get("peak_mb") if rp.ok(r) else None for r in results]
            row += [rp.NA if mb is None else f"{mb:.0f}" for mb in mbs]
            row += [rp.ratio(mb, mbs[0]) for mb in mbs[1:]]
        rows.append(row)
    headers = (["cell", "unit"] + [f"{n} thr" for n in counts]
               + [f"speedup {n}/{base}" for n in counts[1:]])
    if memory:
        headers += ([f"peak MB {n} thr" for n in counts]
                    + [f"MB {n}/{base}" for n in counts[1:]])
    return (f"{wid} thread scaling (speedup = time at {base} / time at N; ratios from this run, "
            f"load average now {_load_average()}):\n" + rp.table(headers, rows))


def main(argv=None) -> int:
    a = _parse(argv)
    if a.list:
        for wid in registry.WORKLOADS:
            mod = registry.load(wid)
            print(f"{wid}: {mod.TITLE}")
            for c in mod.CONFIGS:
                note = "; not with --quick" if not c.quick else ""
                print(f"    python -m bench.run_one {wid} {c.framework} {c.name}"
                      + (f"    # {(c.description + note).lstrip('; ')}"
                         if c.description or note else ""))
        return 0
    try:
        ids = ([registry.normalize_id(x) for o in a.only for x in o.split(",") if x.strip()]
               if a.only else list(registry.WORKLOADS))
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    frameworks = set(registry.FRAMEWORKS)
    if a.frameworks:
        frameworks = {f.strip() for f in a.frameworks.split(",") if f.strip()}
        unknown = frameworks - set(registry.FRAMEWORKS)
        if unknown:
            print(f"error: unknown framework(s) {sorted(unknown)}", file=sys.stderr)
            return 2
    peer_python = a.python or sys.executable
    if a.python and not (shutil.which(a.python) or Path(a.python).exists()):
        print(f"error: --python {a.python}: not found", file=sys.stderr)
        return 2
    pythons = {"primflow": a.primflow_python, "peer": peer_python}
    try:
        counts = [int(x) for x in str(a.threads).split(",") if x.strip()]
        if not counts or min(counts) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --threads {a.threads}: give positive integers, e.g. 1,2", file=sys.stderr)
        return 2
    envs = {n: _child_env(n) for n in counts}
    env = envs[counts[0]]

    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(), "machine": platform.machine(), "platform": platform.platform(),
        "cpus": os.cpu_count(), "quick": a.quick, "rounds": a.rounds,
        "threads": {v: env[v] for v in THREAD_VARS}, "thread_counts": counts,
        "interpreters": {side: {"path": py, "info": _interpreter_info(py, env)}
                         for side, py in pythons.items()},
    }
    print(f"primflow benchmarks  {meta['date']}  {meta['platform']}  {meta['cpus']} CPUs  "
          f"{'quick' if a.quick else 'full'}")
    if counts == [1]:
        print("one thread per framework (OMP/MKL/OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1),"
              " JAX pinned to one core); one process per configuration")
    else:
        print(f"threads per framework: {', '.join(map(str, counts))} (OMP/MKL/OPENBLAS_NUM_THREADS"
              f"=N, so primflow's default is N; torch.set_num_threads(N); JAX pinned to N cores, "
              f"one-thread XLA flags only for N=1); one process per configuration and count")
        print(f"  load average before the run: {_load_average()}")
    print(f"  primflow/NumPy interpreter: {meta['interpreters']['primflow']['info']}")
    meta["primflow_blas"] = _primflow_blas(pythons["primflow"], env)
    print(f"  primflow matrix products:   {meta['primflow_blas']}")
    print(f"  peer interpreter:           {meta['interpreters']['peer']['info']}")
    print()

    all_results = []
    skipped = {}  # (python, framework module) -> reason: no need to start it again
    errors = []
    rounds = max(1, a.rounds)
    for wid in ids:
        mod = registry.load(wid)
        configs = [c for c in mod.CONFIGS
                   if c.framework in frameworks and (c.quick or not a.quick)]
        per_round = {}  # (threads, framework, config) -> list of results, one per round
        t_w = time.perf_counter()
        for rnd in range(rounds):
            for cfg in configs:
                if rnd and not cfg.repeat:
                    continue
                for n in counts:  # back to back: 1 and 2 threads see the same load
                    res = _run_config(a, wid, cfg, pythons, envs[n], skipped, rnd, rounds, n)
                    per_round.setdefault((n, cfg.framework, cfg.name), []).append(res)
        by_count = {n: {} for n in counts}
        for (n, fw, name), runs in per_round.items():
            res = _combine(runs)
            if res["status"] == "error":
                errors.append(res)
            by_count[n][(fw, name)] = res
            all_results.append(res)
        for n in counts:
            if len(counts) > 1:
                print(f"--- {wid} at {n} thread{'s' if n > 1 else ''} ---")
            print(mod.report(by_count[n]))
        if len(counts) > 1:
            print(_scaling_table(wid, configs, counts, by_count))
        note = f", median over {rounds} rounds" if rounds > 1 else ""
        print(f"  ({time.perf_counter() - t_w:.1f} s{note})")
        print()

    if skipped:
        for (python, module), reason in skipped.items():
            print(f"n/a: {module} with {python}: {reason}")
    for res in errors:
        print(f"ERR {res['workload']} {res['framework']}/{res['config']}: {res.get('error')}")
        if res.get("traceback"):
            print("    " + res["traceback"].strip().replace("\n", "\n    "))
    if a.json:
        path = Path(a.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"meta": meta, "results": all_results}, indent=1))
        print(f"results saved to {path}")
    return 1 if errors else 0
