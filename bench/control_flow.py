"""Control flow under ``pf.jit``: RK4 over 1,000 steps inside ``pf.scan``.

The problem: ``dy/dt = W2 tanh(W1 y + b1) + b2`` with a state of 256 values (MLP
256 -> 64 -> 256, float64), integrated with fixed-step RK4; the loss is the mean square of
the final state. Measured in one process (only ratios mean anything; see README.md):

* compile time of ``pf.jit`` of the scan (tracing, IR passes, code generation) for 10 and 1,000
  steps: target <= 1 s and the two within 1.5x (the loop body is compiled once). With the
  default ``auto`` backend the loop runs as generated NumPy code at once while its
  whole-loop numba kernel (``compiler/numba_loops.py``) compiles in a background process;
  the time until those kernels run, from an empty kernel cache, is printed too (a later
  process loads them from the disk cache). The kernel takes the trip count as an argument,
  so 10 and 1,000 steps share it;
* run time of the jitted scan against the same program unrolled (a Python loop traced
  into one straight-line program): target within 1.2x;
* ``pf.jit(pf.grad(loss))`` against ``pf.jit(loss)``: target within 3x;
* JAX ``lax.scan`` under ``jax.jit`` on the same problem when JAX is importable (it is not
  a dependency; without it the column says n/a);
* the small-state cell: the gradient of RK4 over a state of 4 (MLP 4 -> 16 -> 4, 100 steps),
  where the per-step cost dominates, against JAX and PyTorch (eager autograd) when they
  are importable: target within 3x of JAX; and a state of 4 read element by element (a
  Lorenz field, whose reverse loop pads cotangents). ``--small-only`` runs only these.

Every run time is the median of interleaved rounds (each cell called in turn, so all see
the same load), in wall time and in CPU time (which moves less on a shared machine).

Run: ``python -m bench.control_flow [--steps 1000] [--quick] [--skip-unrolled]
[--small-only]``
(``--python``-style peers: run it with an interpreter that has JAX, e.g.
``PYTHONPATH=. /work/benchenv/bin/python -m bench.control_flow``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import primflow as pf  # noqa: E402
from primflow.science.time_stepping import mlp_field, odeint_rk4, unrolled_rk4  # noqa: E402

STATE, HIDDEN, DT = 256, 64, 0.01


def problem(seed=0):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal((STATE, HIDDEN)) / np.sqrt(STATE), np.zeros(HIDDEN),
              rng.standard_normal((HIDDEN, STATE)) * 0.1 / np.sqrt(HIDDEN), np.zeros(STATE)]
    y0 = rng.uniform(-1, 1, STATE)
    return [pf.to_tensor(p) for p in params], pf.to_tensor(y0), params, y0


def scan_loss(n):
    def loss(params, y0):
        y, _ = odeint_rk4(mlp_field, y0, DT, n, params)
        return (y * y).mean()
    return loss


def unrolled_loss(n):
    def loss(params, y0):
        y = unrolled_rk4(mlp_field, y0, DT, n, params)
        return (y * y).mean()
    return loss


def interleaved(calls, reps):
    """``{name: (median wall seconds, median CPU seconds)}`` of each zero-argument callable,
    timed in rounds that call each one in turn (on a shared machine every cell then sees
    the same load; CPU time, summed over the process's threads, moves less with load than
    wall time)."""
    for call in calls.values():
        call()
    wall = {name: [] for name in calls}
    cpu = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            w0, c0 = time.perf_counter(), time.process_time()
            call()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name]))
            for name in calls}


def timed(fn, *args, reps=5):
    fn(*args)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def compile_time(make, n, params, y0, backend):
    """Seconds to trace, optimize and compile (``lower``: nothing runs), with the generated
    code cache emptied first (an identical loop body compiled earlier would be reused)."""
    from primflow.compiler import _pipeline

    times = []
    for _ in range(7):  # the median of seven fresh compiles (the machine may be shared)
        _pipeline._code_cache.clear()
        jitted = pf.jit(make(n), backend=backend)
        t0 = time.perf_counter()
        jitted.lower(params, y0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), jitted


def cold_kernel_time(n, params, y0, backend):
    """Seconds from ``pf.jit`` to the whole-loop numba kernels of the forward and the
    gradient program running, from an empty kernel cache (None when the backend compiles
    no kernel)."""
    import tempfile

    if backend not in ("auto", "numba"):
        return None
    saved = pf.config.cache_dir
    with tempfile.TemporaryDirectory() as cache:
        pf.config.cache_dir = cache
        try:
            t0 = time.perf_counter()
            fwd = pf.jit(scan_loss(n), backend=backend)
            grad = pf.jit(pf.grad(scan_loss(n)), backend=backend)
            fwd.lower(params, y0)
            grad.lower(params, y0)
            fwd(params, y0)
            grad(params, y0)
            fwd.wait_compiled()
            grad.wait_compiled()
            return time.perf_counter() - t0
        finally:
            pf.config.cache_dir = saved


def jax_scan(n, params_np, y0_np):
    """The JAX forward and gradient as zero-argument callables, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def field(y, p):
        w1, b1, w2, b2 = p
        return jnp.tanh(y @ w1 + b1) @ w2 + b2

    def loss(p, y0):
        def step(y, _):
            k1 = field(y, p)
            k2 = field(y + 0.5 * DT * k1, p)
            k3 = field(y + 0.5 * DT * k2, p)
            k4 = field(y + DT * k3, p)
            return y + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None
        y, _ = jax.lax.scan(step, y0, None, length=n)
        return (y * y).mean()

    p = [jnp.asarray(a) for a in params_np]
    y0 = jnp.asarray(y0_np)
    fwd = jax.jit(loss)
    grad = jax.jit(jax.grad(loss))
    return {"jax_forward": lambda: fwd(p, y0).block_until_ready(),
            "jax_gradient": lambda: jax.tree_util.tree_map(lambda a: a.block_until_ready(),
                                                           grad(p, y0))}


