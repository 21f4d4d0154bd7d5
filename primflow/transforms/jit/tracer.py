"""Tracing a Python function into a program: ``JitTracer`` values record each primitive
applied to them (``JitTrace``) into an SSA program, ``trace_entry`` runs the user's
function on them once and turns what it recorded (outputs, captured tensors, random draws)
into a cache entry with its compiled executable; what a trace cannot record (concrete
values, in-place updates of inputs, ``.grad`` accumulation, unreturnable outputs) is
refused here with a message naming the fix."""

from __future__ import annotations

import sys
import weakref

from ...core import random as _random
from ...core.config import config
from ...core.primitive import Aval, PrimitiveError
from ...core.pytree import tree_flatten, tree_unflatten
from ...core.tensor import Tensor
from ...core.trace import Trace, Tracer, TracerConversionError, new_trace, outside_update_error
from ...ir import IMPURE, Builder, normalize_params
from ...ir.regions import all_ops
from .cache import IMMUTABLE_CONSTANTS, Entry, is_array_like, variable_guards
from .diagnostics import leaf_labels, short_repr, tree_paths, type_name


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
    from ..ast_convert import _user_code  # noqa: PLC0415 - ast_convert imports this module

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


def _conversion_message(tracer, what):
    return (f"{what} needs the concrete value of a traced tensor ({tracer.aval}) inside "
            f"pf.jit, but tracing records operations without computing them. Python control "
            f"flow on traced values cannot be compiled: use pf.where(cond, a, b) to choose "
            f"elementwise, or make the argument static (pf.jit(f, static_argnums=...)) so its "
            f"value is known while tracing; return values from the function to inspect them")


def _refused(what):
    """A tracer method that needs a concrete value (``what`` names it in the error)."""
    def method(self, *args, **kwargs):
        raise TracerConversionError(_conversion_message(self, what))

    return method


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

    numpy = _refused(".numpy()")
    item = _refused(".item()")
    tolist = _refused(".tolist()")
    __array__ = _refused("conversion to a NumPy array")
    __bool__ = _refused("bool() (an `if`, `while`, `and`/`or` or `assert` on a tensor)")
    __float__ = _refused("float()")
    __int__ = _refused("int()")
    __index__ = _refused("using a tensor as an index")
    # print(x) / f"{x}" of a traced value shows no value: under pf.jit that statement
    # breaks the graph and prints the real values at every call (repr() still works)
    __str__ = _refused("printing (str(), print())")
    __format__ = _refused("formatting (f-strings)")


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


def trace_entry(jitted, args, kwargs, static_pos, leaves, treedef):
    """Traces ``jitted.fun`` on tracers for the tensor ``leaves`` (the other leaves and the
    static arguments as they are), optimizes and compiles the program: its cache ``Entry``."""
    from ...compiler import compile_program, optimize_program

    builder = Builder(jitted._name)
    random_before = _random.get_state()
    epoch_before = _random.reseed_count()
    with new_trace(JitTrace, builder) as trace:
        try:
            trace.fn_name = jitted._display
            inputs = []
            labels = leaf_labels(jitted, treedef)
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
            out = jitted.fun(*call_args, **{**kwargs, **dyn_kwargs})
            _check_side_effects(trace, inputs, labels)
            out_leaves, out_tree = tree_flatten(out)
            out_slots, outputs, requires = [], [], []
            for j, leaf in enumerate(out_leaves):
                if isinstance(leaf, Tensor):
                    value = trace.lift(leaf)
                    requires.append(not leaf.stop_gradient and leaf.dtype.is_floating)
                elif is_array_like(leaf):  # a NumPy array: a constant tensor
                    const = Tensor(leaf)
                    value = builder.add_constant(const._value, Aval(const._shape, const.dtype))
                    requires.append(False)
                elif _is_constant_output(leaf):
                    out_slots.append(("static", leaf))
                    continue
                else:
                    out_labels = []
                    tree_paths(out_tree, "output", out_labels)
                    raise TypeError(_bad_output_message(jitted._display, out_labels[j], leaf))
                out_slots.append(len(outputs))
                outputs.append(value)
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
    program = optimize_program(fn) if jitted.optimize else fn
    executable = compile_program(program, backend=jitted.backend, blocking=jitted.blocking,
                                 tiered=jitted.tiered)
    return Entry(traced=traced, program=program, executable=executable,
                 captures=captures, n_args=sum(isinstance(x, Tensor) for x in leaves),
                 out_tree=out_tree, out_slots=out_slots, out_requires_grad=requires,
                 impure=[(op.params["key"], op.params["key"] in drawn)
                         for op in program.ops if op.prim in IMPURE],
                 name=jitted._name, reseed=random_after if reseeded else None,
                 random=bool(reseeded or any(op.prim in IMPURE for op in program.ops)),
                 any_requires_grad=any(requires),
                 single=out_tree.kind == "leaf" and len(outputs) == 1,
                 capture_avals=[(v.aval.shape, v.aval.dtype)
                                for v in fn.inputs[len(fn.inputs) - len(captures):]],
                 guards=variable_guards(jitted.fun), reads=list(trace.reads.values()))


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


def _is_constant_output(x):
    if isinstance(x, IMMUTABLE_CONSTANTS):
        return True
    if isinstance(x, frozenset):
        return all(_is_constant_output(e) for e in x)
    # other value-hashable objects (frozen dataclasses, Fractions, ...); objects hashed by
    # identity (generators, functions, plain class instances) are likely mutable: refused
    h = type(x).__hash__
    return h is not None and h is not object.__hash__


def _bad_output_message(fn_name, label, leaf):
    return (f"pf.jit({fn_name}): {label} is a {type_name(leaf)} ({short_repr(leaf)}), which "
            f"a compiled function cannot return: results must be tensors (NumPy arrays become "
            f"constant tensors), pytrees of them (tuple, list, dict, None, Layer), or immutable "
            f"Python constants (bool, int, float, str), which are returned as they were while "
            f"tracing. Return tensors (pf.to_tensor(...)) and build other objects outside the "
            f"jitted function")


def _check_side_effects(trace, inputs, labels):
    """Writes into tensors outside the program cannot be replayed by the compiled program:
    refuse them clearly. In-place updates of arguments (ops refuse them as they happen,
    through ``JitTracer._check_inplace``; this catches any other path that bumped their
    version) and of captured tensors (done eagerly while tracing, after the program had read
    them), and gradients accumulated into ``.grad`` (``loss.backward()`` inside the jitted
    function)."""
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

