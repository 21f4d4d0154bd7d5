"""One module per reference workload (see /work/shared/notes/workloads.md).

A workload module exposes, without importing NumPy or any framework at import time:

    ID: str                      e.g. "W5"
    TITLE: str                   one line, printed above the table
    CONFIGS: list[registry.Config]
        every (framework, name) measured, each in its own process; the driver runs them in
        this order and skips frameworks not importable with the interpreter it uses
    run(framework: str, config: str, quick: bool) -> dict
        runs in the child process; imports what it needs; returns at least
        {"value": float, "unit": str} (any extra JSON-able keys are kept in --json output)
    report(results: dict[tuple[str, str], dict]) -> str
        the table for this workload, from the results keyed by (framework, config); a missing
        or skipped result is shown as "n/a" (helpers in bench/report.py)

Then register it in ``bench/registry.py``.
"""
