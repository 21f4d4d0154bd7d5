"""W4: batched Hessian and Jacobian of small MLPs (functional transforms).

    hessian   Hessian of a scalar MLP 32 -> 128 -> 128 -> 1 (tanh) with respect to its input,
              at 256 inputs: output [256, 32, 32]
    jacobian  Jacobian of an MLP R^64 -> R^64 (64 -> 128 tanh -> 64) at 256 inputs: output
              [256, 64, 64]

float64, fixed seed; the weights are plain tensors closed over (not differentiated). Inputs
uniform in [0, 1]. Milliseconds per batched call.

    primflow  ``pf.vmap(pf.hessian(f))(X)``; ``pf.vmap(pf.jacrev(g))(X)`` and
              ``pf.vmap(pf.jacfwd(g))(X)`` (both measured; the faster is the headline).
              ``pf.hessian`` of a scalar function uses second-order adjoints (forward
              Jacobians plus each primitive's curvature term, transforms/second_order.py),
              about two thirds of the matrix-product work of the peers' forward over
              reverse here.
    PyTorch   ``torch.func.vmap(torch.func.hessian(f))``; ``torch.func.vmap(torch.func.jacrev(g))``
    JAX jit   ``jax.jit(jax.vmap(jax.hessian(f)))``; ``jax.jit(jax.vmap(jax.jacrev(g)))``, timed
              after compilation; the first call (trace + compile + run) is reported separately
    NumPy     the closed-form Hessian / Jacobian written by hand (the floor, and the reference
              every cell checks its result against)
    pf jit    ``pf.jit`` of the same ``pf.vmap(pf.hessian(f))`` (cell ``jit_hessian``), of
              ``vmap(jacfwd(jacrev(f)))`` (``jit_hessian_fwd_rev``, the peers' algorithm),
              and of ``vmap(jacrev)`` / ``vmap(jacfwd)`` (``jit_jacrev``, ``jit_jacfwd``);
              all but the first not with ``--quick``, timed after the first call; compile time as in
              ``bench/jit_support.py``; checked against eager primflow and the closed form

Correctness: every cell compares its full output with the NumPy closed form (``max_abs_diff``
in the JSON) and returns the full Hessian / Jacobian at two inputs (``sample``), from which the
report computes primflow's max abs difference to PyTorch and JAX directly. primflow's cells also
check against central finite differences (of ``pf.grad`` for the Hessian, of ``g`` for the
Jacobian), which needs no peer.
"""

from __future__ import annotations

from ..registry import Config
from .. import report as rp

ID = "W4"
TITLE = ("Hessian of a scalar MLP 32-128-128-1 (tanh) w.r.t. its input, and Jacobian of an MLP "
         "64-128-64 (tanh), at 256 inputs each, float64, ms per batched call")

N_BATCH = 256
HESS_DIMS = (32, 128, 128, 1)
JAC_DIMS = (64, 128, 64)
SEED = 0
SAMPLE_IDX = (0, N_BATCH - 1)  # inputs whose full result goes into the JSON, for peer checks
FD_STEP = 1e-5
TOL = 1e-10  # max abs difference accepted against the closed form (values are O(1))

# the peer figures of the reference machine (workload notes), for the target line
REF_TORCH_MS = {"hessian": 42.0, "jacobian": 48.0}

