"""Python control flow on traced tensors, converted to control-flow operations by a
source-to-source transform of the function's AST (Paddle's to_static approach).

``convert(fn)`` rewrites, in ``fn`` and the functions defined inside it:

* ``if test: ... else: ...`` into two branch functions and a call of ``runtime.if_stmt``,
  which runs Python's ``if`` when ``test`` is concrete and ``pf.cond`` when it is traced;
* ``while test: ...`` into ``runtime.while_stmt`` (``pf.while_loop`` when traced);
* ``for i in range(...)`` into ``runtime.for_range`` (``pf.fori_loop`` when a bound is
  traced; a Python loop otherwise);
* ``break`` / ``continue`` written as ``if cond: break`` (or ``continue``) directly in a
  loop body, and early ``return`` inside ``if`` statements, into flags and nested
  ``if``/``else`` (so they become ``cond``/``while`` operations too);
* ``and`` / ``or`` / ``not`` in the tests of those statements into ``runtime.and_`` ...
  (``logical_and`` on traced values, Python's short-circuit otherwise).

The variables a statement assigns are passed in and returned explicitly (the branch and
body functions are pure), so the converted function computes what the original computes,
eagerly too. Statements the transform cannot express (``x[i] = v`` or ``obj.a = v`` inside
a converted branch, ``break`` nested deeper, ``yield``, ``global``) are left as they were:
if their condition is traced, ``pf.jit`` breaks the graph there (``graph_break.py``).
"""

from __future__ import annotations

import ast
import inspect
import itertools
import operator
import textwrap
import types

from ..core.pytree import replace_at
from ..core.tensor import Tensor
from ..core.trace import TRANSFORM_ATTR
from ..ops.math import logical_and, logical_not, logical_or

_counter = itertools.count()
RUNTIME = "__pf_rt"


class Unconvertible(Exception):
    """The function's source cannot be converted (no source, a lambda, a generator...)."""


class _Undefined:
    """The value of a variable that was not assigned yet when a statement started."""

    def __repr__(self):
        return "<undefined>"


UNDEFINED = _Undefined()


# ---- the runtime the converted code calls -----------------------------------------------------

def _traced(x):
    """Whether ``x`` is a tensor whose value is not known while tracing (staged by pf.jit
    or batched by pf.vmap): Python control flow cannot branch on it."""
    if not isinstance(x, Tensor):
        return False
    from .control import BATCHED, concrete_value

    value = concrete_value(x)
    return value is None or value is BATCHED


class runtime:  # noqa: N801 - a namespace the generated code reads as __pf_rt
    """The functions converted code calls (see the module docstring)."""

    @staticmethod
    def ld(thunk):
        """The variable's value, or UNDEFINED when it has none yet."""
        try:
            return thunk()
        except NameError:  # UnboundLocalError too
            return UNDEFINED

    @staticmethod
    def if_stmt(pred, true_fn, false_fn, values):
        if not _traced(pred):
            return true_fn(*values) if pred else false_fn(*values)
        from .control import cond

        defined = [i for i, v in enumerate(values) if v is not UNDEFINED]

        def branch(fn):
            def run(*ops):
                return _check_defined(fn(*replace_at(values, defined, ops)), "if")
            return run

        return cond(pred, branch(true_fn), branch(false_fn), *[values[i] for i in defined])

    @staticmethod
    def while_stmt(cond_fn, body_fn, values):
        values = tuple(values)
        while True:
            pred = cond_fn(*values)
            if _traced(pred):
                from .control import while_loop

                init = _check_defined(values, "while")
                return while_loop(lambda s: cond_fn(*s), lambda s: tuple(body_fn(*s)),
                                  _as_carry(init))
            if not pred:
                return values
            values = tuple(body_fn(*values))

    @staticmethod
    def for_range(args, body_fn, values):
        if not any(_traced(a) for a in args):
            values = tuple(values)
            for i in range(*[operator.index(a) for a in args]):  # (2.5 or a float tensor: no)
                values = tuple(body_fn(i, *values))
            return values
        from .control import fori_loop

        if len(args) == 3 and not _traced(args[2]) and int(args[2]) == 1:
            args = args[:2]
        if len(args) == 3:
            raise TypeError("for i in range(start, stop, step) with traced bounds needs "
                            "step 1; write a while loop instead")
        lo, hi = (0, args[0]) if len(args) == 1 else args
        init = _as_carry(_check_defined(tuple(values), "for"))
        return fori_loop(lo, hi, lambda i, s: tuple(body_fn(i, *s)), init)

    @staticmethod
    def call(fn):
        """``fn`` with its control flow converted when it is a plain Python function of
        the user's (not primflow's, the standard library's or an installed package's)
        that has some; else ``fn`` itself. Converted once per function. A primflow function
        (``pf.jvp``, ``pf.cond``, ``pf.vjp``...) gets the user functions passed to it
        converted the same way."""
        converted = _converted_callee(fn)
        if converted is fn and getattr(fn, "__module__", None) and (
                fn.__module__ == "primflow" or fn.__module__.startswith("primflow.")):
            return _with_converted_arguments(fn)
        return converted

    @staticmethod
    def and_(a, b_thunk):
        if _traced(a):
            return logical_and(a, b_thunk())
        return b_thunk() if a else a

    @staticmethod
    def or_(a, b_thunk):
        if _traced(a):
            return logical_or(a, b_thunk())
        return a if a else b_thunk()

    @staticmethod
    def not_(a):
        return logical_not(a) if _traced(a) else not a


