"""Where a primflow step spends its time, per primitive kernel.

    python -m bench.profile_prims W4 primflow hessian [--calls 20] [--by-shape] [--top 25]

Wraps ``impl`` (the backend kernel) of every registered primitive with a timer, runs the
workload's step (``make_step`` of the workload module) ``--calls`` times, and prints, per
primitive (or per primitive and input shapes with ``--by-shape``): kernel calls per step, kernel
milliseconds per step and their share of the step (``--by-shape`` marks inputs that are not
C-contiguous with ``*``). What is left of the step's wall time is
spent outside the kernels: Python dispatch (bind, tracers, batching rules, the tape).

The timers cost ~1 µs per kernel call; the step is also timed without them, just before.
"""

from __future__ import annotations

from .timing import set_thread_env

set_thread_env()

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

from . import registry  # noqa: E402


def _shape(v):
    """'256x32x128' for an array ('...*' when it is not C-contiguous), else the type name."""
    s = getattr(v, "shape", None)
    if s is None:
        return type(v).__name__
    flags = getattr(v, "flags", None)
    strided = flags is not None and not flags["C_CONTIGUOUS"]
    return "x".join(map(str, s)) + ("*" if strided else "")


def instrument(by_shape=False):
    """Wraps every primitive's kernel; returns (stats, restore). stats: key -> [calls, s]."""
    from primflow.core.primitive import _registry

    stats = defaultdict(lambda: [0, 0.0])
    saved = {}
    clock = time.perf_counter
    for name, prim in _registry.items():
        impl = prim.impl
        saved[name] = impl

        def timed(*args, _impl=impl, _name=name, **params):
            t = clock()
            try:
                return _impl(*args, **params)
            finally:
                dt = clock() - t
                key = (_name, ",".join(_shape(a) for a in args)) if by_shape else (_name,)
                st = stats[key]
                st[0] += 1
                st[1] += dt

        prim.impl = timed

    def restore():
        for name, impl in saved.items():
            _registry[name].impl = impl

    return stats, restore


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_prims", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload")
    p.add_argument("framework", nargs="?", default="primflow", choices=["primflow"])
    p.add_argument("config")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--by-shape", action="store_true", help="one row per primitive and shapes")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args(argv)
    mod = registry.load(a.workload)
    if not hasattr(mod, "make_step"):
        print(f"{a.workload} does not expose make_step()", file=sys.stderr)
        return 2
    step, _ = mod.make_step(a.framework, a.config)
    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(a.calls):
        step()
    plain = (time.perf_counter() - t) / a.calls

    stats, restore = instrument(a.by_shape)
    step()
    stats.clear()  # the warm-up call above is not counted
    t = time.perf_counter()
    for _ in range(a.calls):
        step()
    timed = (time.perf_counter() - t) / a.calls
    restore()

    n = a.calls
    kernel = sum(s for _, s in stats.values()) / n
    calls = sum(c for c, _ in stats.values()) / n
    print(f"{a.workload} {a.framework}/{a.config}: {plain * 1e3:.2f} ms per step unprofiled, "
          f"{timed * 1e3:.2f} ms with kernel timers ({n} steps)")
    print(f"  kernels: {kernel * 1e3:.2f} ms per step ({kernel / timed:.0%}), {calls:.0f} kernel "
          f"calls per step; outside kernels (Python dispatch, transforms, tape): "
          f"{(timed - kernel) * 1e3:.2f} ms ({(timed - kernel) / timed:.0%}), "
          f"{(timed - kernel) / max(calls, 1) * 1e6:.1f} µs per kernel call")
    print()
    rows = sorted(stats.items(), key=lambda kv: -kv[1][1])
    w = max([len(" ".join(k)) for k, _ in rows[:a.top]] + [9])
    print(f"  {'primitive':<{w}}  {'calls/step':>10}  {'ms/step':>8}  {'% step':>6}  "
          f"{'µs/call':>8}")
    for key, (c, s) in rows[:a.top]:
        print(f"  {' '.join(key):<{w}}  {c / n:>10.1f}  {s / n * 1e3:>8.3f}  "
              f"{s / n / timed:>6.1%}  {s / c * 1e6:>8.1f}")
    if len(rows) > a.top:
        rest = rows[a.top:]
        more = f"({len(rest)} more)"
        print(f"  {more:<{w}}  {sum(c for _, (c, _) in rest) / n:>10.1f}  "
              f"{sum(s for _, (_, s) in rest) / n * 1e3:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
