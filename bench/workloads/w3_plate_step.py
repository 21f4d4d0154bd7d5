"""W3: one training step of a plate (biharmonic) PINN.

The MLP 2-64-64-64-1 (tanh, float64; the same fixed-seed weights as W2, trainable), N = 1,024
interior points uniform in [0, 1]^2 (W2's points), 256 boundary points (64 per edge of the
unit square, fixed seed), f = 4 pi^4 sin(pi x) sin(pi y). One step:

    loss = mean((Δ²u(X_int) - f)^2) + mean(u(X_bnd)^2),
    gradient with respect to all parameters, Adam(lr=1e-3) update.

    primflow collapsed  ``pf.autograd.biharmonic(net, X, method="collapsed")`` in the loss,
                        ``loss.backward(); opt.step(); opt.clear_grad()`` (pf.nn.MLP,
                        pf.optimizer.Adam)
    primflow nested     the same with ``method="nested"`` (for reference)
    primflow jit        ``vg = pf.jit(pf.value_and_grad(loss_fn, None, params))`` (collapsed),
                        then an eager Adam: the returned gradients are assigned to ``p.grad``
                        and ``pf.optimizer.Adam.step()`` runs
    primflow jit_adam   the whole step as one jitted function: the loss through
                        ``pf.nn.functional_call(net, params, X)``, ``pf.value_and_grad`` of it
                        and a functional Adam update (same formula), returning the new
                        parameters and moments
                        (both: compile time = first call - warm call, and the first call of a
                        second process that reuses the disk cache, see bench/jit_support.py;
                        the jitted loss and gradients / step are checked against eager)
    PyTorch             torch.nn + nested ``torch.autograd.grad`` (create_graph=True, the W2
                        operator) + torch.optim.Adam
    JAX jit             ``jax.jit`` of value_and_grad of the loss (W2's nested scalar grads
                        under vmap) plus a hand-written Adam update (same formula as
                        torch/primflow), after compilation

Milliseconds per step (the parameters keep changing from step to step, as in training).

Correctness: each cell also builds a fresh model and returns the loss and the norm of every
parameter's gradient at the initial weights, and the losses of the first three steps (which
check the Adam updates); the report compares them across frameworks (relative difference
< 1e-8).
"""

from __future__ import annotations

from .. import report as rp
from ..registry import Config
from . import w2_biharmonic as w2

ID = "W3"
TITLE = ("one plate PINN training step: N=1,024 interior + 256 boundary points, MLP 2-64-64-64-1 "
         "tanh float64, biharmonic residual, gradient + Adam(lr=1e-3), ms per step")

N_INT = 1024
# the jit step at more points (thread scaling: ``python -m bench --only W3 --threads 1,2``)
N_LARGE = 8192
JIT_LARGE = f"jit_{N_LARGE}"
# a small PINN batch: the jit cell and JAX jit at this many interior points (per-op costs
# dominate; target: pf.jit(grad of the user's loss) faster than JAX jit)
N_SMALL = 32
JIT_SMALL, JAX_SMALL = f"jit_{N_SMALL}", f"nested_{N_SMALL}"
N_BND = 256
LR = 1e-3
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8
CHECK_STEPS = 3
TOL = 1e-8

CONFIGS = [
    Config("primflow", "collapsed", "pf.autograd.biharmonic(method='collapsed') + backward + Adam"),
    Config("torch", "nested", "nested torch.autograd.grad + backward + torch.optim.Adam"),
    Config("jax_jit", "nested", "jax.jit(value_and_grad + Adam), after compile"),
    Config("primflow", "nested", "method='nested' (reference)", quick=False),
    Config("primflow", "jit", "pf.jit(pf.value_and_grad(loss_fn, None, params)) + eager Adam"),
    Config("primflow", "jit_adam", "pf.jit of value_and_grad + functional Adam (whole step)"),
    Config("primflow", JIT_LARGE, f"the jit cell at N = {N_LARGE:,} interior points"),
    Config("primflow", JIT_SMALL, f"the jit cell at N = {N_SMALL} interior points"),
    Config("jax_jit", JAX_SMALL, f"JAX jit at N = {N_SMALL} interior points"),
]
JIT_CONFIGS = ("jit", "jit_adam")
JIT_TOL = 1e-10  # relative, jit vs eager (loss, gradients / new parameters)

