"""W2: the biharmonic Δ²u = u_xxxx + 2 u_xxyy + u_yyyy of an MLP at N points.

u is the MLP 2-64-64-64-1 with tanh (float64, fixed seed; weights plain tensors closed over,
not differentiated), the points are uniform in [0, 1]^2, N = 1,024 and 4,096 (only 1,024 with
``--quick``). Milliseconds per call of the whole operator, and peak memory:

    primflow collapsed   ``pf.autograd.biharmonic(u, X, method="collapsed")`` (collapsed Taylor
                         mode, 4 directions for d = 2, top coefficient summed once)
    primflow taylor      ``method="taylor"`` (one full Taylor series per direction, vmapped)
    primflow nested      ``method="nested"`` (nested reverse mode on the tape)
    primflow stochastic  ``method="stochastic", samples=16`` (STDE: (1/3) mean of D_v^4 u over
                         16 Gaussian directions; an unbiased *estimate*, not the exact value)
    primflow jit         ``pf.jit(lambda X: pf.autograd.biharmonic(u, X, method=...))`` for
                         collapsed and taylor (cells ``jit_collapsed_N``, ``jit_taylor_N``),
                         after the first call; compile time and the disk-cache first call as in
                         ``bench/jit_support.py``; the result is checked against eager
    PyTorch nested       nested ``torch.autograd.grad(... .sum(), X, create_graph=True)``:
                         Laplacian (1 + 2 grads), then the Laplacian of that (1 + 2 grads)
    JAX jit nested       ``jax.jit(jax.vmap(bih))`` with bih built from nested scalar
                         ``jax.grad``s of u: R^2 -> R (u_xxxx + 2 u_xxyy + u_yyyy), after
                         compilation

Memory (every cell in its own process): the resident set size right after imports and setup
(weights, points, the function built; before the first call) is the baseline. After the first
call (JAX: trace + compile) the kernel's peak-RSS mark is reset (``/proc/self/clear_refs``),
the timed calls run, and the peak RSS (``VmHWM``; ``ru_maxrss`` off Linux) minus the
baseline is the cell's peak memory (``peak_mb``). Where the reset is unavailable the peak
also covers the first call. primflow cells also report ``traced_mb``: the tracemalloc peak
of one call (NumPy arrays and Python objects allocated during the call), a per-call figure
free of allocator effects.

Correctness: every cell returns a strided sample of its output; the report checks that the
exact methods agree (max |a - b| / max |b| < 1e-8) and shows the stochastic estimate's
relative error.
"""

from __future__ import annotations

from .. import report as rp
from ..registry import Config

ID = "W2"
TITLE = ("biharmonic Δ²u of the MLP 2-64-64-64-1 (tanh, float64) at N points in [0,1]^2, "
         "ms per call and peak memory")

DIMS = (2, 64, 64, 64, 1)
SEED = 0
SIZES = (1024, 4096)
QUICK_SIZES = (1024,)
SAMPLES = 16  # stochastic directions
SAMPLE_POINTS = 512  # outputs returned per cell (strided), for the cross-checks
TOL = 1e-8  # relative, between exact methods

PF_METHODS = ("collapsed", "taylor", "nested", "stochastic")
JIT_METHODS = ("jit_collapsed", "jit_taylor")
JIT_TOL = 1e-10  # relative, jit vs eager of the same method
EXACT = (("primflow", "collapsed"), ("primflow", "taylor"), ("primflow", "nested"),
         ("torch", "nested"), ("jax_jit", "nested"), ("primflow", "jit_collapsed"),
         ("primflow", "jit_taylor"))

CONFIGS = [c for n in SIZES for c in (
    Config("primflow", f"collapsed_{n}", "pf.autograd.biharmonic(method='collapsed')",
           quick=n in QUICK_SIZES),
    Config("torch", f"nested_{n}", "nested torch.autograd.grad on .sum()", quick=n in QUICK_SIZES),
    Config("jax_jit", f"nested_{n}", "jax.jit(jax.vmap(nested scalar grads)), after compile",
           quick=n in QUICK_SIZES),
    Config("primflow", f"taylor_{n}", "method='taylor'", quick=n in QUICK_SIZES),
    Config("primflow", f"nested_{n}", "method='nested'", quick=n in QUICK_SIZES),
    Config("primflow", f"stochastic_{n}", f"method='stochastic', samples={SAMPLES} (estimate)",
           quick=n in QUICK_SIZES),
    Config("primflow", f"jit_collapsed_{n}", "pf.jit of biharmonic(method='collapsed')",
           quick=n in QUICK_SIZES),
    Config("primflow", f"jit_taylor_{n}", "pf.jit of biharmonic(method='taylor')",
           quick=n in QUICK_SIZES),
)]

