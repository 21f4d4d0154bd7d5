"""cond, while and scan as primitives: declared with their rules, dispatched by ``bind``.

Each rule (jvp, batch, Taylor, vjp) is reached through the transform that owns it, inside
``pf.jit`` (where the operation is staged), and checked against float64 finite differences
or the eager (unrolled) result. The eager paths are tested in test_control_flow.py.
"""

import numpy as np
import pytest

import primflow as pf
from primflow.core.primitive import get_primitive
from primflow.core.region_primitive import RegionPrimitive
from primflow.ir import interpreter
from primflow.ir.regions import all_ops

# a graph break would run the control flow eagerly, bypassing the rules under test
pytestmark = pytest.mark.filterwarnings(
    "error::primflow.transforms.graph_break.GraphBreakWarning")

CONTROL = ("cond", "while", "scan")
RULES = ("jvp", "vjp", "batch", "taylor")


def t(a):
    return pf.to_tensor(np.asarray(a, dtype=np.float64))


def spy_rules(monkeypatch):
    """Records ``(primitive, rule)`` each time a control-flow primitive's rule runs."""
    called = set()
    for name in CONTROL:
        prim = get_primitive(name)
        for rule in RULES:
            original = getattr(prim, rule)

            def wrapped(*args, _name=name, _rule=rule, _original=original, **kwargs):
                called.add((_name, _rule))
                return _original(*args, **kwargs)

            monkeypatch.setattr(prim, rule, wrapped)
    return called


def fd_directional(f, x, v, eps=1e-6):
    """Central finite difference of ``f`` (NumPy in, NumPy out) along ``v``."""
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


def prims_in(jitted, *args):
    return [op.prim for op in all_ops(jitted.lower(*args).program)]


# ---- declarations ---------------------------------------------------------------------------

def test_control_flow_operations_are_declared_primitives():
    for name in CONTROL:
        prim = get_primitive(name)
        assert isinstance(prim, RegionPrimitive) and prim.multiple_results
        assert all(callable(getattr(prim, rule)) for rule in RULES + ("unroll", "infer"))
        assert prim.shard is not None and prim.regions is not None
    # the interpreter binds them like any primitive: no hook installed from above
    assert not hasattr(interpreter, "set_control_rule")


# ---- scan: an RK4 integration with a state of 4 ---------------------------------------------

A = np.array([[-0.5, 1.0, 0.0, 0.2], [-1.0, -0.3, 0.4, 0.0], [0.1, 0.0, -0.2, 1.0],
              [0.0, -0.3, -1.0, -0.1]])


def rk4(y, w, dt=0.05, n=20):
    def field(y):
        return pf.tanh(pf.matmul(w, y))

    def step(y, _):
        k1 = field(y)
        k2 = field(y + 0.5 * dt * k1)
        k3 = field(y + 0.5 * dt * k2)
        k4 = field(y + dt * k3)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), y

    return pf.scan(step, y, None, length=n)


def rk4_np(y, w, dt=0.05, n=20):
    for _ in range(n):
        k1 = np.tanh(w @ y)
        k2 = np.tanh(w @ (y + 0.5 * dt * k1))
        k3 = np.tanh(w @ (y + 0.5 * dt * k2))
        k4 = np.tanh(w @ (y + dt * k3))
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


Y0 = np.array([0.3, -0.7, 0.5, 0.1])


def test_jit_grad_of_scan_uses_the_vjp_rule_and_matches_finite_differences(monkeypatch):
    called = spy_rules(monkeypatch)

    def loss(w, y):
        end, ys = rk4(y, w)
        return (end * end).sum() + 0.1 * (ys * ys).sum()

    def loss_np(w, y):
        ys = [y]
        for _ in range(19):
            ys.append(rk4_np(ys[-1], w, n=1))
        end = rk4_np(ys[-1], w, n=1)
        return (end * end).sum() + 0.1 * sum((v * v).sum() for v in ys)

    gw, gy = pf.jit(pf.grad(loss, argnums=(0, 1)))(t(A), t(Y0))
    assert ("scan", "vjp") in called
    rng = np.random.default_rng(0)
    for _ in range(3):
        vw, vy = rng.standard_normal(A.shape), rng.standard_normal(4)
        fd = fd_directional(lambda s: loss_np(A + s * vw, Y0 + s * vy), 0.0, 1.0)
        got = (gw.numpy() * vw).sum() + (gy.numpy() * vy).sum()
        np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-9)


