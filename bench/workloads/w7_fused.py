"""W7: fused composite kernels vs their primitive decomposition ("N+1").

First-order forward + backward, eager, float32, at 4096 x 768:

    layer_norm      F.layer_norm(x, 768, weight, bias); gradients of x, weight and bias
    rms_norm        F.rms_norm(x, 768, weight); gradients of x and weight
    softmax         F.softmax(x) (last axis); gradient of x
    cross_entropy   F.cross_entropy(x, int_labels) (mean); gradient of x

Non-scalar outputs are pulled back with a fixed random cotangent
(``pf.grad(y, inputs, grad_outputs=g)``), so each step is exactly one forward and one
backward of the op. Every op runs twice, each in its own process: ``fused`` (the default
eager path: the backend's fused forward and backward kernels) and ``decomposed``
(``pf.set_decompose(True)``: the primitive decomposition, what transforms and higher
derivatives use). Reported: median ms per step, and the peak memory one step allocates on
top of its inputs (tracemalloc, which sees NumPy's buffers), measured after the timing.
Target: fused >= 2x faster than decomposed, and less memory.

``rms_norm-jit``: the same step under ``pf.jit`` (the traced program is the
primitive decomposition, fused and compiled by the jit: numba kernels for the arithmetic
groups when numba is installed), against the eager decomposed step: target >= 2x faster.
Its compile time is reported as in ``bench/jit_support.py``, and its gradients are checked
against the eager fused ones (float32: relative 1e-5). Its memory column is what one call
allocates beyond the jit's preallocated workspace (the workspace, allocated once at compile
time, is reported separately as ``workspace_mb``).
"""

from __future__ import annotations

from .. import report as rp
from ..registry import Config

ID = "W7"
TITLE = ("fused vs decomposed composites: first-order forward + backward at 4096 x 768 "
         "float32, ms per step")

ROWS, COLS = 4096, 768
SEED = 0
OPS = ("layer_norm", "rms_norm", "softmax", "cross_entropy")
MODES = ("fused", "decomposed")
SPEEDUP_TARGET = 2.0

JIT_OPS = ("rms_norm",)  # ops with a "-jit" cell (make_step handles every op)
JIT_TOL = 1e-5  # float32, relative: jit vs eager fused

CONFIGS = [Config("primflow", f"{op}-{mode}",
                  "pf.set_decompose(True)" if mode == "decomposed" else "default eager path")
           for op in OPS for mode in MODES] + [
    Config("primflow", f"{op}-jit", "pf.jit of the forward + backward step") for op in JIT_OPS]


def _inputs():
    import numpy as np

    rng = np.random.default_rng(SEED)
    return {
        "x": rng.standard_normal((ROWS, COLS)).astype(np.float32),
        "w": (1.0 + 0.1 * rng.standard_normal(COLS)).astype(np.float32),
        "b": (0.1 * rng.standard_normal(COLS)).astype(np.float32),
        "g": rng.standard_normal((ROWS, COLS)).astype(np.float32),
        "labels": rng.integers(0, COLS, ROWS),
    }


def make_step(framework: str, config: str):
    """(step, check): one forward + backward of the op, and a checksum of its gradients.
    ``step`` returns the gradients (so a caller can keep them alive while measuring)."""
    import primflow as pf

    op, mode = config.rsplit("-", 1)
    pf.set_decompose(mode == "decomposed")
    jit = mode == "jit"
    F = pf.nn.functional
    a = _inputs()
    x = pf.to_tensor(a["x"], stop_gradient=False)
    w = pf.to_tensor(a["w"], stop_gradient=False)
    b = pf.to_tensor(a["b"], stop_gradient=False)
    g = pf.to_tensor(a["g"])
    labels = pf.to_tensor(a["labels"])

    if op == "layer_norm":
        def fn(x, w, b, g, labels):
            return pf.grad(F.layer_norm(x, COLS, w, b), [x, w, b], grad_outputs=g)
    elif op == "rms_norm":
        def fn(x, w, b, g, labels):
            return pf.grad(F.rms_norm(x, COLS, w), [x, w], grad_outputs=g)
    elif op == "softmax":
        def fn(x, w, b, g, labels):
            return pf.grad(F.softmax(x), [x], grad_outputs=g)
    elif op == "cross_entropy":
        def fn(x, w, b, g, labels):
            return pf.grad(F.cross_entropy(x, labels), [x])
    else:
        raise KeyError(f"unknown op {op!r}")
    run_fn = pf.jit(fn) if jit else fn

    def step():
        return run_fn(x, w, b, g, labels)
    step.jitted = run_fn if jit else None
    step.eager = lambda: [t.numpy() for t in fn(x, w, b, g, labels)]  # default: fused

    def check():  # sum of |gradient| per input (a signed sum of softmax's would be ~0)
        return [float(abs(t.numpy().astype("float64")).sum()) for t in step()]

    return step, check


def _peak_bytes(step):
    """Peak bytes allocated during one step beyond what existed before it (inputs)."""
    import gc
    import tracemalloc

    step()  # warm caches (constants, kernels) outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = step()
        peak = tracemalloc.get_traced_memory()[1] - base
        del out
    finally:
        tracemalloc.stop()
    return peak


