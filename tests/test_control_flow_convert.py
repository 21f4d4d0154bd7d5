"""Python control flow under pf.jit: a corpus of small functions whose `if`/`while`/`for`
depends on traced tensors. Each must give eager's results (and gradients); most convert
to cond/while/scan operations, the rest break the graph cleanly. The share converted
without a break is reported (and must stay high)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import primflow as pf
from primflow.transforms.graph_break import GraphBreakWarning
from primflow.transforms.jit import TracerConversionError


@pytest.fixture(autouse=True)
def _float64():
    before = pf.get_default_dtype()
    pf.set_default_dtype("float64")
    yield
    pf.set_default_dtype(before)


# ---- the corpus: (function, argument maker, differentiable?) ------------------------------

def if_else(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = -x
    return y


def if_only(x):
    y = x + 1
    if y.mean() > 1:
        y = y * y
    return y


def if_elif_else(x):
    s = x.sum()
    if s > 2:
        out = x * 3
    elif s > 0:
        out = x * 2
    else:
        out = x - 1
    return out


def nested_if(x):
    if x[0] > 0:
        if x[1] > 0:
            y = x * x
        else:
            y = x + 10
    else:
        y = pf.sin(x)
    return y


def if_and(x):
    if x[0] > 0 and x[1] < 1:
        return x * 2
    return x


def if_or_not(x):
    if not (x[0] > 0) or x[1] > 5:
        y = x - 2
    else:
        y = x + 2
    return y


def early_return(x):
    if x.sum() < 0:
        return -x
    y = x * 3
    return y + 1


def two_early_returns(x):
    if x[0] > 1:
        return x * 0.5
    if x[1] > 1:
        return x * 0.25
    return x


def return_in_both(x):
    if x.max() > 0.5:
        return pf.tanh(x)
    else:
        return pf.exp(x)


def if_tuple_values(x):
    a, b = x * 1, x * 2
    if a.sum() > b.mean():
        a, b = b, a
    return a - b


def while_halving(x):
    while x.abs().max() > 0.1:
        x = x / 2
    return x


def while_counter(x):
    i = 0
    while i < 4:
        x = x * 1.5
        i = i + 1
    return x


def while_tensor_counter(x, n):
    i = pf.to_tensor(0)
    while i < n:
        x = pf.sin(x) + x
        i = i + 1
    return x


def while_two_carries(x):
    a, b = x, x * 0
    while a.sum() > 0.01:
        b = b + a
        a = a * 0.5
    return b


def while_break(x):
    i = 0
    while i < 10:
        if x.sum() > 5:
            break
        x = x + 1
        i = i + 1
    return x


def while_continue(x, n):
    i = pf.to_tensor(0)
    total = x * 0
    while i < n:
        i = i + 1
        if (i % 2) == 0:
            continue
        total = total + x * i
    return total


def while_break_and_continue(x):
    i = 0
    acc = x * 0
    while i < 8:
        i = i + 1
        if acc.sum() > 6:
            break
        if x.sum() < 0:
            continue
        acc = acc + x
    return acc


def newton_sqrt(a):
    x = a
    while (x * x - a).abs().max() > 1e-10:
        x = 0.5 * (x + a / x)
    return x


def for_range_static(x):
    for _ in range(3):
        x = pf.tanh(x) + 0.5
    return x


def for_range_tensor(x, n):
    for i in range(n):
        x = x * 0.9 + 0.1
    return x


def for_range_start_stop(x, n):
    acc = x
    for i in range(1, n):
        acc = acc + x * i
    return acc


def for_range_uses_index(x, n):
    s = x * 0
    for i in range(n):
        s = s + pf.sin(x * i)
    return s


def for_with_if(x, n):
    for i in range(n):
        if x.sum() > 3:
            x = x - 1
        else:
            x = x * 2
    return x


def for_break(x, n):
    for i in range(n):
        if x.sum() > 4:
            break
        x = x + 0.75
    return x


def for_continue(x):
    out = x * 0
    for k in range(5):
        if (x * k).sum() > 3:
            continue
        out = out + x
    return out


def nested_loops(x, n):
    for i in range(n):
        j = pf.to_tensor(0)
        while j < 2:
            x = x * 1.1
            j = j + 1
    return x


def nested_if_in_while(x):
    steps = 0
    while x.sum() < 10:
        if x[0] > x[1]:
            x = x + pf.to_tensor([0.0, 1.0])
        else:
            x = x + pf.to_tensor([1.0, 0.0])
        steps = steps + 1
    return x


def loop_building_list_static(x):
    ys = []
    for k in range(3):
        ys.append(x * k)
    return pf.stack(ys)


def loop_building_list_traced(x, n):
    ys = []
    i = pf.to_tensor(0)
    while i < n:
        ys.append(x * 2)
        i = i + 1
    return pf.stack(ys).sum(0)


def cond_in_helper_call(x):
    def helper(v):
        if v.sum() > 0:
            return v * 2
        return v - 2

    return helper(x) + 1


def numpy_call(x):
    y = x * 2
    m = np.asarray(y).mean()
    if m > 0:
        y = y + 1
    return y * 3


def print_value(x):
    y = x * 2
    print("y =", y)
    return y + 1


def item_in_the_middle(x):
    y = pf.exp(x)
    scale = float(y.sum().item())
    return y / scale


def if_on_python_value(x, flag=True):
    if flag:
        return x * 2
    return x


def assert_statement(x):
    assert x.sum() > -100
    return x * 2


def if_with_elementwise_where(x):
    y = x * 2
    if (y > 0).all():
        y = pf.where(y > 1, y, y * 0)
    return y


def piecewise(x):
    s = x.sum()
    if s < -1:
        y = x * 0
    elif s < 0:
        y = x * x
    elif s < 1:
        y = x
    else:
        y = x * 2 - 1
    return y


def while_with_tuple_carry(x):
    a, b = x[0], x[1]
    while (a * a + b * b) < 4:
        a, b = a * 1.2 + 0.1, b * 1.1
    return pf.stack([a, b])


def mixed_static_and_traced(x, n):
    for k in range(2):
        i = pf.to_tensor(0)
        while i < n:
            x = x + k
            i = i + 1
    return x


def gradient_descent(x):
    w = x * 0
    it = 0
    while it < 20:
        g = 2 * (w - x)
        w = w - 0.1 * g
        it = it + 1
    return w


def bisection(a):
    lo, hi = a * 0, a * 0 + 4
    while (hi - lo).max() > 1e-6:
        mid = (lo + hi) / 2
        too_big = mid * mid > a
        hi = pf.where(too_big, mid, hi)
        lo = pf.where(too_big, lo, mid)
    return lo


def collatz_steps(n):
    steps = pf.to_tensor(0)
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


def clamp_norm(x):
    norm = (x * x).sum().sqrt()
    if norm > 1:
        x = x / norm
    return x


def relu_loop(x, n):
    for i in range(n):
        x = pf.where(x > 0, x, x * 0.5) - 0.1
    return x


def _signed_scale(v):  # a module-level helper: converted when a converted function calls it
    if v.sum() > 0:
        return v * 2
    return v - 2


def calls_module_helper(x):
    return _signed_scale(x) + 1


def calls_helper_in_loop(x, n):
    for i in range(n):
        x = _signed_scale(x) * 0.5
    return x


def x2():
    return (pf.to_tensor([0.4, 0.7]),)


def x2n():
    return pf.to_tensor([0.4, 0.7]), pf.to_tensor(3)


def pos():
    return (pf.to_tensor([2.0, 3.0]),)


CORPUS = [
    (if_else, x2, True), (if_only, x2, True), (if_elif_else, x2, True),
    (nested_if, x2, True), (if_and, x2, True), (if_or_not, x2, True),
    (early_return, x2, True), (two_early_returns, x2, True), (return_in_both, x2, True),
    (if_tuple_values, x2, True), (while_halving, x2, False), (while_counter, x2, True),
    (while_tensor_counter, x2n, False), (while_two_carries, x2, False),
    (while_break, x2, False), (while_continue, x2n, False),
    (while_break_and_continue, x2, False), (newton_sqrt, pos, False),
    (for_range_static, x2, True), (for_range_tensor, x2n, False),
    (for_range_start_stop, x2n, False), (for_range_uses_index, x2n, False),
    (for_with_if, x2n, False), (for_break, x2n, False), (for_continue, x2, True),
    (nested_loops, x2n, False), (nested_if_in_while, x2, False),
    (loop_building_list_static, x2, True), (loop_building_list_traced, x2n, True),
    (cond_in_helper_call, x2, True), (numpy_call, x2, True), (print_value, x2, True),
    (item_in_the_middle, x2, True), (if_on_python_value, x2, True),
    (assert_statement, x2, True), (if_with_elementwise_where, x2, True),
    (piecewise, x2, True), (while_with_tuple_carry, x2, False),
    (mixed_static_and_traced, x2n, False), (gradient_descent, x2, True),
    (bisection, pos, False), (collatz_steps, lambda: (pf.to_tensor(6),), False),
    (clamp_norm, pos, True), (relu_loop, x2n, False),
    (calls_module_helper, x2, True), (calls_helper_in_loop, x2n, False),
]


def _run(fn, make):
    args = make()
    expected = fn(*args)
    jitted = pf.jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = jitted(*make())
        again = jitted(*make())  # the cached program (or pieces)
    breaks = [w for w in caught if issubclass(w.category, GraphBreakWarning)]
    return jitted, expected, got, again, breaks


def _same(a, b):
    np.testing.assert_allclose(np.asarray(a.numpy()), np.asarray(b.numpy()), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("fn, make, diff", CORPUS, ids=[c[0].__name__ for c in CORPUS])
def test_corpus_function_matches_eager(fn, make, diff, capsys):
    jitted, expected, got, again, breaks = _run(fn, make)
    _same(got, expected)
    _same(again, expected)
    if jitted._broken is not None:
        assert breaks or fn in (numpy_call,), "a graph break must warn"
    if diff:
        x = make()[0]
        rest = make()[1:]
        g_eager = pf.grad(lambda v: fn(v, *rest).sum())(x)
        g_jit = pf.grad(lambda v: jitted(v, *rest).sum())(x)
        _same(g_jit, g_eager)


def test_corpus_share_converted_without_a_break(capsys):
    assert len(CORPUS) >= 40
    converted, broken = [], []
    for fn, make, _ in CORPUS:
        jitted, *_ = _run(fn, make)
        (broken if jitted._broken is not None else converted).append(fn.__name__)
    share = len(converted) / len(CORPUS)
    with capsys.disabled():
        print(f"\ncontrol-flow corpus: {len(converted)}/{len(CORPUS)} converted without a "
              f"graph break ({share:.0%}); breaks: {', '.join(broken)}")
    assert share >= 0.75, broken


def test_graph_break_compiles_around_the_break_and_names_the_line():
    def f(x):
        y = pf.exp(x) * 2
        total = float(y.sum())
        return pf.tanh(y / total)

    x = pf.to_tensor([0.1, 0.2], stop_gradient=False)
    jitted = pf.jit(f)
    with pytest.warns(GraphBreakWarning, match=r"test_control_flow_convert\.py:\d+ "
                                               r"\(`total = float\(y\.sum\(\)\)`\)"):
        out = jitted(x)
    _same(out, f(x))
    (g,) = pf.grad(out.sum(), [x])
    (g_eager,) = pf.grad(f(x).sum(), [x])
    _same(g, g_eager)
    text = jitted.lower(pf.to_tensor([0.1, 0.2])).as_text()
    assert text.count("# compiled piece") == 2 and "# graph break at" in text
    with pytest.raises(TracerConversionError, match="full_graph=True"):
        pf.jit(f, full_graph=True)(x)


def test_full_graph_accepts_converted_control_flow():
    jitted = pf.jit(piecewise, full_graph=True)
    for v in ([-2.0, 0.1], [-0.5, 0.1], [0.2, 0.3], [2.0, 1.0]):
        _same(jitted(pf.to_tensor(v)), piecewise(pf.to_tensor(v)))
    assert jitted.lower(pf.to_tensor([0.2, 0.3])).as_text().count(" = cond(") == 3


def test_to_static_layer_with_control_flow():
    class Gate(pf.nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin = pf.nn.Linear(2, 2)

        def forward(self, x):
            y = self.lin(x)
            if y.sum() > 0:
                y = pf.tanh(y)
            else:
                y = y * 0.5
            return y

    layer = Gate()
    x = pf.to_tensor([[0.3, -0.1]])
    expected = layer(x)
    static = pf.to_static(layer)
    _same(static(x), expected)
    assert " = cond(" in static.forward.lower(x).as_text()


def test_explain_lists_graphs_and_breaks():
    assert pf.jit(piecewise).explain(pf.to_tensor([0.2, 0.3])) == (
        "1 graph, no graph break (Python control flow converted to cond/while/scan)")
    assert pf.jit(lambda x: x * 2).explain(pf.to_tensor([0.2])) == "1 graph, no graph break"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphBreakWarning)
        text = pf.jit(item_in_the_middle).explain(pf.to_tensor([0.2, 0.3]))
    assert text.startswith("2 graphs, 1 graph break:")
    assert "test_control_flow_convert.py:" in text and ".item()" in text