CONFIGS = [
    Config("numpy", "hessian", "closed form, hand-written (floor and reference)"),
    Config("primflow", "hessian", "pf.vmap(pf.hessian(f))"),
    Config("torch", "hessian", "torch.func.vmap(torch.func.hessian(f))"),
    Config("jax_jit", "hessian", "jax.jit(jax.vmap(jax.hessian(f))), after compile"),
    Config("numpy", "jacobian", "closed form, hand-written (floor and reference)"),
    Config("primflow", "jacrev", "pf.vmap(pf.jacrev(g))"),
    Config("primflow", "jacfwd", "pf.vmap(pf.jacfwd(g))"),
    Config("torch", "jacrev", "torch.func.vmap(torch.func.jacrev(g))"),
    Config("jax_jit", "jacrev", "jax.jit(jax.vmap(jax.jacrev(g))), after compile"),
    Config("primflow", "jit_hessian", "pf.jit(pf.vmap(pf.hessian(f)))"),
    Config("primflow", "jit_hessian_fwd_rev", "pf.jit(pf.vmap(pf.jacfwd(pf.jacrev(f))))",
           quick=False),
    Config("primflow", "jit_jacrev", "pf.jit(pf.vmap(pf.jacrev(g)))", quick=False),
    Config("primflow", "jit_jacfwd", "pf.jit(pf.vmap(pf.jacfwd(g)))", quick=False),
]
JIT_CONFIGS = ("jit_hessian", "jit_hessian_fwd_rev", "jit_jacrev", "jit_jacfwd")


# --- shared data (NumPy, the same in every process) -------------------------------------------

def _layers(dims, rng):
    import numpy as np

    out = []
    for i, o in zip(dims[:-1], dims[1:]):
        out.append(rng.standard_normal((i, o)) / np.sqrt(i))
        out.append(0.1 * rng.standard_normal(o))
    return out


def _data(kind):
    """(weights [W1, b1, W2, b2, ...], inputs [256, d]) as NumPy float64 arrays."""
    import numpy as np

    if kind == "hessian":
        rng = np.random.default_rng(SEED)
        params = _layers(HESS_DIMS, rng)
        x = rng.uniform(0.0, 1.0, (N_BATCH, HESS_DIMS[0]))
    else:
        rng = np.random.default_rng(SEED + 1)
        params = _layers(JAC_DIMS, rng)
        x = rng.uniform(0.0, 1.0, (N_BATCH, JAC_DIMS[0]))
    return params, x


def _kind(config):
    return "hessian" if config.removeprefix("jit_").startswith("hessian") else "jacobian"


def _f(x, p, tanh):
    """The scalar MLP 32-128-128-1, written once for every framework."""
    h = tanh(x @ p[0] + p[1])
    h = tanh(h @ p[2] + p[3])
    return (h @ p[4] + p[5]).sum()


def _g(x, p, tanh):
    """The MLP R^64 -> R^64."""
    return tanh(x @ p[0] + p[1]) @ p[2] + p[3]


def closed_form(kind, params, x):
    """The exact Hessian [N, 32, 32] / Jacobian [N, 64, 64] (output dims first), in NumPy.

    Hessian of f(x) = w . tanh(W2^T tanh(W1^T x + b1) + b2) + b3 (w = W3[:, 0]), with
    s_k = 1 - h_k^2 and M = W1 diag(s1) W2:
        H = W1 diag(-2 a h1 s1) W1^T + M diag(-2 w h2 s2) M^T,   a = W2 (w * s2).
    Jacobian of g(x) = tanh(x V1 + c1) V2 + c2:  J = V2^T diag(s) V1^T.
    """
    import numpy as np

    if kind == "hessian":
        W1, b1, W2, b2, W3, _ = params
        w = W3[:, 0]
        h1 = np.tanh(x @ W1 + b1)
        s1 = 1.0 - h1 * h1
        h2 = np.tanh(h1 @ W2 + b2)
        s2 = 1.0 - h2 * h2
        a = (w * s2) @ W2.T  # [N, 128]
        d1 = -2.0 * a * h1 * s1  # [N, 128]
        d2 = -2.0 * w * h2 * s2  # [N, 128]
        M = (W1 * s1[:, None, :]) @ W2  # [N, 32, 128]
        return ((W1 * d1[:, None, :]) @ W1.T
                + (M * d2[:, None, :]) @ M.transpose(0, 2, 1))
    V1, c1, V2, _ = params
    s = 1.0 - np.tanh(x @ V1 + c1) ** 2  # [N, 128]
    return (V2.T * s[:, None, :]) @ V1.T  # [N, 64, 128] @ [128, 64]


