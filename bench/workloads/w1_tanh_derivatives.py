"""W1: the k-th derivative of tanh at 100,000 float64 points, k = 1..8.

Each framework the way its users would write it, milliseconds per call of the whole k-th
derivative (one process per framework, method and k):

    primflow Taylor   ``pf.jet(pf.tanh, (x,), ([ones, zeros, ...],))`` with a series of length
                      k; the k-th output coefficient is d^k tanh / dx^k (one Taylor pass, O(k^2)
                      per element)
    primflow nested   ``y = pf.tanh(x)`` then k times ``(y,) = pf.grad(y.sum(), x,
                      create_graph=True)`` (eager tape)
    PyTorch nested    the same with ``torch.autograd.grad(y.sum(), x, create_graph=True)``
    primflow jit      ``pf.jit`` of each of the two (``jit_taylor``, ``jit_nested``), timed after
                      the first call; the first call minus a warm call is the compile time,
                      also measured in a second process that reuses the disk cache (see
                      ``bench/jit_support.py``), and the result is checked against eager
    JAX jit nested    ``jax.jit(jax.vmap(grad(grad(...grad(jnp.tanh)))))``, after compilation
    JAX jit jet       ``jax.jit`` of ``jax.experimental.jet.jet(jnp.tanh, ...)``, after compilation
    NumPy closed      the closed form, evaluated as a polynomial in t = tanh(x) (the floor and
                      the reference every cell checks against)

Closed form: d^k tanh / dx^k = P_k(tanh x) with P_0(t) = t and P_{k+1}(t) = (1 - t^2) P_k'(t).

With ``--quick`` only k in {1, 2, 4, 8} run (the other cells are n/a).
"""

from __future__ import annotations

from .. import report as rp
from ..registry import Config

ID = "W1"
TITLE = "d^k/dx^k tanh(x) at 100,000 float64 points, ms per call"

N_POINTS = 100_000
K_ALL = tuple(range(1, 9))
K_QUICK = (1, 2, 4, 8)
SEED = 0
X_RANGE = (-3.0, 3.0)
TOL = 1e-10  # max abs difference to the closed form, relative to max |closed form|

# (framework, method) -> description; the columns of the table, in order
METHODS = (
    ("numpy", "closed", "closed form P_k(tanh x), hand-written (floor and reference)"),
    ("primflow", "taylor", "pf.jet(pf.tanh, (x,), ([1, 0, ...],)), series of length k"),
    ("primflow", "nested", "k x pf.grad(y.sum(), x, create_graph=True)"),
    ("torch", "nested", "k x torch.autograd.grad(y.sum(), x, create_graph=True)"),
    ("jax_jit", "nested", "jax.jit(jax.vmap(grad^k(jnp.tanh))), after compile"),
    ("jax_jit", "jet", "jax.jit(jet(jnp.tanh, ...)), after compile"),
)

# primflow jit cells (a second table); with --quick only at k = 2 and 8
JIT_METHODS = (
    ("primflow", "jit_taylor", "pf.jit of the Taylor derivative (pf.jet), after the first call"),
    ("primflow", "jit_nested", "pf.jit of the k nested pf.grad calls, after the first call"),
)
K_JIT_QUICK = (2, 8)

# Grouped by k, so that the cells a ratio compares run next to each other.
CONFIGS = [c for k in K_ALL for c in (
    [Config(fw, f"{m}_k{k}", desc, quick=k in K_QUICK) for fw, m, desc in METHODS]
    + [Config(fw, f"{m}_k{k}", desc, quick=k in K_JIT_QUICK) for fw, m, desc in JIT_METHODS])]

# the reference machine's figures (workload notes), k -> ms
REF_TORCH_MS = {1: 0.662, 3: 1.96, 6: 18.9}
REF_JAX_MS = {1: 0.108, 3: 0.151, 6: 0.735}


def _parse(config):
    method, k = config.rsplit("_k", 1)
    return method, int(k)


def _points():
    import numpy as np

    return np.random.default_rng(SEED).uniform(*X_RANGE, N_POINTS)


