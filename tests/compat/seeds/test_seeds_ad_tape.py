"""Seed 001 (动手实现 PyTorch 微分): its hand-written tape (ad_tape_variable.py) prints the
document's trace and numbers; primflow's own tape and forward mode agree with them. Seed
003 (微分计算模式) has no code: the numbers its worked example states (the forward
tangent trace and the reverse adjoints of f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5))
are checked on primflow here."""

import math
import re

import numpy as np
import pytest

import primflow as paddle
from seedrun import run_example

# the output the document shows (addresses of functions differ from run to run)
DOCUMENT_OUTPUT = """\
v-1 = 2.0
v0 = 5.0
v1 = log(v-1)
v2 = v-1 * v0
v3 = v1 + v2
v4 = sin(v0)
v5 = v3 - v4
11.652071455223084
dl_d {'v5': 1.0}
Tape(inputs=['v3', 'v4'], outputs=['v5'], propagate=<function ops_sub.<locals>.propagate at 0x7fd7a2c8c0d0>)
v9 = v6 * v7
v10 = v6 * v8
Tape(inputs=['v0'], outputs=['v4'], propagate=<function ops_sin.<locals>.propagate at 0x7fd7a2c8c378>)
v12 = v10 * v11
Tape(inputs=['v1', 'v2'], outputs=['v3'], propagate=<function ops_add.<locals>.propagate at 0x7fd7a234e7b8>)
v15 = v9 * v13
v16 = v9 * v14
Tape(inputs=['v-1', 'v0'], outputs=['v2'], propagate=<function ops_mul.<locals>.propagate at 0x7fd7a3982ae8>)
v17 = v16 * v0
v18 = v16 * v-1
v19 = v12 + v18
Tape(inputs=['v-1'], outputs=['v1'], propagate=<function ops_log.<locals>.propagate at 0x7fd7a3982c80>)
v21 = v15 * v20
v22 = v17 + v21
dv5_dv5 = v6
dv5_dv3 = v9
dv5_dv4 = v10
dv5_dv0 = v19
dv5_dv1 = v15
dv5_dv2 = v16
dv5_dv-1 = v22
dx 5.5
dy 1.7163378145367738
"""


def normalized(text):
    """Function addresses masked; NumPy 2's repr of a float64 (np.float64(x)) as NumPy 1's."""
    text = re.sub(r" at 0x[0-9a-f]+>", " at ADDRESS>", text)
    return re.sub(r"np\.float64\(([^)]*)\)", r"\1", text)


def test_hand_written_tape_prints_the_documents_trace():
    g, printed = run_example("ad_tape_variable.py")
    assert normalized(printed) == normalized(DOCUMENT_OUTPUT)
    assert g["f"].value == 11.652071455223084
    assert g["dx"].value == 5.5 and g["dy"].value == 1.7163378145367738


def test_primflow_tape_and_forward_mode_give_the_same_numbers():
    x1 = paddle.to_tensor(2.0, dtype="float64", stop_gradient=False)
    x2 = paddle.to_tensor(5.0, dtype="float64", stop_gradient=False)
    f = paddle.log(x1) + x1 * x2 - paddle.sin(x2)
    dx1, dx2 = paddle.grad(f, [x1, x2])
    assert float(f) == 11.652071455223084
    assert float(dx1) == 5.5 and float(dx2) == pytest.approx(1.7163378145367738, rel=1e-15)
    fn = lambda a, b: paddle.log(a) + a * b - paddle.sin(b)  # noqa: E731
    _, column = paddle.jvp(fn, (x1.detach(), x2.detach()), (paddle.ones_like(x1),
                                                             paddle.zeros_like(x2)))
    assert float(column) == 5.5  # one forward pass: the Jacobian's column for x1


# ---- seed 003: the worked example's stated numbers -------------------------------------------

def intermediates(x1, x2):
    v1 = paddle.log(x1)
    v2 = x1 * x2
    v3 = paddle.sin(x2)
    v4 = v1 + v2
    v5 = v4 - v3
    return v1, v2, v3, v4, v5


def test_forward_primal_trace():
    x1, x2 = paddle.to_tensor(2.0, dtype="float64"), paddle.to_tensor(5.0, dtype="float64")
    v1, v2, v3, v4, v5 = (float(v) for v in intermediates(x1, x2))
    # "v1 = ln 2", "v2 = 10", "v3 = sin 5", "v4 = 0.693 + 10", "v5 = 10.693 + 0.959",
    # "y = 11.652"
    assert v1 == pytest.approx(0.693, abs=5e-4) and v1 == math.log(2.0)
    assert v2 == 10.0
    assert v3 == math.sin(5.0) and -v3 == pytest.approx(0.959, abs=5e-4)
    assert v4 == pytest.approx(10.693, abs=5e-4)
    assert v5 == pytest.approx(11.652, abs=5e-4)


def test_forward_tangent_trace():
    # tangents with respect to x1 (x1' = 1, x2' = 0): v1' = 0.5, v2' = 5, v3' = 0,
    # v4' = 5.5, y' = 5.5
    x1, x2 = paddle.to_tensor(2.0, dtype="float64"), paddle.to_tensor(5.0, dtype="float64")
    _, tangents = paddle.jvp(intermediates, (x1, x2), (paddle.ones_like(x1),
                                                      paddle.zeros_like(x2)))
    assert [float(t) for t in tangents] == [0.5, 5.0, 0.0, 5.5, 5.5]


def test_reverse_adjoints():
    # v5bar = 1, v4bar = 1, v3bar = -1, v1bar = v2bar = 1; partials cos v0 = 0.284,
    # dv2/dv0 = 2, dv2/dv-1 = 5, dv1/dv-1 = 0.5; x1bar = 0.5 + 5 = 5.5,
    # x2bar = 2.0 - 0.284 = 1.716
    x1 = paddle.to_tensor(2.0, dtype="float64", stop_gradient=False)
    x2 = paddle.to_tensor(5.0, dtype="float64", stop_gradient=False)
    v1, v2, v3, v4, v5 = intermediates(x1, x2)
    bars = paddle.grad(v5, [v5, v4, v3, v2, v1, x1, x2])
    assert [float(b) for b in bars[:5]] == [1.0, 1.0, -1.0, 1.0, 1.0]
    assert float(bars[5]) == 5.5
    assert float(bars[6]) == pytest.approx(1.716, abs=5e-4)
    assert math.cos(5.0) == pytest.approx(0.284, abs=5e-4)
    (d_v3,) = paddle.grad(paddle.sin(x2), x2)
    assert float(d_v3) == math.cos(5.0)


def test_forward_mode_gives_a_column_and_reverse_mode_a_row():
    # f: R^2 -> R^2 here, so the two are different slices of the Jacobian
    def f(x):
        return paddle.stack([paddle.log(x[0]) + x[0] * x[1] - paddle.sin(x[1]), x[0] * x[0]])

    x = paddle.to_tensor([2.0, 5.0], dtype="float64")
    jac = np.array([[0.5 + 5.0, 2.0 - math.cos(5.0)], [4.0, 0.0]])
    _, column = paddle.jvp(f, (x,), (paddle.to_tensor([1.0, 0.0], dtype="float64"),))
    np.testing.assert_allclose(column.numpy(), jac[:, 0], rtol=1e-15)
    _, vjp_fn = paddle.vjp(f, x)
    (row,) = vjp_fn(paddle.to_tensor([1.0, 0.0], dtype="float64"))
    np.testing.assert_allclose(row.numpy(), jac[0, :], rtol=1e-15)