# --- one framework each: returns (step, result) ------------------------------------------------
# ``step()`` is the timed call; ``result()`` returns the full output as a NumPy array.

def _numpy(config):
    kind = _kind(config)
    params, x = _data(kind)

    def step():
        return closed_form(kind, params, x)
    return step, step


def _primflow(config):
    import primflow as pf

    kind = _kind(config)
    params, x = _data(kind)
    p = [pf.to_tensor(a) for a in params]
    X = pf.to_tensor(x)
    jit = config.startswith("jit_")
    base = config.removeprefix("jit_")
    if base == "hessian_fwd_rev":  # JAX's algorithm, for comparison
        fn = pf.vmap(pf.jacfwd(pf.jacrev(lambda v: _f(v, p, pf.tanh))))
    elif kind == "hessian":
        fn = pf.vmap(pf.hessian(lambda v: _f(v, p, pf.tanh)))
    else:
        tr = pf.jacrev if base == "jacrev" else pf.jacfwd
        fn = pf.vmap(tr(lambda v: _g(v, p, pf.tanh)))
    eager = fn
    if jit:
        fn = pf.jit(fn)

    def step():
        return fn(X)
    step.jitted = fn if jit else None
    step.eager = lambda: eager(X).numpy()
    return step, (lambda: fn(X).numpy())


def _torch(config):
    import torch

    from ..timing import torch_single_thread

    torch_single_thread(torch)
    kind = _kind(config)
    params, x = _data(kind)
    p = [torch.from_numpy(a.copy()) for a in params]
    X = torch.from_numpy(x.copy())
    if kind == "hessian":
        fn = torch.func.vmap(torch.func.hessian(lambda v: _f(v, p, torch.tanh)))
    else:
        fn = torch.func.vmap(torch.func.jacrev(lambda v: _g(v, p, torch.tanh)))
    return (lambda: fn(X)), (lambda: fn(X).numpy())


def _jax(config):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    kind = _kind(config)
    params, x = _data(kind)
    p = [jnp.asarray(a) for a in params]
    X = jnp.asarray(x)
    if kind == "hessian":
        fn = jax.jit(jax.vmap(jax.hessian(lambda v: _f(v, p, jnp.tanh))))
    else:
        fn = jax.jit(jax.vmap(jax.jacrev(lambda v: _g(v, p, jnp.tanh))))

    def step():
        return fn(X).block_until_ready()
    return step, (lambda: np.asarray(step()))


def make_step(framework: str, config: str):
    """(step, result): one batched Hessian/Jacobian call, and the same returning a NumPy
    array. Also used by ``python -m bench.profile_one`` and ``bench.profile_prims``."""
    if framework == "numpy":
        return _numpy(config)
    if framework == "primflow":
        return _primflow(config)
    if framework == "torch":
        return _torch(config)
    return _jax(config)


def _fd_check(config):
    """Max abs difference between primflow's result and central finite differences at the
    SAMPLE_IDX inputs (of pf.grad(f) for the Hessian, of g for the Jacobian). Peer-free."""
    import numpy as np
    import primflow as pf

    kind = _kind(config)
    params, x = _data(kind)
    p = [pf.to_tensor(a) for a in params]
    if kind == "hessian":
        gf = pf.grad(lambda v: _f(v, p, pf.tanh))
        fun = lambda v: gf(pf.to_tensor(v)).numpy()  # noqa: E731
    else:
        fun = lambda v: _g(pf.to_tensor(v), p, pf.tanh).numpy()  # noqa: E731
    _, result = _primflow(config)
    full = result()
    worst = 0.0
    for n in SAMPLE_IDX:
        cols = []
        for j in range(x.shape[1]):
            e = np.zeros(x.shape[1])
            e[j] = FD_STEP
            cols.append((fun(x[n] + e) - fun(x[n] - e)) / (2 * FD_STEP))
        fd = np.stack(cols, axis=-1)  # d out_i / d x_j, output dims first
        worst = max(worst, float(np.abs(fd - full[n]).max()))
    return worst


