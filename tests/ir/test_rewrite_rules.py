"""Golden-text tests of the declarative rewrite rules: one case per rule (a coverage test
makes sure no rule is untested), each verified before and after."""

from __future__ import annotations

import pytest

from primflow.ir import parse, verify
from primflow.ir.passes import dce
from primflow.ir.rewrite import RULES, Rule, apply_rules, parse_pattern

H = "def f(%0: float32[3], %1: float32[3]):\n"
H2 = "def f(%0: float32[2,3]):\n"
B = "def f(%0: bool[3], %1: float32[3], %2: float32[3]):\n"


def _full(n, value, shape="(3,)", t="float32[3]", dtype="float32"):
    return f"    %{n}: {t} = full(shape={shape}, value={value}, dtype={dtype})\n"


# rule -> (program before, program after simplify + dce)
CASES = {
    "add_zero": (H + _full(2, 0.0) + "    %3: float32[3] = add(%2, %0)\n    return %3\n",
                 H + "    return %0\n"),
    "sub_zero": (H + _full(2, 0.0) + "    %3: float32[3] = sub(%0, %2)\n    return %3\n",
                 H + "    return %0\n"),
    "zero_sub": (H + _full(2, 0.0) + "    %3: float32[3] = sub(%2, %0)\n    return %3\n",
                 H + "    %2: float32[3] = neg(%0)\n    return %2\n"),
    "mul_one": (H + _full(2, 1.0) + "    %3: float32[3] = mul(%0, %2)\n    return %3\n",
                H + "    return %0\n"),
    "mul_minus_one": (H + _full(2, -1.0) + "    %3: float32[3] = mul(%2, %1)\n    return %3\n",
                      H + "    %2: float32[3] = neg(%1)\n    return %2\n"),
    "div_one": (H + _full(2, 1.0) + "    %3: float32[3] = div(%1, %2)\n    return %3\n",
                H + "    return %1\n"),
    "mul_zero": (H + _full(2, 0.0) + "    %3: float32[3] = mul(%0, %2)\n    return %3\n",
                 H + _full(2, 0.0) + "    return %2\n"),
    "sub_self": (H + "    %2: float32[3] = sub(%1, %1)\n    return %2\n",
                 H + _full(2, 0.0) + "    return %2\n"),
    "neg_neg": (H + "    %2: float32[3] = neg(%0)\n    %3: float32[3] = neg(%2)\n    return %3\n",
                H + "    return %0\n"),
    "neg_sub": (H + "    %2: float32[3] = sub(%0, %1)\n    %3: float32[3] = neg(%2)\n"
                "    return %3\n",
                H + "    %2: float32[3] = sub(%1, %0)\n    return %2\n"),
    "add_neg": (H + "    %2: float32[3] = neg(%1)\n    %3: float32[3] = add(%2, %0)\n"
                "    return %3\n",
                H + "    %2: float32[3] = sub(%0, %1)\n    return %2\n"),
    "sub_neg": (H + "    %2: float32[3] = neg(%1)\n    %3: float32[3] = sub(%0, %2)\n"
                "    return %3\n",
                H + "    %2: float32[3] = add(%0, %1)\n    return %2\n"),
    "mul_neg_neg": (H + "    %2: float32[3] = neg(%0)\n    %3: float32[3] = neg(%1)\n"
                    "    %4: float32[3] = mul(%2, %3)\n    return %4\n",
                    H + "    %2: float32[3] = mul(%0, %1)\n    return %2\n"),
    "neg_full": (H + _full(2, 2.5) + "    %3: float32[3] = neg(%2)\n    return %3\n",
                 H + _full(2, -2.5) + "    return %2\n"),
    "abs_neg": (H + "    %2: float32[3] = neg(%0)\n    %3: float32[3] = abs(%2)\n    return %3\n",
                H + "    %2: float32[3] = abs(%0)\n    return %2\n"),
    "abs_abs": (H + "    %2: float32[3] = abs(%0)\n    %3: float32[3] = abs(%2)\n    return %3\n",
                H + "    %2: float32[3] = abs(%0)\n    return %2\n"),
    "max_self": (H + "    %2: float32[3] = maximum(%0, %0)\n    return %2\n",
                 H + "    return %0\n"),
    "min_self": (H + "    %2: float32[3] = minimum(%1, %1)\n    return %2\n",
                 H + "    return %1\n"),
    "integer_pow_one": (H + "    %2: float32[3] = integer_pow(%0, y=1)\n    return %2\n",
                        H + "    return %0\n"),
    "select_same": (B + "    %3: float32[3] = select(%0, %1, %1)\n    return %3\n",
                    B + "    return %1\n"),
    "select_not": (B + "    %3: bool[3] = logical_not(%0)\n"
                   "    %4: float32[3] = select(%3, %1, %2)\n    return %4\n",
                   B + "    %3: float32[3] = select(%0, %2, %1)\n    return %3\n"),
    "not_not": (B + "    %3: bool[3] = logical_not(%0)\n    %4: bool[3] = logical_not(%3)\n"
                "    return %4\n",
                B + "    return %0\n"),
    "convert_same": (H + "    %2: float32[3] = convert_element_type(%0, dtype=float32)\n"
                     "    return %2\n",
                     H + "    return %0\n"),
    "convert_roundtrip": (H + "    %2: float64[3] = convert_element_type(%0, dtype=float64)\n"
                          "    %3: float32[3] = convert_element_type(%2, dtype=float32)\n"
                          "    return %3\n",
                          H + "    return %0\n"),
    "convert_full": (H + _full(2, 2.7) + "    %3: int32[3] = convert_element_type(%2, "
                     "dtype=int32)\n    return %3\n",
                     H + "    %2: int32[3] = full(shape=(3,), value=2, dtype=int32)\n"
                     "    return %2\n"),
    "reshape_same": (H2 + "    %1: float32[2,3] = reshape(%0, shape=(2,3))\n    return %1\n",
                     H2 + "    return %0\n"),
    "reshape_reshape": (H2 + "    %1: float32[6] = reshape(%0, shape=(6,))\n"
                        "    %2: float32[3,2] = reshape(%1, shape=(3,2))\n    return %2\n",
                        H2 + "    %1: float32[3,2] = reshape(%0, shape=(3,2))\n    return %1\n"),
    "reshape_full": (H2 + _full(1, 1.5, "(6,)", "float32[6]") +
                     "    %2: float32[2,3] = reshape(%1, shape=(2,3))\n    return %2\n",
                     H2 + _full(1, 1.5, "(2,3)", "float32[2,3]") + "    return %1\n"),
    "transpose_identity": (H2 + "    %1: float32[2,3] = transpose(%0, perm=(0,1))\n"
                           "    return %1\n",
                           H2 + "    return %0\n"),
    "transpose_transpose": (
        "def f(%0: float32[2,3,4]):\n"
        "    %1: float32[3,4,2] = transpose(%0, perm=(1,2,0))\n"
        "    %2: float32[4,3,2] = transpose(%1, perm=(1,0,2))\n    return %2\n",
        "def f(%0: float32[2,3,4]):\n"
        "    %1: float32[4,3,2] = transpose(%0, perm=(2,1,0))\n    return %1\n"),
    "transpose_dot": (
        "def f(%0: float32[5,2], %1: float32[5,3]):\n"
        "    %2: float32[2,3] = dot_general(%0, %1, contracting=((0,),(0,)), batch=((),()))\n"
        "    %3: float32[3,2] = transpose(%2, perm=(1,0))\n    return %3\n",
        "def f(%0: float32[5,2], %1: float32[5,3]):\n"
        "    %2: float32[3,2] = dot_general(%1, %0, contracting=((0,),(0,)), batch=((),()))\n"
        "    return %2\n"),
    "transpose_full": (H2 + _full(1, 3.0, "(2,3)", "float32[2,3]") +
                       "    %2: float32[3,2] = transpose(%1, perm=(1,0))\n    return %2\n",
                       H2 + _full(1, 3.0, "(3,2)", "float32[3,2]") + "    return %1\n"),
    "broadcast_full": (H2 + _full(1, 3.0, "()", "float32[]") +
                       "    %2: float32[2,3] = broadcast_in_dim(%1, shape=(2,3), "
                       "broadcast_dimensions=())\n    return %2\n",
                       H2 + _full(1, 3.0, "(2,3)", "float32[2,3]") + "    return %1\n"),
    "broadcast_identity": (H2 + "    %1: float32[2,3] = broadcast_in_dim(%0, shape=(2,3), "
                           "broadcast_dimensions=(0,1))\n    return %1\n",
                           H2 + "    return %0\n"),
    "broadcast_broadcast": (
        "def f(%0: float32[3]):\n"
        "    %1: float32[2,3] = broadcast_in_dim(%0, shape=(2,3), broadcast_dimensions=(1,))\n"
        "    %2: float32[2,3,5] = broadcast_in_dim(%1, shape=(2,3,5), "
        "broadcast_dimensions=(0,1))\n    return %2\n",
        "def f(%0: float32[3]):\n"
        "    %1: float32[2,3,5] = broadcast_in_dim(%0, shape=(2,3,5), "
        "broadcast_dimensions=(1,))\n    return %1\n"),
    "slice_full": (H2 + _full(1, 0.5, "(2,3)", "float32[2,3]") +
                   "    %2: float32[1,2] = slice(%1, start=(0,1), limit=(1,3), strides=(1,1))\n"
                   "    return %2\n",
                   H2 + _full(1, 0.5, "(1,2)", "float32[1,2]") + "    return %1\n"),
    "slice_all": (H2 + "    %1: float32[2,3] = slice(%0, start=(0,0), limit=(2,3), "
                  "strides=(1,1))\n    return %1\n",
                  H2 + "    return %0\n"),
    "reduce_sum_none": (H2 + "    %1: float32[2,3] = reduce_sum(%0, axes=())\n    return %1\n",
                        H2 + "    return %0\n"),
    "reduce_full_sum": (H2 + _full(1, 0.0, "(2,3)", "float32[2,3]") +
                        "    %2: float32[2] = reduce_sum(%1, axes=(1,))\n    return %2\n",
                        H2 + _full(1, 0.0, "(2,)", "float32[2]") + "    return %1\n"),
}


