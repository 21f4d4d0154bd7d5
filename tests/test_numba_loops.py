"""Whole-loop numba kernels (compiler/numba_loops.py) and the loop simplification pass
(ir.regions.simplify_loops): each loop compiled as one kernel must give what the Python
loop over compiled regions gives (backend="numpy"), what eager execution gives, and its
gradients must match an independent oracle (the Python-unrolled loop's gradient, float64
finite differences)."""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import requires_extra
from primflow.compiler import numba_codegen, numba_loops
from primflow.ir.regions import all_ops, simplify_loops

# loops become kernels, compiled in the first call; small elementwise groups stay NumPy
NUMBA = {"backend": "auto", "tiered": False}
needs_numba = requires_extra("jit")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(pf.config, "cache_dir", str(tmp_path))


def _field(y, p):
    w1, b1, w2 = p
    return pf.tanh(y @ w1 + b1) @ w2


def _rk4(y0, p, n, dt=0.1):
    def step(y, _):
        k1 = _field(y, p)
        k2 = _field(y + 0.5 * dt * k1, p)
        return y + dt * k2, (y * y).sum()

    return pf.scan(step, y0, None, length=n)


def _problem(seed=0, dtype="float64"):
    rng = np.random.default_rng(seed)
    p = [pf.to_tensor(rng.standard_normal((6, 4)) * 0.5, dtype=dtype),
         pf.to_tensor(rng.standard_normal(4) * 0.1, dtype=dtype),
         pf.to_tensor(rng.standard_normal((4, 6)) * 0.5, dtype=dtype)]
    return p, pf.to_tensor(rng.uniform(-1, 1, 6), dtype=dtype)


def _loop_kernels(jitted, *args):
    exe = jitted.lower(*args).compile()
    return [k for k in exe.kernels if isinstance(k, numba_loops.LoopLauncher)]


def _np(tree):
    return [np.asarray(t.numpy()) for t in pf.tree_flatten(tree)[0]]


@needs_numba
def test_forward_scan_is_one_kernel_and_matches_the_python_loop():
    p, y0 = _problem()

    def f(p, y0):
        y, ys = _rk4(y0, p, 7)
        return y, ys

    fast = pf.jit(f, **NUMBA)
    assert len(_loop_kernels(fast, p, y0)) == 1
    slow = pf.jit(f, backend="numpy")
    assert not _loop_kernels(slow, p, y0)
    for a, b, c in zip(_np(fast(p, y0)), _np(slow(p, y0)), _np(f(p, y0))):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(a, c, rtol=1e-13, atol=1e-14)
    assert "the whole loop is one numba kernel" in fast.lower(p, y0).as_text("compiled")


@needs_numba
def test_gradient_through_scan_matches_the_unrolled_loop_and_finite_differences():
    p, y0 = _problem(1)

    def loss(p, y0):
        y, _ = _rk4(y0, p, 5)
        return (y * y).sum()

    def unrolled(p, y0, dt=0.1):
        y = y0
        for _ in range(5):
            y = y + dt * _field(y + 0.5 * dt * _field(y, p), p)
        return (y * y).sum()

    grad = pf.jit(pf.grad(loss), **NUMBA)
    scans = [op for op in grad.lower(p, y0).program.ops if op.prim == "scan"]
    assert len(scans) >= 2  # the forward scan saving residuals, a reverse scan
    assert len(_loop_kernels(grad, p, y0)) == len(scans)  # each one numba kernel
    got = _np(grad(p, y0))
    want = _np(pf.grad(unrolled)(p, y0))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    # float64 central differences on one weight entry
    w = p[0].numpy().copy()
    eps = 1e-6
    plus, minus = w.copy(), w.copy()
    plus[2, 1] += eps
    minus[2, 1] -= eps
    fd = (float(loss([pf.to_tensor(plus)] + p[1:], y0))
          - float(loss([pf.to_tensor(minus)] + p[1:], y0))) / (2 * eps)
    assert abs(got[0][2, 1] - fd) < 1e-7 * max(1.0, abs(fd))


@needs_numba
def test_reverse_scan_with_xs_float32_and_scalar_carry():
    rng = np.random.default_rng(2)
    xs = pf.to_tensor(rng.standard_normal((9, 3)), dtype="float32")
    c0 = pf.to_tensor(0.5, dtype="float32")

    def f(c0, xs):
        def step(c, x):
            c = c * 0.9 + pf.exp(-x * x).sum()
            return c, x * c
        return pf.scan(step, c0, xs, reverse=True)

    fast = pf.jit(f, **NUMBA)
    assert len(_loop_kernels(fast, c0, xs)) == 1
    for a, b in zip(_np(fast(c0, xs)), _np(f(c0, xs))):
        assert a.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=2e-6)