REF_MS = {"jax_jit": 160.0, "torch": 146.0}  # reference machine (workload notes)


def _data(n_int=N_INT):
    """(params, interior [N, 2], boundary [256, 2], f at interior [N]) as NumPy float64."""
    import numpy as np

    xi = w2.interior_points(n_int)
    rng = np.random.default_rng(w2.SEED + 2)
    per = N_BND // 4
    t = rng.uniform(0.0, 1.0, (4, per))
    z, o = np.zeros(per), np.ones(per)
    xb = np.concatenate([np.stack([t[0], z], 1), np.stack([t[1], o], 1),
                         np.stack([z, t[2]], 1), np.stack([o, t[3]], 1)])
    f = 4.0 * np.pi ** 4 * np.sin(np.pi * xi[:, 0]) * np.sin(np.pi * xi[:, 1])
    return w2.mlp_params(), xi, xb, f


# --- one framework each: build() -> (step, initial_grads) -------------------------------------
# step(): one training step, returns the loss (before the update) as a float-convertible value;
# initial_grads(): (loss, [gradient norm per parameter]) at the current weights, no update.

def _primflow_setup(method, n_int=N_INT):
    """(make_net, loss_of): a fresh MLP with the shared weights, and the plate loss of a
    network (biharmonic residual by ``method`` at the interior points, u on the boundary)."""
    import primflow as pf

    pf.set_default_dtype("float64")
    params, xi, xb, f = _data(n_int)
    Xi, Xb = pf.to_tensor(xi), pf.to_tensor(xb)
    F = pf.to_tensor(f[:, None])

    def make_net():
        net = pf.nn.MLP(list(w2.DIMS), activation="tanh")
        for p, a in zip(net.parameters(), params):
            p.set_value(a)
        return net

    def loss_of(u):
        res = pf.autograd.biharmonic(u, Xi, method=method)
        return ((res - F) ** 2).mean() + (u(Xb) ** 2).mean()

    return make_net, loss_of


def torch_mlp(torch, params):
    """W2's MLP as a ``torch.nn.Sequential`` (float64, tanh) holding ``params``' weights
    (shared with bench/distributed.py's DDP cell)."""
    layers = []
    for i, (n_in, n_out) in enumerate(zip(w2.DIMS[:-1], w2.DIMS[1:])):
        lin = torch.nn.Linear(n_in, n_out, dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(params[2 * i].T.copy()))
            lin.bias.copy_(torch.from_numpy(params[2 * i + 1]))
        layers.append(lin)
        if i < len(w2.DIMS) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def _primflow(method):
    import primflow as pf

    make_net, loss_of = _primflow_setup(method)

    def build():
        net = make_net()
        opt = pf.optimizer.Adam(learning_rate=LR, beta1=BETA1, beta2=BETA2, epsilon=EPS,
                                parameters=net.parameters())

        def loss_fn():
            return loss_of(net)

        def step():
            loss = loss_fn()
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss

        def initial_grads():
            loss = loss_fn()
            loss.backward()
            norms = [float((p.grad ** 2).sum().item()) ** 0.5 for p in net.parameters()]
            opt.clear_grad()
            return float(loss.item()), norms

        return step, initial_grads
    return build