_callees = {}  # id(function) -> (function, its converted version or itself)


def _with_converted_arguments(fn):
    """``fn`` called with the user functions among its arguments converted."""
    def call(*args, **kwargs):
        args = [_converted_callee(a) if isinstance(a, types.FunctionType) else a for a in args]
        kwargs = {k: _converted_callee(v) if isinstance(v, types.FunctionType) else v
                  for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    return call


def _converted_callee(fn):
    spec = getattr(fn, TRANSFORM_ATTR, None) if callable(fn) else None
    if spec is not None:  # pf.grad(helper) called from converted code: convert the helper
        inner, rebuild = spec
        new = [_converted_callee(g) for g in inner]
        return fn if all(a is b for a, b in zip(new, inner)) else rebuild(*new)
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType):
        return fn
    entry = _callees.get(id(target))
    if entry is None or entry[0] is not target:
        new = target
        # (closures too: the converted function shares their cells, see ``build``; not
        # functions made by converted code, which are converted already)
        code = target.__code__
        if RUNTIME not in code.co_freevars and _user_code(code.co_filename):
            try:
                converted, count = convert(target)
                new = converted if count else target
            except Unconvertible:
                pass
        entry = _callees[id(target)] = (target, new)
    new = entry[1]
    if new is target:
        return fn
    return types.MethodType(new, fn.__self__) if isinstance(fn, types.MethodType) else new


def _user_code(filename) -> bool:
    """Whether a function defined in ``filename`` is the user's code (converted when
    called from converted code): not primflow's, not an installed package's, not the
    standard library's."""
    import os
    import sys
    import sysconfig

    if filename.startswith("<"):
        return False
    path = os.path.realpath(filename)
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if path.startswith(here + os.sep) or "site-packages" in path or "dist-packages" in path:
        return False
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    return not path.startswith(stdlib + os.sep) and not path.startswith(
        os.path.realpath(sys.base_prefix) + os.sep + "lib")


def _check_defined(values, what):
    values = tuple(values)
    for v in values:
        if v is UNDEFINED:
            raise TypeError(f"a variable assigned inside a converted `{what}` on a traced "
                            f"value has no value on every path; assign it before the `{what}`")
    return values


def _as_carry(values):
    """Loop-carried Python numbers become tensors (a traced loop carries tensors)."""
    from ..ops.helpers import as_tensor

    return tuple(v if isinstance(v, bool) or not isinstance(v, (int, float))
                 else as_tensor(v, dtype="int64" if isinstance(v, int) else None)
                 for v in values)


