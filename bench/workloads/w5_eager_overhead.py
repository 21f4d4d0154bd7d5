"""W5: eager per-op cost.

A chain of 50 elementwise ops cycling (sin, x*1.0001, x+0.1) on 1,000 float64 elements, in
three modes, reported in microseconds per op (time of one chain / 50):

    no_grad   forward only, nothing recorded (``with pf.no_grad()`` / ``torch.no_grad()``)
    record    forward with the input requiring grad (the tape records every op)
    fwd_bwd   forward with recording, then ``y.sum().backward()`` (the gradient is cleared
              after each call so it never accumulates)

Floors and peers: plain NumPy forward (the floor for no_grad/record) and a hand-written NumPy
forward + VJP (the floor for fwd_bwd); PyTorch eager; JAX op by op without jit (record =
``jax.vjp``, fwd_bwd = ``jax.grad``, both unjitted) and, for reference only, JAX jit.

Memory flatness: ``memory`` runs 10,000 forward+backward iterations in one process and reads
the resident set size at iterations 1,000 and 10,000; growth above 10% is flagged as a leak.
"""

from __future__ import annotations

from ..registry import FRAMEWORKS, Config
from .. import report as rp

ID = "W5"
TITLE = ("eager per-op cost: chain of 50 elementwise ops (sin, x*1.0001, x+0.1) on 1,000 "
         "float64 elements, µs per op")

N_OPS = 50
N_ELEM = 1000
SEED = 0
MODES = ("no_grad", "record", "fwd_bwd")
MEM_ITERS = 10_000
MEM_MARKS = (1, 100, 1_000, 10_000)
LEAK_THRESHOLD = 0.10

# the jitted chain (forward: pf.jit(chain); gradient: pf.jit(pf.grad(sum of chain))) on
# 1 element (the per-call cost) and on 1,000; targets: <= 3x JAX jit per op at 1 element,
# <= 1.2x at 1,000 (forward and gradient)
JIT_SIZES = (1, 1000)
JIT_TARGETS = {1: 3.0, 1000: 1.2}
EAGER_TARGET = 1.2  # primflow fwd_bwd per op against PyTorch's

# Grouped by mode, so that the cells a ratio compares run next to each other (a burst of load
# from other work on the machine then tends to hit both).
CONFIGS = [
    Config("numpy", "forward", "plain NumPy forward (the floor)"),
    Config("primflow", "no_grad"),
    Config("torch", "no_grad"),
    Config("jax", "no_grad", "op by op, no jit"),
    Config("jax_jit", "no_grad", "reference only"),
    Config("primflow", "record"),
    Config("torch", "record"),
    Config("jax", "record", "op by op, no jit: jax.vjp"),
    Config("numpy", "fwd_bwd_manual", "NumPy forward + hand-written VJP (fwd_bwd floor)"),
    Config("numpy", "fwd_bwd_tape", "the smallest Python tape over NumPy (floor of any tape)"),
    Config("primflow", "fwd_bwd"),
    Config("torch", "fwd_bwd"),
    Config("jax", "fwd_bwd", "op by op, no jit: jax.grad"),
    Config("jax_jit", "fwd_bwd", "reference only"),
] + [Config(fw, f"jit_{kind}_{n}", note)
     for n in JIT_SIZES for kind in ("fwd", "grad")
     for fw, note in (("primflow", "pf.jit"), ("jax_jit", "jax.jit"))] + [
    Config("primflow", "memory", f"{MEM_ITERS} fwd+bwd iterations, RSS", repeat=False),
    Config("torch", "memory", f"{MEM_ITERS} fwd+bwd iterations, RSS", repeat=False),
]


def _chain(x, sin):
    """50 ops: (sin, *1.0001, +0.1) x 16, then sin, *1.0001. Unrolled to keep the Python
    loop overhead (the same for every framework) small."""
    for _ in range(16):
        x = sin(x)
        x = x * 1.0001
        x = x + 0.1
    x = sin(x)
    x = x * 1.0001
    return x


def _input():
    import numpy as np

    return np.random.default_rng(SEED).standard_normal(N_ELEM)


# --- one framework each: returns (step(), checksum()) for a mode ---------------------------

def _numpy(config):
    import numpy as np

    a = _input()
    sin, cos = np.sin, np.cos
    if config == "forward":
        return (lambda: _chain(a, sin)), (lambda: float(_chain(a, sin).sum()))
    if config == "fwd_bwd_tape":
        return _smallest_tape(a)

    def fwd_bwd():  # what a minimal tape must do: keep the sin inputs, multiply back
        saved = []
        x = a
        for _ in range(16):
            saved.append(x)
            x = sin(x)
            x = x * 1.0001
            x = x + 0.1
        saved.append(x)
        x = sin(x)
        x = x * 1.0001
        g = np.ones_like(x)
        for s in reversed(saved):
            g = g * 1.0001
            g = g * cos(s)
        return g

    return fwd_bwd, (lambda: float(fwd_bwd().sum()))


