"""Control flow: pf.cond/switch/while_loop/fori_loop/scan and pf.static.nn, eagerly, under
every transform and under pf.jit (regions in the IR), against unrolled Python loops and
float64 finite differences. (The OpInfo table adds orders 1-4 of each op.)"""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.ir import evaluate, parse, verify
from primflow.ir import VerificationError


@pytest.fixture(autouse=True)
def _float64():
    before = pf.get_default_dtype()
    pf.set_default_dtype("float64")
    yield
    pf.set_default_dtype(before)


def t(x, **kw):
    return pf.to_tensor(x, **kw)


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a),
                               np.asarray(b.numpy() if hasattr(b, "numpy") else b),
                               rtol=tol, atol=tol)


def fd(f, x, eps=1e-6):
    """Central difference of a scalar function of a scalar tensor."""
    v = float(x)
    return (float(f(t(v + eps))) - float(f(t(v - eps)))) / (2 * eps)


XS = [0.3, -0.2, 0.5, 0.1, 0.7]


def rnn(w, xs, c0=0.2):
    """A scan whose carry is defined before the loop and also read after it."""
    before = t(c0) * w

    def step(c, x):
        c = pf.tanh(c * w + x)
        return c, c * c

    c, ys = pf.scan(step, before, xs)
    return c * 3 + ys.sum() + before


def rnn_unrolled(w, xs, c0=0.2):
    before = t(c0) * w
    c, total = before, 0
    for i in range(xs.shape[0]):
        c = pf.tanh(c * w + xs[i])
        total = total + c * c
    return c * 3 + total + before


# ---- values ---------------------------------------------------------------------------------

def test_values_and_pytrees():
    xs = {"a": t([1.0, 2.0, 3.0]), "b": t([[1.0], [0.0], [2.0]])}

    def step(carry, x):
        s, n = carry
        return (s + x["a"] * x["b"][0], n + 1), {"prod": s * x["a"]}

    (s, n), ys = pf.scan(step, (t(0.0), t(0)), xs)
    assert float(s) == 7.0 and int(n) == 3
    close(ys["prod"], [0.0, 2.0, 3.0])
    (s_r, _), ys_r = pf.scan(step, (t(0.0), t(0)), xs, reverse=True)
    close(ys_r["prod"], [6.0, 12.0, 0.0])  # reverse: ys keep their positions
    jitted = pf.jit(lambda xs: pf.scan(step, (t(0.0), t(0)), xs))
    (s_j, n_j), ys_j = jitted(xs)
    assert float(s_j) == 7.0 and int(n_j) == 3
    close(ys_j["prod"], ys["prod"])
    out = pf.cond(t(True), lambda a, b: {"s": a + b}, lambda a, b: {"s": a - b}, t(1.0), t(2.0))
    assert float(out["s"]) == 3.0
    assert float(pf.switch(t(2), [lambda v: v, lambda v: v * 2, lambda v: v * 3], t(2.0))) == 6
    assert float(pf.fori_loop(0, 5, lambda i, v: v + i, t(0.0))) == 10.0
    assert float(pf.while_loop(lambda v: v < 10, lambda v: v * 3, t(1.0))) == 27.0


def test_paddle_spellings():
    x = t(2.0)
    assert float(pf.static.nn.cond(x > 1, lambda: x * 2, lambda: x)) == 4.0
    i, s = pf.static.nn.while_loop(lambda i, s: i < 5, lambda i, s: [i + 1, s + i],
                                   [t(0), t(0)])
    assert int(i) == 5 and int(s) == 10
    fns = {0: lambda: t(0.0), 3: lambda: t(3.0)}
    assert float(pf.static.nn.switch_case(t(3), fns)) == 3.0
    assert float(pf.static.nn.switch_case(t(7), fns, default=lambda: t(-1.0))) == -1.0
    assert float(pf.static.nn.switch_case(t(7), fns)) == 3.0  # Paddle: the last branch
    jitted = pf.jit(lambda k: pf.static.nn.switch_case(k, fns, default=lambda: t(-1.0)))
    assert [float(jitted(t(k))) for k in (0, 3, 5)] == [0.0, 3.0, -1.0]