def run(framework: str, config: str, quick: bool) -> dict:
    import numpy as np

    from ..timing import FULL, QUICK, measure, pin_to_one_core

    if framework.startswith("jax"):
        pin_to_one_core()
    from .. import jit_support

    jit = framework == "primflow" and config in JIT_CONFIGS
    if jit:
        info = jit_support.prepare()
    step, result = make_step(framework, config)
    first, phases, counts = jit_support.first_call(step, jit)
    m = measure(step, **(QUICK if quick else FULL))
    out = result()
    kind = _kind(config)
    ref = closed_form(kind, *_data(kind))
    res = {"value": m["median_s"] * 1e3, "unit": "ms", "min": m["min_s"] * 1e3,
           "reps_ms": [t * 1e3 for t in m["times_s"]], "reps": m["reps"], "inner": m["inner"],
           "first_call_ms": first * 1e3, "shape": list(out.shape),
           "max_abs_diff": float(np.abs(out - ref).max()) if out.shape == ref.shape else None,
           "ref_max_abs": float(np.abs(ref).max()),
           "sample_idx": list(SAMPLE_IDX),
           "sample": out[list(SAMPLE_IDX)].ravel().tolist()}
    if framework == "jax_jit":
        res["compile_ms"] = (first - m["median_s"]) * 1e3
    if framework == "primflow" and not jit:
        res["max_abs_diff_fd"] = _fd_check(config)
    if jit:
        res["jit_vs_eager"] = jit_support.rel_diff(out, step.eager())
        res.update(jit_support.fields(info, first, phases, counts, m["median_s"], ID, framework,
                                      config, quick, jitted=[step.jitted]))
    return res


# --- the table --------------------------------------------------------------------------------

def _sample_diff(a, b):
    """Max abs difference of two cells' sampled outputs (None when either is missing)."""
    if not (rp.ok(a) and rp.ok(b)) or "sample" not in a or "sample" not in b:
        return None
    if a.get("shape") != b.get("shape") or len(a["sample"]) != len(b["sample"]):
        return float("inf")
    return max(abs(u - v) for u, v in zip(a["sample"], b["sample"]))


def _fmt_diff(d):
    return rp.NA if d is None else f"{d:.1e}"


