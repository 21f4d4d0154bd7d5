"""Declarative rewrites: rules are data (source pattern, target pattern, constraints) and
one rewriter applies them all.

Pattern language (a small expression syntax, parsed once):

* ``prim(arg, ..., key=val)`` matches an operation of that primitive whose operands match
  the ``arg`` patterns and whose params equal the literal ``val`` (or bind the name ``val``).
  Params a pattern does not mention are free.
* A bare name (``x``) binds an operand; a name used twice must bind the same value
  (``sub(x, x)``). ``_`` matches anything.
* Commutative primitives (add, mul, maximum, ...) match with their operands either way.

Targets use the same syntax. A target param is a literal, a bound name, or a computed
``$helper(args)`` (see ``HELPERS``: ``$shape(x)``, ``$compose_perm(p, q)``, ...). A target
that is a bare name replaces the matched value by that value.

Constraints are ``predicate(args)`` strings over bound names (see ``PREDICATES``); a rule
fires only when all hold. Every rule keeps the matched value's type (checked), and a rule
flagged ``assumes_finite`` (``x * 0 -> 0``, ``x - x -> 0``: wrong for inf/nan) runs only when
the caller allows it.

Example:
    >>> from primflow.ir import parse
    >>> from primflow.ir.rewrite import apply_rules
    >>> fn = parse("def f(%0: float32[3]):\\n    %1: float32[3] = neg(%0)\\n"
    ...            "    %2: float32[3] = neg(%1)\\n    return %2\\n")
    >>> apply_rules(fn)
    1
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core import dtypes
from ..core.primitive import get_primitive
from ._program import COMMUTATIVE, Operation

# ---- the pattern syntax ----------------------------------------------------------------

@dataclass(frozen=True)
class Pat:
    """``prim(args, params)``; ``args`` are Pats or names (str); params map to literals
    (wrapped in ``Lit``), names (str) or ``Call`` (targets only)."""

    prim: str
    args: tuple
    params: tuple  # ((key, value), ...)


@dataclass(frozen=True)
class Lit:
    value: object


@dataclass(frozen=True)
class Call:
    helper: str
    args: tuple


_TOK = re.compile(r"\s*(?:(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<name>\$?[A-Za-z_]\w*)"
                  r"|(?P<p>[(),=]))")


def _tokens(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOK.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"bad pattern {text!r} at {text[pos:]!r}")
        pos = m.end()
        out.append(m.group(m.lastgroup))
    return out


def parse_pattern(text):
    """A pattern string as a ``Pat`` tree (or a bare name)."""
    toks = _tokens(text)
    pos = 0

    def literal(tok):
        if tok in ("True", "False", "None"):
            return Lit({"True": True, "False": False, "None": None}[tok])
        if tok in dtypes.BY_NAME:
            return Lit(dtypes.BY_NAME[tok])
        if re.fullmatch(r"-?\d+", tok):
            return Lit(int(tok))
        if re.fullmatch(r"-?[\d.eE+-]+", tok):
            return Lit(float(tok))
        return None

    def expr():
        nonlocal pos
        tok = toks[pos]
        pos += 1
        if pos < len(toks) and toks[pos] == "(":
            pos += 1
            args, params = [], []
            while toks[pos] != ")":
                if pos + 1 < len(toks) and toks[pos + 1] == "=":
                    key = toks[pos]
                    pos += 2
                    params.append((key, param_value()))
                else:
                    args.append(expr())
                if toks[pos] == ",":
                    pos += 1
            pos += 1
            if tok.startswith("$"):
                return Call(tok[1:], tuple(args))
            return Pat(tok, tuple(args), tuple(params))
        return tok

    def param_value():
        nonlocal pos
        tok = toks[pos]
        lit = literal(tok)
        if lit is not None:
            pos += 1
            return lit
        return expr()

    out = expr()
    if pos != len(toks):
        raise ValueError(f"trailing tokens in pattern {text!r}: {toks[pos:]}")
    return out


# ---- rules -------------------------------------------------------------------------------

@dataclass
class Rule:
    """``source -> target`` when every constraint holds."""

    name: str
    source: str
    target: str
    where: tuple = ()
    assumes_finite: bool = False
    doc: str = ""
    _source: object = field(default=None, repr=False)
    _target: object = field(default=None, repr=False)
    _where: tuple = field(default=(), repr=False)

    def __post_init__(self):
        self._source = parse_pattern(self.source)
        if not isinstance(self._source, Pat):
            raise ValueError(f"rule {self.name}: the source must be an operation pattern")
        self._target = parse_pattern(self.target)
        self._where = tuple(parse_pattern(w) for w in self.where)
        for w in self._where:
            if not isinstance(w, Pat) or w.prim not in PREDICATES:
                raise ValueError(f"rule {self.name}: unknown constraint {w!r}; known: "
                                 f"{sorted(PREDICATES)}")


# Predicates over bound names: values (Value) or params (Python objects).
PREDICATES = {
    "same_shape": lambda b, x, y: _val(b, x).aval.shape == _val(b, y).aval.shape,
    "shape_is": lambda b, x, s: _val(b, x).aval.shape == tuple(b[s]),
    "identity_perm": lambda b, p: tuple(b[p]) == tuple(range(len(b[p]))),
    "dtype_is": lambda b, x, d: _val(b, x).aval.dtype is b[d],
    "identity_broadcast": lambda b, x, s, d: (
        _val(b, x).aval.shape == tuple(b[s]) and tuple(b[d]) == tuple(range(len(b[s])))),
    "widens": lambda b, x, d: _widens(_val(b, x).aval.dtype, b[d]),
    "empty": lambda b, a: len(b[a]) == 0,
    "full_slice": lambda b, x, start, limit, strides: (
        all(s == 0 for s in b[start]) and tuple(b[limit]) == _val(b, x).aval.shape
        and all(st == 1 for st in b[strides])),
    "floating": lambda b, x: _val(b, x).aval.dtype.is_floating,
    "swaps_dot_operands": lambda b, x, y, batch, perm: _swaps_dot(b[x], b[y], b[batch],
                                                                 b[perm]),
}


def _swaps_dot(x, y, batch, perm):
    """Whether ``perm`` exchanges the free dims of x and y in a batchless dot_general's
    output (then the transposed product is the product with the operands swapped)."""
    if batch != ((), ()):
        return False
    out_ndim = len(perm)
    # free dims: x's come first in the output, then y's
    n_y_free = out_ndim - (len(x.aval.shape) - _n_contract(x, y, out_ndim))
    n_x_free = out_ndim - n_y_free
    return tuple(perm) == tuple(range(n_x_free, out_ndim)) + tuple(range(n_x_free))


def _n_contract(x, y, out_ndim):
    # len(x) + len(y) - 2 * n_contract = out_ndim
    return (len(x.aval.shape) + len(y.aval.shape) - out_ndim) // 2


def _val(b, name):
    return b[name]


def _widens(src, dst):
    """Converting src -> dst -> src gives back every src value."""
    if src is dst:
        return True
    if src.is_floating:
        return dst.is_floating and dst.itemsize >= src.itemsize
    if src.is_bool:
        return True
    if src.is_integer:
        return (dst.is_integer and dst.itemsize >= src.itemsize) or (
            dst.is_floating and dst.itemsize > src.itemsize)
    return False


def _compose_perm(p, q):
    # transpose(transpose(x, p), q): out[i] = x.dim[p[q[i]]]
    return tuple(p[i] for i in q)


def _compose_broadcast(inner_dims, outer_dims):
    return tuple(outer_dims[d] for d in inner_dims)


def _cast_value(value, dtype):
    if dtype.is_bool:
        return bool(value)
    if dtype.is_integer:
        return int(value)
    return float(value)


def _neg_value(value):
    return -value


def _reduce_size(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


HELPERS = {
    "shape": lambda b, x: _val(b, x).aval.shape,
    "dtype": lambda b, x: _val(b, x).aval.dtype,
    "compose_perm": lambda b, p, q: _compose_perm(b[p], b[q]),
    "compose_broadcast": lambda b, d1, d2: _compose_broadcast(b[d1], b[d2]),
    "swap_pair": lambda b, c: (tuple(b[c][1]), tuple(b[c][0])),
    "cast_value": lambda b, v, d: _cast_value(b[v], b[d]),
    "neg_value": lambda b, v: _neg_value(b[v]),
    "out_shape": lambda b: b["$out"].aval.shape,
    "out_dtype": lambda b: b["$out"].aval.dtype,
}


RULES = [
    # additive and multiplicative identities (prims never broadcast: shapes already agree)
    Rule("add_zero", "add(x, full(value=0))", "x", doc="x + 0 -> x"),
    Rule("sub_zero", "sub(x, full(value=0))", "x", doc="x - 0 -> x"),
    Rule("zero_sub", "sub(full(value=0), x)", "neg(x)", doc="0 - x -> -x"),
    Rule("mul_one", "mul(x, full(value=1))", "x", doc="x * 1 -> x"),
    Rule("mul_minus_one", "mul(x, full(value=-1))", "neg(x)", doc="x * -1 -> -x"),
    Rule("div_one", "div(x, full(value=1))", "x", doc="x / 1 -> x"),
    Rule("mul_zero", "mul(x, full(value=0))",
         "full(shape=$out_shape(), value=0, dtype=$out_dtype())", assumes_finite=True,
         doc="x * 0 -> 0 (wrong for x = inf or nan)"),
    Rule("sub_self", "sub(x, x)", "full(shape=$out_shape(), value=0, dtype=$out_dtype())",
         assumes_finite=True, doc="x - x -> 0 (wrong for x = inf or nan)"),
    # signs
    Rule("neg_neg", "neg(neg(x))", "x", doc="-(-x) -> x"),
    Rule("neg_sub", "neg(sub(x, y))", "sub(y, x)", doc="-(x - y) -> y - x"),
    Rule("add_neg", "add(x, neg(y))", "sub(x, y)", doc="x + (-y) -> x - y"),
    Rule("sub_neg", "sub(x, neg(y))", "add(x, y)", doc="x - (-y) -> x + y"),
    Rule("mul_neg_neg", "mul(neg(x), neg(y))", "mul(x, y)", doc="(-x)(-y) -> xy"),
    Rule("neg_full", "neg(full(shape=s, value=v, dtype=d))",
         "full(shape=s, value=$neg_value(v), dtype=d)", doc="-full(v) -> full(-v)"),
    Rule("abs_neg", "abs(neg(x))", "abs(x)", doc="|-x| -> |x|"),
    Rule("abs_abs", "abs(abs(x))", "abs(x)", doc="||x|| -> |x|"),
    Rule("max_self", "maximum(x, x)", "x", doc="max(x, x) -> x"),
    Rule("min_self", "minimum(x, x)", "x", doc="min(x, x) -> x"),
    Rule("integer_pow_one", "integer_pow(x, y=1)", "x", doc="x ** 1 -> x"),
    # selection and logic
    Rule("select_same", "select(p, x, x)", "x", doc="where(p, x, x) -> x"),
    Rule("select_not", "select(logical_not(p), x, y)", "select(p, y, x)",
         doc="where(!p, x, y) -> where(p, y, x)"),
    Rule("not_not", "logical_not(logical_not(x))", "x", doc="!!x -> x"),
    # dtype conversions
    Rule("convert_same", "convert_element_type(x, dtype=d)", "x", where=("dtype_is(x, d)",),
         doc="casting to the dtype x already has -> x"),
    Rule("convert_roundtrip", "convert_element_type(convert_element_type(x, dtype=d1), dtype=d2)",
         "x", where=("dtype_is(x, d2)", "widens(x, d1)"),
         doc="x -> wider -> x's dtype gives x back (float32 -> float64 -> float32)"),
    Rule("convert_full", "convert_element_type(full(shape=s, value=v), dtype=d)",
         "full(shape=s, value=$cast_value(v, d), dtype=d)", doc="cast of a constant"),
    # shapes
    Rule("reshape_same", "reshape(x, shape=s)", "x", where=("shape_is(x, s)",),
         doc="reshape to the same shape -> x"),
    Rule("reshape_reshape", "reshape(reshape(x), shape=s)", "reshape(x, shape=s)",
         doc="reshape(reshape(x)) -> reshape(x)"),
    Rule("reshape_full", "reshape(full(value=v, dtype=d), shape=s)",
         "full(shape=s, value=v, dtype=d)", doc="reshape of a constant"),
    Rule("transpose_identity", "transpose(x, perm=p)", "x", where=("identity_perm(p)",),
         doc="transpose by the identity permutation -> x"),
    Rule("transpose_transpose", "transpose(transpose(x, perm=p), perm=q)",
         "transpose(x, perm=$compose_perm(p, q))",
         doc="transpose(transpose(x)) -> one transpose (or x, by transpose_identity)"),
    Rule("transpose_dot", "transpose(dot_general(x, y, contracting=c, batch=bt), perm=p)",
         "dot_general(y, x, contracting=$swap_pair(c), batch=bt)",
         where=("swaps_dot_operands(x, y, bt, p)",),
         doc="(x^T y)^T -> y^T x: a transposed product is the swapped product"),
    Rule("transpose_full", "transpose(full(value=v, dtype=d))",
         "full(shape=$out_shape(), value=v, dtype=d)", doc="transpose of a constant"),
    Rule("broadcast_full", "broadcast_in_dim(full(value=v, dtype=d), shape=s)",
         "full(shape=s, value=v, dtype=d)", doc="broadcast of a constant -> a constant"),
    Rule("broadcast_identity", "broadcast_in_dim(x, shape=s, broadcast_dimensions=d)", "x",
         where=("identity_broadcast(x, s, d)",), doc="broadcast to x's own shape -> x"),
    Rule("broadcast_broadcast",
         "broadcast_in_dim(broadcast_in_dim(x, broadcast_dimensions=d1), shape=s, "
         "broadcast_dimensions=d2)",
         "broadcast_in_dim(x, shape=s, broadcast_dimensions=$compose_broadcast(d1, d2))",
         doc="two broadcasts -> one"),
    Rule("slice_full", "slice(full(value=v, dtype=d))",
         "full(shape=$out_shape(), value=v, dtype=d)", doc="slice of a constant"),
    Rule("slice_all", "slice(x, start=a, limit=l, strides=st)", "x",
         where=("full_slice(x, a, l, st)",), doc="slice of everything -> x"),
    Rule("reduce_sum_none", "reduce_sum(x, axes=a)", "x", where=("empty(a)",),
         doc="sum over no axes -> x"),
    Rule("reduce_full_sum", "reduce_sum(full(value=0, dtype=d))",
         "full(shape=$out_shape(), value=0, dtype=d)", doc="sum of zeros -> zeros"),
]
RULES_BY_PRIM = {}
for _r in RULES:
    RULES_BY_PRIM.setdefault(_r._source.prim, []).append(_r)


# ---- matching ----------------------------------------------------------------------------

def _param_equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (not isinstance(a, bool) and a == b) or (
            not isinstance(b, bool) and a == b)
    try:
        return a == b
    except Exception:  # noqa: BLE001
        return False


def _match(pat, value, b):
    """Matches ``pat`` against ``value``; extends bindings ``b`` (returns False on failure;
    ``b`` may then hold partial bindings, callers copy)."""
    if isinstance(pat, str):
        if pat == "_":
            return True
        if pat in b:
            return b[pat] is value
        b[pat] = value
        return True
    op = value.op
    if op is None or op.prim != pat.prim:
        return False
    for key, want in pat.params:
        if key not in op.params:
            return False
        have = op.params[key]
        if isinstance(want, Lit):
            if not _param_equal(have, want.value):
                return False
        elif isinstance(want, str):
            if want in b:
                if not _param_equal(b[want], have):
                    return False
            else:
                b[want] = have
    if len(pat.args) != len(op.inputs) and pat.args:
        return False
    if not pat.args:
        return True
    orders = [op.inputs]
    if pat.prim in COMMUTATIVE and len(op.inputs) == 2:
        orders.append(op.inputs[::-1])
    for inputs in orders:
        trial = dict(b)
        if all(_match(p, v, trial) for p, v in zip(pat.args, inputs)):
            b.clear()
            b.update(trial)
            return True
    return False


def _build(pat, b, new_ops):
    """The value a target pattern denotes, appending the operations it needs."""
    if isinstance(pat, str):
        return b[pat]
    params = {}
    for key, val in pat.params:
        if isinstance(val, Lit):
            params[key] = val.value
        elif isinstance(val, Call):
            params[key] = HELPERS[val.helper](b, *val.args)
        else:
            params[key] = b[val]
    if pat.prim == "full":
        # a constant keeps the matched value's number type (0 for ints, 0.0 for floats)
        params["value"] = _cast_value(params["value"], params["dtype"])
    inputs = [_build(a, b, new_ops) for a in pat.args]
    aval = get_primitive(pat.prim).abstract_eval(*[v.aval for v in inputs], **params)
    op = Operation(pat.prim, inputs, params, aval)
    new_ops.append(op)
    return op.out


def _try_rules(op, rules, assume_finite):
    for rule in rules:
        if rule.assumes_finite and not assume_finite:
            continue
        b = {}
        if not _match(rule._source, op.out, b):
            continue
        b["$out"] = op.out
        if not all(PREDICATES[w.prim](b, *w.args) for w in rule._where):
            continue
        new_ops = []
        try:
            value = _build(rule._target, b, new_ops)
        except (ValueError, TypeError, OverflowError):  # e.g. casting nan to an int: skip
            continue
        if value.aval != op.out.aval:
            raise RuntimeError(f"rewrite rule {rule.name} changed the type {op.out.aval} to "
                               f"{value.aval}")
        return rule, value, new_ops
    return None


def apply_rules(fn, rules=None, assume_finite=False, max_rounds=20, stats=None) -> int:
    """Applies ``rules`` (default ``RULES``) until none fires; returns how many fired.
    A matched operation is removed (SSA order means all its uses come later and are
    remapped); operations it read may become dead, for ``dce`` to remove.
    ``stats``, a dict, collects how often each rule fired."""
    by_prim = RULES_BY_PRIM
    if rules is not None:
        by_prim = {}
        for r in rules:
            by_prim.setdefault(r._source.prim, []).append(r)
    total = 0
    for _ in range(max_rounds):
        mapping = {}
        new_ops = []
        fired = 0
        for op in fn.ops:
            if mapping:
                op.inputs = [mapping.get(v, v) for v in op.inputs]
            candidates = by_prim.get(op.prim)
            found = _try_rules(op, candidates, assume_finite) if candidates else None
            if found is None:
                new_ops.append(op)
                continue
            rule, value, created = found
            new_ops.extend(created)  # op itself goes: every later use is remapped
            mapping[op.out] = value
            fired += 1
            if stats is not None:
                stats[rule.name] = stats.get(rule.name, 0) + 1
        fn.ops = new_ops
        if mapping:
            fn.outputs = [mapping.get(v, v) for v in fn.outputs]
        total += fired
        if not fired:
            break
    return total