# ---- derivatives ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_scan_gradients_match_unrolled_and_finite_differences(mode):
    xs = t(XS)
    w = t(0.7)
    wrap = pf.jit if mode == "jit" else (lambda f: f)
    g = wrap(pf.grad(rnn))(w, xs)
    close(g, pf.grad(rnn_unrolled)(w, xs))
    close(g, fd(lambda v: rnn(v, xs), w), tol=1e-7)
    g2 = wrap(pf.grad(pf.grad(rnn)))(w, xs)
    close(g2, pf.grad(pf.grad(rnn_unrolled))(w, xs))
    close(g2, fd(lambda v: pf.grad(rnn)(v, xs), w), tol=1e-6)
    g3 = wrap(pf.grad(pf.grad(pf.grad(rnn))))(w, xs)
    close(g3, pf.grad(pf.grad(pf.grad(rnn_unrolled)))(w, xs), tol=1e-9)
    # the scanned inputs' gradient
    close(wrap(pf.grad(rnn, argnums=1))(w, xs), pf.grad(rnn_unrolled, argnums=1)(w, xs))


def test_gradient_through_a_jitted_scan_from_outside():
    xs = t(XS)
    w = t(0.7, stop_gradient=False)
    out = pf.jit(rnn)(w, xs)
    (g,) = pf.grad(out, [w], create_graph=True)
    close(g, pf.grad(rnn_unrolled)(t(0.7), xs))
    (g2,) = pf.grad(g, [w])
    close(g2, pf.grad(pf.grad(rnn_unrolled))(t(0.7), xs))


def test_forward_mode_and_vmap_inside_jit_stay_one_loop():
    xs, w = t(XS), t(0.7)
    jvp_f = pf.jit(lambda w: pf.jvp(lambda v: rnn(v, xs), (w,), (t(1.0),))[1])
    close(jvp_f(w), pf.grad(rnn_unrolled)(w, xs))
    assert jvp_f.lower(w).as_text().count(" = scan(") == 1
    fwd_over_rev = pf.jit(lambda w: pf.jvp(pf.grad(lambda v: rnn(v, xs)), (w,), (t(1.0),))[1])
    close(fwd_over_rev(w), pf.grad(pf.grad(rnn_unrolled))(w, xs))
    ws = t([0.1, 0.7, -0.3])
    batched = pf.jit(pf.vmap(lambda v: rnn(v, xs)))
    close(batched(ws), pf.vmap(lambda v: rnn_unrolled(v, xs))(ws))
    assert batched.lower(ws).as_text().count(" = scan(") == 1
    grads = pf.jit(pf.grad(lambda ws: pf.vmap(lambda v: rnn(v, xs))(ws).sum()))(ws)
    close(grads, pf.vmap(pf.grad(lambda v: rnn_unrolled(v, xs)))(ws))
    xb = t([XS, [0.1, 0.2, 0.3, 0.4, 0.5]])
    close(pf.jit(pf.vmap(lambda x: rnn(w, x)))(xb), pf.vmap(lambda x: rnn_unrolled(w, x))(xb))


def test_fori_loop_static_bounds_is_a_reverse_differentiable_scan():
    def f(w):
        return pf.fori_loop(0, 6, lambda i, c: pf.sin(c * w) + i * 0.1, t(0.4))

    def unrolled(w):
        c = t(0.4)
        for i in range(6):
            c = pf.sin(c * w) + i * 0.1
        return c

    w = t(1.3)
    text = pf.jit(f).lower(w).as_text()
    assert text.count(" = scan(") == 1 and "sin(" in text
    for fn in (pf.grad(f), pf.grad(pf.grad(f))):
        close(pf.jit(fn)(w), fn(w))
    close(pf.grad(f)(w), pf.grad(unrolled)(w))
    close(pf.grad(pf.grad(f))(w), pf.grad(pf.grad(unrolled))(w))
    # traced bounds: a while loop (forward mode only under jit)
    traced = pf.jit(lambda n, w: pf.fori_loop(0, n, lambda i, c: c * w, t(1.0)))
    assert float(traced(t(3), t(2.0))) == 8.0 and float(traced(t(5), t(2.0))) == 32.0
    assert " = while(" in traced.lower(t(3), t(2.0)).as_text()


