"""Runs one configuration in this process and prints one JSON line.

    python -m bench.run_one W5 primflow fwd_bwd [--quick] [--threads N]

The line has ``status`` "ok" (with ``value`` and ``unit``), "skipped" (the framework is not
importable with this interpreter) or "error". The driver (``python -m bench``) starts one such
process per configuration.
"""

from __future__ import annotations

# Thread settings before anything can import NumPy / torch / jax.
import os  # noqa: E402
import sys  # noqa: E402

from .timing import THREADS_ENV, bench_threads, set_thread_env

if "--threads" in sys.argv[:-1]:
    os.environ[THREADS_ENV] = sys.argv[sys.argv.index("--threads") + 1]
set_thread_env()

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import traceback  # noqa: E402

from . import registry  # noqa: E402

MARK = "BENCH_RESULT "  # prefix of the result line, so stray prints cannot be mistaken for it


def _versions(framework_module: str) -> dict:
    out = {"python": platform.python_version()}
    for name in sorted({"numpy", framework_module}):
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = getattr(mod, "__version__", "?")
    return out


def run(workload_id: str, framework: str, config: str, quick: bool) -> dict:
    res = {"workload": workload_id, "framework": framework, "config": config,
           "quick": quick, "executable": sys.executable, "threads": bench_threads()}
    try:
        wid = registry.normalize_id(workload_id)
        res["workload"] = wid
        fw = registry.FRAMEWORKS[framework]
        module = registry.load(wid)
        if not any(c.framework == framework and c.name == config for c in module.CONFIGS):
            raise KeyError(f"{wid} has no configuration {framework}/{config}")
    except KeyError as e:
        res.update(status="error", error=str(e))
        return res
    try:
        importlib.import_module(fw.module)
    except Exception as e:  # ImportError, or a broken install: either way, not usable here
        res.update(status="skipped", reason=f"{fw.module} not importable: {type(e).__name__}: {e}")
        return res
    try:
        out = module.run(framework, config, quick=quick)
    except Exception as e:
        res.update(status="error", error=f"{type(e).__name__}: {e}",
                   traceback=traceback.format_exc(limit=8))
        return res
    res.update(out)
    res.setdefault("status", "ok")
    res["versions"] = _versions(fw.module)
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run_one", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload")
    p.add_argument("framework", choices=sorted(registry.FRAMEWORKS))
    p.add_argument("config")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per framework (default 1; read before NumPy is imported)")
    a = p.parse_args(argv)
    res = run(a.workload, a.framework, a.config, a.quick)
    sys.stdout.flush()
    print(MARK + json.dumps(res), flush=True)
    return 0 if res["status"] != "error" else 1


if __name__ == "__main__":
    sys.exit(main())