def test_jit_jvp_of_scan_is_one_loop_and_matches_finite_differences(monkeypatch):
    called = spy_rules(monkeypatch)
    v = np.array([1.0, -0.5, 0.25, 2.0])

    def f(y):
        return pf.jvp(lambda y: rk4(y, t(A))[0], (y,), (t(v),))

    jitted = pf.jit(f)
    out, dot = jitted(t(Y0))
    assert ("scan", "jvp") in called
    assert prims_in(jitted, t(Y0)).count("scan") == 1  # not unrolled
    np.testing.assert_allclose(out.numpy(), rk4_np(Y0, A), rtol=1e-12)
    np.testing.assert_allclose(dot.numpy(), fd_directional(lambda y: rk4_np(y, A), Y0, v),
                               rtol=1e-7, atol=1e-9)


def test_jit_vmap_of_scan_batches_the_loop(monkeypatch):
    called = spy_rules(monkeypatch)
    ys = np.random.default_rng(1).uniform(-1, 1, (3, 4))
    out = pf.jit(pf.vmap(lambda y: rk4(y, t(A))[0]))(t(ys))
    assert ("scan", "batch") in called
    np.testing.assert_allclose(out.numpy(), np.stack([rk4_np(y, A) for y in ys]), rtol=1e-12)


def test_jit_jet_of_scan_matches_derivatives_along_a_line(monkeypatch):
    called = spy_rules(monkeypatch)
    v = np.array([0.5, 1.0, -1.0, 0.3])

    series = ([t(v), t(np.zeros(4))],)  # concrete: jet inspects which are zero

    def f(y):
        return pf.jet(lambda y: rk4(y, t(A))[0], (y,), series)

    y0, (y1, y2) = pf.jit(f)(t(Y0))
    assert ("scan", "taylor") in called

    def line(s):
        return rk4_np(Y0 + s * v, A)

    np.testing.assert_allclose(y0.numpy(), line(0.0), rtol=1e-12)
    np.testing.assert_allclose(y1.numpy(), fd_directional(line, 0.0, 1.0), rtol=1e-7,
                               atol=1e-9)
    eps = 1e-4
    second = (line(eps) - 2 * line(0.0) + line(-eps)) / eps ** 2
    np.testing.assert_allclose(y2.numpy(), second, rtol=1e-4, atol=1e-6)


# ---- while ----------------------------------------------------------------------------------

def halve_until_small(x):
    return pf.while_loop(lambda v: (v * v).sum() > 0.01, lambda v: v * 0.5 + 0.01 * pf.sin(v),
                         x)


def halve_np(x):
    while (x * x).sum() > 0.01:
        x = x * 0.5 + 0.01 * np.sin(x)
    return x


def test_jit_jvp_and_vmap_of_while(monkeypatch):
    called = spy_rules(monkeypatch)
    x = np.array([1.0, -2.0])
    v = np.array([0.3, 1.0])
    out, dot = pf.jit(lambda x: pf.jvp(halve_until_small, (x,), (t(v),)))(t(x))
    assert ("while", "jvp") in called
    np.testing.assert_allclose(out.numpy(), halve_np(x), rtol=1e-12)
    np.testing.assert_allclose(dot.numpy(), fd_directional(halve_np, x, v), rtol=1e-6)
    lanes = np.array([[1.0, -2.0], [0.05, 0.0], [4.0, 4.0]])  # a different trip count each
    out = pf.jit(pf.vmap(halve_until_small))(t(lanes))
    assert ("while", "batch") in called
    np.testing.assert_allclose(out.numpy(), np.stack([halve_np(r) for r in lanes]),
                               rtol=1e-12)


def test_jit_grad_of_while_says_what_to_use_instead(monkeypatch):
    called = spy_rules(monkeypatch)
    with pytest.raises(ValueError, match="max_steps"):
        pf.jit(pf.grad(lambda x: halve_until_small(x).sum()))(t([1.0, 2.0]))
    assert ("while", "vjp") in called


# ---- cond -----------------------------------------------------------------------------------

def branchy(x):
    return pf.cond(x.sum() > 0, lambda v: pf.sin(v) * v, lambda v: pf.exp(v) - v, x)


def branchy_np(x):
    return np.sin(x) * x if x.sum() > 0 else np.exp(x) - x


@pytest.mark.parametrize("x", [[0.4, 0.9], [-0.4, -0.9]], ids=["true", "false"])
def test_jit_jvp_of_cond_is_a_cond_of_the_branch_jvps(monkeypatch, x):
    called = spy_rules(monkeypatch)
    x, v = np.array(x), np.array([1.0, -2.0])
    jitted = pf.jit(lambda x: pf.jvp(branchy, (x,), (t(v),)))
    out, dot = jitted(t(x))
    assert ("cond", "jvp") in called
    assert prims_in(jitted, t(x)).count("cond") == 1 and "select" not in prims_in(jitted, t(x))
    np.testing.assert_allclose(out.numpy(), branchy_np(x), rtol=1e-12)
    np.testing.assert_allclose(dot.numpy(), fd_directional(branchy_np, x, v), rtol=1e-7)