def test_cond_derivatives_and_both_branches_under_jit():
    def f(x):
        return pf.cond(x > 0, lambda v: v * v * pf.sin(v), lambda v: pf.exp(v), x)

    for x0 in (0.8, -0.6):
        x = t(x0)
        for fn in (f, pf.grad(f), pf.grad(pf.grad(f)), pf.grad(pf.grad(pf.grad(f)))):
            close(pf.jit(fn)(x), fn(x))
        close(pf.grad(f)(x), fd(f, x), tol=1e-7)
        close(pf.jvp(f, (x,), (t(1.0),))[1], fd(f, x), tol=1e-7)
    text = pf.jit(f).lower(t(1.0)).as_text()
    assert " = cond(" in text and "def branch0" in text and "def branch1" in text


def test_while_loop_modes():
    def f(x):
        return pf.while_loop(lambda v: v < 10, lambda v: v * v + 1, x)

    x = t(1.5)
    # eagerly the tape records every step: reverse mode works
    close(pf.grad(f)(x), fd(f, x), tol=1e-6)
    close(pf.jvp(f, (x,), (t(1.0),))[1], pf.grad(f)(x))
    jitted = pf.jit(lambda x: pf.jvp(f, (x,), (t(1.0),)))
    value, tangent = jitted(x)
    close(value, f(x))
    close(tangent, pf.grad(f)(x))
    with pytest.raises(ValueError, match="max_steps"):
        pf.jit(pf.grad(f))(x)

    def bounded(x):
        return pf.while_loop(lambda v: v < 10, lambda v: v * v + 1, x, max_steps=8)

    close(bounded(x), f(x))
    close(pf.jit(pf.grad(bounded))(x), pf.grad(f)(x))
    # a batched condition: every lane runs until it is done
    xs = t([1.5, 0.5, 20.0])
    expected = [float(f(t(v))) for v in (1.5, 0.5, 20.0)]
    close(pf.vmap(f)(xs), expected)
    close(pf.jit(pf.vmap(f))(xs), expected)
    close(pf.vmap(pf.grad(f))(xs), [float(pf.grad(f)(t(v))) for v in (1.5, 0.5, 20.0)])


def test_batched_predicates_select_per_lane():
    def f(x):
        return pf.cond(x > 0, lambda v: v * 2, lambda v: -v, x)

    def g(k, x):
        return pf.switch(k, [lambda v: v + 1, lambda v: v * 10, lambda v: v - 5], x)

    xs = t([1.0, -2.0, 3.0])
    close(pf.vmap(f)(xs), [2.0, 2.0, 6.0])
    close(pf.jit(pf.vmap(f))(xs), [2.0, 2.0, 6.0])
    ks = t([2, 0, 1])
    close(pf.vmap(g)(ks, xs), [-4.0, -1.0, 30.0])
    close(pf.jit(pf.vmap(g))(ks, xs), [-4.0, -1.0, 30.0])
    close(pf.vmap(pf.grad(f))(xs), [2.0, -1.0, 2.0])


def test_jet_through_control_flow():
    def f(x):
        c, _ = pf.scan(lambda c, _: (pf.sin(c) * x, None), x, None, length=3)
        return pf.cond(c > -10, lambda v: v * v, lambda v: v, c)

    x = t(0.7)
    _, (d1, d2) = pf.jet(f, (x,), ((t(1.0), t(0.0)),))
    close(d1, pf.grad(f)(x))
    close(d2, pf.grad(pf.grad(f))(x))


# ---- the IR: regions in the program ---------------------------------------------------------