def _smallest_tape(a):
    """(step, checksum) of the chain's gradient through the smallest reverse-mode tape one
    can write in Python over NumPy: a node per op holding its inputs and a closure for its
    vjp, a topological sort, gradients summed in a dict; no checks, dtypes, hooks or
    higher orders. What any Python framework's eager tape costs at the least."""
    import numpy as np

    class Node:
        __slots__ = ("value", "parents", "vjp", "grad")

        def __init__(self, value, parents=(), vjp=None):
            self.value, self.parents, self.vjp, self.grad = value, parents, vjp, None

        def __mul__(self, c):
            return Node(self.value * c, (self,), lambda g: (g * c,))

        def __add__(self, c):
            return Node(self.value + c, (self,), lambda g: (g,))

    def sin(x):
        return Node(np.sin(x.value), (x,), lambda g: (g * np.cos(x.value),))

    def backward(y):
        order, seen, stack = [], set(), [(y, False)]
        while stack:  # depth-first, each node after everything it depends on
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append((node, True))
                stack += [(p, False) for p in node.parents]
        grads = {id(y): np.ones_like(y.value)}
        for node in reversed(order):
            g = grads.pop(id(node))
            if node.vjp is None:
                node.grad = g
                continue
            for p, gp in zip(node.parents, node.vjp(g)):
                grads[id(p)] = grads[id(p)] + gp if id(p) in grads else gp

    x = Node(a)

    def fwd_bwd():
        backward(_chain(x, sin))
        return x.grad

    return fwd_bwd, (lambda: float(fwd_bwd().sum()))


def _primflow(config):
    import primflow as pf

    x = pf.to_tensor(_input(), stop_gradient=False)
    sin = pf.sin
    if config == "no_grad":
        def step():
            with pf.no_grad():
                return _chain(x, sin)
        return step, (lambda: float(step().sum().item()))
    if config == "record":
        return (lambda: _chain(x, sin)), (lambda: float(_chain(x, sin).sum().item()))

    def fwd_bwd():
        _chain(x, sin).sum().backward()
        x.clear_grad()

    def check():
        _chain(x, sin).sum().backward()
        g = float(x.grad.numpy().sum())
        x.clear_grad()
        return g

    return fwd_bwd, check


def _torch(config):
    import torch

    from ..timing import torch_single_thread

    torch_single_thread(torch)
    x = torch.from_numpy(_input().copy()).requires_grad_(True)
    sin = torch.sin
    if config == "no_grad":
        def step():
            with torch.no_grad():
                return _chain(x, sin)
        return step, (lambda: float(step().sum()))
    if config == "record":
        return (lambda: _chain(x, sin)), (lambda: float(_chain(x, sin).sum()))

    def fwd_bwd():
        _chain(x, sin).sum().backward()
        x.grad = None

    def check():
        _chain(x, sin).sum().backward()
        g = float(x.grad.sum())
        x.grad = None
        return g

    return fwd_bwd, check


def _jax(config, jit):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    x = jnp.asarray(_input())
    sin = jnp.sin

    def f(v):
        return _chain(v, sin)

    def loss(v):
        return _chain(v, sin).sum()

    if config == "no_grad":
        fn = jax.jit(f) if jit else f

        def step():
            return fn(x).block_until_ready()
        return step, (lambda: float(step().sum()))
    if config == "record":  # forward plus linearisation, no backward pass: the eager analogue
        def step():
            y, _vjp = jax.vjp(f, x)
            return y.block_until_ready()
        return step, (lambda: float(step().sum()))
    g = jax.jit(jax.grad(loss)) if jit else jax.grad(loss)

    def fwd_bwd():
        return g(x).block_until_ready()
    return fwd_bwd, (lambda: float(fwd_bwd().sum()))


def _jit_step(framework, config):
    """(step, check) of a jit cell ``jit_{fwd,grad}_{n}``."""
    import numpy as np

    _, kind, n = config.split("_")
    a = np.random.default_rng(SEED).standard_normal(int(n))
    if framework == "jax_jit":
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        x, sin = jnp.asarray(a), jnp.sin
        if kind == "fwd":
            fn = jax.jit(lambda v: _chain(v, sin))
        else:
            fn = jax.jit(jax.grad(lambda v: _chain(v, sin).sum()))

        def step():
            return fn(x).block_until_ready()
        return step, (lambda: float(np.asarray(step()).sum()))
    import primflow as pf

    x, sin = pf.to_tensor(a), pf.sin
    if kind == "fwd":
        fn = pf.jit(lambda v: _chain(v, sin))
    else:
        fn = pf.jit(pf.grad(lambda v: _chain(v, sin).sum()))
    step = (lambda: fn(x))
    step.jitted = fn
    return step, (lambda: float(fn(x).numpy().sum()))