# the reference machine's figures (workload notes): N -> (ms, peak MB or None)
REF_TORCH = {1024: (49.0, None), 4096: (225.0, 674.0)}
REF_JAX = {1024: (21.6, None), 4096: (113.0, 409.0)}


def _parse(config):
    method, n = config.rsplit("_", 1)
    return method, int(n)


# --- shared data (NumPy, the same in every process; also used by W3) ---------------------------

def mlp_params(dims=DIMS, seed=SEED):
    """[W1, b1, W2, b2, ...] as NumPy float64: W [in, out] Glorot-uniform, b ~ 0.1 N(0, 1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i, o in zip(dims[:-1], dims[1:]):
        lim = np.sqrt(6.0 / (i + o))
        out.append(rng.uniform(-lim, lim, (i, o)))
        out.append(0.1 * rng.standard_normal(o))
    return out


def interior_points(n, seed=SEED + 1):
    import numpy as np

    return np.random.default_rng(seed).uniform(0.0, 1.0, (n, 2))


def mlp(P, p, tanh):
    """u(P) for points P [N, 2] -> [N, 1], written once for every framework."""
    h = P
    for j in range(0, len(p) - 2, 2):
        h = tanh(h @ p[j] + p[j + 1])
    return h @ p[-2] + p[-1]


def torch_biharmonic(u, X):
    """Δ²u at X [N, 2] (X requires grad) by nested ``torch.autograd.grad`` of sums: the
    Laplacian (grad, then one grad per dim), then the Laplacian of the Laplacian. Every grad
    keeps its graph (create_graph=True), as a PINN residual needs. Returns [N]."""
    import torch

    def lap(v):
        (g,) = torch.autograd.grad(v.sum(), X, create_graph=True)
        total = None
        for i in range(X.shape[1]):
            (gi,) = torch.autograd.grad(g[:, i].sum(), X, create_graph=True)
            total = gi[:, i] if total is None else total + gi[:, i]
        return total

    return lap(lap(u(X)))


def jax_biharmonic(u):
    """bih(x) for one point x [2], from a scalar u: R^2 -> R by nested ``jax.grad``:
    u_xxxx + 2 u_xxyy + u_yyyy (to be vmapped and jitted)."""
    import jax

    def d(f, i):
        return lambda x: jax.grad(f)(x)[i]

    uxx = d(d(u, 0), 0)
    uyy = d(d(u, 1), 1)
    return lambda x: d(d(uxx, 0), 0)(x) + 2.0 * d(d(uxx, 1), 1)(x) + d(d(uyy, 1), 1)(x)


# --- memory ------------------------------------------------------------------------------------

def measure_with_memory(step, quick, extra_first=None, first_call=None):
    """Baseline RSS (the caller has done imports and setup), first call, peak reset, timing.
    Returns (timing dict, first-call seconds, memory dict). ``first_call(step)``, when given,
    makes the first call and returns its seconds (the jit cells record its phases)."""
    import gc
    import time

    from ..timing import FULL, QUICK, measure, peak_rss_bytes, reset_peak_rss, rss_bytes

    gc.collect()
    base = rss_bytes()
    if first_call is not None:
        first = first_call(step)
    else:
        t0 = time.perf_counter()
        step()  # for JAX jit: trace + compile + first run
        first = time.perf_counter() - t0
    if extra_first is not None:
        extra_first()
    gc.collect()
    after_first = rss_bytes()
    reset = reset_peak_rss()
    m = measure(step, **(QUICK if quick else FULL))
    peak = peak_rss_bytes()
    mem = {"peak_mb": (peak - base) / 2**20, "baseline_mb": base / 2**20,
           "after_first_mb": after_first / 2**20, "peak_rss_mb": peak / 2**20,
           "peak_reset": reset,
           "memory_method": ("peak RSS (VmHWM) after resetting the peak mark past the first call, "
                             "minus the RSS after imports and setup" if reset else
                             "peak RSS (whole process, incl. the first call) minus the RSS "
                             "after imports and setup")}
    return m, first, mem


def traced_peak_mb(step):
    """tracemalloc peak of one call (NumPy registers its buffers with tracemalloc)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


# --- one framework each: returns (step, result) ------------------------------------------------