@needs_numba
def test_while_loop_and_fori_loop_with_integer_counters():
    def newton(a):  # sqrt(a) by Newton's method until converged (a traced trip count)
        def cond(s):
            return (pf.abs(s[1] * s[1] - a) > 1e-12) & (s[0] < 50)

        def body(s):
            return s[0] + 1, 0.5 * (s[1] + a / s[1])
        return pf.while_loop(cond, body, (pf.to_tensor(0, dtype="int64"), a))

    a = pf.to_tensor(7.0, dtype="float64")
    fast = pf.jit(newton, **NUMBA)
    assert len(_loop_kernels(fast, a)) == 1
    steps, root = fast(a)
    assert abs(float(root) - np.sqrt(7.0)) < 1e-12
    assert int(steps) == int(newton(a)[0])

    def powers(x):
        return pf.fori_loop(0, 6, lambda i, v: v * x + pf.cast(i, "float64"), x)

    x = pf.to_tensor(np.linspace(-1, 1, 5))
    fast = pf.jit(powers, **NUMBA)
    assert len(_loop_kernels(fast, x)) == 1
    np.testing.assert_allclose(fast(x).numpy(), powers(x).numpy(), rtol=1e-14)


@needs_numba
def test_a_loop_numba_cannot_run_stays_a_python_loop():
    def f(x):
        return pf.scan(lambda c, v: (c + pf.erf(v), c), x[0], x)[0]

    x = pf.to_tensor(np.linspace(-1, 1, 4))
    fast = pf.jit(f, **NUMBA)
    assert not _loop_kernels(fast, x)
    np.testing.assert_allclose(fast(x).numpy(), f(x).numpy(), rtol=1e-14)


def test_the_kernel_does_not_depend_on_the_trip_count():
    p, y0 = _problem()

    def spec(n):
        program = pf.jit(lambda p, y0: _rk4(y0, p, n)[0]).lower(p, y0).program
        (op,) = [op for op in program.ops if op.prim == "scan"]
        return numba_loops.loop_spec(op)

    a, b = spec(10), spec(1000)
    assert a is not None and a.sha == b.sha


def test_simplify_loops_moves_constants_and_unchanged_carries_out():
    def f(x, w):
        zeros = pf.zeros([4, 3])

        def step(c, v):
            acc, fixed = c
            x_t, z_t = v
            return (acc + x_t * fixed + z_t.sum(), fixed), acc

        return pf.scan(step, (x[0], w), (x, zeros))

    x, w = pf.to_tensor(np.arange(4.0)), pf.to_tensor(2.0)
    jitted = pf.jit(f, backend="numpy")
    traced = jitted.lower(x, w).traced.copy()
    assert simplify_loops(traced)
    (scan,) = [op for op in all_ops(traced) if op.prim == "scan"]
    assert (scan.params["n_carry"], scan.params["n_xs"]) == (1, 1)
    (program_scan,) = [op for op in jitted.lower(x, w).program.ops if op.prim == "scan"]
    assert program_scan.params["n_carry"] == 1
    for a, b in zip(_np(jitted(x, w)), _np(f(x, w))):
        np.testing.assert_allclose(a, b, rtol=1e-14)


@needs_numba
def test_a_kernel_numba_rejects_falls_back_to_the_python_loop(monkeypatch):
    def broken(op):
        raise RuntimeError("numba typing failed (simulated)")

    monkeypatch.setattr(numba_loops, "compile_loop", broken)

    def f(x):
        return pf.scan(lambda c, v: (c * 0.5 + v, c), x[0], x)

    x = pf.to_tensor(np.linspace(-1, 1, 4))
    fast = pf.jit(f, **NUMBA)
    with pytest.warns(RuntimeWarning, match="could not be compiled as one numba kernel"):
        got = fast(x)
    assert not _loop_kernels(fast, x)
    for a, b in zip(_np(got), _np(f(x))):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_jet_inside_jit_keeps_scan_and_while_loops_as_one_operation():
    xs = pf.to_tensor(np.linspace(0.5, 1.5, 6))

    def f(x):
        def step(c, v):
            c = pf.sin(c * v) + 0.5 * c
            return c, c * c
        c, ys = pf.scan(step, x, xs)
        _, d = pf.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, pf.tanh(s[1]) * c),
                             (pf.to_tensor(0, dtype="int64"), c))
        return c + ys.sum() + d

    def series(x, v1, v2, v3):
        y0, ys = pf.jet(f, (x,), ([v1, v2, v3],))
        return [y0] + list(ys)

    args = [pf.to_tensor(a, dtype="float64") for a in (0.3, 1.0, 0.2, 0.0)]
    jitted = pf.jit(series, full_graph=True)
    prims = [op.prim for op in jitted.lower(*args).program.ops]
    assert prims.count("scan") == 1 and prims.count("while") == 1 and len(prims) < 60
    got = [float(v) for v in jitted(*args)]
    want = [float(v) for v in series(*args)]  # eager: the Python loops
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the first coefficient is the derivative: float64 central differences
    eps = 1e-6
    fd = (float(f(pf.to_tensor(0.3 + eps, dtype="float64")))
          - float(f(pf.to_tensor(0.3 - eps, dtype="float64")))) / (2 * eps)
    assert abs(got[1] - fd) < 1e-6 * max(1.0, abs(fd))


