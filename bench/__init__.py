"""primflow's benchmark harness (not part of the installed package, never imported by primflow).

Run ``python -m bench`` from the repository root; see ``bench/README.md``.

Layout:
    bench/registry.py         the workloads (W1..W6) and the frameworks (primflow, numpy, peers)
    bench/workloads/wN_*.py   one module per workload: its configurations, ``run`` and ``report``
    bench/run_one.py          ``python -m bench.run_one W5 primflow fwd_bwd``: one configuration,
                              in its own process, printing one JSON line
    bench/profile_one.py      ``python -m bench.profile_one W5 primflow fwd_bwd``: cProfile of
                              one configuration's step
    bench/cli.py              the driver behind ``python -m bench``: spawns one process per
                              configuration, prints the tables, saves JSON

Nothing in this package imports NumPy or a framework at import time: the thread settings
(``OMP_NUM_THREADS=1`` ...) must be in place before a child process imports them.
"""