def _primflow_jit(config, n_int=N_INT):
    """Builders for the jit cells: ``step`` carries ``jitted`` (for the report) and
    ``jit_vs_eager()`` (max relative difference of the jitted results to eager ones)."""
    import numpy as np

    import primflow as pf

    from .. import jit_support

    make_net, loss_of = _primflow_setup("collapsed", n_int)

    if config == "jit":
        def build():
            net = make_net()
            ps = net.parameters()
            opt = pf.optimizer.Adam(learning_rate=LR, beta1=BETA1, beta2=BETA2, epsilon=EPS,
                                    parameters=ps)

            def loss_fn():
                return loss_of(net)

            vg = pf.jit(pf.value_and_grad(loss_fn, None, ps))

            def step():
                with pf.no_grad():  # the results need no tape node: Adam reads them
                    loss, grads = vg()
                for p, g in zip(ps, grads):
                    p.grad = g
                opt.step()
                opt.clear_grad()
                return loss

            def initial_grads():
                with pf.no_grad():
                    loss, grads = vg()
                return float(loss.item()), [float((g ** 2).sum().item()) ** 0.5 for g in grads]

            def jit_vs_eager():
                with pf.no_grad():
                    loss, grads = vg()
                want = loss_fn()
                want.backward()
                d = jit_support.rel_diff([loss.numpy()] + [g.numpy() for g in grads],
                                         [want.numpy()] + [p.grad.numpy() for p in ps])
                opt.clear_grad()
                return d

            step.jitted, step.jit_vs_eager = vg, jit_vs_eager
            return step, initial_grads
        return build

    def train_step(ps, m, v, t, net):
        loss, g = pf.value_and_grad(lambda q: loss_of(
            lambda X: pf.nn.functional_call(net, q, X)))(ps)
        t = t + 1.0
        c1, c2 = 1.0 - BETA1 ** t, 1.0 - BETA2 ** t
        new_p, new_m, new_v = {}, {}, {}
        for k in ps:
            new_m[k] = m[k] * BETA1 + g[k] * (1.0 - BETA1)
            new_v[k] = v[k] * BETA2 + g[k] * g[k] * (1.0 - BETA2)
            new_p[k] = ps[k] - (new_m[k] / c1) / (pf.sqrt(new_v[k] / c2) + EPS) * LR
        return loss, new_p, new_m, new_v, t

    def build():
        net = make_net()
        p0 = {k: p.detach() for k, p in net.named_parameters()}
        zeros = {k: pf.zeros_like(p) for k, p in p0.items()}
        state = [p0, zeros, dict(zeros), pf.to_tensor(0.0)]
        jstep = pf.jit(lambda ps, m, v, t: train_step(ps, m, v, t, net))

        def step():
            loss, *new = jstep(*state)
            state[:] = new
            return loss

        vg = pf.jit(pf.value_and_grad(lambda q: loss_of(
            lambda X: pf.nn.functional_call(net, q, X))))

        names = [k for k, _ in net.named_parameters()]  # the order of net.parameters()

        def initial_grads():
            loss, g = vg(state[0])
            return float(loss.item()), [float((g[k] ** 2).sum().item()) ** 0.5 for k in names]

        def jit_vs_eager():
            got = jstep(*state)
            want = train_step(*state, net)

            def flat(out):
                loss, new_p, new_m, new_v, _ = out
                return [np.asarray(loss.numpy())] + [d[k].numpy() for d in (new_p, new_m, new_v)
                                                     for k in sorted(d)]
            return jit_support.rel_diff(flat(got), flat(want))

        step.jitted, step.jit_vs_eager = jstep, jit_vs_eager
        return step, initial_grads
    return build


def _torch():
    import torch

    from ..timing import torch_single_thread

    torch_single_thread(torch)
    params, xi, xb, f = _data()
    Xi = torch.from_numpy(xi).requires_grad_(True)
    Xb, F = torch.from_numpy(xb), torch.from_numpy(f)

    def build():
        net = torch_mlp(torch, params)
        opt = torch.optim.Adam(net.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS)

        def loss_fn():
            res = w2.torch_biharmonic(net, Xi)
            return ((res - F) ** 2).mean() + (net(Xb) ** 2).mean()

        def step():
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            opt.step()
            return loss.detach()

        def initial_grads():
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            norms = [float(p.grad.norm()) for p in net.parameters()]
            opt.zero_grad()
            return loss.item(), norms

        return step, initial_grads
    return build