@needs_numba
def test_matrix_vector_products_in_every_orientation():
    rng = np.random.default_rng(3)
    w = pf.to_tensor(rng.standard_normal((5, 7)) * 0.3, dtype="float32")
    v = pf.to_tensor(rng.standard_normal(7) * 0.3, dtype="float32")
    u = pf.to_tensor(rng.standard_normal(5) * 0.3, dtype="float32")

    def f(w, v, u):
        def step(c, _):
            a, b = c
            m = w * pf.tanh(b).sum()  # a matrix computed in the loop: np.dot
            a = pf.tanh(w @ b + m @ b)  # matrix @ vector (rows of w read directly)
            b = pf.sin(a @ w + ((b[None, :] @ w.T) @ w)[0])  # vector @ matrix, both ways
            return (a, b), (a * a).sum()
        return pf.scan(step, (u, v), None, length=4)

    fast = pf.jit(f, **NUMBA)
    assert len(_loop_kernels(fast, w, v, u)) == 1
    slow = pf.jit(f, backend="numpy")
    for a, b in zip(_np(fast(w, v, u)), _np(slow(w, v, u))):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


@needs_numba
def test_the_kernels_tanh_is_within_two_ulp_of_numpys():
    x = np.concatenate([np.linspace(-30, 30, 20001), np.geomspace(1e-300, 2, 3000),
                        -np.geomspace(1e-300, 2, 3000), np.linspace(0.62, 0.63, 1001),
                        [0.0, -0.0, np.inf, -np.inf, np.nan]])
    xs = pf.to_tensor(x[None, :])

    def f(xs):
        return pf.scan(lambda c, v: (c, pf.tanh(v)), pf.to_tensor(0.0, dtype="float64"), xs)[1]

    fast = pf.jit(f, **NUMBA)
    assert len(_loop_kernels(fast, xs)) == 1
    got = fast(xs).numpy()[0]
    want = np.tanh(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    ulp = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))
    assert ulp.max() <= 2
    assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))  # tanh(-0) = -0


@needs_numba
def test_stacked_results_the_caller_holds_are_never_reused():
    def f(x):
        return pf.scan(lambda c, v: (c + v, c * v), x[0], x)[1]

    fast = pf.jit(f, **NUMBA)
    x1, x2 = pf.to_tensor(np.arange(1.0, 6.0)), pf.to_tensor(np.arange(10.0, 15.0))
    first = fast(x1)
    kept = first.numpy().copy()
    view = first[1:3]
    second = fast(x2)
    third = fast(x2)
    np.testing.assert_array_equal(first.numpy(), kept)  # not overwritten by later calls
    np.testing.assert_array_equal(view.numpy(), kept[1:3])
    np.testing.assert_array_equal(second.numpy(), third.numpy())
    np.testing.assert_allclose(second.numpy(), f(x2).numpy(), rtol=1e-14)