# ---- analysis ---------------------------------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _walk_local(nodes):
    """Every node under ``nodes`` in their own scope: nested functions, lambdas, classes
    and comprehensions are yielded but not entered (their names are their own)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def assigned_names(stmts) -> list:
    """Local variables the statements assign (in first-assignment order); functions and
    classes defined there are not values a converted statement can carry."""
    names = []
    for node in _walk_local(stmts):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and (
                node.id not in names):
            names.append(node.id)
    return names


def loaded_names(nodes) -> set:
    """Every name read anywhere under ``nodes`` (nested functions and lambdas included: a
    closure reads its variables when it runs)."""
    return {node.id for n in nodes for node in ast.walk(n)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def _stored(target) -> set:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}


def exposed_names(stmts) -> set:
    """Names the statements read before certainly assigning them (a loop body reading the
    previous iteration's value): only plain assignments count as certain."""
    assigned, exposed = set(), set()
    for s in stmts:
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            exposed |= loaded_names([s.value]) - assigned
            for target in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                exposed |= loaded_names([target]) - assigned  # x[i] = ... reads x
                assigned |= _stored(target)
        elif isinstance(s, ast.AugAssign):
            exposed |= (loaded_names([s.value]) | _stored(s.target)) - assigned
            assigned |= _stored(s.target)
        elif isinstance(s, (ast.FunctionDef, ast.ClassDef)):
            exposed |= loaded_names([s]) - assigned - {s.name}
            assigned.add(s.name)
        else:
            exposed |= loaded_names([s]) - assigned
    return exposed


def _mutates_objects(stmts) -> bool:
    """``x[i] = v``, ``x.a = v``, ``del``, augmented item updates: not expressible as a
    pure branch or body."""
    for node in _walk_local(stmts):
        if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(
                node.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom,
                             ast.Await, ast.Delete)):
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and not (isinstance(node.func.value, ast.Name)
                         and node.func.value.id == RUNTIME)
                and (node.func.attr in _MUTATORS or (node.func.attr.endswith("_")
                                                     and not node.func.attr.startswith("_")))):
            return True  # ys.append(y), d.update(...), x.add_(1): changes an object
    return False


_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                       "setdefault", "add", "discard", "popitem", "sort", "reverse",
                       "set_value", "backward"})


def _has_return(stmts) -> bool:
    return any(isinstance(node, ast.Return) for node in _walk_local(stmts))


def _jumps_out(stmts) -> bool:
    """A return, or a break/continue not inside a nested loop."""
    return _has_return(stmts) or _loose_jumps(stmts)


def _loose_jumps(stmts) -> bool:
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        loop = isinstance(s, (ast.For, ast.While, ast.AsyncFor))  # its body's jumps are its own
        fields = ("orelse",) if loop else ("body", "orelse", "finalbody", "handlers")
        if any(_loose_jumps(getattr(s, field, None) or []) for field in fields):
            return True
    return False


def _always_returns(stmts) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return isinstance(last, (ast.Return, ast.Raise))


# ---- building nodes -------------------------------------------------------------------------

def _name(id_, store=False):
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _rt(attr):
    return ast.Attribute(value=_name(RUNTIME), attr=attr, ctx=ast.Load())


def _call(func, *args):
    return ast.Call(func=func, args=list(args), keywords=[])