def report(results) -> str:
    r, v = rp.lookup(results)

    # primflow's Jacobian headline: the faster of jacrev and jacfwd
    pf_jac = None
    for cfg in ("jacrev", "jacfwd"):
        if v("primflow", cfg) is not None and (pf_jac is None or v("primflow", cfg) < v(*pf_jac)):
            pf_jac = ("primflow", cfg)
    rows = []
    heads = {"hessian": (("primflow", "hessian"), ("numpy", "hessian"), ("torch", "hessian"),
                         ("jax_jit", "hessian")),
             "jacobian": (pf_jac or ("primflow", "jacrev"), ("numpy", "jacobian"),
                          ("torch", "jacrev"), ("jax_jit", "jacrev"))}
    for kind, (pk, nk, tk, jk) in heads.items():
        pf, npv, to, jx = (v(*k) for k in (pk, nk, tk, jk))
        jit = r(*jk)
        compile_ms = (f"{jit['compile_ms']:.0f}" if rp.ok(jit) and "compile_ms" in jit
                      else rp.NA)
        label = kind if kind == "hessian" else f"jacobian (pf {pk[1]})"
        rows.append([label, rp.cell(r(*nk)), rp.cell(r(*pk)), rp.cell(r(*tk)), rp.cell(jit),
                     compile_ms, rp.ratio(pf, to), rp.ratio(pf, jx), rp.ratio(pf, npv)])
    reps = next((res.get("reps") for res in results.values() if rp.ok(res) and "reps" in res), None)
    how = f"median of {reps} reps, " if reps else ""
    out = [f"{ID}  {TITLE}  ({how}one process per cell)", ""]
    out.append(rp.table(["", "NumPy", "primflow", "PyTorch", "JAX jit", "JAX compile ms",
                         "pf/torch", "pf/jax", "pf/numpy"], rows))
    jr, jf = r("primflow", "jacrev"), r("primflow", "jacfwd")
    out.append(f"  primflow Jacobian: vmap(jacrev) {rp.cell(jr)} ms, vmap(jacfwd) {rp.cell(jf)} ms "
               "(the faster is in the table)")
    out.append("  NumPy: the closed-form Hessian/Jacobian written by hand. PyTorch: torch.func "
               "vmap(hessian) / vmap(jacrev), eager. JAX jit: after compilation; compile ms = "
               "first call - steady call.")

    # correctness: every cell against the closed form (full output), primflow against the peers
    # (sampled inputs) and against finite differences
    out.append("")
    bad, lines = [], []
    for (fw, cfg), res in sorted(results.items()):
        if fw == "numpy":  # the closed form itself
            continue
        if rp.ok(res) and res.get("max_abs_diff") is not None:
            d = res["max_abs_diff"]
            lines.append(f"{fw}/{cfg} {d:.1e}")
            if not d <= TOL:
                bad.append(f"{fw}/{cfg} differs from the closed form by {d:.2e}")
        elif rp.ok(res):
            bad.append(f"{fw}/{cfg} has shape {res.get('shape')}")
    if lines:
        out.append("  check vs closed form (max abs diff, all 256 inputs): " + ", ".join(lines))
    peer_lines = []
    for pcfg, peer_cfg in (("hessian", "hessian"), ("jacrev", "jacrev"), ("jacfwd", "jacrev")):
        pres = r("primflow", pcfg)
        for peer in ("torch", "jax_jit"):
            d = _sample_diff(pres, r(peer, peer_cfg))
            if d is not None:
                peer_lines.append(f"pf/{pcfg} vs {peer} {_fmt_diff(d)}")
                if not d <= TOL:
                    bad.append(f"primflow/{pcfg} differs from {peer} by {d:.2e}")
                if rp.ok(pres):  # kept in the --json output
                    pres.setdefault("max_abs_diff_vs", {})[peer] = d
    if peer_lines:
        out.append(f"  check vs peers (max abs diff, inputs {list(SAMPLE_IDX)}): "
                   + ", ".join(peer_lines))
    fd_lines = [f"pf/{c} {r('primflow', c)['max_abs_diff_fd']:.1e}"
                for c in ("hessian", "jacrev", "jacfwd")
                if rp.ok(r("primflow", c)) and "max_abs_diff_fd" in r("primflow", c)]
    if fd_lines:
        out.append(f"  check vs central differences (h={FD_STEP:g}, inputs {list(SAMPLE_IDX)}): "
                   + ", ".join(fd_lines) + "  (truncation error ~1e-9 expected)")
        for c in ("hessian", "jacrev", "jacfwd"):
            res = r("primflow", c)
            if rp.ok(res) and not res.get("max_abs_diff_fd", 0.0) <= 1e-6:
                bad.append(f"primflow/{c} differs from finite differences by "
                           f"{res['max_abs_diff_fd']:.2e}")
    if bad:
        out.append("  CHECK FAILED: " + "; ".join(bad))
    elif lines:
        out.append(f"  check: all results agree (tolerance {TOL:g})")

    out += _jit_report(results, pf_jac)

    # the target: eager primflow no slower than torch.func
    for kind, pk in (("Hessian", ("primflow", "hessian")), ("Jacobian", pf_jac)):
        tk = ("torch", "hessian" if kind == "Hessian" else "jacrev")
        pf, to = (v(*pk) if pk else None), v(*tk)
        ref = REF_TORCH_MS[kind.lower()]
        if pf is None or to is None:
            verdict = "n/a (needs primflow and PyTorch results)"
        else:
            verdict = (f"{pf / to:.2f}x -> {'met' if pf <= to else 'not met'}"
                       f"{rp.per_round(r(*pk), r(*tk))}")
        out.append(f"  target: primflow {kind} <= torch.func (eager; {ref:.0f} ms on the "
                   f"reference machine): {verdict}")
    return "\n".join(out)