def _jit_run(framework, config, quick):
    from .. import jit_support
    from ..timing import FULL, QUICK, measure

    info = jit_support.prepare() if framework == "primflow" else None
    step, check = _jit_step(framework, config)
    first, phases, counts = jit_support.first_call(step, framework == "primflow")
    m = measure(step, **(QUICK if quick else FULL))
    res = {"value": m["median_s"] / N_OPS * 1e6, "unit": "us/op", "min": m["min_s"] / N_OPS * 1e6,
           "reps": m["reps"], "inner": m["inner"], "first_call_ms": first * 1e3,
           "checksum": check()}
    if info is not None:
        res.update(jit_support.fields(info, first, phases, counts, m["median_s"], ID, framework,
                                      config, quick, (step.jitted,)))
    return res


def _memory(framework):
    import gc
    import time

    from ..timing import peak_rss_bytes, rss_bytes

    step, _ = make_step(framework, "fwd_bwd")
    rss = {}
    gc.collect()
    rss["0"] = rss_bytes()
    t0 = time.perf_counter()
    for i in range(1, MEM_ITERS + 1):
        step()
        if i in MEM_MARKS:
            rss[str(i)] = rss_bytes()
    elapsed = time.perf_counter() - t0
    mb = {k: v / 2**20 for k, v in rss.items()}
    growth = (rss[str(MEM_ITERS)] - rss["1000"]) / rss["1000"]
    return {"value": growth * 100.0, "unit": "% RSS growth 1k->10k", "rss_mb": mb,
            "peak_rss_mb": peak_rss_bytes() / 2**20, "iterations": MEM_ITERS,
            "leak": growth > LEAK_THRESHOLD, "elapsed_s": elapsed,
            "bytes_per_iter": (rss[str(MEM_ITERS)] - rss["1000"]) / (MEM_ITERS - 1000),
            "us_per_op": elapsed / MEM_ITERS / N_OPS * 1e6}


def make_step(framework: str, config: str):
    """(step, check): one call of the measured chain, and a checksum of its result. Also used
    by ``python -m bench.profile_one``."""
    if config.startswith("jit_"):
        return _jit_step(framework, config)
    if framework == "numpy":
        return _numpy(config)
    if framework == "primflow":
        return _primflow(config)
    if framework == "torch":
        return _torch(config)
    return _jax(config, jit=framework == "jax_jit")


def run(framework: str, config: str, quick: bool) -> dict:
    from ..timing import FULL, QUICK, measure, pin_to_one_core

    if framework.startswith("jax"):
        pin_to_one_core()
    if config == "memory":
        return _memory(framework)  # always the full 10,000 iterations
    if config.startswith("jit_"):
        return _jit_run(framework, config, quick)
    step, check = make_step(framework, config)
    m = measure(step, **(QUICK if quick else FULL))
    return {"value": m["median_s"] / N_OPS * 1e6, "unit": "us/op",
            "min": m["min_s"] / N_OPS * 1e6,
            "reps_us_per_op": [t / N_OPS * 1e6 for t in m["times_s"]],
            "reps": m["reps"], "inner": m["inner"], "checksum": check()}


# --- the table --------------------------------------------------------------------------------

