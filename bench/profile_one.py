"""cProfile of one configuration's measured step, for finding where the time goes.

    python -m bench.profile_one W5 primflow fwd_bwd [--calls 2000] [--sort tottime] [--top 30]

Needs the workload module to expose ``make_step(framework, config) -> (step, check)``.
Prints the profile and, since cProfile inflates Python-heavy code, the unprofiled time per
call measured just before.
"""

from __future__ import annotations

from .timing import set_thread_env

set_thread_env()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from . import registry  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_one", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload")
    p.add_argument("framework", choices=sorted(registry.FRAMEWORKS))
    p.add_argument("config")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative...)")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--out", help="also dump the raw stats here (for snakeviz / pstats)")
    a = p.parse_args(argv)
    mod = registry.load(a.workload)
    if not hasattr(mod, "make_step"):
        print(f"{a.workload} does not expose make_step()", file=sys.stderr)
        return 2
    step, _ = mod.make_step(a.framework, a.config)
    for _ in range(max(10, a.calls // 10)):  # warm-up
        step()
    t = time.perf_counter()
    for _ in range(a.calls):
        step()
    per_call = (time.perf_counter() - t) / a.calls
    print(f"{a.workload} {a.framework}/{a.config}: {per_call * 1e6:.1f} µs per call unprofiled "
          f"({a.calls} calls)")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(a.calls):
        step()
    prof.disable()
    if a.out:
        prof.dump_stats(a.out)
    st = pstats.Stats(prof)
    st.sort_stats(a.sort).print_stats(a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