def _primflow(method, n):
    import primflow as pf

    p = [pf.to_tensor(a) for a in mlp_params()]
    X = pf.to_tensor(interior_points(n))

    def u(P):
        return mlp(P, p, pf.tanh)

    jit = method.startswith("jit_")
    base = method[4:] if jit else method

    def bih(X):
        return pf.autograd.biharmonic(u, X, method=base, samples=SAMPLES, seed=SEED + 7)

    fn = pf.jit(bih) if jit else bih

    def step():
        return fn(X)
    step.jitted = fn if jit else None
    step.eager = lambda: bih(X).numpy().ravel()
    return step, (lambda: step().numpy().ravel())


def _torch(n):
    import torch

    from ..timing import torch_single_thread

    torch_single_thread(torch)
    p = [torch.from_numpy(a.copy()) for a in mlp_params()]
    X = torch.from_numpy(interior_points(n)).requires_grad_(True)

    def u(P):
        return mlp(P, p, torch.tanh)

    def step():
        return torch_biharmonic(u, X)
    return step, (lambda: step().detach().numpy().ravel())


def _jax(n):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    p = [jnp.asarray(a) for a in mlp_params()]
    X = jnp.asarray(interior_points(n))

    def u(x):  # one point [2] -> scalar
        return mlp(x[None, :], p, jnp.tanh)[0, 0]

    fn = jax.jit(jax.vmap(jax_biharmonic(u)))

    def step():
        return fn(X).block_until_ready()
    return step, (lambda: np.asarray(step()).ravel())


def make_step(framework: str, config: str):
    """(step, result): one biharmonic at all N points, and the same as a flat NumPy array.
    Also used by ``python -m bench.profile_one`` and ``bench.profile_prims``."""
    method, n = _parse(config)
    if framework == "primflow":
        return _primflow(method, n)
    if framework == "torch":
        return _torch(n)
    return _jax(n)


