"""The IR's text form: printing, parsing (exact round trips), and the verifier."""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.ir import ParseError, VerificationError, evaluate, parse, verify

EXAMPLE = """\
def f(%0: float32[4,8], %1: float32[8,2], %2: bool[4,2]):
    %3: float32[4,2] = dot_general(%0, %1, contracting=((1,),(0,)), batch=((),()))
    %4: float32[4,2] = full(shape=(4,2), value=-inf, dtype=float32)
    %5: float32[4,2] = select(%2, %3, %4)
    %6: float32[4] = reduce_max(%5, axes=(1,))
    %7: float64[4] = convert_element_type(%6, dtype=float64)
    %8: float64[4] = full(shape=(4,), value=nan, dtype=float64)
    %9: float64[4] = add(%7, %8)
    %10: int64[4,2] = iota(shape=(4,2), dtype=int64, dimension=1)
    %11: float32[2,3] = constant(index=0)
    return %9, %10, %11, %9
const #0: float32[2,3] = [1.0, 2.5, -3.0, 1e-08, 0.0, 7.0]
"""


def test_example_round_trips_exactly():
    fn = parse(EXAMPLE)
    verify(fn)
    assert fn.as_text() == EXAMPLE
    assert parse(fn.as_text()).as_text() == EXAMPLE


def test_parser_accepts_other_value_names_and_comments():
    text = ("def g(%x: float64[3]):  # a comment\n"
            "    %y: float64[3] = exp(%x)\n\n"
            "    %z: float64[3] = mul(%y, %x)  # another\n"
            "    return %z\n")
    fn = parse(text)
    assert fn.as_text() == ("def g(%0: float64[3]):\n    %1: float64[3] = exp(%0)\n"
                            "    %2: float64[3] = mul(%1, %0)\n    return %2\n")


def test_params_of_every_kind_print_and_parse_back():
    text = ("def h(%0: float32[2,3,4]):\n"
            "    %1: float32[4,2,3] = transpose(%0, perm=(2,0,1))\n"
            "    %2: float32[1,3,4] = slice(%0, start=(1,0,0), limit=(2,3,4), strides=(1,1,1))\n"
            "    %3: float32[2,3,4] = cumsum(%0, axis=2, reverse=True)\n"
            "    %4: float32[2,3,4] = integer_pow(%0, y=-3)\n"
            "    %5: float32[] = full(shape=(), value=1e+300, dtype=float32)\n"
            "    %6: int32[2,3] = argmax(%0, axis=2, index_dtype=int32)\n"
            "    %7: float32[3,3,4] = pad(%2, %5, config=((1,1,0),(0,0,0),(0,0,0)))\n"
            "    return %1, %3, %4, %6, %7\n")
    fn = parse(text)
    verify(fn)
    assert fn.as_text() == text
    assert fn.ops[2].params["reverse"] is True
    assert fn.ops[3].params["y"] == -3


@pytest.mark.parametrize("make", [
    lambda x, w: pf.tanh(x @ w) * 2.0 + 1.0,
    lambda x, w: pf.nn.functional.softmax(x @ w, axis=-1),
    lambda x, w: (pf.sin(x) @ w).sum(),
    lambda x, w: pf.concat([x[:, :2], pf.flip(x, 0)[:, 1:3]], axis=1).max(axis=0),
])
def test_traced_programs_round_trip_and_match_eager(make):
    x = pf.randn([4, 8])
    w = pf.randn([8, 2])
    lowered = pf.jit(make).lower(x, w)
    for fn in (lowered.traced, lowered.program):
        text = fn.as_text()
        again = parse(text, consts=fn.consts)
        verify(again)
        assert again.as_text() == text
        got = evaluate(again, [x.numpy(), w.numpy()], keys="traced")[0]
        np.testing.assert_allclose(np.asarray(got), make(x, w).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("text,message", [
    ("def f(%0: float32[2]):\n    %1: float32[2] = exp(%2)\n    return %1\n",
     "used before it is defined"),
    ("def f(%0: float32[2]):\n    %0: float32[2] = exp(%0)\n    return %0\n", "defined twice"),
    ("def f(%0: float32[2]):\n    %1: float32[2] = exp(%0)\n", "no 'return'"),
    ("def f(%0: float32[2]):\n    %1: float32[2] = exp(%0, shape=(1,)\n    return %1\n",
     "end of line"),
    ("def f(%0: float32[2]):\n    %1: float32[2] = constant(index=3)\n    return %1\n",
     "not given"),
    ("%1: float32[2] = exp(%0)\n", "'def NAME"),
    ("def f(%0: float8[2]):\n    return %0\n", "expected a dtype"),
])
def test_parse_errors_name_the_problem(text, message):
    with pytest.raises(ParseError, match=message):
        parse(text)


@pytest.mark.parametrize("text,message", [
    ("def f(%0: float32[2]):\n    %1: float64[2] = exp(%0)\n    return %1\n",
     "typed float64\\[2\\] but exp of its operands gives float32\\[2\\]"),
    ("def f(%0: float32[2], %1: float32[3]):\n    %2: float32[2] = add(%0, %1)\n"
     "    return %2\n", "rejected by the primitive's shape rule"),
    ("def f(%0: float32[2]):\n    %1: float32[2] = frobnicate(%0)\n    return %1\n",
     "no primitive named 'frobnicate'"),
    ("def f(%0: float32[2]):\n    %1: float32[2] = reshape(%0, shape=(2,1))\n"
     "    return %1\n", "typed float32\\[2\\] but reshape"),
])
def test_verifier_rejects_ill_typed_programs(text, message):
    fn = parse(text)
    with pytest.raises(VerificationError, match=message):
        verify(fn)


def test_verifier_rejects_broken_ssa_built_by_hand():
    fn = parse("def f(%0: float32[2]):\n    %1: float32[2] = exp(%0)\n"
               "    %2: float32[2] = neg(%1)\n    return %2\n")
    fn.ops.reverse()  # neg now reads exp's result before it is computed
    with pytest.raises(VerificationError, match="used before it is defined"):
        verify(fn)
    fn.ops.reverse()
    fn.ops.append(fn.ops[0])
    with pytest.raises(VerificationError, match="defined twice"):
        verify(fn)


def test_verifier_checks_constants():
    fn = parse("def f():\n    %0: float32[3] = constant(index=0)\n    return %0\n"
               "const #0: float32[3] = [1.0, 2.0, 3.0]\n")
    verify(fn)
    fn.consts[0] = np.zeros(4, dtype=np.float32)
    with pytest.raises(VerificationError, match="constant #0"):
        verify(fn)


def test_interpreter_runs_the_reference_semantics():
    fn = parse(EXAMPLE)
    x = np.arange(32, dtype=np.float32).reshape(4, 8) / 10
    w = np.ones((8, 2), dtype=np.float32)
    mask = np.array([[True, False]] * 4)
    out, iota, const, again = evaluate(fn, [x, w, mask])
    assert np.isnan(out).all() and out.dtype == np.float64
    np.testing.assert_array_equal(iota, [[0, 1]] * 4)
    assert const.shape == (2, 3) and again is out