def _jax(n_int=N_INT):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    params, xi, xb, f = _data(n_int)
    Xi, Xb, F = jnp.asarray(xi), jnp.asarray(xb), jnp.asarray(f)

    def loss_fn(p):
        def u(x):
            return w2.mlp(x[None, :], p, jnp.tanh)[0, 0]
        res = jax.vmap(w2.jax_biharmonic(u))(Xi)
        return jnp.mean((res - F) ** 2) + jnp.mean(w2.mlp(Xb, p, jnp.tanh) ** 2)

    vg = jax.value_and_grad(loss_fn)

    @jax.jit
    def update(p, m, v, t):
        loss, g = vg(p)
        t = t + 1
        m = [BETA1 * a + (1 - BETA1) * b for a, b in zip(m, g)]
        v = [BETA2 * a + (1 - BETA2) * b * b for a, b in zip(v, g)]
        c1, c2 = 1 - BETA1 ** t, 1 - BETA2 ** t
        p = [a - LR * (mi / c1) / (jnp.sqrt(vi / c2) + EPS) for a, mi, vi in zip(p, m, v)]
        return p, m, v, t, loss

    grads_jit = jax.jit(vg)

    def build():
        p = [jnp.asarray(a) for a in params]
        state = [p, [jnp.zeros_like(a) for a in p], [jnp.zeros_like(a) for a in p],
                 jnp.asarray(0.0)]

        def step():
            *new, loss = update(*state)
            state[:] = new
            return loss.block_until_ready()

        def initial_grads():
            loss, g = grads_jit(state[0])
            return float(loss), [float(jnp.sqrt(jnp.sum(a * a))) for a in g]

        return step, initial_grads
    return build


def _builder(framework, config):
    if framework == "primflow" and config in JIT_CONFIGS:
        return _primflow_jit(config)
    if framework == "primflow" and config == JIT_LARGE:
        return _primflow_jit("jit", N_LARGE)
    if framework == "primflow" and config == JIT_SMALL:
        return _primflow_jit("jit", N_SMALL)
    if framework == "jax_jit" and config == JAX_SMALL:
        return _jax(N_SMALL)
    if framework == "primflow":
        return _primflow(config)
    if framework == "torch":
        return _torch()
    return _jax()


def make_step(framework: str, config: str):
    """(step, check): one training step, and the initial loss/gradient check of a fresh model.
    Also used by ``python -m bench.profile_one`` and ``bench.profile_prims``."""
    build = _builder(framework, config)
    step, _ = build()

    def check():
        fresh_step, initial_grads = build()
        loss0, norms = initial_grads()
        losses = [float(fresh_step()) for _ in range(CHECK_STEPS)]
        out = {"loss0": loss0, "grad_norms": norms, "losses": losses}
        if hasattr(fresh_step, "jit_vs_eager"):  # at the weights after those steps
            out["jit_vs_eager"] = fresh_step.jit_vs_eager()
        return out
    return step, check


def run(framework: str, config: str, quick: bool) -> dict:
    from ..timing import FULL, QUICK, measure, pin_to_one_core

    if framework.startswith("jax"):
        pin_to_one_core()
    from .. import jit_support

    jit = framework == "primflow" and config in JIT_CONFIGS + (JIT_LARGE, JIT_SMALL)
    if jit:
        info = jit_support.prepare()
    step, check = make_step(framework, config)
    first, phases, counts = jit_support.first_call(step, jit)
    m = measure(step, **(QUICK if quick else FULL))
    res = {"value": m["median_s"] * 1e3, "unit": "ms", "min": m["min_s"] * 1e3,
           "reps_ms": [t * 1e3 for t in m["times_s"]], "reps": m["reps"], "inner": m["inner"],
           "first_call_ms": first * 1e3, **check()}
    if framework == "jax_jit":
        res["compile_ms"] = (first - m["median_s"]) * 1e3
    if jit:
        res.update(jit_support.fields(info, first, phases, counts, m["median_s"], ID, framework,
                                      config, quick, jitted=[step.jitted]))
    return res


# --- the table --------------------------------------------------------------------------------

