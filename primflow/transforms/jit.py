"""Static graphs: ``pf.jit(f)`` and ``pf.to_static(f_or_layer)``.

The first call with a new input signature (shapes, dtypes and grad flags of the tensor
leaves, the values of static arguments and Python scalars, the pytree structure) runs ``f``
once on ``JitTracer`` values. Each primitive applied to them is recorded, with the type
that ``Primitive.abstract_eval`` gives, into an SSA program (``primflow.ir``); nothing is
computed. The program is optimized (``primflow.ir.passes``) and compiled
(``primflow.compiler``), and cached under the signature; later calls with that signature
run the compiled program.

* Tensors ``f`` closes over (a layer's parameters, data) become extra program inputs read
  at every call, so updates to them are seen; constants created inside ``f`` are recorded
  as ``full``/``iota`` operations and folded. What ``f`` computes from other values while
  tracing is baked into the program, so each call first checks it still holds (guards,
  a few identity checks): if a closure variable or a module global that ``f``'s own code
  reads was rebound (a new tensor, another number), or a tensor whose value was read while
  tracing (an op on constants only, ``float(w)``) was changed in place, ``f`` is traced
  again. Results always match eager code; values that change on every call retrace on
  every call (``RetraceWarning`` says which): pass those as arguments. Values reached
  otherwise (attributes of objects, a helper's globals) are not checked: pass them as
  arguments too if they change.
* ``pf.grad``, ``backward``, ``pf.vmap``, ``pf.jvp`` inside ``f`` work as in eager code:
  their traces nest inside the jit trace and what they compute is recorded too.
* Differentiating *through* a jitted function (its inputs or the parameters it reads
  require grad) works: the outputs get a tape node whose backward re-runs the program
  with the tape on (as ``pf.checkpoint`` does), so every order of derivative is available.
* Called inside another transform (vmap, jvp, Taylor mode, or another jit's trace), ``f``
  is simply traced by that transform (inlined).
* Called with distributed tensors (``primflow.distributed``), ``f`` compiles to one program
  per rank on the local blocks, the collectives its layouts need recorded as ops, the
  arguments' placements part of the signature (``distributed/staged_jit.py``).
* Python control flow on traced values: ``bool()``, ``float()``, ``.item()``,
  ``.numpy()`` or ``print`` of a traced value raise ``TracerConversionError`` while
  tracing. ``pf.jit`` then converts the function's ``if``/``while``/``for i in range(n)``
  statements to ``pf.cond``/``pf.while_loop``/``pf.fori_loop`` (``ast_convert.py``) and
  traces again; what still needs concrete values breaks the graph (``graph_break.py``:
  that statement runs eagerly between compiled pieces, with a ``GraphBreakWarning``), or
  raises with ``full_graph=True``. ``pf.cond``/``pf.scan``/... are staged as operations
  with regions (``control/``).

What a jitted function may take and return (bad input gives an error naming the argument
or output and the fix):

* Arguments: tensors and NumPy arrays (traced), pytrees of them (tuples, lists, dicts,
  Layers), and hashable Python values, which are *static*: compiled into the program by
  value, so each new value traces again. Python scalars are static too; pass a number that
  changes from call to call as a tensor (``pf.to_tensor(v)``). Unhashable values (a list
  marked static, a set, a bytearray) raise a ``TypeError`` naming the argument.
* Retracing: every new signature (shape, dtype, grad flag, static value, pytree structure)
  traces and compiles again. After ``RETRACE_WARNING_THRESHOLD`` (8) traces of one function
  a single ``RetraceWarning`` names what changed between the last two signatures.
* Results: tensors and pytrees of them; NumPy arrays become constant tensors; ``None`` and
  immutable Python constants (bool, int, float, str, dtypes, other value-hashable objects)
  are returned as they were while tracing. Anything else (a generator, a mutable custom
  object) raises a ``TypeError`` naming its position in the output.
* In-place updates: inputs are immutable (as in JAX). ``x.add_(...)``, ``x[i] = v`` or
  ``x.set_value(...)`` on an argument raise a ``TypeError`` (eager code would change the
  caller's tensor, the compiled program cannot): return the new value instead. In-place
  updates of tensors created inside the function work as in eager code. Updating a tensor
  the function closes over, with a traced value or after reading it, raises; Python side
  effects that involve no traced value (printing, appending to a list) run once, while
  tracing, not on every call.
"""

from __future__ import annotations

import enum
import functools
import inspect
import sys
import types
import warnings
import weakref

from ..backends import get_backend
from ..core import dtypes
from ..core.config import config
from ..core import random as _random
from ..core.primitive import Aval, PrimitiveError, record_custom
from ..core.pytree import replace_at, tree_flatten, tree_unflatten
from ..core.state import state
from ..core.tensor import Tensor
from ..core.trace import (TRANSFORM_ATTR, Trace, Tracer, TracerConversionError, new_trace,
                          outside_update_error)
from ..ir import IMPURE, Builder, evaluate_bound, normalize_params
from ..ir.regions import all_ops

__all__ = ["RETRACE_WARNING_THRESHOLD", "JitTrace", "JitTracer", "Jitted", "Lowered",
           "RetraceWarning", "TraceTooLongError", "TracerConversionError", "jit", "to_static"]

# after this many traces of one jitted function, warn (once) that its signature keeps
# changing; read at each trace, so it can be changed at run time
RETRACE_WARNING_THRESHOLD = 8


class TraceTooLongError(RuntimeError):
    """Tracing a function recorded more than ``pf.config.jit_max_trace_ops`` operations:
    most likely a Python loop whose condition is known while tracing never ends (it is
    unrolled into the program one iteration at a time).

    Example:
        >>> import primflow as pf
        >>> def f(x):
        ...     n = 0
        ...     while n < 10:  # n is never increased
        ...         x = x * 2.0
        ...     return x
        >>> with pf.config.override(jit_max_trace_ops=100):
        ...     try:
        ...         pf.jit(f).lower(pf.ones([2]))
        ...     except pf.TraceTooLongError as e:
        ...         print(type(e).__name__)
        TraceTooLongError
    """


def _too_long_message(fn_name):
    from .ast_convert import _user_code  # noqa: PLC0415 - ast_convert imports this module

    frame, where = sys._getframe(1), ""
    while frame is not None:
        code = frame.f_code
        if _user_code(code.co_filename):
            where = f", at {code.co_filename}:{frame.f_lineno} (in {code.co_name})"
            break
        frame = frame.f_back
    return (f"pf.jit({fn_name}): tracing recorded more than {config.jit_max_trace_ops:,} "
            f"operations{where}. A Python loop whose condition is known while tracing "
            f"(`while n < 10` on a Python number) is unrolled into the program one iteration "
            f"at a time, and this one does not seem to end. Make its condition depend on a "
            f"tensor (it becomes one pf.while_loop operation), use pf.fori_loop or pf.scan, "
            f"or, if the program really is this long, raise pf.config.jit_max_trace_ops")