def report(results) -> str:
    r, v = rp.lookup(results)

    numpy_cfg = {"no_grad": "forward", "record": "forward", "fwd_bwd": "fwd_bwd_manual"}
    rows = []
    for mode in MODES:
        np_res = r("numpy", numpy_cfg[mode])
        pf, to, jx = v("primflow", mode), v("torch", mode), v("jax", mode)
        npv = rp.value(np_res)
        jit = r("jax_jit", mode) if mode != "record" else None
        rows.append([
            mode, rp.cell(np_res), rp.cell(r("primflow", mode)), rp.cell(r("torch", mode)),
            rp.cell(r("jax", mode)), rp.cell(jit) if mode != "record" else "-",
            rp.ratio(pf, to), rp.ratio(pf, npv),
            rp.NA if pf is None or npv is None else f"{pf - npv:+.2f}",
            rp.ratio(pf, jx),
        ])
    reps = next((res.get("reps") for res in results.values() if rp.ok(res) and "reps" in res), None)
    how = f"median of {reps} reps, " if reps else ""
    out = [f"{ID}  {TITLE}  ({how}one process per cell)", ""]
    out.append(rp.table(["mode", "NumPy", "primflow", "PyTorch", "JAX eager", "JAX jit",
                         "pf/torch", "pf/numpy", "pf-numpy µs", "pf/jax"], rows))
    out.append("  NumPy column: plain forward for no_grad and record; forward + hand-written VJP "
               "for fwd_bwd.")
    out.append("  JAX eager: op by op without jit; record = jax.vjp, fwd_bwd = jax.grad (both "
               "unjitted, optional). JAX jit: reference only.")

    # memory flatness
    mem_rows = []
    for fw in ("primflow", "torch"):
        res = r(fw, "memory")
        if rp.ok(res):
            mb = res["rss_mb"]
            verdict = "LEAK (>10%)" if res["leak"] else "flat"
            mem_rows.append([FRAMEWORKS[fw].label, f"{mb['1000']:.1f} / {mb[str(MEM_ITERS)]:.1f}",
                             f"{res['value']:+.1f}%", f"{res['bytes_per_iter']:.0f}", verdict,
                             f"{res['peak_rss_mb']:.1f}",
                             f"{res['us_per_op']:.2f}"])
        else:
            mem_rows.append([FRAMEWORKS[fw].label, rp.cell(res)] + [rp.NA] * 5)
    out += ["", f"  memory flatness: {MEM_ITERS:,} fwd+bwd iterations in one process",
            rp.table(["", "RSS MB @1k / @10k", "growth", "B/iter", "verdict", "peak MB", "µs/op"],
                     mem_rows)]

    # correctness cross-check (same input everywhere)
    ref = {"no_grad": ("numpy", "forward"), "record": ("numpy", "forward"),
           "fwd_bwd": ("numpy", "fwd_bwd_manual")}
    bad, compared = [], 0
    for mode in MODES:
        base = r(*ref[mode])
        if not rp.ok(base) or "checksum" not in base:
            continue
        cells = [(fw, mode) for fw in ("primflow", "torch", "jax", "jax_jit")]
        if mode == "fwd_bwd":
            cells.append(("numpy", "fwd_bwd_tape"))
        for fw, cfg in cells:
            res = r(fw, cfg)
            if rp.ok(res) and "checksum" in res:
                a, b = res["checksum"], base["checksum"]
                compared += 1
                if abs(a - b) > 1e-8 * max(1.0, abs(b)):
                    bad.append(f"{fw}/{cfg}: {a!r} vs NumPy {b!r}")
    out.append("")
    if bad:
        out.append("  CHECK FAILED (results differ from NumPy): " + "; ".join(bad))
    elif compared:
        out.append(f"  check: outputs and gradients agree with NumPy ({compared} cells compared)")
    else:
        out.append("  check: nothing to compare against NumPy")

    out += _jit_report(r, v)

    # the target, and the smallest Python tape for scale
    pf, to = v("primflow", "fwd_bwd"), v("torch", "fwd_bwd")
    if pf is None or to is None:
        verdict = "n/a (needs primflow and PyTorch results)"
    else:
        verdict = (f"{pf / to:.2f}x -> {'met' if pf / to <= EAGER_TARGET else 'NOT met'}"
                   f"{rp.per_round(r('primflow', 'fwd_bwd'), r('torch', 'fwd_bwd'))}")
    out.append(f"  target: primflow fwd_bwd per op <= {EAGER_TARGET}x PyTorch eager: {verdict}")
    tape = v("numpy", "fwd_bwd_tape")
    if tape is not None:
        vs = f" = {tape / to:.2f}x PyTorch" if to else ""
        out.append(f"  the smallest Python tape over NumPy (a node and a vjp closure per op, "
                   f"no checks): {tape:.2f} µs/op{vs}")
    return "\n".join(out)


def _jit_report(r, v):
    """The jitted chain's table: pf.jit against jax.jit per op, with the targets."""
    from .. import jit_support

    rows, verdicts, early = [], [], []
    for n in JIT_SIZES:
        for kind in ("fwd", "grad"):
            cfg = f"jit_{kind}_{n}"
            pf, jx = v("primflow", cfg), v("jax_jit", cfg)
            res = r("primflow", cfg)
            target = JIT_TARGETS[n]
            ok = None if pf is None or jx is None else pf / jx <= target
            rows.append([f"{kind} {n:,}", rp.cell(res), rp.cell(r("jax_jit", cfg)),
                         rp.ratio(pf, jx), f"<= {target:g}x",
                         rp.NA if ok is None else ("met" if ok else "NOT met"),
                         (res or {}).get("steady_tier") or rp.NA])
            early.append((cfg, res))
    if not any(rp.ok(res) for _, res in early):
        return []
    out = ["", "  jitted chain (50 ops), µs per op: pf.jit vs jax.jit (forward; gradient of the "
           "sum), steady state",
           rp.table(["cell", "pf.jit", "jax.jit", "pf/jax", "target", "verdict", "pf tier"],
                    rows)]
    out += jit_support.early_report(early, "  ")
    return out