def run(framework: str, config: str, quick: bool) -> dict:
    from ..timing import FULL, QUICK, measure

    jit = config.endswith("-jit")
    if jit:
        from .. import jit_support

        info = jit_support.prepare()
    step, check = make_step(framework, config)
    if jit:
        first, phases, counts = jit_support.first_call(step)
    m = measure(step, **(QUICK if quick else FULL))
    peak = _peak_bytes(step)
    res = {"value": m["median_s"] * 1e3, "unit": "ms", "min": m["min_s"] * 1e3,
           "reps_ms": [t * 1e3 for t in m["times_s"]], "reps": m["reps"],
           "inner": m["inner"], "peak_mb": peak / 2**20, "checksum": check()}
    if jit:
        got = [t.numpy() for t in step()]
        res["jit_vs_eager"] = jit_support.rel_diff(got, step.eager())
        plans = [e.executable.plan for e in step.jitted._cache.values()]
        res["workspace_mb"] = sum(getattr(p, "nbytes", 0) or 0 for p in plans) / 2**20
        res.update(jit_support.fields(info, first, phases, counts, m["median_s"], ID, framework,
                                      config, quick, jitted=[step.jitted]))
    return res


# --- the table --------------------------------------------------------------------------------

def report(results) -> str:
    def r(op, mode):
        return results.get(("primflow", f"{op}-{mode}"))

    rows, verdicts, bad = [], [], []
    for op in OPS:
        fu, de = r(op, "fused"), r(op, "decomposed")
        fv, dv = rp.value(fu), rp.value(de)
        fm = fu.get("peak_mb") if rp.ok(fu) else None
        dm = de.get("peak_mb") if rp.ok(de) else None
        rows.append([op, rp.cell(fu), rp.cell(de), rp.ratio(dv, fv),
                     rp.NA if fm is None else f"{fm:.1f}", rp.NA if dm is None else f"{dm:.1f}",
                     rp.ratio(dm, fm)])
        if None not in (fv, dv, fm, dm):
            met = dv / fv >= SPEEDUP_TARGET and fm < dm
            verdicts.append(f"{op} {'met' if met else 'NOT met'}")
        if rp.ok(fu) and rp.ok(de) and "checksum" in fu and "checksum" in de:
            for i, (p, q) in enumerate(zip(fu["checksum"], de["checksum"])):
                if abs(p - q) > 1e-3 * max(1.0, abs(q)):
                    bad.append(f"{op} grad {i}: fused {p!r} vs decomposed {q!r}")
    reps = next((res.get("reps") for res in results.values() if rp.ok(res) and "reps" in res),
                None)
    how = f"median of {reps} reps, " if reps else ""
    out = [f"{ID}  {TITLE}  ({how}one process per cell)", ""]
    out.append(rp.table(["op", "fused ms", "decomposed ms", "speedup", "fused MB",
                         "decomposed MB", "memory ratio"], rows))
    out.append("  speedup = decomposed / fused time; memory = peak bytes one forward + "
               "backward step allocates beyond its inputs (tracemalloc), ratio = "
               "decomposed / fused.")
    out.append("")
    if bad:
        out.append("  CHECK FAILED (fused and decomposed gradients differ): " + "; ".join(bad))
    else:
        out.append("  check: fused and decomposed gradients agree (checksums, rtol 1e-3)")
    out.append(f"  target: fused >= {SPEEDUP_TARGET:.0f}x faster and less memory than "
               f"decomposed: {', '.join(verdicts) if verdicts else 'n/a'}")
    out += _jit_report(results)
    return "\n".join(out)


def _jit_report(results) -> list:
    from .. import jit_support

    def r(op, mode):
        return results.get(("primflow", f"{op}-{mode}"))

    ops = [op for op in JIT_OPS if r(op, "jit")]
    if not ops:
        return []
    rows, lines = [], []
    for op in ops:
        jr, fu, de = r(op, "jit"), r(op, "fused"), r(op, "decomposed")
        jv, fv, dv = rp.value(jr), rp.value(fu), rp.value(de)
        rows.append([op, rp.cell(jr), rp.cell(fu), rp.cell(de), rp.ratio(dv, jv), rp.ratio(fv, jv),
                     f"{jr['peak_mb']:.1f}" if rp.ok(jr) else rp.NA,
                     f"{jr['workspace_mb']:.1f}" if rp.ok(jr) and "workspace_mb" in jr
                     else rp.NA])
        if jv is not None and dv is not None:
            q = dv / jv
            per = rp.per_round(de, jr)
            lines.append(f"  target: {op} fused (jit) >= {SPEEDUP_TARGET:.0f}x faster than eager "
                         f"unfused (decomposed): {q:.2f}x{per} -> "
                         f"{'met' if q >= SPEEDUP_TARGET else 'NOT met'}")
    out = ["", "  pf.jit of the same step (the jit fuses the decomposition itself)"]
    out.append(rp.table(["op", "jit ms", "eager fused ms", "eager decomposed ms",
                         "decomposed/jit", "fused/jit", "jit MB per call", "jit workspace MB"],
                        rows))
    out += jit_support.compile_report([(f"{op}-jit", r(op, "jit")) for op in ops])
    out += jit_support.check_lines([(f"{op} (jit vs eager fused)", r(op, "jit")) for op in ops],
                                   "jit gradients equal eager fused ones", JIT_TOL,
                                   "float32 tolerance")
    return out + lines