class RetraceWarning(UserWarning):
    """A jitted function was traced ``RETRACE_WARNING_THRESHOLD`` times: its input
    signature keeps changing (a Python number or a shape that differs on every call), so
    every call compiles it again."""


def _conversion_message(tracer, what):
    return (f"{what} needs the concrete value of a traced tensor ({tracer.aval}) inside "
            f"pf.jit, but tracing records operations without computing them. Python control "
            f"flow on traced values cannot be compiled: use pf.where(cond, a, b) to choose "
            f"elementwise, or make the argument static (pf.jit(f, static_argnums=...)) so its "
            f"value is known while tracing; return values from the function to inspect them")


class JitTracer(Tracer):
    """A traced tensor inside ``pf.jit``: an SSA value of the program being recorded."""

    __slots__ = ("value",)

    def __init__(self, trace, value):
        self._init_tracer(trace, value.aval)
        self.value = value

    @property
    def _value(self):
        # AttributeError (not TypeError) so hasattr(x, "_value") answers False for tracers
        raise AttributeError(
            f"a traced tensor ({self.aval}) has no concrete array: it is a value of a program "
            f"that pf.jit is recording{self._escaped()}. Compute with it using primflow ops, "
            f"and return it from the jitted function to get its value. In-place updates of "
            f"tensors outside the function (optimizer.step(), set_value) cannot be compiled: "
            f"write the step functionally and return the new values")

    @_value.setter
    def _value(self, new):
        self._check_inplace("an in-place update")
        raise TypeError(f"a traced tensor ({self.aval}) cannot have its array replaced inside "
                        f"pf.jit; build a new tensor instead (e.g. with pf.where), or use "
                        f"x.set_value(...), x[...] = v or x.add_(...) on a tensor created "
                        f"inside the function")

    def _check_inplace(self, what):
        """Refuses an in-place update of one of the function's inputs: eager code would
        change the caller's tensor, the compiled program cannot. Tensors created inside the
        function are updated functionally (by ops), as under any transform."""
        label = self._trace.arg_labels.get(id(self))
        if label is not None:
            raise TypeError(_input_mutation_message(self._trace.fn_name, label, what))

    def _escaped(self):
        if self._trace.finished:
            return (" (this tracer escaped from a finished trace: a jitted function stored "
                    "it outside, e.g. in a global, an optimizer's state or a tensor's .grad)")
        return ""

    def detach(self):
        """The same value, cut from the tape."""
        return JitTracer(self._trace, self.value)

    def numpy(self):
        raise TracerConversionError(_conversion_message(self, ".numpy()"))

    def item(self):
        raise TracerConversionError(_conversion_message(self, ".item()"))

    def tolist(self):
        raise TracerConversionError(_conversion_message(self, ".tolist()"))

    def __array__(self, dtype=None, copy=None):
        raise TracerConversionError(_conversion_message(self, "conversion to a NumPy array"))

    def __bool__(self):
        raise TracerConversionError(_conversion_message(
            self, "bool() (an `if`, `while`, `and`/`or` or `assert` on a tensor)"))

    def __float__(self):
        raise TracerConversionError(_conversion_message(self, "float()"))

    def __int__(self):
        raise TracerConversionError(_conversion_message(self, "int()"))

    def __index__(self):
        raise TracerConversionError(_conversion_message(self, "using a tensor as an index"))

    def __str__(self):
        # print(x) / f"{x}" of a traced value shows no value: under pf.jit that statement
        # breaks the graph and prints the real values at every call (repr() still works)
        raise TracerConversionError(_conversion_message(self, "printing (str(), print())"))

    def __format__(self, spec):
        raise TracerConversionError(_conversion_message(self, "formatting (f-strings)"))


def _input_mutation_message(fn_name, label, what):
    return (f"pf.jit({fn_name}): the function modifies its input {label} in place ({what}); "
            f"a compiled function cannot change its arguments (inputs are immutable, as in "
            f"JAX), while eager code would change the caller's tensor. Return the new value "
            f"instead (e.g. `return x + 1` for x.add_(1), pf.where(mask, value, x) for "
            f"x[mask] = value), or update a copy made inside the function (y = x.clone())")


class JitTrace(Trace):
    """Records every primitive applied to its tracers into ``builder``'s program."""

    stages_creation = True

    def __init__(self, level, builder):
        super().__init__(level)
        self.builder = builder
        # id(tensor) -> (tensor, Value, grad, version and array before capture)
        self.captured = {}
        self.finished = False
        self.fn_name = builder.fn.name
        self.arg_labels = {}  # id(input tracer) -> "argument 0 ('x')": refused in-place
        # id(tensor) -> (weak reference, version) of concrete tensors read while tracing:
        # what was computed from them is baked in, so a change in place retraces
        self.reads = {}

    def read_constants(self, tensors):
        for t in tensors:
            if isinstance(t, Tracer):
                continue
            known = self.reads.get(id(t))
            if known is None or known[0]() is not t:
                self.reads[id(t)] = (weakref.ref(t), t._version)

    @property
    def transform_name(self):  # errors name the function: "pf.jit(step)"
        return f"pf.jit({self.fn_name})"

    def lift(self, a):
        if isinstance(a, JitTracer):
            if a._trace is self:
                return a.value
            raise ValueError(
                f"a traced value ({a.aval}) from another pf.jit trace was used here{a._escaped()}"
                f"; pass values between jitted functions as arguments and results")
        if isinstance(a, Tracer):
            raise ValueError(
                f"a jitted function used a value ({a.aval}) traced by an enclosing transform "
                f"({type(a._trace).__name__}) that it closes over; pass that value to the "
                f"jitted function as an argument instead")
        entry = self.captured.get(id(a))
        if entry is None:
            v = self.builder.add_input(Aval(a._shape, a.dtype))
            entry = self.captured[id(a)] = (a, v, a.grad, a._version, a._value)
        return entry[1]

    def process_primitive(self, prim, args, params):
        if len(self.builder.fn.ops) >= config.jit_max_trace_ops:
            raise TraceTooLongError(_too_long_message(self.fn_name))
        params = normalize_params(params)
        ins = [self.lift(a) for a in args]
        try:
            aval = prim.abstract_eval(*[v.aval for v in ins], **params)
        except PrimitiveError:
            raise
        except Exception as e:  # name the primitive and types, as eager errors do
            described = ", ".join(str(v.aval) for v in ins) or "()"
            raise type(e)(f"primitive {prim.name!r} on {described} with params {params}: "
                          f"{e}") from e
        out = self.builder.add_op(prim.name, ins, params, aval)
        if prim.multiple_results:  # control flow: one tuple value, its results by ``get``
            return [JitTracer(self, self.builder.add_op("get", [out], {"index": k}, a))
                    for k, a in enumerate(aval.avals)]
        return JitTracer(self, out)