def _rewrite(text, assume_finite=True):
    fn = parse(text)
    verify(fn)
    stats = {}
    apply_rules(fn, assume_finite=assume_finite, stats=stats)
    verify(fn)
    dce(fn)
    verify(fn)
    return fn.as_text(), stats


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_golden(name):
    before, after = CASES[name]
    text, stats = _rewrite(before)
    assert text == after
    assert stats.get(name), f"{name} did not fire (fired: {stats})"


def test_every_rule_has_a_golden_case_and_there_are_enough():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)), "duplicate rule names"
    assert set(names) == set(CASES), set(names) ^ set(CASES)
    assert len(RULES) >= 20


@pytest.mark.parametrize("name", ["mul_zero", "sub_self"])
def test_rules_wrong_for_inf_and_nan_need_assume_finite(name):
    before, _ = CASES[name]
    text, stats = _rewrite(before, assume_finite=False)
    assert text == before and not stats


@pytest.mark.parametrize("before", [
    # exp(log x) is x only for x > 0: no rule may apply
    H + "    %2: float32[3] = log(%0)\n    %3: float32[3] = exp(%2)\n    return %3\n",
    # float64 -> float32 -> float64 loses precision: not a round trip
    "def f(%0: float64[3]):\n    %1: float32[3] = convert_element_type(%0, dtype=float32)\n"
    "    %2: float64[3] = convert_element_type(%1, dtype=float64)\n    return %2\n",
    # a transpose that does not swap the operands' free dims stays
    "def f(%0: float32[2,3,4], %1: float32[4,5]):\n"
    "    %2: float32[2,3,5] = dot_general(%0, %1, contracting=((2,),(0,)), batch=((),()))\n"
    "    %3: float32[3,2,5] = transpose(%2, perm=(1,0,2))\n    return %3\n",
    # x * 2 is not x; reshape to another shape stays
    H + _full(2, 2.0) + "    %3: float32[3] = mul(%0, %2)\n    return %3\n",
    H2 + "    %1: float32[3,2] = reshape(%0, shape=(3,2))\n    return %1\n",
])
def test_invalid_rewrites_do_not_happen(before):
    text, stats = _rewrite(before)
    assert text == before and not stats