def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def _check_diff(a, b):
    """Max relative difference of loss0, gradient norms and the first losses of two cells."""
    if not (rp.ok(a) and rp.ok(b)) or "loss0" not in a or "loss0" not in b:
        return None
    pairs = [(a["loss0"], b["loss0"])] + list(zip(a["grad_norms"], b["grad_norms"])) \
        + list(zip(a["losses"], b["losses"]))
    if len(a["grad_norms"]) != len(b["grad_norms"]):
        return float("inf")
    return max(_rel(x, y) for x, y in pairs)


def report(results) -> str:
    r, v = rp.lookup(results)

    pc, pn = v("primflow", "collapsed"), v("primflow", "nested")
    to, jx = v("torch", "nested"), v("jax_jit", "nested")
    jit = r("jax_jit", "nested")
    compile_ms = (f"{jit['compile_ms']:.0f}" if rp.ok(jit) and "compile_ms" in jit else rp.NA)
    rows = [["step", rp.cell(r("primflow", "collapsed"), "{:.1f}"),
             rp.cell(r("primflow", "nested"), "{:.1f}"), rp.cell(r("torch", "nested"), "{:.1f}"),
             rp.cell(jit, "{:.1f}"), compile_ms, rp.ratio(pc, to), rp.ratio(pc, jx),
             rp.ratio(pn, to)]]
    reps = next((res.get("reps") for res in results.values() if rp.ok(res) and "reps" in res), None)
    how = f"median of {reps} reps, " if reps else ""
    out = [f"{ID}  {TITLE}  ({how}one process per cell)", ""]
    out.append(rp.table(["", "pf collapsed", "pf nested", "PyTorch", "JAX jit", "JAX compile ms",
                         "collapsed/torch", "collapsed/jax", "pf nested/torch"], rows))
    out.append("  pf: eager, pf.nn.MLP + pf.autograd.biharmonic + backward + pf.optimizer.Adam; "
               "PyTorch: eager, nested autograd.grad (create_graph) + torch.optim.Adam; JAX: "
               "jit(value_and_grad + Adam), after compile.")
    # correctness
    out.append("")
    cells = [("primflow", "collapsed"), ("primflow", "nested"), ("torch", "nested"),
             ("jax_jit", "nested")] + [("primflow", c) for c in JIT_CONFIGS]
    present = [c for c in cells if rp.ok(r(*c)) and "loss0" in r(*c)]
    bad, worst = [], None
    for i, a in enumerate(present):
        for b in present[i + 1:]:
            d = _check_diff(r(*a), r(*b))
            if d is not None:
                worst = d if worst is None else max(worst, d)
                if not d <= TOL:
                    bad.append(f"{a[0]}/{a[1]} vs {b[0]}/{b[1]}: {d:.2e}")
    if present:
        loss0 = r(*present[0])["loss0"]
        out.append(f"  initial loss {loss0:.6e}; check: loss, 8 gradient norms and the first "
                   f"{CHECK_STEPS} step losses compared across {len(present)} cells"
                   + (f", max relative difference {worst:.1e}" if worst is not None else ""))
    if bad:
        out.append("  CHECK FAILED: " + "; ".join(bad))
    elif worst is not None:
        out.append(f"  check: all cells agree (tolerance {TOL:g})")
    # ratios the issue cares about
    for label, peer in (("PyTorch eager", ("torch", "nested")), ("JAX jit", ("jax_jit", "nested"))):
        a, b = r("primflow", "collapsed"), r(*peer)
        if rp.ok(a) and rp.ok(b):
            out.append(f"  pf collapsed / {label}: {a['value'] / b['value']:.2f}x"
                       f"{rp.per_round(a, b)}")
    out += _jit_report(results)
    out.append("  reference machine (workload notes): JAX jit 160 ms (compile 5.8 s), PyTorch "
               "eager 146 ms")
    return "\n".join(out)