# ---- the traced program and its cache ------------------------------------------------------

class _Entry:
    """One cached trace: the programs, the executable and how to map values in and out."""

    __slots__ = (
        "any_requires_grad",
        "capture_avals",
        "captures",
        "executable",
        "guards",
        "impure",
        "n_args",
        "name",
        "out_requires_grad",
        "out_slots",
        "out_tree",
        "program",
        "random",
        "reads",
        "reseed",
        "single",
        "traced",
    )

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class Lowered:
    """What ``jitted.lower(*args)`` returns: the traced and optimized programs.

    ``as_text()`` prints the optimized program (``stage="traced"`` the program as
    recorded, ``stage="compiled"`` the generated code).
    """

    def __init__(self, entry):
        self._entry = entry
        self.traced = entry.traced
        self.program = entry.program

    def as_text(self, stage="optimized") -> str:
        if stage == "traced":
            return self.traced.as_text()
        if stage == "optimized":
            return self.program.as_text()
        if stage == "compiled":
            source = getattr(self._entry.executable, "source", None)
            return source if source is not None else self.program.as_text()
        raise ValueError(f"stage must be 'traced', 'optimized' or 'compiled', got {stage!r}")

    def __str__(self):
        return self.as_text()

    def compile(self):
        """The executable: ``executable(list of native arrays) -> list of native arrays``."""
        return self._entry.executable


def _caller_level():
    """The ``stacklevel`` of the first frame outside this module (warnings point at the
    user's call, however many jit frames lie between)."""
    import sys

    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    return level


class _BrokenLowered:
    """``lower()`` of a function with graph breaks: its compiled pieces and breaks."""

    def __init__(self, text):
        self.text = text

    def as_text(self, stage="optimized") -> str:
        del stage
        return self.text

    __str__ = as_text


def _is_array_like(x):
    return hasattr(x, "__array__") and hasattr(x, "shape") and hasattr(x, "dtype")


def _stager(args, kwargs):
    """The class of an argument that stages its own program (an ambient tracer whose class
    has ``_jit_call`` / ``_jit_lower``: distributed tensors, issue 15), else None."""
    for leaf in tree_flatten((args, kwargs))[0]:
        if isinstance(leaf, Tracer) and hasattr(type(leaf), "_jit_call"):
            return type(leaf)
    return None


