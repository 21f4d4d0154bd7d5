"""Reads the text that ``printer.print_function`` writes back into a ``Function``.

The grammar is small: a ``def`` header with typed inputs, one ``%v: type = prim(args)``
line per operation, a ``return`` line and optional ``const #i: type = [values]`` lines.
Parameters are ints, floats (``inf``, ``nan``), bools, None, quoted strings, dtype names and
tuples of those. ``#`` starts a comment except in ``const #i``.
"""

from __future__ import annotations

import re

from ..backends import get_backend
from ..core import dtypes
from ..core.primitive import Aval
from ._program import CONSTANT, Function, Operation, Value

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<value>%[A-Za-z0-9_]+)
  | (?P<const>\#\d+)
  | (?P<region>@[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<name>-?[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<string>'[^']*'|"[^"]*")
  | (?P<arrow>->)
  | (?P<punct>[()\[\],:=<>])
""", re.VERBOSE)


class ParseError(ValueError):
    """The text is not a valid program; the message names the line."""


def _tokenize(line, lineno):
    pos, out = 0, []
    while pos < len(line):
        m = _TOKEN.match(line, pos)
        if m is None:
            raise ParseError(f"line {lineno}: unexpected character {line[pos]!r} in {line!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group()))
    return out


class _Tokens:
    def __init__(self, tokens, lineno, line):
        self.tokens = tokens
        self.i = 0
        self.lineno = lineno
        self.line = line

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None)

    def next(self):
        tok = self.peek()
        if tok[0] is None:
            self.fail("unexpected end of line")
        self.i += 1
        return tok

    def expect(self, text):
        kind, tok = self.next()
        if tok != text:
            self.fail(f"expected {text!r}, got {tok!r}")

    def accept(self, text):
        if self.peek()[1] == text:
            self.i += 1
            return True
        return False

    def done(self):
        return self.i >= len(self.tokens)

    def fail(self, msg):
        raise ParseError(f"line {self.lineno}: {msg}: {self.line.strip()!r}")


def _strip_comment(line):
    # '#' starts a comment unless it is a constant reference '#<digits>'
    i = 0
    while True:
        i = line.find("#", i)
        if i < 0:
            return line
        if i + 1 < len(line) and line[i + 1].isdigit():
            i += 1
            continue
        return line[:i]


class _RegionRef:
    """``@name`` in an operation's params: the region printed below it in ``{ ... }``."""

    def __init__(self, name):
        self.name = name


def _parse_type(t):
    if t.accept("("):  # a control-flow operation's tuple of results (ir/regions.py)
        avals = []
        while not t.accept(")"):
            avals.append(_parse_type(t))
            t.accept(",")
        from .regions import TupleAval

        return TupleAval(avals)
    kind, name = t.next()
    if kind != "name" or name not in dtypes.BY_NAME:
        t.fail(f"expected a dtype, got {name!r}")
    t.expect("[")
    dims = []
    while not t.accept("]"):
        kind, tok = t.next()
        if kind != "number":
            t.fail(f"expected a dimension, got {tok!r}")
        dims.append(int(tok))
        t.accept(",")
    return Aval(tuple(dims), dtypes.BY_NAME[name])


def _parse_param(t):
    kind, tok = t.next()
    if tok == "(":
        items = []
        while not t.accept(")"):
            items.append(_parse_param(t))
            if not t.accept(","):
                t.expect(")")
                break
        return tuple(items)
    if kind == "number":
        return float(tok) if any(c in tok for c in ".eE") else int(tok)
    if kind == "string":
        return tok[1:-1]
    if kind == "region":
        return _RegionRef(tok[1:])
    if kind == "name":
        special = {"True": True, "False": False, "None": None, "inf": float("inf"),
                   "-inf": float("-inf"), "nan": float("nan")}
        if tok in special:
            return special[tok]
        if tok in dtypes.BY_NAME:
            return dtypes.BY_NAME[tok]
    t.fail(f"cannot read parameter value {tok!r}")


def _lookup(t, env, name):
    try:
        return env[name]
    except KeyError:
        t.fail(f"value {name} is used before it is defined")


def parse(text: str, consts=None) -> Function:
    """The ``Function`` that ``text`` describes. ``consts`` supplies constant-pool arrays
    the text abbreviates (``<n values>``).

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float32[2]):\\n    %1: float32[2] = exp(%0)\\n    return %1\\n")
        >>> print(fn.as_text(), end="")
        def f(%0: float32[2]):
            %1: float32[2] = exp(%0)
            return %1
    """
    env = {}
    fn = None
    pool = dict(consts or {})
    returned = False
    for lineno, raw, blocks in _with_region_blocks(text):
        line = _strip_comment(raw)
        if not line.strip():
            continue
        t = _Tokens(_tokenize(line, lineno), lineno, raw)
        kind, tok = t.peek()
        if tok == "def":
            if fn is not None:
                t.fail("a second 'def' (one function per text)")
            t.next()
            _, name = t.next()
            fn = Function(name)
            t.expect("(")
            while not t.accept(")"):
                kind, vname = t.next()
                if kind != "value":
                    t.fail(f"expected an input name, got {vname!r}")
                t.expect(":")
                v = Value(_parse_type(t))
                if vname in env:
                    t.fail(f"{vname} is defined twice")
                env[vname] = v
                fn.inputs.append(v)
                t.accept(",")
            t.expect(":")
            continue
        if fn is None:
            t.fail("expected 'def NAME(...):' first")
        if tok == "return":
            t.next()
            outs = []
            if t.accept("("):
                t.expect(")")
            while not t.done():
                kind, vname = t.next()
                outs.append(_lookup(t, env, vname))
                t.accept(",")
            fn.outputs = outs
            returned = True
            continue
        if tok == "const":
            t.next()
            kind, ref = t.next()
            if kind != "const":
                t.fail("expected '#index' after const")
            aval = _parse_type_after_colon(t)
            t.expect("=")
            index = int(ref[1:])
            if t.accept("<"):
                if index not in pool:
                    t.fail(f"constant #{index} is abbreviated; pass its array in consts=")
                continue
            t.expect("[")
            values = []
            while not t.accept("]"):
                values.append(_parse_param(t))
                t.accept(",")
            pool[index] = get_backend().kernels["reshape"](
                get_backend().asarray(values, aval.dtype), shape=aval.shape)
            continue
        if kind != "value":
            t.fail("expected '%name: type = prim(...)', 'return' or 'const'")
        if returned:
            t.fail("operation after 'return'")
        _, vname = t.next()
        aval = _parse_type_after_colon(t)
        t.expect("=")
        kind, prim = t.next()
        if kind != "name":
            t.fail(f"expected a primitive name, got {prim!r}")
        t.expect("(")
        inputs, params = [], {}
        while not t.accept(")"):
            kind, tok = t.next()
            if kind == "value":
                if params:
                    t.fail("operands must come before parameters")
                inputs.append(_lookup(t, env, tok))
            elif kind == "name":
                t.expect("=")
                params[tok] = _parse_param(t)
            else:
                t.fail(f"unexpected {tok!r} in the argument list")
            t.accept(",")
        if blocks:  # the operation's regions, printed below it
            regions = {}
            for block in blocks:
                region = parse(block, consts)
                regions[region.name] = region
            params = {k: _resolve_regions(t, v, regions) for k, v in params.items()}
        op = Operation(prim, inputs, params, aval)
        if vname in env:
            t.fail(f"{vname} is defined twice")
        env[vname] = op.out
        fn.ops.append(op)
    if fn is None:
        raise ParseError("empty text: no 'def' line")
    if not returned:
        raise ParseError("the function has no 'return' line")
    used = {op.params["index"] for op in fn.ops if op.prim == CONSTANT}
    missing = used - set(pool)
    if missing:
        raise ParseError(f"constants {sorted(missing)} are used but not given")
    fn.consts = {k: pool[k] for k in sorted(pool) if k in used or consts is None}
    return fn


def _parse_type_after_colon(t):
    t.expect(":")
    return _parse_type(t)


def _with_region_blocks(text):
    """``(lineno, line, region texts)`` for each line outside region blocks: the ``{ ... }``
    blocks that follow an operation's line are collected (dedented) as its regions."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        if raw.strip() == "{":
            if not out:
                raise ParseError(f"line {i + 1}: a region block before any operation")
            depth, body = 1, []
            j = i + 1
            while j < len(lines):
                stripped = lines[j].strip()
                if stripped == "{":
                    depth += 1
                elif stripped == "}":
                    depth -= 1
                    if depth == 0:
                        break
                body.append(lines[j])
                j += 1
            else:
                raise ParseError(f"line {i + 1}: region block without a closing '}}'")
            indent = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
            out[-1][2].append("\n".join(b[indent:] for b in body) + "\n")
            i = j + 1
            continue
        out.append((i + 1, raw, []))
        i += 1
    return out


def _resolve_regions(t, v, regions):
    if isinstance(v, _RegionRef):
        if v.name not in regions:
            t.fail(f"region @{v.name} is not given in a block below the operation")
        return regions[v.name]
    if isinstance(v, tuple):
        return tuple(_resolve_regions(t, x, regions) for x in v)
    return v