def tanh_poly(k):
    """Coefficients (increasing powers) of P_k with d^k tanh / dx^k = P_k(tanh x)."""
    from numpy.polynomial import polynomial as P

    c = [0.0, 1.0]  # P_0(t) = t
    for _ in range(k):
        c = P.polymul([1.0, 0.0, -1.0], P.polyder(c))
    return c


def closed_form(k, x):
    import numpy as np
    from numpy.polynomial import polynomial as P

    return P.polyval(np.tanh(x), tanh_poly(k))


# --- one framework each: returns (step, result) ------------------------------------------------

def _numpy(k):
    x = _points()

    def step():
        return closed_form(k, x)
    return step, step


def _primflow_fn(method, k):
    """(f, x): the k-th derivative as a function of the points, and the points."""
    import primflow as pf

    a = _points()
    if method == "taylor":
        x = pf.to_tensor(a)

        def f(x):
            series = ([pf.ones_like(x)] + [pf.zeros_like(x) for _ in range(k - 1)],)
            _, ys = pf.jet(pf.tanh, (x,), series)
            return ys[k - 1]
    else:
        x = pf.to_tensor(a, stop_gradient=False)

        def f(x):
            y = pf.tanh(x)
            for _ in range(k):
                (y,) = pf.grad(y.sum(), x, create_graph=True)
            return y
    return f, x


def _primflow(method, k):
    import primflow as pf

    jit = method.startswith("jit_")
    f, x = _primflow_fn(method[4:] if jit else method, k)
    if jit:
        f = pf.jit(f)
    elif method == "taylor":  # the series built once, outside the timed call
        series = ([pf.ones_like(x)] + [pf.zeros_like(x) for _ in range(k - 1)],)

        def f(x):
            _, ys = pf.jet(pf.tanh, (x,), series)
            return ys[k - 1]

    def step():
        return f(x)
    step.jitted = f if jit else None
    return step, (lambda: step().numpy())