def test_loop_body_is_compiled_once_not_unrolled():
    w = t(0.7)
    sizes = []
    for n in (3, 40):
        xs = t(np.linspace(-1, 1, n))
        jitted = pf.jit(rnn)
        close(jitted(w, xs), rnn_unrolled(w, xs))
        program = jitted.lower(w, xs).program
        scans = [op for op in program.ops if op.prim == "scan"]
        assert len(scans) == 1
        sizes.append((len(program.ops), len(scans[0].params["body"].ops)))
    assert sizes[0] == sizes[1]  # the same program whatever the trip count


def _two_stage(activation):
    """An RK2 step of a two-layer field and its loss: scanned, and unrolled (the oracle)."""
    def field(y, p):
        return activation(y @ p[0] + p[1]) @ p[2]

    def step(y):
        return y + 0.1 * field(y + 0.05 * field(y, p_of[0]), p_of[0])

    p_of = [None]

    def scanned(p, y0):
        p_of[0] = p
        y, _ = pf.scan(lambda y, _: (step(y), None), y0, None, length=4)
        return (y * y).sum()

    def unrolled(p, y0):
        p_of[0] = p
        y = y0
        for _ in range(4):
            y = step(y)
        return (y * y).sum()

    return scanned, unrolled


@pytest.mark.parametrize("activation", [pf.tanh, lambda h: h * h],
                         ids=["tanh", "square"])
def test_reverse_scan_reads_saved_stage_inputs_and_recomputes_no_product(activation):
    # residual policy (transforms/control/reverse.py _worth_saving): the forward scan saves each
    # matrix product's step-dependent operand (an RK stage's input) and what nonlinear
    # derivatives need (tanh's output; for h * h the product itself); the reverse scan
    # then computes only the two transposed products per stage and rebuilds no stage input
    rng = np.random.default_rng(3)
    p = [t(rng.standard_normal((5, 3)) * 0.5), t(rng.standard_normal(3) * 0.1),
         t(rng.standard_normal((3, 5)) * 0.5)]
    y0 = t(rng.uniform(-1, 1, 5))
    scanned, unrolled = _two_stage(activation)
    grad = pf.jit(pf.grad(scanned), backend="numpy")
    got = grad(p, y0)
    for a, b in zip(got, pf.grad(unrolled)(p, y0)):
        close(a, b, tol=1e-12)
    w = p[0].numpy().copy()
    plus, minus = w.copy(), w.copy()
    plus[1, 2] += 1e-6
    minus[1, 2] -= 1e-6
    fd_value = (float(unrolled([t(plus)] + p[1:], y0))
                - float(unrolled([t(minus)] + p[1:], y0))) / 2e-6
    assert abs(float(got[0].numpy()[1, 2]) - fd_value) < 1e-7
    program = grad.lower(p, y0).program
    backward = [op for op in program.ops if op.prim == "scan" and op.params["reverse"]]
    assert len(backward) == 1
    body = backward[0].params["body"]
    assert sum(op.prim == "dot_general" for op in body.ops) == 4  # 2 stages x 2 products
    # it reads one saved value per stage (tanh's output / the hidden product), and
    # stacks only cotangents for the weight-gradient products after it: no stage input
    assert backward[0].params["n_xs"] == 2
    assert len(body.outputs) - backward[0].params["n_carry"] == 4


def test_regions_print_parse_verify_and_interpret():
    def f(x, w):
        def step(c, xi):
            c = pf.cond(c > 0, lambda a: pf.tanh(a * w + xi), lambda a: a - xi, c)
            return c, c * 2

        c, ys = pf.scan(step, pf.zeros([]), x)
        v = pf.while_loop(lambda v: v < 10, lambda v: v * 2 + pf.abs(c), w + 1)
        return c, ys, v

    x, w = t([0.3, -0.2, 0.5]), t(0.5)
    lowered = pf.jit(f).lower(x, w)
    text = lowered.as_text()
    for piece in (" = scan(", " = cond(", " = while(", "def body(", "def branch1(", " = get("):
        assert piece in text
    fn = parse(text)
    assert fn.as_text() == text
    verify(fn)
    verify(lowered.program)
    verify(lowered.traced)
    got = evaluate(fn, [x.numpy(), w.numpy()])
    for a, b in zip(got, f(x, w)):
        close(a, b)
    # the verifier checks region signatures
    broken = parse(text)
    scan_op = next(op for op in broken.ops if op.prim == "scan")
    body = scan_op.params["body"]
    body.outputs = body.outputs[:1]
    with pytest.raises(VerificationError, match="scan"):
        verify(broken)