def test_rules_chain_to_a_fixed_point():
    # -(-(x * 1)) + 0 -> x, through three rules
    before = (H + _full(2, 1.0) + "    %3: float32[3] = mul(%0, %2)\n"
              "    %4: float32[3] = neg(%3)\n    %5: float32[3] = neg(%4)\n" + _full(6, 0.0)
              + "    %7: float32[3] = add(%5, %6)\n    return %7\n")
    text, stats = _rewrite(before)
    assert text == H + "    return %0\n"
    assert set(stats) == {"mul_one", "neg_neg", "add_zero"}


def test_a_rule_is_data():
    rule = Rule("double_neg_mul", "mul(neg(x), y)", "neg(mul(x, y))")
    fn = parse(H + "    %2: float32[3] = neg(%0)\n    %3: float32[3] = mul(%1, %2)\n"
               "    return %3\n")
    assert apply_rules(fn, rules=[rule]) == 1
    dce(fn)
    verify(fn)
    assert fn.as_text() == (H + "    %2: float32[3] = mul(%0, %1)\n"
                            "    %3: float32[3] = neg(%2)\n    return %3\n")


def test_pattern_syntax_errors():
    with pytest.raises(ValueError, match="unknown constraint"):
        Rule("bad", "neg(x)", "x", where=("no_such_predicate(x)",))
    with pytest.raises(ValueError, match="must be an operation pattern"):
        Rule("bad", "x", "x")
    assert parse_pattern("neg(x)").prim == "neg"
