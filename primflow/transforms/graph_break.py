"""Graph breaks: what ``pf.jit`` does with code it cannot compile.

When tracing a function raises ``TracerConversionError`` even after its control flow was
converted (``ast_convert.py``) — a NumPy call on a traced value, ``print`` of a value,
``float(x)``, an unconverted statement — ``pf.jit`` splits the function's top-level
statements into pieces: the statement that needs concrete values runs eagerly (on real
tensors, recorded by the tape), and the statements before and after it are compiled, each
as its own jitted function of the local variables. Results and gradients are exact (the
compiled pieces take part in autodiff like any jitted function). Each break warns once
(``GraphBreakWarning``, naming file:line and why); ``pf.jit(f, full_graph=True)`` raises
instead. ``Jitted.lower(...).as_text()`` lists the compiled pieces and the breaks.
"""

from __future__ import annotations

import ast
import copy
import inspect
import warnings

from .ast_convert import _def, assigned_names, build, convert_ast, function_ast

__all__ = ["GraphBreakWarning", "BrokenFunction"]


class GraphBreakWarning(UserWarning):
    """``pf.jit`` ran part of a function eagerly (a graph break); see ``graph_break``."""


_warned = set()


class _Piece:
    __slots__ = ("start", "stop", "eager", "fn", "jitted", "reason", "where")

    def __init__(self, start, stop, eager=False, reason=None, where=None):
        self.start, self.stop, self.eager = start, stop, eager
        self.fn = self.jitted = None
        self.reason, self.where = reason, where