@pytest.mark.parametrize("x", [[0.4, 0.9], [-0.4, -0.9]], ids=["true", "false"])
def test_jit_jet_and_grad_of_cond(monkeypatch, x):
    called = spy_rules(monkeypatch)
    x, v = np.array(x), np.array([1.0, 0.5])
    series = ([t(v), t(np.zeros(2))],)  # concrete: jet inspects which are zero
    y0, (y1, y2) = pf.jit(lambda x: pf.jet(branchy, (x,), series))(t(x))
    assert ("cond", "taylor") in called

    def line(s):
        return branchy_np(x + s * v)

    np.testing.assert_allclose(y1.numpy(), fd_directional(line, 0.0, 1.0), rtol=1e-7)
    eps = 1e-4
    np.testing.assert_allclose(y2.numpy(), (line(eps) - 2 * line(0) + line(-eps)) / eps ** 2,
                               rtol=1e-4, atol=1e-6)
    g = pf.jit(pf.grad(lambda x: branchy(x).sum()))(t(x))
    assert ("cond", "vjp") in called
    fd = [fd_directional(lambda y: branchy_np(y).sum(), x, e) for e in np.eye(2)]
    np.testing.assert_allclose(g.numpy(), fd, rtol=1e-7)


def test_jit_vmap_of_cond_with_one_index_and_with_an_index_per_lane(monkeypatch):
    called = spy_rules(monkeypatch)
    w = np.array([[0.5, 1.0], [-2.0, 0.1], [0.3, 0.3]])

    def shared(x, w):  # one predicate for the whole batch: a cond of the vmapped branches
        return pf.vmap(lambda w: pf.cond(x.sum() > 0, lambda a, b: a * b, lambda a, b: a - b,
                                         x, w))(w)

    x = np.array([1.0, 2.0])
    jitted = pf.jit(shared)
    np.testing.assert_allclose(jitted(t(x), t(w)).numpy(), x * w, rtol=1e-12)
    assert ("cond", "batch") in called and prims_in(jitted, t(x), t(w)).count("cond") == 1
    # a predicate per lane: each lane takes its own branch
    out = pf.jit(pf.vmap(branchy))(t(w))
    np.testing.assert_allclose(out.numpy(), np.stack([branchy_np(r) for r in w]), rtol=1e-12)


def test_compiled_cond_returning_an_operand_keeps_its_value():
    """A branch that returns one of its operands: the compiled program used to hand back
    the operand's buffer, which the memory plan then reused for a later result."""
    def f(x):
        a = pf.exp(x)
        c = pf.cond(x.sum() > 0, lambda a: a, lambda a: a * 2.0, a)
        d = (x * 3.0 + 1.0) * x
        return d - c, c

    x = t([0.5, 1.5, -0.2])
    for backend in ("numpy", "auto"):
        got = pf.jit(f, backend=backend)(x)
        want = f(x)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


def test_single_branch_switch_checks_every_lane_when_compiled():
    """With one branch the selection reads no index, so the compiled per-lane check was
    dead code and an out-of-range lane passed silently; now the result goes through it."""
    def f(k, x):
        return pf.vmap(lambda k, x: pf.switch(k, [lambda v: v * 2.0], x))(k, x)

    x = t([1.0, 2.0, 3.0])
    ok = pf.to_tensor(np.array([0, 0, 0], dtype=np.int32))
    np.testing.assert_allclose(pf.jit(f)(ok, x).numpy(), [2.0, 4.0, 6.0])
    bad = pf.to_tensor(np.array([0, 1, 0], dtype=np.int32))
    with pytest.raises(IndexError, match="branch index is 1"):
        pf.jit(f)(bad, x)


@pytest.mark.parametrize("x0", [0.7, -0.7], ids=["true", "false"])
def test_jit_second_derivatives_of_cond_and_scan(x0):
    """The vjp rules' backward passes bind cond and scan again, so every order works."""
    def f(x):
        y = pf.cond(x > 0, lambda v: pf.sin(v) * v, lambda v: pf.exp(v) - v, x)
        c, _ = pf.scan(lambda c, _: (c * pf.cos(c) + y, None), y, None, length=3)
        return c

    def f_np(x):
        y = np.sin(x) * x if x > 0 else np.exp(x) - x
        c = y
        for _ in range(3):
            c = c * np.cos(c) + y
        return c

    second = pf.jit(pf.grad(pf.grad(f)))(t(x0))
    eps = 1e-4
    fd = (f_np(x0 + eps) - 2 * f_np(x0) + f_np(x0 - eps)) / eps ** 2
    np.testing.assert_allclose(float(second), fd, rtol=1e-5)