class Jitted:
    """A function compiled per input signature. See ``jit``."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), optimize=True,
                 backend=None, extra_key=None, name=None, full_graph=False,
                 tiered=None, blocking=None):
        if not callable(fun):
            raise TypeError(f"pf.jit needs a callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.static_argnums = ((static_argnums,) if isinstance(static_argnums, int)
                               else tuple(static_argnums))
        self.static_argnames = ((static_argnames,) if isinstance(static_argnames, str)
                                else tuple(static_argnames))
        self.optimize = optimize
        self.backend = backend
        self.tiered, self.blocking = tiered, blocking  # None: pf.config's, when compiling
        self._extra_key = extra_key
        self._name = name or getattr(fun, "__name__", "f")
        if not self._name.isidentifier():
            self._name = "f"
        self._display = (getattr(fun, "__qualname__", None) or self._name).rpartition(
            "<locals>.")[2]
        self._cache = {}
        self._fast = {}  # native-type signature of positional tensors -> entry
        self.traces = 0  # how many times f was traced (cache misses)
        self.hits = 0
        self._last_signature = None  # description of the last traced call (retrace warning)
        self._stale_reason = None  # what made the last cached program stale (retrace warning)
        self._warned_retrace = False
        self._param_names = None
        # Python control flow on traced values (issue 16): the AST-converted function
        # replaces fun after a TracerConversionError; what still cannot be traced breaks
        # the graph (transforms/graph_break.py) unless full_graph
        self.full_graph = full_graph
        self._converted = False
        self._converted_count = 0  # statements and calls the AST conversion rewrote
        self._no_convert = False  # a piece of a broken function: its owner splits it
        self._broken = None

    def __get__(self, obj, objtype=None):  # decorating a method binds self as usual
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return f"<pf.jit of {self._name}: {len(self._cache)} cached signatures>"

    # ---- signature -------------------------------------------------------------------------
    def _split(self, args, kwargs):
        n = len(args)
        static_pos = set()
        for i in self.static_argnums:
            if not -n <= i < n:
                raise ValueError(f"pf.jit: static_argnums {self.static_argnums} is out of "
                                 f"range for a call with {n} positional arguments")
            static_pos.add(i % n)
        dyn_args = tuple(None if i in static_pos else a for i, a in enumerate(args))
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        static = tuple((i, args[i]) for i in sorted(static_pos)) + tuple(
            sorted(((k, v) for k, v in kwargs.items() if k in self.static_argnames),
                   key=lambda kv: kv[0]))
        return dyn_args, dyn_kwargs, static, static_pos

    def _signature(self, leaves, treedef, static):
        parts = []
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                parts.append((leaf._shape, leaf.dtype, leaf.stop_gradient))
            else:
                parts.append((type(leaf), leaf))
        key = (treedef, tuple(parts), static, _layer_key(treedef), state.grad_enabled,
               state.decompose, dtypes.default_float(), get_backend(), state.amp)
        if self._extra_key is not None:
            key += (self._extra_key(),)
        try:
            hash(key)
        except TypeError as e:
            raise TypeError(self._unhashable_message(leaves, treedef, static, e)) from None
        return key

    # ---- describing arguments (error and warning paths only) ------------------------------
    def _arg_label(self, i):
        """``argument 1 ('s')``: the position, and the parameter's name where known."""
        if self._param_names is None:
            try:
                params = inspect.signature(self.fun).parameters.values()
                self._param_names = [p.name for p in params if p.kind in (
                    p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            except (TypeError, ValueError):
                self._param_names = []
        if i < len(self._param_names):
            return f"argument {i} ({self._param_names[i]!r})"
        return f"argument {i}"

    def _leaf_labels(self, treedef):
        """A label per leaf of the flattened ``(dyn_args, dyn_kwargs)``, in leaf order."""
        args_def, kwargs_def = treedef.children
        labels = []
        for i, child in enumerate(args_def.children):
            _tree_paths(child, self._arg_label(i), labels)
        for k, child in zip(kwargs_def.meta, kwargs_def.children):
            _tree_paths(child, f"keyword argument {k!r}", labels)
        return labels

    def _static_label(self, k):
        if isinstance(k, int):
            return f"static {self._arg_label(k)}"
        return f"static keyword argument {k!r}"

    def _unhashable_message(self, leaves, treedef, static, error):
        head = f"pf.jit({self._display}): "
        for k, v in static:
            if not _hashable(v):
                where = "static_argnums" if isinstance(k, int) else "static_argnames"
                return (f"{head}{self._static_label(k)} (marked by {where}) is a "
                        f"{_type_name(v)}, which is not hashable ({_hash_error(v)}): static "
                        f"arguments are compiled into the program and their values key its "
                        f"cache, so they must be hashable: {_hashable_hint(v, static=True)}")
        for label, leaf in zip(self._leaf_labels(treedef), leaves):
            if not isinstance(leaf, Tensor) and not _hashable(leaf):
                return (f"{head}{label} is a {_type_name(leaf)}, which is neither a tensor, a "
                        f"pytree of tensors (tuple, list, dict, Layer) nor a hashable Python "
                        f"value ({_hash_error(leaf)}). Non-tensor arguments are static: their "
                        f"values are compiled into the program and key its cache. Pass data as "
                        f"tensors (pf.to_tensor(...)) and configuration as hashable values "
                        f"({_hashable_hint(leaf, static=False)}), optionally marked with "
                        f"static_argnums / static_argnames")
        return (f"{head}the call's signature is not hashable ({error}); pass tensors for data "
                f"and hashable values for configuration (static_argnums / static_argnames)")

    def _describe_call(self, leaves, treedef, static, key):
        """What a traced signature is made of, readably: compared between the last two
        traces to say what changed when warning about retracing."""
        items = {}
        for label, leaf in zip(self._leaf_labels(treedef), leaves):
            if isinstance(leaf, Tensor):
                items[label] = ("tensor", list(leaf._shape), leaf.dtype.name,
                                leaf.stop_gradient)
            else:
                items[label] = ("value", _type_name(leaf), _short_repr(leaf))
        for k, v in static:
            items[self._static_label(k)] = ("static", _type_name(v), _short_repr(v))
        env = {"grad mode (pf.no_grad / pf.enable_grad)": key[4],
               "pf.decompose mode": key[5], "default float dtype": key[6],
               "identity or train/eval mode of a Layer argument": key[3],
               "backend": key[7], "pf.amp.auto_cast": key[8]}
        if self._extra_key is not None:
            env["extra cache key"] = key[9]
        return {"structure": treedef, "items": items, "env": env}

    def _check_retraces(self, signature):
        """Counts traces (on cache misses only) and warns once when they pile up."""
        previous, self._last_signature = self._last_signature, signature
        if self._warned_retrace or self.traces < RETRACE_WARNING_THRESHOLD:
            return
        self._warned_retrace = True
        changed = _signature_changes(previous, signature) if previous else []
        what = ("; ".join(changed) if changed else
                f"the arguments' signature is unchanged, but {self._stale_reason} (pass "
                f"values that change as arguments)" if self._stale_reason else
                "the arguments' signature is unchanged: a tensor the function closes over "
                "changed shape or dtype")
        warnings.warn(
            f"pf.jit({self._display}) has been traced {self.traces} times: every call with a "
            f"new signature traces and compiles it again. Between the last two traces: {what}. "
            f"Keep shapes, dtypes and static values the same from call to call: pass numbers "
            f"that change as tensors (pf.to_tensor(value)) instead of Python scalars, and pad "
            f"or bucket inputs to a few fixed shapes. (This warning is shown once per "
            f"function; cache_info() counts the traces.)", RetraceWarning,
            stacklevel=_caller_level())

    # ---- calling ---------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if state.trace_stack:  # inside a transform (or another jit's trace): be traced by it
            try:
                return self.fun(*args, **kwargs)
            except TracerConversionError:
                if not self._convert():
                    raise
                return self.fun(*args, **kwargs)
        if self._broken is not None:
            return self._broken(args, kwargs)
        try:
            return self._call_compiled(args, kwargs)
        except TracerConversionError as e:
            return self._recover(e, args, kwargs)

    def _convert(self) -> bool:
        """Replaces ``fun`` by its AST-converted version (once); whether it did."""
        if self._converted or self._no_convert:
            return False
        self._converted = True
        from .ast_convert import Unconvertible, convert

        source = getattr(self.fun, "__pf_source__", self.fun)
        try:
            converted, count = convert(source)
        except Unconvertible:
            return False
        if not count:
            return False
        self.fun = converted
        self._converted_count = count
        self.clear_cache()
        return True

    def _recover(self, error, args, kwargs, run=True):
        """After a ``TracerConversionError`` while tracing: convert the function's control
        flow and trace again; if that fails too, break the graph (or raise under
        ``full_graph``). Runs the function on the arguments, unless ``run`` is False
        (``lower``: trace only)."""
        if self._convert():
            try:
                if not run:
                    self._lookup(args, kwargs)
                    return None
                return self._call_compiled(args, kwargs)
            except TracerConversionError as e:
                error = e
        if self._no_convert:
            raise error
        if self.full_graph:
            raise TracerConversionError(
                f"pf.jit({self._display}, full_graph=True): the function cannot be compiled "
                f"as one program (without full_graph it would break the graph here and run "
                f"this part eagerly): {error}") from error
        from .ast_convert import Unconvertible
        from .graph_break import BrokenFunction

        source = getattr(self.fun, "__pf_source__", self.fun)
        source = getattr(source, "__wrapped_original__", source)
        try:
            self._broken = BrokenFunction(source, self._display, backend=self.backend)
        except Unconvertible as e:  # no source: the whole function runs eagerly
            import warnings

            from .graph_break import GraphBreakWarning

            warnings.warn(f"pf.jit({self._display}): cannot compile the function and cannot "
                          f"split it ({e}): it runs eagerly. Reason: {error}",
                          GraphBreakWarning, stacklevel=3)
            self._broken = lambda a, kw: source(*a, **kw)
        return self._broken(args, kwargs) if run else None

    def _call_compiled(self, args, kwargs):
        if not kwargs and not self.static_argnums:
            # fast path: positional tensors only (the common case), keyed on native types
            sig = []
            for a in args:
                if not isinstance(a, Tensor) or isinstance(a, Tracer):
                    break
                v = a._value
                sig.append((v.shape, v.dtype, a.stop_gradient))
            else:
                # (a program is compiled for one backend, and pf.amp's casts are traced in)
                key = (tuple(sig), state.grad_enabled, state.decompose, dtypes.default_float(),
                       get_backend(), state.amp)
                if self._extra_key is not None:
                    key += (self._extra_key(),)
                entry = self._fast.get(key)
                if entry is not None and _captures_fit(entry) and not _stale(entry):
                    self.hits += 1
                    return self._run(entry, list(args))
                entry = self._lookup(args, kwargs)
                if entry is not None:
                    self._fast[key] = entry
                    return self._run(entry, list(args))
        entry = self._lookup(args, kwargs)
        if entry is None:  # inside another transform: let it trace f
            stager = _stager(args, kwargs)
            if stager is not None:  # distributed tensors: they stage their own program
                return stager._jit_call(self, args, kwargs)
            return self.fun(*args, **kwargs)
        leaves = tree_flatten(self._split(args, kwargs)[:2])[0]
        return self._run(entry, [_as_tensor_leaf(x) for x in leaves
                                 if isinstance(x, Tensor) or _is_array_like(x)])

    def _lookup(self, args, kwargs):
        """The cache entry for these arguments (tracing on a miss), or None when an
        argument is another transform's tracer."""
        dyn_args, dyn_kwargs, static, static_pos = self._split(args, kwargs)
        leaves, treedef = tree_flatten((dyn_args, dyn_kwargs))
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tracer):
                return None
            if not isinstance(leaf, Tensor) and _is_array_like(leaf):
                leaves[i] = Tensor(leaf)
        key = self._signature(leaves, treedef, static)
        entry = self._cache.get(key)
        stale = None if entry is None else _stale(entry)
        if entry is None or not _captures_fit(entry) or stale:
            self._stale_reason = stale
            entry = self._trace(args, kwargs, static_pos, leaves, treedef)
            self._cache[key] = entry
            self._check_retraces(self._describe_call(leaves, treedef, static, key))
        else:
            self.hits += 1
        return entry

    def lower(self, *args, **kwargs) -> Lowered:
        """Traces (or finds in the cache) the program for these arguments without running
        it. ``jitted.lower(x).as_text()`` prints it. A function with graph breaks is run
        once (its eager pieces decide what the compiled ones get); one that can be neither
        compiled nor split is described, not run. Tracing stops with a
        ``TraceTooLongError`` after ``pf.config.jit_max_trace_ops`` operations (a Python
        loop that never ends, unrolled while tracing)."""
        if not state.trace_stack:
            stager = _stager(args, kwargs)
            if stager is not None:  # distributed tensors: they stage their own program
                return stager._jit_lower(self, args, kwargs)
        if self._broken is None and not state.trace_stack:
            try:
                self._lookup(args, kwargs)
            except TracerConversionError as e:
                self._recover(e, args, kwargs, run=False)
        if self._broken is not None:
            if not hasattr(self._broken, "describe"):
                return _BrokenLowered("# the function can be neither compiled nor split: it "
                                      "runs eagerly")
            return _BrokenLowered(self._broken.describe(args, kwargs))
        hits = self.hits
        entry = self._lookup(args, kwargs)
        self.hits = hits
        if entry is None:
            raise TypeError("lower() needs concrete arguments, not another transform's "
                            "tracers")
        return Lowered(entry)

    def explain(self, *args, **kwargs) -> str:
        """How this function compiles for these arguments: how many graphs (compiled
        programs), each graph break with its file:line and reason, and whether its Python
        control flow was converted.

        Example:
            >>> import primflow as pf
            >>> def f(x):
            ...     if x.sum() > 0:
            ...         x = x * 2
            ...     return x
            >>> print(pf.jit(f).explain(pf.ones([2])))
            1 graph, no graph break (Python control flow converted to cond/while/scan)
        """
        self.lower(*args, **kwargs)
        converted = (" (Python control flow converted to cond/while/scan)"
                     if self._converted_count else "")
        broken = self._broken
        if broken is None:
            return "1 graph, no graph break" + converted
        if not hasattr(broken, "pieces"):
            return "0 graphs: the function cannot be compiled or split; it runs eagerly"
        graphs = sum(not p.eager for p in broken.pieces)
        breaks = [p for p in broken.pieces if p.eager]
        lines = [f"{graphs} graph{'s' if graphs != 1 else ''}, {len(breaks)} graph "
                 f"break{'s' if len(breaks) != 1 else ''}:"]
        lines += [f"  {p.where}: {p.reason}" for p in breaks]
        return "\n".join(lines)

    def cache_info(self) -> dict:
        """``{"traces": ..., "hits": ..., "entries": ...}``."""
        return {"traces": self.traces, "hits": self.hits, "entries": len(self._cache)}

    def wait_compiled(self, timeout=None) -> bool:
        """Waits until the numba kernels of every traced signature, compiled in the
        background (see ``pf.jit``), are in use; returns whether none is still compiling.
        Useful before timing a jitted function, or to run bitwise like later calls.

        Example:
            >>> import primflow as pf
            >>> f = pf.jit(lambda x: x * 2.0 + 1.0)
            >>> _ = f(pf.ones([3]))
            >>> f.wait_compiled()
            True
        """
        done = True
        for entry in list(self._cache.values()):
            executable = entry.executable
            if hasattr(executable, "wait"):
                executable.wait(timeout)
                done = done and not executable.compiling
        return done

    def clear_cache(self):
        self._cache.clear()
        self._fast.clear()

    # ---- tracing ---------------------------------------------------------------------------
    def _trace(self, args, kwargs, static_pos, leaves, treedef):
        from ..compiler import compile_program, optimize_program

        self.traces += 1
        builder = Builder(self._name)
        random_before = _random.get_state()
        epoch_before = _random.reseed_count()
        with new_trace(JitTrace, builder) as trace:
            try:
                trace.fn_name = self._display
                inputs = []
                labels = self._leaf_labels(treedef)
                for label, leaf in zip(labels, leaves):
                    if isinstance(leaf, Tensor):
                        t = JitTracer(trace, builder.add_input(Aval(leaf._shape, leaf.dtype)))
                        t.stop_gradient = leaf.stop_gradient
                        inputs.append(t)
                        trace.arg_labels[id(t)] = label
                    else:
                        inputs.append(leaf)
                dyn_args, dyn_kwargs = tree_unflatten(treedef, inputs)
                call_args = [args[i] if i in static_pos else a for i, a in enumerate(dyn_args)]
                call_kwargs = dict(kwargs)
                call_kwargs.update(dyn_kwargs)
                out = self.fun(*call_args, **call_kwargs)
                _check_side_effects(trace, inputs, labels)
                out_leaves, out_tree = tree_flatten(out)
                out_slots, outputs, requires = [], [], []
                out_labels = None
                for j, leaf in enumerate(out_leaves):
                    if isinstance(leaf, Tensor):
                        out_slots.append(len(outputs))
                        outputs.append(trace.lift(leaf))
                        requires.append(not leaf.stop_gradient and leaf.dtype.is_floating)
                    elif _is_array_like(leaf):  # a NumPy array: a constant tensor
                        const = Tensor(leaf)
                        out_slots.append(len(outputs))
                        outputs.append(builder.add_constant(
                            const._value, Aval(const._shape, const.dtype)))
                        requires.append(False)
                    elif _is_constant_output(leaf):
                        out_slots.append(("static", leaf))
                    else:
                        if out_labels is None:
                            out_labels = []
                            _tree_paths(out_tree, "output", out_labels)
                        raise TypeError(_bad_output_message(self._display, out_labels[j], leaf))
            finally:
                trace.finished = True
        fn = builder.fn
        fn.outputs = outputs
        # pf.seed(...) inside the function: its draws are fixed by that seed, so replay the
        # traced keys and leave the generator where the traced call left it
        random_after = _random.get_state()
        # pf.seed ran inside (even to the state the generator was already in): replay
        reseeded = _random.reseed_count() != epoch_before
        drawn = frozenset() if reseeded else _keys_drawn(random_before, random_after)
        # draws inside control-flow regions count too (each run of a region draws afresh)
        n_draws = sum(op.prim in IMPURE and op.params["key"] in drawn for op in all_ops(fn))
        reseeded = reseeded or random_after[1] != random_before[1] + n_draws
        captures = [entry[0] for entry in trace.captured.values()]
        traced = fn.copy()
        program = optimize_program(fn) if self.optimize else fn
        executable = compile_program(program, backend=self.backend, blocking=self.blocking,
                                     tiered=self.tiered)
        return _Entry(traced=traced, program=program, executable=executable,
                      captures=captures, n_args=sum(isinstance(x, Tensor) for x in leaves),
                      out_tree=out_tree, out_slots=out_slots, out_requires_grad=requires,
                      impure=[(op.params["key"], op.params["key"] in drawn)
                              for op in program.ops if op.prim in IMPURE],
                      name=self._name, reseed=random_after if reseeded else None,
                      random=bool(reseeded or any(op.prim in IMPURE for op in program.ops)),
                      any_requires_grad=any(requires),
                      single=out_tree.kind == "leaf" and len(outputs) == 1,
                      capture_avals=[(v.aval.shape, v.aval.dtype)
                                     for v in fn.inputs[len(fn.inputs) - len(captures):]],
                      guards=variable_guards(self.fun), reads=list(trace.reads.values()))

    # ---- running ---------------------------------------------------------------------------
    def _run(self, entry, tensors):
        inputs = tensors + entry.captures if entry.captures else tensors
        natives = [t._value for t in inputs]
        keys = _fresh_keys(entry) if entry.random else None
        outs = entry.executable(natives, keys)
        results = [Tensor._wrap(o) for o in outs]
        if entry.any_requires_grad and state.grad_enabled:
            diff = [i for i, t in enumerate(inputs)
                    if not t.stop_gradient and t.dtype.is_floating]
            if diff:
                results = _attach_backward(entry, inputs, diff, results, keys)
        if entry.single:
            return results[0]
        return _unflatten_outputs(entry, results)


def _as_tensor_leaf(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def _keys_drawn(before, after):
    """The keys the global generator handed out between two of its states (the draws of
    random ops while tracing: those draw fresh keys on every call)."""
    if before[0] != after[0] or after[1] < before[1]:
        return frozenset()  # reseeded: handled by replaying the traced keys
    saved = _random.get_state()
    try:
        _random.set_state(before)
        return frozenset(_random.next_key() for _ in range(after[1] - before[1]))
    finally:
        _random.set_state(saved)


def _fresh_keys(entry):
    """One key per random operation: a fresh draw where the traced call drew one from the
    generator, the traced key where the key was given explicitly."""
    if entry.reseed is not None:
        _random.set_state(entry.reseed)
        return [key for key, _ in entry.impure] or None
    if not entry.impure:
        return None
    return [_random.next_key() if drawn else key for key, drawn in entry.impure]


def _unflatten_outputs(entry, results):
    leaves = [results[s] if isinstance(s, int) else s[1] for s in entry.out_slots]
    return tree_unflatten(entry.out_tree, leaves)


def variable_guards(fn):
    """What a program traced from ``fn`` assumed about the variables ``fn`` reads:
    ``(holder, name, value, description)`` for each closure cell (name None) and each
    module global named in the user's own code (holder: the globals dict), following the
    functions a transform wrapper calls (pf.grad(f): f's too) and a converted function's
    original. Modules are left out (rebinding one is not something programs do)."""
    from .ast_convert import RUNTIME, _user_code  # noqa: PLC0415 - ast_convert imports jit

    guards, seen, stack = [], set(), [fn]
    while stack:
        f = stack.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        spec = getattr(f, TRANSFORM_ATTR, None)
        if spec is not None:
            stack.extend(spec[0])
        stack.append(getattr(f, "__wrapped_original__", None))
        stack.append(getattr(f, "__pf_source__", None))
        code = getattr(f, "__code__", None)
        if code is None:
            continue
        owner = (getattr(f, "__qualname__", None) or code.co_name).rpartition("<locals>.")[2]
        for name, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # not assigned yet: nothing was read
                continue
            if name != RUNTIME and not isinstance(value, types.ModuleType):
                guards.append((cell, None, value, f"the variable {name!r} that {owner} closes "
                                                  f"over was rebound"))
        if _user_code(code.co_filename):
            names = f.__globals__
            for name in code.co_names:
                value = names.get(name, _MISSING)
                if value is not _MISSING and not isinstance(value, types.ModuleType):
                    guards.append((names, name, value, f"the global {name!r} was rebound"))
    return guards


_MISSING = object()
_CONSTANT_TYPES = (int, float, complex, bool, str, bytes, type(None))


def _stale(entry):
    """What changed since ``entry`` was traced (a description), or None: a variable it
    read was rebound to another object (a Python number to another value), or a tensor
    read eagerly while tracing was changed in place."""
    for holder, name, value, what in entry.guards:
        try:
            now = holder.cell_contents if name is None else holder[name]
        except (ValueError, KeyError):
            return what
        if now is not value and not (type(now) is type(value) and type(now) in _CONSTANT_TYPES
                                     and (now == value or now != now and value != value)):
            return what
    for ref, version in entry.reads:
        t = ref()
        if t is not None and t._version != version:
            return (f"a tensor ({t.dtype.name}{list(t._shape)}) whose value the trace read was "
                    f"changed in place")
    return None


def _captures_fit(entry):
    """Whether every captured tensor still has the type it was traced with."""
    for t, (shape, dtype) in zip(entry.captures, entry.capture_avals):
        if t._shape != shape or t.dtype is not dtype:
            return False
    return True


def _tree_paths(td, prefix, out):
    """Appends a readable path (``argument 0 ('d')['a'][1]``) for each leaf of ``td``."""
    if td.kind == "leaf":
        out.append(prefix)
    elif td.kind == "dict":
        for k, child in zip(td.meta, td.children):
            _tree_paths(child, f"{prefix}[{k!r}]", out)
    elif td.kind in ("tuple", "list") or (isinstance(td.kind, type)
                                           and issubclass(td.kind, tuple)):
        for j, child in enumerate(td.children):
            _tree_paths(child, f"{prefix}[{j}]", out)
    elif td.kind != "none":  # a registered class (a Layer: its parameters' names)
        names = getattr(td.meta, "names", None)
        if not isinstance(names, tuple) or len(names) != len(td.children):
            names = [f"<{j}>" for j in range(len(td.children))]
        for name, child in zip(names, td.children):
            _tree_paths(child, f"{prefix}.{name}", out)


def _type_name(x):
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _short_repr(x, limit=60):
    try:
        text = repr(x)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the message
        text = f"<{_type_name(x)} object>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _hashable(x):
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _hash_error(x):
    try:
        hash(x)
    except TypeError as e:
        return str(e)
    return "hashable"


def _hashable_hint(x, static):
    """How to make an argument hashable, for its type."""
    if isinstance(x, list):
        hint = "pass a tuple instead of a list: tuple(value)"
    elif isinstance(x, dict):
        hint = ("pass a tuple of its items (tuple(sorted(d.items()))) instead of a dict"
                + ("; or, if it holds tensors, do not mark it static: a dict is a pytree "
                   "whose tensors are traced" if static else ""))
    elif isinstance(x, (set, frozenset)):
        hint = "pass a frozenset or a sorted tuple instead of a set"
    elif isinstance(x, bytearray):
        hint = "pass bytes(value) instead of a bytearray"
    elif _is_array_like(x):
        hint = ("pass it as a tensor argument (leave it out of static_argnums / "
                "static_argnames): arrays are traced, not compiled in")
    else:
        hint = (f"make {type(x).__name__} hashable (define __hash__ and __eq__, e.g. a "
                f"frozen dataclass) or pass its data as tensors")
    return hint


_SCALARS = (bool, int, float, complex)


def _signature_changes(old, new):
    """What differs between two signature descriptions, readably (at most 3 items)."""
    if old["structure"] != new["structure"]:
        return [(f"the pytree structure of the arguments changed: "
                 f"{_short_repr(old['structure'], 80)} -> {_short_repr(new['structure'], 80)}")]
    changes = []
    for label, now in new["items"].items():
        before = old["items"].get(label)
        if before is None or before == now:
            continue
        if before[0] == "tensor" and now[0] == "tensor":
            _, shape0, dtype0, sg0 = before
            _, shape1, dtype1, sg1 = now
            if shape0 != shape1:
                changes.append(f"{label} shape {shape0} -> {shape1} (every new shape "
                               f"compiles again: pad or bucket to a few fixed shapes)")
            if dtype0 != dtype1:
                changes.append(f"{label} dtype {dtype0} -> {dtype1}")
            if sg0 != sg1:
                changes.append(f"{label} stop_gradient {sg0} -> {sg1}")
        elif before[0] == now[0] == "value" and before[1] == now[1]:
            scalar = now[1] in {t.__name__ for t in _SCALARS}
            changes.append(
                f"{label}: Python {now[1]} {before[2]} -> {now[2]} "
                + ("(Python scalars are static, compiled into the program: pass it as a "
                   "tensor, pf.to_tensor(value), so that it is traced)" if scalar else
                   "(non-tensor arguments are static, compiled into the program: pass the "
                   "data as tensors)"))
        elif before[0] == now[0] == "static":
            changes.append(f"{label}: {before[2]} -> {now[2]} (static arguments are compiled "
                           f"into the program: each new value compiles again)")
        else:
            changes.append(f"{label}: {_describe_item(before)} -> {_describe_item(now)}")
    for name, value in new["env"].items():
        if old["env"].get(name) != value:
            changes.append(f"the {name} changed")
    return changes[:3] + ([f"and {len(changes) - 3} more"] if len(changes) > 3 else [])


def _describe_item(item):
    if item[0] == "tensor":
        return f"tensor {item[2]}{item[1]}"
    return f"Python {item[1]} {item[2]}"


# immutable Python values a jitted function may return (returned as they were traced)
_CONSTANT_TYPES = (bool, int, float, complex, str, bytes, range, slice, type(Ellipsis), type,
                   dtypes.DType, enum.Enum)


def _is_constant_output(x):
    if isinstance(x, _CONSTANT_TYPES):
        return True
    if isinstance(x, frozenset):
        return all(_is_constant_output(e) for e in x)
    # other value-hashable objects (frozen dataclasses, Fractions, ...); objects hashed by
    # identity (generators, functions, plain class instances) are likely mutable: refused
    h = type(x).__hash__
    return h is not None and h is not object.__hash__


def _bad_output_message(fn_name, label, leaf):
    return (f"pf.jit({fn_name}): {label} is a {_type_name(leaf)} ({_short_repr(leaf)}), which "
            f"a compiled function cannot return: results must be tensors (NumPy arrays become "
            f"constant tensors), pytrees of them (tuple, list, dict, None, Layer), or immutable "
            f"Python constants (bool, int, float, str), which are returned as they were while "
            f"tracing. Return tensors (pf.to_tensor(...)) and build other objects outside the "
            f"jitted function")


def _check_side_effects(trace, inputs, labels):
    """Writes into tensors outside the program cannot be replayed by the compiled program:
    refuse them clearly. In-place updates of arguments (ops refuse them as they happen,
    through ``JitTracer._check_inplace``; this catches any other path that bumped their
    version) and of captured tensors (done eagerly while
    tracing, after the program had read them), and gradients accumulated into ``.grad``
    (``loss.backward()`` inside the jitted function)."""
    for t, label in zip(inputs, labels):
        if isinstance(t, JitTracer) and t._version != 0:
            raise TypeError(_input_mutation_message(trace.fn_name, label, "an in-place update"))
    for tensor, _, _, version, array in trace.captured.values():
        if tensor._version != version:
            tensor._value = array  # undo the update the trace made to the caller's tensor
            raise outside_update_error(trace, tensor, "an in-place update while tracing")
    bad = []
    for tensor, _, grad_before, _, _ in trace.captured.values():
        if isinstance(tensor.grad, JitTracer):
            tensor.grad = grad_before
            bad.append(f"a captured tensor of shape {tensor.shape}")
    for i, t in enumerate(inputs):
        if isinstance(t, JitTracer) and t.grad is not None:
            bad.append(f"argument leaf {i} of shape {t.shape}")
    if bad:
        raise RuntimeError(
            f"pf.jit: the function accumulated gradients into .grad of {', '.join(bad)} "
            f"(backward() inside a jitted function); a compiled program cannot write into "
            f"tensors outside it. Compute gradients with pf.grad(loss, params) (or the "
            f"functional pf.grad(f)) and return them, e.g. a functional training step that "
            f"returns the new parameters")


def _attach_backward(entry, inputs, diff, results, keys):
    """Tape nodes for the outputs: their backward re-runs the program with the tape on."""
    from ..autodiff.custom import recomputing_pullback

    diff_inputs = [inputs[i] for i in diff]
    name = f"jit({entry.name})"

    def run(handles):
        return evaluate_bound(entry.program, replace_at(inputs, diff, handles), keys=keys)

    pullback = recomputing_pullback(name, run, diff_inputs)

    out, n = [], len(results)
    for k, r in enumerate(results):
        if not entry.out_requires_grad[k]:
            out.append(r)
            continue

        # (the rule holds no output: an output -> node -> rule -> output cycle would keep
        # every call's result alive until the garbage collector runs)
        def vjp(g, _out, *_inputs, k=k):
            cts = [None] * n
            cts[k] = g
            return tuple(pullback(cts))

        out.append(record_custom(r, diff_inputs, name, vjp))
    return out


def _layer_key(treedef):
    """Layers in the arguments: their identity and train/eval flags (read while tracing but
    not part of their pytree structure)."""
    found = []
    stack = [treedef]
    while stack:
        td = stack.pop()
        template = getattr(td.meta, "template", None)
        if template is not None and hasattr(template, "sublayers"):
            found.append((id(template), tuple(getattr(layer, "training", None)
                                              for layer in template.sublayers(
                                                  include_self=True))))
        stack.extend(td.children)
    return tuple(found)


def jit(fun=None, *, static_argnums=(), static_argnames=(), optimize=True, backend=None,
        full_graph=False, tiered=None, blocking=None):
    """Compiles ``fun`` into a static program per input signature (JAX's ``jax.jit``).

    Args:
        fun: a function of tensors (pytrees of tensors, Layers, Python scalars). It returns
            tensors, pytrees of them, NumPy arrays (made constant tensors) or immutable
            Python constants (returned as traced); other results raise a ``TypeError``.
            It must not update its tensor arguments in place (``x.add_``, ``x[i] = v``):
            inputs are immutable, return new values instead. Tensors it closes over are
            read at every call; closure variables and module globals its code reads are
            checked at every call, and rebinding one (``scale = 3.0``, ``w = new_tensor``)
            traces it again, so results match eager code (JAX would keep the old value).
        static_argnums: positions of arguments whose *values* are part of the signature
            (configuration: ints, strings, tuples...; they must be hashable). Python
            scalars are always static: pass a number that changes on every call as a
            tensor, or every call traces again.
        static_argnames: the same for keyword arguments.
        optimize: run the IR passes (simplify, fold, CSE, DCE) before compiling.
        backend: ``"numpy"`` (generated NumPy code), ``"numba"`` (NumPy code plus numba
            kernels for arithmetic groups, compiled in the first call; needs numba),
            ``"interpret"`` (the reference interpreter), ``"auto"`` (numpy, with numba for
            large arithmetic groups when numba is importable) or None:
            ``pf.config.jit_backend`` (default ``"auto"``).
        tiered: with ``"auto"``, compile numba kernels not yet in the disk cache in a
            background process while the first calls run the NumPy code (True, see
            ``Jitted.wait_compiled``) or in the first call (False). None:
            ``pf.config.jit_tiered`` (default True).
        blocking: run programs whose rows are independent in cache-sized row blocks. None:
            ``pf.config.jit_blocking`` (default True).
        full_graph: make a graph break an error. By default, Python control flow on
            traced values (``if``/``while``/``for i in range(n)`` with a tensor condition
            or bound, with ``break``/``continue``/early ``return``) is converted to
            ``pf.cond``/``pf.while_loop``/``pf.fori_loop`` by a source transform
            (``transforms/ast_convert.py``), and what still needs concrete values (a NumPy
            call, ``print`` of a value, ``float(x)``) breaks the graph: that statement runs
            eagerly, the code around it is compiled, and a ``GraphBreakWarning`` names the
            line (``transforms/graph_break.py``). With ``full_graph=True`` that raises
            ``TracerConversionError`` instead.

    Returns:
        A ``Jitted`` callable; ``f.lower(*args).as_text()`` prints the program.

    Warns:
        RetraceWarning: once, when the function has been traced
        ``RETRACE_WARNING_THRESHOLD`` (8) times, naming what changed between the last two
        signatures (a Python scalar's value, a shape...) or what made the last program
        stale (a rebound closure variable or global, see the module docstring).

    Example:
        >>> import primflow as pf
        >>> @pf.jit
        ... def f(x):
        ...     return pf.tanh(x) * 2.0 + 1.0
        >>> f(pf.zeros([3])).numpy()
        array([1., 1., 1.], dtype=float32)
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, optimize=optimize,
                                 backend=backend, full_graph=full_graph, tiered=tiered,
                                 blocking=blocking)
    return Jitted(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                  optimize=optimize, backend=backend, full_graph=full_graph, tiered=tiered,
                  blocking=blocking)


def to_static(function=None, input_spec=None, build_strategy=None, backend=None, **kwargs):
    """Paddle's ``paddle.jit.to_static``: compiles a function, or a Layer's ``forward``.

    For a Layer, ``forward`` is replaced (on that instance) by a jitted version that reads the
    layer's parameters at every call, so optimizer updates are seen, and that retraces when
    ``train()``/``eval()`` changes. The layer itself is returned.

    Example:
        >>> import primflow as pf
        >>> net = pf.to_static(pf.nn.Linear(2, 3))
        >>> net(pf.ones([4, 2])).shape
        [4, 3]
    """
    del input_spec, build_strategy
    full_graph = bool(kwargs.pop("full_graph", False))
    if function is None:
        return functools.partial(to_static, backend=backend, full_graph=full_graph)
    forward = getattr(function, "forward", None)
    if forward is not None and hasattr(function, "sublayers"):
        layer = function
        cls_forward = type(layer).forward

        # the layer is an argument (a pytree of its parameters), so the parameters in its
        # slots at call time are the inputs: updates and functional_call swaps are seen
        def run_forward(layer_, *args, **kw):
            return cls_forward(layer_, *args, **kw)

        try:  # errors name forward's parameters (self, x, ...)
            run_forward.__signature__ = inspect.signature(cls_forward)
        except (TypeError, ValueError):
            pass
        run_forward.__pf_source__ = cls_forward  # what control-flow conversion rewrites
        jitted = Jitted(run_forward, backend=backend, name=type(layer).__name__,
                        full_graph=full_graph)
        jitted._display = f"{type(layer).__name__}.forward"

        def static_forward(*args, **kw):
            return jitted(layer, *args, **kw)

        static_forward.jitted = jitted
        static_forward.lower = lambda *args, **kw: jitted.lower(layer, *args, **kw)
        object.__setattr__(layer, "forward", static_forward)
        return layer
    return Jitted(function, backend=backend, full_graph=full_graph)