def _arguments(names):
    return ast.arguments(posonlyargs=[], args=[ast.arg(arg=a) for a in names], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _thunk(expr):
    return ast.Lambda(args=_arguments([]), body=expr)


def _tuple(names, store=False):
    return ast.Tuple(elts=[_name(n, store) for n in names],
                     ctx=ast.Store() if store else ast.Load())


def _loads(names):
    return ast.Tuple(elts=[_call(_rt("ld"), _thunk(_name(n))) for n in names], ctx=ast.Load())


def _def(name, params, body):
    return ast.FunctionDef(name=name, args=_arguments(params), body=body, decorator_list=[],
                           returns=None, type_params=[])


def _function(name, params, body, returns):
    return _def(name, params, list(body) + [ast.Return(value=_tuple(returns))])


def _assign(names, value):
    if not names:
        return ast.Expr(value=value)
    return ast.Assign(targets=[_tuple(names, store=True)], value=value)


def _set(name, value):
    return ast.Assign(targets=[_name(name, True)], value=value)


def _fresh(kind):
    return f"__pf_{kind}_{next(_counter)}"


# ---- the transform --------------------------------------------------------------------------

class _Converter:
    """Rewrites statement lists (see the module docstring); counts what it converted."""

    def __init__(self):
        self.converted = 0

    def function(self, fn):
        fn.body = self.returns(fn.body) if self._needs_return_lowering(fn.body) else fn.body
        fn.body = self.block(fn.body, frozenset())
        calls = _CallsConverted()
        calls.visit(fn)
        self.converted += calls.wrapped
        return fn

    # -- early return: `if c: return a` ... `return b` becomes if/else assigning __pf_ret
    def _needs_return_lowering(self, body):
        return any(not isinstance(s, ast.Return) and _has_return([s]) for s in body)

    def returns(self, body):
        lowered = self._lower_returns(body)
        if lowered is None:
            return body
        init = _set("__pf_ret", ast.Constant(None))
        return [init] + lowered + [ast.Return(value=_name("__pf_ret"))]

    def _lower_returns(self, stmts):
        out = []
        for k, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                out.append(_set("__pf_ret", s.value or ast.Constant(None)))
                return out
            if isinstance(s, ast.If) and _has_return([s]):
                rest = stmts[k + 1:]
                body = self._lower_returns(s.body + ([] if _always_returns(s.body) else rest))
                orelse = self._lower_returns(s.orelse + ([] if _always_returns(s.orelse) else rest))
                if body is None or orelse is None:
                    return None
                out.append(ast.If(test=s.test, body=body or [ast.Pass()],
                                  orelse=orelse or [ast.Pass()]))
                return out
            if _has_return([s]):
                return None  # a return inside a loop or try: left as it is
            out.append(s)
        return out

    # -- statements
    def block(self, stmts, live_out):
        """Converts a statement list; ``live_out``: names read after it. A converted
        statement carries only the variables it assigns that are read later."""
        out = []
        for k, s in enumerate(stmts):
            out.extend(self.statement(s, set(live_out) | loaded_names(stmts[k + 1:])))
        return out

    def statement(self, s, live):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(s)
            return [s]
        if isinstance(s, (ast.If, ast.While, ast.For)):
            kind = {ast.If: self.if_, ast.While: self.while_, ast.For: self.for_}[type(s)]
            out = kind(s, live)
            for node in out:  # generated statements keep the original's lines (tracebacks,
                if not hasattr(node, "lineno"):  # graph-break locations)
                    ast.copy_location(node, s)
                    for child in ast.walk(node):
                        if "lineno" in child._attributes and not hasattr(child, "lineno"):
                            ast.copy_location(child, s)
            return out
        for field in ("body", "orelse", "finalbody"):  # with, try: convert inside
            sub = getattr(s, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                setattr(s, field, self.block(sub, live))
        return [s]

    def if_(self, s, live):
        body, orelse = self.block(s.body, live), self.block(s.orelse, live)
        if _jumps_out(s.body + s.orelse) or _mutates_objects(s.body + s.orelse):
            s.body, s.orelse = body, orelse
            return [s]
        # a branch assigns what is read later, and what it reads before assigning (its
        # value from before the if) must come in
        carried = set(live) | exposed_names(body) | exposed_names(orelse)
        names = [n for n in assigned_names(body + orelse) if n in carried]
        t_name, f_name = _fresh("true"), _fresh("false")
        self.converted += 1
        call = _call(_rt("if_stmt"), self.test(s.test), _name(t_name), _name(f_name), _loads(names))
        return [_function(t_name, names, body or [ast.Pass()], names),
                _function(f_name, names, orelse or [ast.Pass()], names),
                _assign(names, call)]

    def _lower_jumps(self, body):
        """``if c: break`` / ``if c: continue`` directly in ``body`` become flags; returns
        ``(new body, break flag or None, continue flag or None)``, or None when a jump sits
        deeper."""
        out = []
        for k, s in enumerate(body):
            if isinstance(s, (ast.Break, ast.Continue)):
                jump, test = s, ast.Constant(True)
            elif (isinstance(s, ast.If) and len(s.body) == 1 and not s.orelse
                  and isinstance(s.body[0], (ast.Break, ast.Continue))):
                jump, test = s.body[0], s.test
            elif _loose_jumps([s]):
                return None
            else:
                out.append(s)
                continue
            is_break = isinstance(jump, ast.Break)
            flag = _fresh("break" if is_break else "continue")
            out.append(_set(flag, _call(_rt("or_"), _name(flag), _thunk(self.test(test)))))
            rest = self._lower_jumps(body[k + 1:])
            if rest is None:
                return None
            rest_body, rest_brk, rest_cont = rest
            second = rest_brk if is_break else rest_cont
            if second:  # a second break (continue) in the body: not lowered
                return None
            if rest_body:
                out.append(ast.If(test=_call(_rt("not_"), _name(flag)), body=rest_body, orelse=[]))
            return (out, flag, rest_cont) if is_break else (out, rest_brk, flag)
        return out, None, None

    def _loop_as_is(self, s, live):
        """The loop left a Python loop (its body converted inside)."""
        s.body = self.block(s.body, set(live) | loaded_names([s]))
        return [s]

    def while_(self, s, live):
        lowered = None if s.orelse else self._lower_jumps(s.body)
        if lowered is None:
            return self._loop_as_is(s, live)
        body, brk, cont = lowered
        pre = []
        test = s.test
        if cont:
            body = [_set(cont, ast.Constant(False))] + body
            pre.append(_set(cont, ast.Constant(False)))
        if brk:
            pre.append(_set(brk, ast.Constant(False)))
            test = ast.BoolOp(op=ast.And(), values=[
                ast.UnaryOp(op=ast.Not(), operand=_name(brk)), test])
        # carried: what the test reads, what the body reads before assigning it (the last
        # iteration's value), and what is read after the loop
        live = set(live) | loaded_names([test]) | exposed_names(body)
        body = self.block(body, live)
        if _jumps_out(body) or _mutates_objects(body):
            s.test, s.body = test, body
            return pre + [s]
        names = [n for n in assigned_names(body) if n in live]
        if brk and brk not in names:
            names.append(brk)
        c_name, b_name = _fresh("cond"), _fresh("body")
        self.converted += 1
        cond_fn = _function(c_name, names, [], [])
        cond_fn.body = [ast.Return(value=self.test(test))]
        call = _call(_rt("while_stmt"), _name(c_name), _name(b_name), _loads(names))
        return pre + [cond_fn, _function(b_name, names, body, names), _assign(names, call)]

    def for_(self, s, live):
        is_range = (isinstance(s.iter, ast.Call) and isinstance(s.iter.func, ast.Name)
                    and s.iter.func.id == "range" and not s.iter.keywords
                    and 1 <= len(s.iter.args) <= 3 and isinstance(s.target, ast.Name)
                    and not s.orelse)
        lowered = self._lower_jumps(s.body) if is_range else None
        if lowered is None:
            return self._loop_as_is(s, live)
        body, brk, cont = lowered
        if brk or cont:  # a while loop over a counter: for i in range(a, b) with jumps
            args = s.iter.args
            start, stop = (ast.Constant(0), args[0]) if len(args) == 1 else (args[0], args[1])
            step = args[2] if len(args) == 3 else ast.Constant(1)
            counter, bound = _fresh("i"), _fresh("stop")
            init = [_set(counter, start), _set(bound, stop)]
            loop = ast.While(
                test=ast.Compare(left=_name(counter), ops=[ast.Lt()], comparators=[_name(bound)]),
                body=[_set(s.target.id, _name(counter)),
                      _set(counter, ast.BinOp(left=_name(counter), op=ast.Add(), right=step)),
                      *s.body],
                orelse=[])
            for node in init + [loop]:
                ast.copy_location(node, s)
            return init + self.while_(loop, live)
        live = set(live) | exposed_names(body)
        body = self.block(body, live)
        if _jumps_out(body) or _mutates_objects(body):
            s.body = body
            return [s]
        names = [n for n in assigned_names(body) if n != s.target.id and n in live]
        b_name = _fresh("body")
        self.converted += 1
        call = _call(_rt("for_range"), ast.Tuple(elts=list(s.iter.args), ctx=ast.Load()),
                     _name(b_name), _loads(names))
        return [_function(b_name, [s.target.id] + names, body, names), _assign(names, call)]

    def test(self, expr):
        """``and``/``or``/``not`` in a condition, as runtime calls (they work on traced tensors)."""
        if isinstance(expr, ast.BoolOp):
            values = [self.test(v) for v in expr.values]
            fn = "and_" if isinstance(expr.op, ast.And) else "or_"
            out = values[-1]
            for v in reversed(values[:-1]):
                out = _call(_rt(fn), v, _thunk(out))
            return out
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return _call(_rt("not_"), self.test(expr.operand))
        return expr


class _CallsConverted(ast.NodeTransformer):
    """``helper(x)`` becomes ``__pf_rt.call(helper)(x)``: functions the converted code
    calls have their control flow converted too (Paddle's convert_call)."""

    def __init__(self):
        self.wrapped = 0

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in _NOT_CONVERTED:
            return node
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
                func.value.id == RUNTIME):
            return node
        if not isinstance(func, (ast.Name, ast.Attribute, ast.Call)):
            return node  # (a Call: `pf.grad(helper)(x)` converts the helper)
        node.func = ast.copy_location(_call(_rt("call"), func), func)
        self.wrapped += 1
        return node


_NOT_CONVERTED = frozenset({"range", "len", "print", "isinstance", "super", "float", "int",
                            "bool", "list", "tuple", "dict", "zip", "enumerate", "min",
                            "max", "abs", "sum", "locals", "globals", "vars", "type"})


# ---- from a function to its converted version ---------------------------------------------------

def function_ast(fn):
    """``(FunctionDef, source file, first line)`` of ``fn``; raises ``Unconvertible``."""
    if getattr(fn, "__name__", "") == "<lambda>":
        raise Unconvertible("a lambda (its source is an expression, with no statements)")
    code = getattr(fn, "__code__", None)
    if code is None:
        raise Unconvertible(f"{type(fn).__name__} is not a Python function")
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        raise Unconvertible("a generator or coroutine")
    if "__class__" in code.co_freevars:
        raise Unconvertible("it uses super() or __class__")
    if getattr(fn, TRANSFORM_ATTR, None) is not None:
        raise Unconvertible("it is a primflow transform's wrapper (its own source is "
                            "primflow's; the function it transforms is converted instead)")
    try:
        # the source of fn's own code object: inspect.getsourcelines(fn) would follow
        # __wrapped__ (functools.wraps) to the function a wrapper wraps, and recompiling
        # that source in the wrapper's place would compute the wrapped function instead
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError) as e:
        raise Unconvertible(f"its source is not available ({e})") from None
    source = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise Unconvertible(f"its source does not parse on its own ({e})") from None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != code.co_name:
        raise Unconvertible("its source is not a plain `def`")
    ast.increment_lineno(tree, first - 1)
    return node, code.co_filename, first