def run(framework: str, config: str, quick: bool) -> dict:
    import numpy as np

    from ..timing import pin_to_one_core

    if framework.startswith("jax"):
        pin_to_one_core()
    method, n = _parse(config)
    jit = method.startswith("jit_")
    first_info = {}
    if jit:
        from .. import jit_support

        info = jit_support.prepare()  # imports numba before the memory baseline

        def first_call(step):
            first_, phases, counts = jit_support.first_call(step)
            first_info.update(phases=phases, counts=counts)
            return first_
    step, result = make_step(framework, config)
    m, first, mem = measure_with_memory(step, quick, first_call=first_call if jit else None)
    out = result()
    stride = max(1, n // SAMPLE_POINTS)
    res = {"value": m["median_s"] * 1e3, "unit": "ms", "min": m["min_s"] * 1e3,
           "reps_ms": [t * 1e3 for t in m["times_s"]], "reps": m["reps"], "inner": m["inner"],
           "first_call_ms": first * 1e3, "n": n, "method": method, **mem,
           "shape": list(out.shape), "sample_stride": stride,
           "sample": out[::stride].tolist(), "checksum": float(out.sum()),
           "max_abs": float(np.abs(out).max())}
    if framework == "jax_jit":
        res["compile_ms"] = (first - m["median_s"]) * 1e3
    if framework == "primflow":
        res["traced_mb"] = traced_peak_mb(step)
    if jit:
        res["jit_vs_eager"] = jit_support.rel_diff(out, step.eager())
        res.update(jit_support.fields(info, first, first_info["phases"], first_info["counts"],
                                      m["median_s"], ID, framework, config, quick,
                                      jitted=[step.jitted]))
    return res


# --- the table --------------------------------------------------------------------------------

def rel_diff(a, b):
    """max |a - b| / max |b| over two cells' sampled outputs (None when either is missing)."""
    if not (rp.ok(a) and rp.ok(b)) or "sample" not in a or "sample" not in b:
        return None
    if len(a["sample"]) != len(b["sample"]) or a.get("shape") != b.get("shape"):
        return float("inf")
    scale = max(abs(y) for y in b["sample"]) or 1.0
    return max(abs(x - y) for x, y in zip(a["sample"], b["sample"])) / scale


def _mem(res, key="peak_mb"):
    return f"{res[key]:.0f}" if rp.ok(res) and res.get(key) is not None else rp.NA


def report(results) -> str:
    def r(fw, method, n):
        return results.get((fw, f"{method}_{n}"))

    def v(fw, method, n):
        return rp.value(r(fw, method, n))

    cols = [("primflow", m) for m in PF_METHODS] + [("torch", "nested"), ("jax_jit", "nested")]
    labels = ["pf collapsed", "pf taylor", "pf nested", "pf stoch.*", "PyTorch", "JAX jit"]
    sizes = [n for n in SIZES if any(r(fw, m, n) for fw, m in cols)]
    rows, mrows = [], []
    for n in sizes:
        pc, to = v("primflow", "collapsed", n), v("torch", "nested", n)
        jx = v("jax_jit", "nested", n)
        rows.append([f"N={n}"] + [rp.cell(r(fw, m, n), "{:.1f}") for fw, m in cols]
                    + [rp.ratio(pc, to), rp.ratio(pc, jx),
                       rp.ratio(v("primflow", "nested", n), to)])
        pcr, tor = r("primflow", "collapsed", n), r("torch", "nested", n)
        jxr = r("jax_jit", "nested", n)
        mrows.append([f"N={n}"] + [_mem(r(fw, m, n)) for fw, m in cols]
                     + [rp.ratio(pcr.get("peak_mb") if rp.ok(pcr) else None,
                                 tor.get("peak_mb") if rp.ok(tor) else None),
                        rp.ratio(pcr.get("peak_mb") if rp.ok(pcr) else None,
                                 jxr.get("peak_mb") if rp.ok(jxr) else None),
                        _mem(pcr, "traced_mb")])
    reps = next((res.get("reps") for res in results.values() if rp.ok(res) and "reps" in res), None)
    how = f"median of {reps} reps, " if reps else ""
    out = [f"{ID}  {TITLE}  ({how}one process per cell)", "", "  time, ms"]
    out.append(rp.table([""] + labels + ["collapsed/torch", "collapsed/jax", "pf nested/torch"],
                        rows))
    out += ["", "  peak memory above the post-setup baseline, MB (RSS)"]
    out.append(rp.table([""] + labels + ["collapsed/torch", "collapsed/jax",
                                         "pf collapsed traced MB"], mrows))
    reset = all(res.get("peak_reset", False) for res in results.values() if rp.ok(res))
    out.append("  memory: peak RSS (VmHWM) minus the RSS after imports and setup; "
               + ("the peak mark is reset after the first call (JAX compile excluded)"
                  if reset else "the peak includes the first call (JAX: compile)")
               + "; traced MB = tracemalloc peak of one primflow call.")
    out.append(f"  * stochastic = STDE estimate from {SAMPLES} Gaussian directions (not exact). "
               "PyTorch: nested autograd.grad on .sum() (Laplacian of Laplacian, create_graph). "
               "JAX jit: jit(vmap(nested scalar grads)), after compile.")
    comp = [f"N={n} {r('jax_jit', 'nested', n)['compile_ms']:.0f}" for n in sizes
            if rp.ok(r("jax_jit", "nested", n))]
    if comp:
        out.append("  JAX compile ms (first call - steady call): " + ", ".join(comp))

    # correctness: exact methods agree; stochastic error
    out.append("")
    bad, lines, est = [], [], []
    for n in sizes:
        base = r("primflow", "collapsed", n)
        worst, worst_pair = None, None
        present = [(fw, m) for fw, m in EXACT if rp.ok(r(fw, m, n))]
        for i, a in enumerate(present):
            for b in present[i + 1:]:
                d = rel_diff(r(*a, n), r(*b, n))
                if d is not None and (worst is None or d > worst):
                    worst, worst_pair = d, f"{a[0]}/{a[1]} vs {b[0]}/{b[1]}"
                if d is not None and not d <= TOL:
                    bad.append(f"N={n}: {a[0]}/{a[1]} vs {b[0]}/{b[1]} differ by {d:.2e}")
        if worst is not None:
            lines.append(f"N={n} {worst:.1e} ({worst_pair}; {len(present)} methods)")
        d = rel_diff(r("primflow", "stochastic", n), base)
        if d is not None:
            est.append(f"N={n} {d:.2f}")
    if lines:
        out.append("  check: max relative difference between exact methods (strided sample of "
                   f"{SAMPLE_POINTS} points): " + ", ".join(lines))
    if est:
        out.append("  stochastic estimate vs exact (max |est - exact| / max |exact|): "
                   + ", ".join(est) + f"  (an unbiased estimate from {SAMPLES} directions)")
    if bad:
        out.append("  CHECK FAILED: " + "; ".join(bad))
    elif lines:
        out.append(f"  check: all exact methods agree (tolerance {TOL:g})")

    # the targets
    for n in sizes:
        pcr, tor = r("primflow", "collapsed", n), r("torch", "nested", n)
        jxr = r("jax_jit", "nested", n)
        if rp.ok(pcr) and rp.ok(tor):
            q = pcr["value"] / tor["value"]
            time_ok, mem_ok = q <= 0.5, pcr["peak_mb"] < tor["peak_mb"]
            verdict = ("met" if time_ok and mem_ok else
                       "NOT met (" + " and ".join(w for w, bad_ in (("time", not time_ok),
                                                                   ("memory", not mem_ok))
                                                  if bad_) + ")")
            out.append(f"  target N={n}: eager pf collapsed >= 2x faster than PyTorch nested, with "
                       f"less memory: time pf/torch {q:.2f}x (needs <= 0.50x)"
                       f"{rp.per_round(pcr, tor)}, memory {pcr['peak_mb']:.0f} vs "
                       f"{tor['peak_mb']:.0f} MB -> {verdict}")
        else:
            out.append(f"  target N={n}: pf collapsed vs PyTorch: n/a (needs both results)")
        if rp.ok(pcr) and rp.ok(jxr):
            out.append(f"  jit target N={n} (reported only; goal: time and memory <= 0.50x of "
                       f"JAX jit): pf collapsed eager time {pcr['value'] / jxr['value']:.2f}x"
                       f"{rp.per_round(pcr, jxr)}, memory "
                       f"{pcr['peak_mb'] / max(jxr['peak_mb'], 1e-9):.2f}x of JAX jit's")
    out += _jit_report(results, sizes)
    out.append("  reference machine (workload notes): PyTorch N=1024 49 ms, N=4096 225 ms / "
               "674 MB; JAX jit N=1024 21.6 ms, N=4096 113 ms / 409 MB (whole-process peak RSS)")
    return "\n".join(out)


def _jit_report(results, sizes) -> list:
    """The primflow jit table, its checks and the jit target (time and memory vs JAX jit)."""
    from .. import jit_support

    def r(fw, method, n):
        return results.get((fw, f"{method}_{n}"))

    def v(fw, method, n):
        return rp.value(r(fw, method, n))

    def mb(res):
        return res.get("peak_mb") if rp.ok(res) else None

    jsizes = [n for n in sizes if any(r("primflow", m, n) for m in JIT_METHODS)]
    if not jsizes:
        return []
    rows, lines = [], []
    for n in jsizes:
        jx = r("jax_jit", "nested", n)
        row = [f"N={n}"]
        for m in JIT_METHODS:
            res = r("primflow", m, n)
            row += [rp.cell(res, "{:.1f}"), rp.ratio(v("primflow", m[4:], n), v("primflow", m, n)),
                    rp.ratio(v("primflow", m, n), rp.value(jx)), _mem(res),
                    rp.ratio(mb(res), mb(jx)),
                    f"{res['cached']['peak_mb']:.0f}"
                    if rp.ok(res) and "peak_mb" in res.get("cached", {}) else rp.NA]
        rows.append(row + [rp.cell(jx, "{:.1f}"), _mem(jx)])
        verdicts = []
        for m in JIT_METHODS:
            res = r("primflow", m, n)
            if rp.ok(res) and rp.ok(jx):
                tq, mq = res["value"] / jx["value"], mb(res) / max(mb(jx), 1e-9)
                ok_ = tq <= 0.5 and mq <= 0.5
                text = f"{m[4:]}: time {tq:.2f}x{rp.per_round(res, jx)}, memory {mq:.2f}x"
                verdicts.append((ok_, text))
        if verdicts:
            met = any(ok_ for ok_, _ in verdicts)
            detail = "; ".join(t for _, t in verdicts)
            lines.append(f"  target N={n}: pf jit (exact) >= 2x faster than JAX jit with half "
                         f"its peak memory (both <= 0.50x): {detail} -> "
                         f"{'met' if met else 'NOT met'}")
        else:
            lines.append(f"  target N={n}: pf jit vs JAX jit: n/a (needs both results)")
    out = ["", ("  primflow jit (pf.jit of pf.autograd.biharmonic; ms after the first call, "
                "peak MB as above)")]
    heads = [""]
    for m in JIT_METHODS:
        k = m[4:]
        heads += [f"jit {k} ms", "eager/jit", "/jax", "MB", "MB/jax", "MB 2nd proc"]
    out.append(rp.table(heads + ["JAX jit ms", "JAX MB"], rows))
    out.append("  MB 2nd proc: the same peak in a second process whose numba kernels come from "
               "the disk cache (no LLVM compile in the process).")
    out += jit_support.compile_report(
        [(f"{m[4:]} N={n}", r("primflow", m, n)) for n in jsizes for m in JIT_METHODS])
    out += jit_support.check_lines(
        [(f"{m}_{n}", r("primflow", m, n)) for n in jsizes for m in JIT_METHODS],
        "jit results equal eager", JIT_TOL)
    return out + lines