SMALL_STATE, SMALL_HIDDEN, SMALL_STEPS = 4, 16, 100


def small_problem(seed=1):
    """The small-state cell's MLP field (4 -> 16 -> 4) and initial state."""
    rng = np.random.default_rng(seed)
    s, h = SMALL_STATE, SMALL_HIDDEN
    params = [rng.standard_normal((s, h)) / np.sqrt(s), np.zeros(h),
              rng.standard_normal((h, s)) * 0.1 / np.sqrt(h), np.zeros(s)]
    y0 = rng.uniform(-1, 1, s)
    return [pf.to_tensor(p) for p in params], pf.to_tensor(y0), params, y0


def torch_scan(n, params_np, y0_np):
    """The PyTorch gradient (eager autograd over a Python loop: PyTorch has no scan) as a
    zero-argument callable, or None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    p = [torch.tensor(a, requires_grad=True) for a in params_np]
    y0 = torch.tensor(y0_np)

    def field(y):
        return torch.tanh(y @ p[0] + p[1]) @ p[2] + p[3]

    def gradient():
        y = y0
        for _ in range(n):
            k1 = field(y)
            k2 = field(y + 0.5 * DT * k1)
            k3 = field(y + 0.5 * DT * k2)
            k4 = field(y + DT * k3)
            y = y + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return torch.autograd.grad((y * y).mean(), p)

    return gradient


def lorenz_field(y, p):
    """A small field that reads its state element by element (its reverse mode pads each
    element's cotangent back into a vector): Lorenz's system plus a decaying fourth state."""
    return pf.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                     y[0] * y[1] - p[2] * y[2], -y[3]])


def lorenz_loss(p, y0):
    y, _ = odeint_rk4(lorenz_field, y0, 0.001, SMALL_STEPS, p)
    return (y * y).sum()


def jax_lorenz(p_np, y0_np):
    """JAX's gradient of ``lorenz_loss`` as a zero-argument callable, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def field(y, p):
        return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                          y[0] * y[1] - p[2] * y[2], -y[3]])

    def loss(p, y0):
        def step(y, _):
            k1 = field(y, p)
            k2 = field(y + 0.5 * 0.001 * k1, p)
            k3 = field(y + 0.5 * 0.001 * k2, p)
            k4 = field(y + 0.001 * k3, p)
            return y + 0.001 / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None
        y, _ = jax.lax.scan(step, y0, None, length=SMALL_STEPS)
        return (y * y).sum()

    grad = jax.jit(jax.grad(loss))
    p, y0 = jnp.asarray(p_np), jnp.asarray(y0_np)
    return lambda: grad(p, y0).block_until_ready()