@needs_numba
def test_step_buffers_never_alias_a_carry_the_next_step_reads():
    # carries computed into the kernel's step buffers trade places with them; these bodies
    # return carries swapped, one result as two carries, a matrix product's result (read
    # whole by the next step's product), 2-d carries, int32 and bool arithmetic
    rng = np.random.default_rng(4)
    w = pf.to_tensor(rng.standard_normal((5, 5)) * 0.4)
    m0 = pf.to_tensor(rng.standard_normal((2, 3)))
    v0 = pf.to_tensor(rng.standard_normal(5))
    k0 = pf.to_tensor(np.arange(6, dtype=np.int32).reshape(2, 3))

    def f(w, m0, v0, k0):
        def step(c, _):
            a, b, u, p, m, k = c
            u = pf.tanh(u @ w)
            p = p @ w  # the product's buffer becomes the carry the next product reads
            m2 = m * 0.5 + pf.cast(k, "float64")
            k2 = pf.where(m2 > 0, k * 3 - 1, k + 2)
            return (b + 1.0, a * 2.0, u, p, m2, k2), (u.sum(), m2)  # a, b swapped

        def share(c, _):
            x, y, r, u = c
            z = pf.sin(x + y)
            h = pf.sin(r) + u
            # z as two carries; r's old array becomes u, read (by the product) after h is
            # made: neither may be a buffer the next step overwrites first
            return (z, z, h, r), z.sum() + (u @ w).sum()

        c, ys = pf.scan(step, (v0, v0 * 3.0, v0, v0, m0, k0), None, length=7)
        c2, zs = pf.scan(share, (v0, v0 * 0.5, v0 * 0.3, v0 * -0.2), None, length=5)
        return c, ys, c2, zs

    fast = pf.jit(f, **NUMBA)
    assert len(_loop_kernels(fast, w, m0, v0, k0)) == 2
    slow = pf.jit(f, backend="numpy")
    got, want = _np(fast(w, m0, v0, k0)), _np(slow(w, m0, v0, k0))
    for a, b, c in zip(got, want, _np(f(w, m0, v0, k0))):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(a, c, rtol=1e-13, atol=1e-14)


@needs_numba
def test_long_matrix_vector_products_four_rows_at_a_time_with_a_remainder():
    rng = np.random.default_rng(5)
    w = pf.to_tensor(rng.standard_normal((130, 7)) * 0.2)  # 7 outputs of 130-long rows
    x0 = pf.to_tensor(rng.standard_normal(130))

    def f(w, x0):
        def step(x, _):
            a = x @ w  # rows of w's transpose: 4 + 3 rows
            return pf.tanh(w @ a), a
        return pf.scan(step, x0, None, length=3)

    fast = pf.jit(f, **NUMBA)
    assert len(_loop_kernels(fast, w, x0)) == 1
    for a, b in zip(_np(fast(w, x0)), _np(pf.jit(f, backend="numpy")(w, x0))):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


def _lorenz(y, p):  # indexes its state: the reverse loop pads each slice's cotangent
    return pf.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                     y[0] * y[1] - p[2] * y[2], -y[3]])


def _lorenz_loss(p, y0, n=30, dt=0.002):
    def step(y, _):
        k1 = _lorenz(y, p)
        k2 = _lorenz(y + 0.5 * dt * k1, p)
        k3 = _lorenz(y + 0.5 * dt * k2, p)
        k4 = _lorenz(y + dt * k3, p)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None

    y, _ = pf.scan(step, y0, None, length=n)
    return (y * y).sum()


def _lorenz_loss_np(p, y, n=30, dt=0.002):
    def f(y):
        return np.array([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                         y[0] * y[1] - p[2] * y[2], -y[3]])

    for _ in range(n):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return (y * y).sum()


@needs_numba
def test_gradient_of_a_loop_that_indexes_its_state_is_two_kernels():
    """A small state read element by element (y[0], y[1], ...): the reverse loop's body
    pads each slice's cotangent, which kept it a Python loop over the compiled body (~40x
    JAX per call for a state of 4) until pad had a numba form."""
    p0, y0 = np.array([10.0, 28.0, 8 / 3]), np.array([1.0, 0.5, 0.2, 0.1])
    grad = pf.jit(pf.grad(_lorenz_loss, argnums=(0, 1)), **NUMBA)
    p, y = pf.to_tensor(p0), pf.to_tensor(y0)
    gp, gy = grad(p, y)
    assert len(_loop_kernels(grad, p, y)) == 2  # the forward and the reverse scan
    program = grad.lower(p, y).program
    assert "pad" in [op.prim for op in all_ops(program)]
    eps = 1e-6
    for got, base, which in ((gp, p0, 0), (gy, y0, 1)):
        for i in range(len(base)):
            e = np.zeros_like(base)
            e[i] = eps
            args_hi = [p0, y0 + e] if which else [p0 + e, y0]
            args_lo = [p0, y0 - e] if which else [p0 - e, y0]
            fd = (_lorenz_loss_np(*args_hi) - _lorenz_loss_np(*args_lo)) / (2 * eps)
            np.testing.assert_allclose(got.numpy()[i], fd, rtol=1e-6, atol=1e-8)