def _jit_report(results, pf_jac) -> list:
    """The primflow jit rows, the jit-vs-eager check and the jit target (Hessian vs JAX jit)."""
    from .. import jit_support

    r, v = rp.lookup(results)

    if not any(r("primflow", c) for c in JIT_CONFIGS):
        return []
    jac = None  # the faster jitted Jacobian
    for c in ("jit_jacrev", "jit_jacfwd"):
        if v("primflow", c) is not None and (jac is None or v("primflow", c) < v("primflow", jac)):
            jac = c
    rows = []
    kinds = [("hessian", "jit_hessian", "hessian", "hessian", "hessian")]
    if jac is not None or any(r("primflow", c) for c in ("jit_jacrev", "jit_jacfwd")):
        kinds.append((f"jacobian (pf {jac or 'jit_jacrev'})", jac or "jit_jacrev",
                      (pf_jac or ("primflow", "jacrev"))[1], "jacobian", "jacrev"))
    for label, jc, ec, nk, tk in kinds:
        res = r("primflow", jc)
        jv = rp.value(res)
        rows.append([label, rp.cell(r("primflow", ec)), rp.cell(res),
                     rp.ratio(v("primflow", ec), jv), rp.ratio(jv, v("torch", tk)),
                     rp.ratio(jv, v("jax_jit", tk)), rp.ratio(jv, v("numpy", nk)),
                     f"{res['compile_ms']:.0f}" if rp.ok(res) and "compile_ms" in res else rp.NA,
                     f"{res['cached_compile_ms']:.0f}"
                     if rp.ok(res) and "cached_compile_ms" in res else rp.NA])
    out = ["", "  primflow jit (ms after the first call)"]
    out.append(rp.table(["", "pf eager", "pf jit", "eager/jit", "jit/torch", "jit/jax",
                         "jit/numpy", "compile ms", "2nd-proc compile ms"], rows))
    fr = r("primflow", "jit_hessian_fwd_rev")
    if fr:
        out.append(f"  primflow jit Hessian by forward over reverse (JAX's algorithm; pf.hessian "
                   f"uses second-order adjoints): {rp.cell(fr)} ms, "
                   f"{rp.ratio(rp.value(fr), v('jax_jit', 'hessian'))} JAX jit")
    jr, jf = r("primflow", "jit_jacrev"), r("primflow", "jit_jacfwd")
    if jr or jf:
        out.append(f"  primflow jit Jacobian: jit(vmap(jacrev)) {rp.cell(jr)} ms, "
                   f"jit(vmap(jacfwd)) {rp.cell(jf)} ms (the faster is in the table)")
    out += jit_support.compile_report([(c[4:], r("primflow", c)) for c in JIT_CONFIGS])
    out += jit_support.check_lines([(c, r("primflow", c)) for c in JIT_CONFIGS],
                                   "jit results equal eager", TOL)
    a, b = r("primflow", "jit_hessian"), r("jax_jit", "hessian")
    if rp.ok(a) and rp.ok(b):
        q = a["value"] / b["value"]
        out.append(f"  target: primflow Hessian (jit) no slower than JAX jit: {q:.2f}x"
                   f"{rp.per_round(a, b)} -> "
                   f"{'met' if q <= 1.0 else 'NOT met'}")
    else:
        out.append("  target: primflow Hessian (jit) no slower than JAX jit: n/a (needs both)")
    return out
