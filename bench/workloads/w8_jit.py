"""W8: eager vs pf.jit: the same Python function run op by op or compiled.

    chain-N       float32 elementwise chain ``z = x*y + 1; tanh(z) * (1 - z*z) + exp(-x)``
                  on N elements (N = 1e4 and 1e6)
    arith-1e6     the arithmetic-only chain ``x = a*b + c; x * (1 - x*x)`` on 1e6 elements,
                  where numba kernels apply (``jit-numba`` needs numba)
    mlp-step      one training step of a 2-128-128-1 tanh MLP on a batch of 256 (float32):
                  forward, gradient of the MSE loss (pf.value_and_grad) and a functional
                  Adam update, returning the new parameters and moments

Modes: ``eager`` (each op dispatched as it runs), ``jit`` (pf.jit, default backend: generated
NumPy code; numba for large arithmetic groups when it is installed), ``jit-numpy`` (numba
off). Reported: median microseconds per call; every jitted cell checks its result against
eager (relative difference).
"""

from __future__ import annotations

from .. import report as rp
from ..registry import Config

ID = "W8"
TITLE = "eager vs pf.jit, microseconds per call (lower is better)"
SEED = 0
CASES = ("chain-1e4", "chain-1e6", "arith-1e6", "mlp-step")
MODES = ("eager", "jit-numpy", "jit")

CONFIGS = [Config("primflow", f"{case}-{mode}") for case in CASES for mode in MODES]


def _chain(pf):
    def chain(x, y):
        z = x * y + 1.0
        return pf.tanh(z) * (1.0 - z * z) + pf.exp(-x)

    return chain


def _arith(a, b, c):
    x = a * b + c
    return x * (1.0 - x * x)


def _mlp_step(pf, net):
    def step(params, m, v, t, x, y, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        def loss_of(ps):
            return ((pf.nn.functional_call(net, ps, x) - y) ** 2).mean()

        loss, grads = pf.value_and_grad(loss_of)(params)
        t = t + 1.0
        new_p, new_m, new_v = {}, {}, {}
        for k in params:
            g = grads[k]
            new_m[k] = m[k] * b1 + g * (1.0 - b1)
            new_v[k] = v[k] * b2 + g * g * (1.0 - b2)
            m_hat = new_m[k] / (1.0 - b1 ** t)
            v_hat = new_v[k] / (1.0 - b2 ** t)
            new_p[k] = params[k] - m_hat / (pf.sqrt(v_hat) + eps) * lr
        return loss, new_p, new_m, new_v, t

    return step


def _split(config):
    """``"mlp-step-jit-numpy"`` -> ``("mlp-step", "jit-numpy")``."""
    for mode in ("jit-numpy", "eager", "jit"):
        if config.endswith("-" + mode):
            return config[:-len(mode) - 1], mode
    raise KeyError(f"unknown W8 config {config!r}")


def make_step(config: str):
    """(step, result): one call, and its first output as a NumPy array."""
    import numpy as np

    import primflow as pf

    case, mode = _split(config)
    if mode == "jit-numpy":
        pf.config.jit_backend = "numpy"

    rng = np.random.default_rng(SEED)
    if case.startswith("chain"):
        n = int(float(case.split("-")[1]))
        x, y = (pf.to_tensor(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
        fn = _chain(pf)
        args = (x, y)
    elif case == "arith-1e6":
        a, b, c = (pf.to_tensor(rng.standard_normal(10**6).astype(np.float32))
                   for _ in range(3))
        fn, args = _arith, (a, b, c)
    else:
        pf.seed(SEED)
        net = pf.nn.Sequential(pf.nn.Linear(2, 128), pf.nn.Tanh(), pf.nn.Linear(128, 128),
                               pf.nn.Tanh(), pf.nn.Linear(128, 1))
        params = {k: p.detach() for k, p in net.named_parameters()}
        zeros = {k: pf.zeros_like(p) for k, p in params.items()}
        x = pf.to_tensor(rng.standard_normal((256, 2)).astype(np.float32))
        y = pf.to_tensor(rng.standard_normal((256, 1)).astype(np.float32))
        fn = _mlp_step(pf, net)
        args = (params, zeros, dict(zeros), pf.to_tensor(0.0), x, y)
    run = fn if mode == "eager" else pf.jit(fn)

    def step():
        return run(*args)

    if mode != "eager":  # the first call traces; time the numba version once it is in use
        step()
        run.wait_compiled()

    def result():
        out = step()
        first = out[0] if isinstance(out, tuple) else out
        return first.numpy()

    return step, result


def run(framework: str, config: str, quick: bool) -> dict:
    import numpy as np

    from ..timing import FULL, QUICK, measure

    step, result = make_step(config)
    m = measure(step, **(QUICK if quick else FULL))
    out = {"value": m["median_s"] * 1e6, "unit": "us", "min": m["min_s"] * 1e6,
           "reps": m["reps"]}
    case, mode = _split(config)
    if mode != "eager":
        _, eager_result = make_step(f"{case}-eager")
        got, want = result(), eager_result()
        out["max_rel_diff"] = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)),
                                                                       1e-30))
    return out


def report(results) -> str:
    rows = []
    for case in CASES:
        cells = [results.get(("primflow", f"{case}-{mode}")) for mode in MODES]
        eager = rp.value(cells[0])
        diffs = [c.get("max_rel_diff") for c in cells[1:] if rp.ok(c)]
        rows.append([case] + [rp.cell(c, "{:.1f}") for c in cells]
                    + [rp.ratio(eager, rp.value(c)) for c in cells[1:]]
                    + [rp.NA if not diffs else f"{max(diffs):.1e}"])
    out = [f"{ID}  {TITLE}  (one process per cell)", ""]
    out.append(rp.table(["case", "eager us", "jit-numpy us", "jit us", "speedup numpy",
                         "speedup jit", "max rel diff"], rows))
    out.append("  jit-numpy: generated NumPy code only; jit: the default backend (numba "
               "kernels for large arithmetic groups when numba is installed).")
    return "\n".join(out)