def _torch(k):
    import torch

    from ..timing import torch_single_thread

    torch_single_thread(torch)
    x = torch.from_numpy(_points()).requires_grad_(True)

    def step():
        y = torch.tanh(x)
        for _ in range(k):
            (y,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        return y
    return step, (lambda: step().detach().numpy())


def _jax(method, k):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(_points())
    if method == "nested":
        g = jnp.tanh
        for _ in range(k):
            g = jax.grad(g)
        fn = jax.jit(jax.vmap(g))
    else:
        from jax.experimental.jet import jet

        def kth(v):
            ones = jnp.ones_like(v)
            _, ys = jet(jnp.tanh, (v,), ([ones] + [jnp.zeros_like(v)] * (k - 1),))
            return ys[k - 1]
        fn = jax.jit(kth)

    def step():
        return fn(x).block_until_ready()
    return step, (lambda: np.asarray(step()))


def make_step(framework: str, config: str):
    """(step, result): one k-th derivative at all points, and the same as a NumPy array. Also
    used by ``python -m bench.profile_one`` and ``bench.profile_prims``."""
    method, k = _parse(config)
    if framework == "numpy":
        return _numpy(k)
    if framework == "primflow":
        return _primflow(method, k)
    if framework == "torch":
        return _torch(k)
    return _jax(method, k)


def run(framework: str, config: str, quick: bool) -> dict:
    import numpy as np

    from ..timing import FULL, QUICK, measure, pin_to_one_core

    if framework.startswith("jax"):
        pin_to_one_core()
    from .. import jit_support

    method, k = _parse(config)
    jit = method.startswith("jit_")
    if jit:
        info = jit_support.prepare()
    step, result = make_step(framework, config)
    first, phases, counts = jit_support.first_call(step, jit)
    m = measure(step, **(QUICK if quick else FULL))
    out = result()
    ref = closed_form(k, _points())
    scale = float(np.abs(ref).max())
    res = {"value": m["median_s"] * 1e3, "unit": "ms", "min": m["min_s"] * 1e3,
           "reps_ms": [t * 1e3 for t in m["times_s"]], "reps": m["reps"], "inner": m["inner"],
           "first_call_ms": first * 1e3, "k": k,
           "rel_diff": (float(np.abs(out - ref).max()) / scale if out.shape == ref.shape
                        else None),
           "ref_max_abs": scale}
    if framework == "jax_jit":
        res["compile_ms"] = (first - m["median_s"]) * 1e3
    if jit:
        f, x = _primflow_fn(method[4:], k)
        res["jit_vs_eager"] = jit_support.rel_diff(out, f(x).numpy())
        res.update(jit_support.fields(info, first, phases, counts, m["median_s"], ID, framework,
                                      config, quick, jitted=[step.jitted]))
    return res


# --- the table --------------------------------------------------------------------------------

def report(results) -> str:
    def r(fw, method, k):
        return results.get((fw, f"{method}_k{k}"))

    def v(fw, method, k):
        return rp.value(r(fw, method, k))

    def best_pf(k):
        """primflow's best eager method at k: (ms, method) or (None, None)."""
        cands = [(v("primflow", m, k), m) for m in ("taylor", "nested")
                 if v("primflow", m, k) is not None]
        return min(cands) if cands else (None, None)

    ks = [k for k in K_ALL if any(r(fw, m, k) for fw, m, _ in METHODS)]
    rows = []
    for k in ks:
        pbest, pm = best_pf(k)
        to, jn, jj = v("torch", "nested", k), v("jax_jit", "nested", k), v("jax_jit", "jet", k)
        jbest = min([t for t in (jn, jj) if t is not None], default=None)
        rows.append([f"k={k}"] + [rp.cell(r(fw, m, k), "{:.3f}") for fw, m, _ in METHODS]
                    + [rp.ratio(v("primflow", "taylor", k), to),
                       rp.ratio(v("primflow", "nested", k), to),
                       rp.ratio(pbest, jbest), rp.ratio(pbest, v("numpy", "closed", k))])
    reps = next((res.get("reps") for res in results.values() if rp.ok(res) and "reps" in res), None)
    how = f"median of {reps} reps, " if reps else ""
    out = [f"{ID}  {TITLE}  ({how}one process per cell)", ""]
    out.append(rp.table(["", "NumPy closed", "pf taylor", "pf nested", "PyTorch nested",
                         "JAX jit nested", "JAX jit jet", "taylor/torch", "nested/torch",
                         "pf best/jax best", "pf best/numpy"], rows))
    out.append("  pf taylor: pf.jet with a series of length k; pf nested / PyTorch: k x "
               "grad(y.sum(), x, create_graph=True); JAX jit: jit(vmap(grad^k)) and jit(jet), "
               "after compile; NumPy: closed form P_k(tanh x).")
    # primflow's own scaling in k
    t_rows = [f"k={k} {v('primflow', 'taylor', k) / v('primflow', 'taylor', 1):.2f}x"
              for k in ks if v("primflow", "taylor", k) and v("primflow", "taylor", 1)]
    if t_rows:
        out.append("  pf taylor time relative to k=1: " + ", ".join(t_rows))
    comp = [f"k={k} {r('jax_jit', 'nested', k)['compile_ms']:.0f}/"
            f"{r('jax_jit', 'jet', k)['compile_ms']:.0f}"
            for k in ks if rp.ok(r("jax_jit", "nested", k)) and rp.ok(r("jax_jit", "jet", k))]
    if comp:
        out.append("  JAX compile ms (nested/jet): " + ", ".join(comp))

    # correctness against the closed form
    out.append("")
    bad, worst = [], {}
    for (fw, cfg), res in sorted(results.items()):
        if not rp.ok(res) or fw == "numpy":
            continue
        d = res.get("rel_diff")
        key = f"{fw}/{_parse(cfg)[0]}"
        if d is None:
            bad.append(f"{fw}/{cfg} has the wrong shape")
            continue
        worst[key] = max(worst.get(key, 0.0), d)
        if not d <= TOL:
            bad.append(f"{fw}/{cfg} differs from the closed form by {d:.2e} (relative)")
    if worst:
        out.append("  check vs closed form (max abs diff / max |d^k tanh|, worst over k): "
                   + ", ".join(f"{key} {d:.1e}" for key, d in worst.items()))
    if bad:
        out.append("  CHECK FAILED: " + "; ".join(bad))
    elif worst:
        out.append(f"  check: all results agree with the closed form (tolerance {TOL:g})")

    # the targets
    t2, t8 = r("primflow", "taylor", 2), r("primflow", "taylor", 8)
    if rp.ok(t2) and rp.ok(t8):
        q = t8["value"] / t2["value"]
        verdict = f"{q:.2f}x -> {'met' if q <= 4.0 else 'NOT met'}{rp.per_round(t8, t2)}"
    else:
        verdict = "n/a (needs primflow taylor at k=2 and k=8)"
    out.append(f"  target: primflow Taylor time at k=8 <= 4x its time at k=2 (eager): {verdict}")
    parts, fails, have = [], [], False
    for k in ks:
        if k < 4:
            continue
        pbest, pm = best_pf(k)
        to = v("torch", "nested", k)
        if pbest is None or to is None:
            continue
        have = True
        parts.append(f"k={k} {pbest / to:.2f}x ({pm})")
        if not pbest < to:
            fails.append(k)
    if have:
        verdict = ("met" if not fails else f"NOT met at k={','.join(map(str, fails))}")
        out.append(f"  target: primflow (best eager method) faster than PyTorch nested for k >= 4: "
                   f"{verdict}  [{', '.join(parts)}]")
    else:
        out.append("  target: primflow faster than PyTorch nested for k >= 4: n/a (needs "
                   "PyTorch results)")
    out += _jit_report(results, ks)
    out.append("  reference machine (workload notes): PyTorch nested k=1/3/6 "
               + "/".join(f"{REF_TORCH_MS[k]:g}" for k in (1, 3, 6)) + " ms, JAX jit "
               + "/".join(f"{REF_JAX_MS[k]:g}" for k in (1, 3, 6)) + " ms")
    return "\n".join(out)


def _jit_report(results, ks) -> list:
    """The primflow jit table (a second table under the eager one)."""
    from .. import jit_support

    def r(fw, method, k):
        return results.get((fw, f"{method}_k{k}"))

    def v(fw, method, k):
        return rp.value(r(fw, method, k))

    jks = [k for k in ks if any(r("primflow", m, k) for _, m, _ in JIT_METHODS)]
    if not jks:
        return []
    rows = []
    for k in jks:
        jt, jn = v("primflow", "jit_taylor", k), v("primflow", "jit_nested", k)
        jbest = min([t for t in (jt, jn) if t is not None], default=None)
        xbest = min([t for t in (v("jax_jit", "nested", k), v("jax_jit", "jet", k))
                     if t is not None], default=None)
        rows.append([f"k={k}", rp.cell(r("primflow", "taylor", k), "{:.3f}"),
                     rp.cell(r("primflow", "jit_taylor", k), "{:.3f}"),
                     rp.cell(r("primflow", "nested", k), "{:.3f}"),
                     rp.cell(r("primflow", "jit_nested", k), "{:.3f}"),
                     rp.ratio(v("primflow", "taylor", k), jt),
                     rp.ratio(v("primflow", "nested", k), jn),
                     rp.ratio(jbest, xbest), rp.ratio(jbest, v("torch", "nested", k)),
                     rp.ratio(jbest, v("numpy", "closed", k))])
    out = ["", "  primflow jit (pf.jit of the same function; ms after the first call)"]
    out.append(rp.table(["", "pf taylor", "pf jit taylor", "pf nested", "pf jit nested",
                         "taylor eager/jit", "nested eager/jit", "pf jit best/jax best",
                         "pf jit best/torch", "pf jit best/numpy"], rows))
    out += jit_support.compile_report(
        [(f"{m[4:]} k={k}", r("primflow", m, k)) for k in jks for _, m, _ in JIT_METHODS])
    j2, j8 = v("primflow", "jit_taylor", 2), v("primflow", "jit_taylor", 8)
    if j2 is not None and j8 is not None:
        q = j8 / j2
        out.append(f"  target: primflow Taylor time at k=8 <= 4x its time at k=2, with jit: "
                   f"{q:.2f}x -> {'met' if q <= 4.0 else 'NOT met'}")
    out += jit_support.check_lines(
        [(f"{m}_k{k}", r("primflow", m, k)) for k in jks for _, m, _ in JIT_METHODS],
        "jit results equal eager", TOL)
    return out