def _jit_report(results) -> list:
    """The primflow jit rows, their checks and the W3 jit target."""
    from .. import jit_support

    r, v = rp.lookup(results)

    if not any(r("primflow", c) for c in JIT_CONFIGS):
        return []
    eager = v("primflow", "collapsed")
    peers = [(v(fw, "nested"), label) for fw, label in (("torch", "PyTorch"),
                                                          ("jax_jit", "JAX jit"))
             if v(fw, "nested") is not None]
    fastest = min(peers) if peers else (None, None)
    rows = []
    for c in JIT_CONFIGS:
        res = r("primflow", c)
        jv = rp.value(res)
        cold = f"{res['compile_ms']:.0f}" if rp.ok(res) and "compile_ms" in res else rp.NA
        cached = (f"{res['cached_compile_ms']:.0f}" if rp.ok(res) and "cached_compile_ms" in res
                  else rp.NA)
        rows.append([c, rp.cell(res, "{:.1f}"), rp.ratio(eager, jv), rp.ratio(fastest[0], jv),
                     rp.ratio(v("torch", "nested"), jv), rp.ratio(v("jax_jit", "nested"), jv),
                     cold, cached])
    out = ["", "  primflow jit (ms per step after the first call; speedups = other / jit)"]
    out.append(rp.table(["", "ms", "pf eager/jit", "fastest peer/jit", "torch/jit", "jax/jit",
                         "compile ms", "2nd-proc compile ms"], rows))
    out.append("  jit: pf.jit(pf.value_and_grad(loss_fn, None, params)) + eager "
               "pf.optimizer.Adam on the returned gradients; jit_adam: the whole step "
               "(functional_call, value_and_grad, functional Adam) in one pf.jit.")
    out += jit_support.compile_report([(c, r("primflow", c)) for c in JIT_CONFIGS])
    out += jit_support.check_lines(
        [(c, r("primflow", c)) for c in JIT_CONFIGS],
        "jitted loss and gradients (jit) / step outputs (jit_adam) equal eager", JIT_TOL)
    large = r("primflow", JIT_LARGE)
    if large:
        d = large.get("jit_vs_eager") if rp.ok(large) else None
        out.append(f"  jit at N = {N_LARGE:,} interior points: {rp.cell(large, '{:.1f}')} ms per "
                   f"step" + (f" (jitted loss and gradients vs eager: {d:.1e})"
                              if d is not None else ""))
    small, small_jax = r("primflow", JIT_SMALL), r("jax_jit", JAX_SMALL)
    if small or small_jax:
        a, b = rp.value(small), rp.value(small_jax)
        d = small.get("jit_vs_eager") if rp.ok(small) else None
        verdict = rp.NA if a is None or b is None else (
            f"{a / b:.2f}x -> {'met' if a < b else 'NOT met'}{rp.per_round(small, small_jax)}")
        out.append(f"  N = {N_SMALL} interior points: pf jit {rp.cell(small, '{:.2f}')} ms, JAX "
                   f"jit {rp.cell(small_jax, '{:.2f}')} ms per step"
                   + (f" (jit vs eager: {d:.1e})" if d is not None else "")
                   + f"; target pf jit faster than JAX jit: {verdict}")
        out += jit_support.early_report([(JIT_SMALL, small)])
    verdicts = []
    for c in JIT_CONFIGS:
        res = r("primflow", c)
        if not rp.ok(res) or eager is None or fastest[0] is None:
            continue
        qe, qp = eager / res["value"], fastest[0] / res["value"]
        met = qe >= 3.0 and qp >= 2.0
        verdicts.append(met)
        per = rp.per_round(r("primflow", "collapsed"), res, "eager/jit per round")
        out.append(f"  target ({c}): >= 2x faster than the fastest peer ({fastest[1]}) and >= 3x "
                   f"faster than primflow eager: {qp:.2f}x and {qe:.2f}x{per} -> "
                   f"{'met' if met else 'NOT met'}")
    if not verdicts:
        out.append("  target: pf jit >= 2x faster than the fastest peer and >= 3x faster than "
                   "primflow eager: n/a (needs primflow eager, jit and peer results)")
    return out