class BrokenFunction:
    """Runs ``fn`` as compiled pieces around the statements that need concrete values."""

    def __init__(self, fn, display, backend=None):
        from .jit import Jitted

        self._jitted_cls = Jitted
        self.fn, self.display, self.backend = fn, display, backend
        node, self.filename, _ = function_ast(fn)
        convert_ast(node)
        ast.fix_missing_locations(node)
        self.node = node
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters)
        self.stmts = list(node.body)
        # functions, classes and imports defined at the top level: re-run in every piece
        # that follows them (they are not values a compiled piece can return)
        self.hoisted = {k for k, s in enumerate(self.stmts)
                        if isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.Import,
                                          ast.ImportFrom))}
        self.locals = set(self.params) | set(assigned_names(
            [s for k, s in enumerate(self.stmts) if k not in self.hoisted]))
        self.pieces = [_Piece(0, len(self.stmts))]
        self.last_run = []

    # ---- pieces ---------------------------------------------------------------------------
    def _piece_fn(self, piece):
        """A function ``env -> (returned, value or new env)`` running the piece's
        statements on the local variables in ``env``."""
        names = sorted(self.locals)
        load = "".join(f"if {v!r} in __pf_env: {v} = __pf_env[{v!r}]\n" for v in names)
        store = "".join(f"try:\n    __pf_out[{v!r}] = {v}\nexcept NameError:\n    pass\n"
                        for v in names)
        body = ast.parse(load).body + [self.stmts[k] for k in sorted(self.hoisted)
                                       if k < piece.start]
        body += [_ReturnAsPair().visit(copy.deepcopy(s))
                 for s in self.stmts[piece.start:piece.stop]]
        body += ast.parse(f"__pf_out = {{}}\n{store}return (False, __pf_out)").body
        fn_node = _def(_piece_name(piece), ["__pf_env"], body)
        ast.copy_location(fn_node, self.stmts[piece.start] if self.stmts else self.node)
        for node in ast.walk(fn_node):  # generated lines point at the piece's first line
            if not hasattr(node, "lineno") and "lineno" in node._attributes:
                ast.copy_location(node, fn_node)
        ast.fix_missing_locations(fn_node)
        return build(self.fn, fn_node, self.filename)

    def _prepare(self, piece):
        if piece.fn is None:
            piece.fn = self._piece_fn(piece)
            if not piece.eager:
                piece.jitted = self._jitted_cls(piece.fn, backend=self.backend,
                                                name=f"{self.display}_part")
                piece.jitted._no_convert = True

    def _split(self, index, error):
        """Splits piece ``index`` around the statement that raised ``error``."""
        piece = self.pieces[index]
        k = self._failing_statement(piece, error)
        # (None: the whole piece runs eagerly)
        k_start, k_stop = (piece.start, piece.stop) if k is None else (k, k + 1)
        stmt = self.stmts[k_start]
        where = f"{self.filename}:{stmt.lineno}"
        reason = _short_reason(error)
        new = []
        if k_start > piece.start:
            new.append(_Piece(piece.start, k_start))
        new.append(_Piece(k_start, k_stop, eager=True, reason=reason, where=where))
        if k_stop < piece.stop:
            new.append(_Piece(k_stop, piece.stop))
        self.pieces[index:index + 1] = new
        key = (self.display, where)
        if key not in _warned:
            _warned.add(key)
            import linecache

            text = linecache.getline(self.filename, stmt.lineno).strip()
            warnings.warn(
                f"pf.jit({self.display}): graph break at {where}"
                + (f" (`{text}`)" if text else "") + f": {reason}. This statement runs "
                f"eagerly; the code before and after it is compiled. Results and gradients "
                f"are exact, but each break costs a return to Python: compute with primflow "
                f"ops instead, or pass pf.jit(..., full_graph=True) to make this an error",
                GraphBreakWarning, stacklevel=4)

    def _failing_statement(self, piece, error):
        """The index of the top-level statement of ``piece`` that was running when
        ``error`` was raised, from the traceback's line in the piece's function."""
        name = _piece_name(piece)
        tb = error.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_name == name:
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is None:
            return None
        for k in range(piece.start, piece.stop):
            s = self.stmts[k]
            if s.lineno <= line <= (s.end_lineno or s.lineno):
                return k
        return None

    # ---- running -----------------------------------------------------------------------------
    def __call__(self, args, kwargs):
        from .jit import TracerConversionError

        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        env = dict(bound.arguments)
        self.last_run = []
        i = 0
        while i < len(self.pieces):
            piece = self.pieces[i]
            self._prepare(piece)
            if piece.eager:
                returned, out = piece.fn(env)
                self.last_run.append((piece, None))
            else:
                try:
                    returned, out = piece.jitted(env)
                    self.last_run.append((piece, dict(env)))
                except TracerConversionError as e:
                    self._split(i, e)
                    continue
                except TypeError as e:  # a value a compiled piece cannot take or return
                    if "pf.jit" not in str(e):
                        raise
                    piece.eager, piece.reason = True, _short_reason(e)
                    piece.where = f"{self.filename}:{self.stmts[piece.start].lineno}"
                    continue
            if returned:
                return out
            env.update(out)
            i += 1
        return None

    def describe(self, args, kwargs) -> str:
        """The pieces of the last run for these arguments: compiled programs and breaks."""
        self(args, kwargs)
        parts = []
        for piece, env in self.last_run:
            lines = f"statements {piece.start}..{piece.stop - 1}"
            if piece.eager:
                parts.append(f"# graph break at {piece.where}: {piece.reason}\n"
                             f"# ({lines} run eagerly)\n")
            else:
                parts.append(f"# compiled piece ({lines})\n"
                             + piece.jitted.lower(env).as_text())
        return "\n".join(parts)


class _ReturnAsPair(ast.NodeTransformer):
    """``return x`` in a piece becomes ``return (True, x)`` (nested functions keep theirs)."""

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_Return(self, node):
        value = node.value or ast.Constant(None)
        return ast.copy_location(ast.Return(value=ast.Tuple(
            elts=[ast.Constant(True), value], ctx=ast.Load())), node)


def _piece_name(piece):
    return f"__pf_piece_{piece.start}_{piece.stop}"


def _short_reason(error) -> str:
    text = str(error).split(" inside pf.jit")[0].split("; ")[0]
    return text if len(text) < 200 else text[:197] + "..."