# ---- bad input ------------------------------------------------------------------------------

def test_bad_input_errors_name_both_sides():
    x = t([1.0, 2.0])
    with pytest.raises(TypeError, match=r"false_fn's result is float64\[2\] but leaf 0 of "
                                        r"true_fn's result is float64\[3\]"):
        pf.jit(lambda x: pf.cond(x.sum() > 0, lambda v: pf.concat([v, v[:1]]),
                                 lambda v: v, x))(x)
    with pytest.raises(TypeError, match="structure"):
        pf.jit(lambda x: pf.cond(x.sum() > 0, lambda v: (v, v), lambda v: v, x))(x)
    with pytest.raises(TypeError, match="float32"):
        pf.jit(lambda x: pf.cond(x.sum() > 0, lambda v: v.astype("float32"),
                                 lambda v: v, x))(x)
    with pytest.raises(TypeError, match="the carry f returns"):
        pf.scan(lambda c, x: ((c, c), x), t(0.0), x)
    with pytest.raises(TypeError, match="initial value"):
        pf.while_loop(lambda v: v.sum() < 5, lambda v: pf.concat([v, v]), x)
    with pytest.raises(TypeError, match="scalar"):
        pf.cond(x > 0, lambda: 1.0, lambda: 2.0)
    with pytest.raises(TypeError, match="boolean or integer"):
        pf.cond(t(1.5), lambda: 1.0, lambda: 2.0)
    with pytest.raises(TypeError, match="boolean"):
        pf.while_loop(lambda v: v, lambda v: v, t(1.0))
    with pytest.raises(IndexError, match="index is 3 but there are 2 branches"):
        pf.switch(t(3), [lambda: t(1.0), lambda: t(2.0)])
    jitted = pf.jit(lambda k: pf.switch(k, [lambda: t(1.0), lambda: t(2.0)]))
    with pytest.raises(IndexError, match="index is -1"):
        jitted(t(-1))
    with pytest.raises(ValueError, match="different leading sizes"):
        pf.scan(lambda c, x: (c, x), t(0.0), (t([1.0, 2.0]), t([1.0])))
    with pytest.raises(ValueError, match="length=3"):
        pf.scan(lambda c, x: (c, x), t(0.0), t([1.0, 2.0]), length=3)


def test_random_draws_in_a_compiled_loop_are_fresh_per_step_and_call():
    def f(x):
        return pf.scan(lambda c, _: (c + pf.rand([2]), pf.rand([1])), x, None, length=4)

    jitted = pf.jit(f)
    _, ys1 = jitted(pf.zeros([2]))
    _, ys2 = jitted(pf.zeros([2]))
    assert len(set(ys1.numpy().ravel().tolist())) == 4  # a new draw at every step
    assert not np.allclose(ys1.numpy(), ys2.numpy())  # and at every call
    pf.seed(5)
    _, a = jitted(pf.zeros([2]))
    pf.seed(5)
    _, b = jitted(pf.zeros([2]))
    close(a, b)  # reproducible from a seed


def test_unread_loop_results_leave_the_region():
    def f(x):
        c, ys = pf.scan(lambda c, x: (c + x, pf.exp(x) * c), t(0.0), x)
        return c  # the ys are never read

    program = pf.jit(f).lower(t([1.0, 2.0])).program
    (scan_op,) = [op for op in program.ops if op.prim == "scan"]
    assert len(scan_op.out.aval.avals) == 1
    assert "exp" not in [op.prim for op in scan_op.params["body"].ops]
    assert float(pf.jit(f)(t([1.0, 2.0]))) == 3.0