def small_state_cells(backend, reps):
    """The gradient of RK4 over a state of 4 (100 steps): the per-step cost, where the
    large-state cells measure the arithmetic. Returns the lines to print."""
    params, y0, params_np, y0_np = small_problem()
    grad = pf.jit(pf.grad(scan_loss(SMALL_STEPS)), backend=backend)
    grad(params, y0)
    grad.wait_compiled()
    python_loop = pf.jit(pf.grad(scan_loss(SMALL_STEPS)), backend="numpy")
    calls = {"small": lambda: grad(params, y0),
             "small_python_loop": lambda: python_loop(params, y0)}
    jax_calls = jax_scan(SMALL_STEPS, params_np, y0_np)
    if jax_calls is not None:
        calls["small_jax"] = jax_calls["jax_gradient"]
    torch_call = torch_scan(SMALL_STEPS, params_np, y0_np)
    if torch_call is not None:
        calls["small_torch"] = torch_call
    p_np, s_np = np.array([10.0, 28.0, 8 / 3]), np.array([1.0, 0.5, 0.2, 0.1])
    lorenz = pf.jit(pf.grad(lorenz_loss), backend=backend)
    lorenz_args = (pf.to_tensor(p_np), pf.to_tensor(s_np))
    lorenz(*lorenz_args)
    lorenz.wait_compiled()
    calls["lorenz"] = lambda: lorenz(*lorenz_args)
    jax_call = jax_lorenz(p_np, s_np)
    if jax_call is not None:
        calls["lorenz_jax"] = jax_call
    t = interleaved(calls, reps)
    kind = ("one numba kernel per loop" if grad.lower(params, y0).compile().kernels
            else "Python loop")
    lines = [f"RK4 gradient (jit of grad), state {SMALL_STATE}, MLP {SMALL_STATE}->"
             f"{SMALL_HIDDEN}->{SMALL_STATE}, {SMALL_STEPS} steps:"]
    for name, label in (("small", f"primflow ({kind})"),
                        ("small_python_loop", "primflow, backend numpy (Python loop)"),
                        ("small_jax", "JAX jit(grad)"), ("small_torch", "PyTorch eager")):
        if name not in t:
            lines.append(f"  {label:40s} n/a (not installed)")
            continue
        ratio = (f"   primflow/this {t['small'][0] / t[name][0]:.2f}x"
                 if name in ("small_jax", "small_torch") else "")
        lines.append(f"  {label:40s} {t[name][0] * 1e3:8.3f} ms (CPU "
                     f"{t[name][1] * 1e3:7.3f} ms){ratio}")
    if "small_jax" in t:
        lines.append(f"  target: primflow within 3x of JAX: "
                     f"{t['small'][0] / t['small_jax'][0]:.2f}x (CPU "
                     f"{t['small'][1] / t['small_jax'][1]:.2f}x)")
    lines.append(f"RK4 gradient, state 4 read element by element (Lorenz field), "
                 f"{SMALL_STEPS} steps:")
    lines.append(f"  {'primflow':40s} {t['lorenz'][0] * 1e3:8.3f} ms (CPU "
                 f"{t['lorenz'][1] * 1e3:7.3f} ms)")
    if "lorenz_jax" in t:
        lines.append(f"  {'JAX jit(grad)':40s} {t['lorenz_jax'][0] * 1e3:8.3f} ms (CPU "
                     f"{t['lorenz_jax'][1] * 1e3:7.3f} ms)   primflow/JAX "
                     f"{t['lorenz'][0] / t['lorenz_jax'][0]:.2f}x (CPU "
                     f"{t['lorenz'][1] / t['lorenz_jax'][1]:.2f}x)")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--backend", default="auto",
                        help="pf.jit backend for every primflow cell (default auto, pf.jit's "
                             "default: whole-loop numba kernels when numba is installed)")
    parser.add_argument("--skip-unrolled", action="store_true",
                        help="leave out the unrolled program (its compile takes minutes)")
    parser.add_argument("--small-only", action="store_true",
                        help="only the small-state gradient cell (state 4, 100 steps)")
    args = parser.parse_args(argv)
    pf.set_default_dtype("float64")
    reps = 5 if args.quick else 11
    small = small_state_cells(args.backend, 5 * reps)
    if args.small_only:
        print("\n".join(small))
        return
    n = args.steps
    params, y0, params_np, y0_np = problem()
    compile_time(scan_loss, 10, params, y0, args.backend)  # (imports, numba's first load)
    c10, _ = compile_time(scan_loss, 10, params, y0, args.backend)
    cn, fwd = compile_time(scan_loss, n, params, y0, args.backend)
    fwd(params, y0)
    fwd.wait_compiled()  # the background numba compile (a no-op for backend numpy)
    python_loop = pf.jit(scan_loss(n), backend="numpy")
    cold = cold_kernel_time(n, params, y0, args.backend)
    grad = pf.jit(pf.grad(scan_loss(n)), backend=args.backend)
    grad(params, y0)
    grad.wait_compiled()
    calls = {"scan": lambda: fwd(params, y0), "python_loop": lambda: python_loop(params, y0),
             "gradient": lambda: grad(params, y0)}
    cu = None
    if not args.skip_unrolled:
        t0 = time.perf_counter()  # the unrolled program is compiled once (it takes long)
        unrolled = pf.jit(unrolled_loss(n), backend=args.backend)
        unrolled.lower(params, y0)
        cu = time.perf_counter() - t0
        calls["unrolled"] = lambda: unrolled(params, y0)
    jax_calls = jax_scan(n, params_np, y0_np)
    calls.update(jax_calls or {})
    t = interleaved(calls, reps)

    def ms(name):
        return f"{t[name][0] * 1e3:8.2f} ms (CPU {t[name][1] * 1e3:7.2f} ms)"

    def ratio(a, b):
        return f"{t[a][0] / t[b][0]:.2f}x (CPU {t[a][1] / t[b][1]:.2f}x)"

    print(f"RK4 in pf.scan, {n} steps, state {STATE}, MLP {STATE}->{HIDDEN}->{STATE}, "
          f"float64, backend={args.backend}, python {sys.version.split()[0]}; medians of "
          f"{reps} interleaved rounds")
    print(f"  compile time, 10 steps:        {c10 * 1e3:8.1f} ms")
    print(f"  compile time, {n} steps:     {cn * 1e3:8.1f} ms   ratio {cn / c10:.2f}x "
          f"(target <= 1.5x, <= 1000 ms)")
    if cold is not None:
        print(f"  numba loop kernels (fwd+grad) running after {cold:.1f} s from an empty "
              f"kernel cache (background compile; NumPy code runs meanwhile)")
    kind = "one numba kernel" if fwd.lower(params, y0).compile().kernels else "Python loop"
    print(f"  run time, scan ({kind}): {ms('scan')}")
    print(f"  run time, scan as a Python loop over its compiled body (backend numpy): "
          f"{ms('python_loop')}")
    if cu is not None:
        print(f"  compile time, unrolled:        {cu * 1e3:8.1f} ms")
        print(f"  run time, unrolled:            {ms('unrolled')}   scan/unrolled "
              f"{ratio('scan', 'unrolled')} (target <= 1.2x)")
    print(f"  gradient (jit of grad):        {ms('gradient')}   grad/forward "
          f"{ratio('gradient', 'scan')} (target <= 3x)")
    if jax_calls is None:
        print("  JAX lax.scan under jax.jit:    n/a (jax is not installed)")
    else:
        print(f"  JAX lax.scan forward:          {ms('jax_forward')}   primflow/JAX "
              f"{ratio('scan', 'jax_forward')}")
        print(f"  JAX lax.scan gradient:         {ms('jax_gradient')}   primflow/JAX "
              f"{ratio('gradient', 'jax_gradient')}")
    print("\n".join(small))


if __name__ == "__main__":
    main()
