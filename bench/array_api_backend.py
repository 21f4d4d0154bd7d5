"""The array-API backend over NumPy against the NumPy backend on W2 (jitted collapsed
biharmonic, N = 1,024) and W3's plate step: milliseconds per call and the ratio (the
target: within 1.3x). Jitted programs on the array-API backend run code generated over the
namespace (``compiler/array_api_codegen.py``): the NumPy backend's fusion groups, memory
plan, row blocks and threads, with ``out=`` where the namespace's functions take it (NumPy's
ufuncs do), and numba kernels where its arrays are NumPy's. Both are timed after their
numba kernels are in use, in alternating rounds (the same machine load for both).

    PYTHONPATH=$PWD python -m bench.array_api_backend [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import primflow as pf
from bench.workloads import w2_biharmonic, w3_plate_step


def _best_ms(step, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t)
    return 1e3 * best


def _settle(step):
    """Compiles ``step`` and waits for its numba kernels (compiled in the background), so
    both backends are timed in their steady state."""
    step()
    jitted = getattr(step, "jitted", None)
    if jitted is not None:
        jitted.wait_compiled(timeout=300)
    step()


def _interleaved_ms(numpy_step, api_step, repeat, rounds=4):
    """Best milliseconds of each step, timed in alternating rounds (``repeat`` calls each)
    so that both see the same machine load (a shared machine's load changes by the
    second); each step runs under the backend it was built on."""
    numpy_ms = api_ms = float("inf")
    for _ in range(rounds):
        numpy_ms = min(numpy_ms, _best_ms(numpy_step, repeat))
        with pf.backend("array_api", namespace=np):
            api_step()  # (constants cached per backend are made again after a switch)
            api_ms = min(api_ms, _best_ms(api_step, repeat))
        numpy_step()
    return numpy_ms, api_ms


def _cells():
    # each builds (step, value): value() is a NumPy array to compare across backends
    def w2():
        step, result = w2_biharmonic.make_step("primflow", "jit_collapsed_1024")
        return step, result

    def w3():
        step, _ = w3_plate_step._builder("primflow", "jit")()  # a fresh model per backend
        first = np.asarray(float(step()))
        return step, lambda: first

    yield "W2 jit_collapsed_1024", w2
    yield "W3 jit step", w3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'cell':28s} {'numpy ms':>10s} {'array_api ms':>13s} {'ratio':>7s}")
    for name, build in _cells():
        try:
            numpy_step, value = build()
            _settle(numpy_step)
            expected = np.asarray(value())
            with pf.backend("array_api", namespace=np):
                api_step, value = build()
                _settle(api_step)
                got = np.asarray(value())
            numpy_ms, api_ms = _interleaved_ms(numpy_step, api_step, args.repeat)
        except Exception as e:  # noqa: BLE001 - report the cell and go on
            print(f"{name:28s} failed: {type(e).__name__}: {e}")
            continue
        err = float(np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-300))
        print(f"{name:28s} {numpy_ms:10.2f} {api_ms:13.2f} {api_ms / numpy_ms:7.2f}"
              f"   (max rel diff {err:.1e})")


if __name__ == "__main__":
    main()