def build(fn, node, filename, extra_names=()):
    """Compiles the ``FunctionDef`` ``node`` as a replacement for ``fn``: same globals,
    defaults, name and closure cells (shared, not copied: when the enclosing function
    rebinds a variable, the replacement reads the new value, as ``fn`` does)."""
    code = fn.__code__
    freevars = list(code.co_freevars)
    cells = dict(zip(freevars, fn.__closure__ or ()))
    node.decorator_list = []
    factory = _def("__pf_factory", [RUNTIME, *freevars, *extra_names],
                   [node, ast.Return(value=_name(node.name))])
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    namespace = {}
    # the user's own code, rewritten
    exec(compile(module, filename, "exec"), fn.__globals__, namespace)  # noqa: S102
    made = namespace["__pf_factory"](runtime, *[None] * (len(freevars) + len(extra_names)))
    # the made function's cells for the runtime and extra names, fn's own for its variables
    own = dict(zip(made.__code__.co_freevars, made.__closure__ or ()))
    closure = tuple(cells.get(name, own.get(name)) for name in made.__code__.co_freevars)
    new = types.FunctionType(made.__code__, fn.__globals__, made.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = getattr(fn, "__qualname__", made.__qualname__)
    new.__wrapped_original__ = fn
    return new


def convert(fn):
    """``fn`` with its Python control flow on tensors converted (see the module docstring).
    Returns ``(new function, number of statements converted)``; raises ``Unconvertible``
    when ``fn``'s source cannot be converted.

    Example:
        >>> import primflow as pf
        >>> from primflow.transforms.ast_convert import convert
        >>> def relu_sum(x):
        ...     if x.sum() > 0:
        ...         y = x
        ...     else:
        ...         y = -x
        ...     return y
        >>> fixed, n = convert(relu_sum)
        >>> pf.jit(fixed, full_graph=True)(pf.to_tensor([-1.0, -2.0])).numpy()
        array([1., 2.], dtype=float32)
    """
    spec = getattr(fn, TRANSFORM_ATTR, None)
    if spec is not None:  # pf.grad(f), pf.vmap(f), ...: convert f, make the transform again
        inner, rebuild = spec
        results, first_error = [], None
        for g in inner:
            try:
                results.append(convert(g))
            except Unconvertible as e:
                first_error = first_error or e
                results.append((g, 0))
        count = sum(n for _, n in results)
        if not count:
            if first_error is not None:
                raise first_error
            return fn, 0
        return rebuild(*[g for g, _ in results]), count
    node, filename, _ = function_ast(fn)
    converted = convert_ast(node)
    return build(fn, node, filename), converted


def convert_ast(node) -> int:
    """Converts the ``FunctionDef`` ``node`` in place; returns how many statements became
    runtime calls."""
    converter = _Converter()
    converter.function(node)
    return converter.converted
