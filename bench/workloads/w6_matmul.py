"""W6: float64 matmul 2048 x 2048, GFLOP/s (2 n^3 flops per product): the hardware ceiling.

NumPy ``a @ b``, primflow ``pf.matmul(a, b)`` (no gradient recorded: the inputs do not require
grad), PyTorch ``a @ b``, JAX ``jax.jit(jnp.matmul)``. One thread each, so this is the BLAS
each framework links (OpenBLAS for NumPy/primflow, MKL or oneDNN for torch, Eigen for XLA).
Every cell also checks its product against NumPy's (max abs difference, relative to max |C|).
"""

from __future__ import annotations

from ..registry import Config
from .. import report as rp

ID = "W6"
N = 2048
TITLE = f"float64 matmul {N}x{N}, GFLOP/s (higher is better; one thread)"
SEED = 0
FLOPS = 2.0 * N ** 3
TOL = 1e-12  # relative to max |C|

CONFIGS = [
    Config("numpy", "matmul", "a @ b"),
    Config("primflow", "matmul", "pf.matmul(a, b)"),
    Config("torch", "matmul", "a @ b"),
    Config("jax_jit", "matmul", "jax.jit(jnp.matmul)"),
]


def _inputs():
    import numpy as np

    rng = np.random.default_rng(SEED)
    return rng.standard_normal((N, N)), rng.standard_normal((N, N))


def make_step(framework: str, config: str):
    """(step, result): one product, and the product as a NumPy array."""
    import numpy as np

    a, b = _inputs()
    if framework == "numpy":
        step = lambda: a @ b  # noqa: E731
        return step, step
    if framework == "primflow":
        import primflow as pf

        ta, tb = pf.to_tensor(a), pf.to_tensor(b)
        return (lambda: pf.matmul(ta, tb)), (lambda: pf.matmul(ta, tb).numpy())
    if framework == "torch":
        import torch

        from ..timing import torch_single_thread

        torch_single_thread(torch)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return (lambda: ta @ tb), (lambda: (ta @ tb).numpy())
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    ja, jb = jnp.asarray(a), jnp.asarray(b)
    mm = jax.jit(jnp.matmul)

    def step():
        return mm(ja, jb).block_until_ready()
    return step, (lambda: np.asarray(step()))


def run(framework: str, config: str, quick: bool) -> dict:
    import numpy as np

    from ..timing import FULL, QUICK, measure, pin_to_one_core

    if framework.startswith("jax"):
        pin_to_one_core()
    step, result = make_step(framework, config)
    opts = dict(QUICK if quick else FULL)
    opts["min_warmup_calls"] = 1 if quick else 2  # one product is ~0.3 s on one core
    m = measure(step, **opts)
    c = result()
    a, b = _inputs()
    ref = a @ b if framework != "numpy" else c
    return {"value": FLOPS / m["median_s"] / 1e9, "unit": "GFLOP/s",
            "median_ms": m["median_s"] * 1e3, "min_ms": m["min_s"] * 1e3,
            "reps_ms": [t * 1e3 for t in m["times_s"]], "reps": m["reps"], "inner": m["inner"],
            "max_abs_diff_vs_numpy": float(np.abs(c - ref).max()),
            "rel_diff_vs_numpy": float(np.abs(c - ref).max() / np.abs(ref).max())}


def report(results) -> str:
    def r(fw):
        return results.get((fw, "matmul"))

    npv = rp.value(r("numpy"))
    rows = []
    for fw, label in (("numpy", "NumPy"), ("primflow", "primflow"), ("torch", "PyTorch"),
                      ("jax_jit", "JAX jit")):
        res = r(fw)
        rows.append([label, rp.cell(res, "{:.1f}"),
                     f"{res['median_ms']:.0f}" if rp.ok(res) else rp.NA,
                     rp.ratio(rp.value(res), npv)])
    reps = next((res.get("reps") for res in results.values() if rp.ok(res) and "reps" in res), None)
    how = f"median of {reps} reps, " if reps else ""
    out = [f"{ID}  {TITLE}  ({how}one process per cell)", ""]
    out.append(rp.table(["", "GFLOP/s", "ms", "vs NumPy"], rows))
    bad = [f"{fw} {res['rel_diff_vs_numpy']:.1e}" for (fw, _), res in results.items()
           if rp.ok(res) and not res.get("rel_diff_vs_numpy", 0.0) <= TOL]
    out.append("")
    out.append("  CHECK FAILED (product differs from NumPy's, relative): " + ", ".join(bad) if bad
               else f"  check: every product agrees with NumPy's (relative {TOL:g})")
    return "\n".join(out)
