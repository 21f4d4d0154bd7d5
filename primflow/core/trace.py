"""Transform traces: the hook that lets one rule set serve eager mode and every transform.

A transform (forward mode, vmap, jit) pushes a ``Trace`` on ``state.trace_stack`` and wraps
its inputs in that trace's ``Tracer`` subclass. ``Primitive.bind`` hands any call that has a
tracer among its inputs to the innermost such trace (highest level), which computes with
the tracer's payload by binding primitives again: one level further down, until plain
tensors run eagerly. Nesting transforms nests traces; nothing else is needed.
"""

from __future__ import annotations

import abc
import contextlib

from .state import pop_trace, push_trace, state
from .tensor import Tensor, _Deferred


class TracerConversionError(TypeError):
    """A concrete value was asked of a traced value: Python control flow (``if``,
    ``while``, ``bool()``, ``float()``, ``.item()``, ``.numpy()``) on a tensor that a
    transform traces. Inside ``pf.jit`` (without ``full_graph=True``) it makes the function's
    control flow convert to ``pf.cond``/``pf.while_loop``, or the graph break, instead.

    Example:
        >>> import primflow as pf
        >>> @pf.jit(full_graph=True)
        ... def f(x):
        ...     return x * 2 if float(x.sum()) > 0 else x
        >>> try:
        ...     f(pf.ones([2]))
        ... except pf.TracerConversionError as e:
        ...     print(type(e).__name__)
        TracerConversionError
    """


class EscapedTracerError(RuntimeError, AttributeError):
    """A traced value was used after the transform that made it ended: the function
    stored it outside (a global, a list, a closure, an object's attribute). Also an
    AttributeError: ``hasattr(tracer, "_value")`` stays False.

    Example:
        >>> import primflow as pf
        >>> kept = []
        >>> _ = pf.vmap(lambda x: kept.append(x) or x)(pf.ones([2, 3]))
        >>> try:
        ...     kept[0] + 1.0
        ... except pf.EscapedTracerError as e:
        ...     print(type(e).__name__)
        EscapedTracerError
    """


class NoConcreteValueError(TracerConversionError, AttributeError):
    """The ``_value`` of a tracer of an active transform: it has no array. An
    AttributeError too, so ``hasattr(tracer, "_value")`` is False."""


def is_active(trace) -> bool:
    """Whether ``trace`` is on this thread's trace stack (a level-0 trace lives outside
    the stack, for the whole program, and counts as active)."""
    stack = state.trace_stack
    level = trace.level
    return not level or (level <= len(stack) and stack[level - 1] is trace)


def escaped_tracer_error(tracer) -> EscapedTracerError:
    """The error for ``tracer`` used after its transform ended."""
    return EscapedTracerError(
        f"a value traced by {tracer._trace.transform_name} ({tracer.aval}) was used after that "
        f"transform ended: the transformed function stored it outside itself (in a global, "
        f"a list, a closure or an object's attribute), and it escaped. A traced value exists "
        f"only while its transform runs: return it from the transformed function instead, "
        f"and use the result")


class Trace(abc.ABC):
    """One active transform. ``level`` orders nested transforms (innermost is highest)."""

    # whether this trace also records primitives that have none of its tracers among their
    # inputs: creation primitives (full, iota, random) and operations on tensors requiring
    # grad. True for staging traces (jit), which must see constants and parameters.
    stages_creation = False

    def __init__(self, level: int):
        self.level = level

    @property
    def transform_name(self) -> str:
        """How error messages name this transform (``"pf.vmap"``); subclasses set it."""
        return type(self).__name__

    @abc.abstractmethod
    def process_primitive(self, prim, args, params):
        """Applies ``prim`` to ``args`` (tracers of this trace or plain values)."""

    def read_constants(self, tensors):
        """Called with concrete tensors whose values were read while this trace was
        active (``state.note_constant_reads``); a staging trace that bakes them in keeps
        track. Nothing to do by default."""

    def __repr__(self):
        return f"{type(self).__name__}(level={self.level})"


class Tracer(Tensor):
    """A tensor-like value owned by a trace. Subclasses set ``_trace`` and ``aval``.

    Internal API for the layers above (like Tensor's, see core/tensor.py): ``_trace`` (the
    owning trace), ``aval``, ``_init_tracer`` and ``_check_inplace``.
    """

    __slots__ = ("_trace", "aval")

    def _init_tracer(self, trace, aval):
        """Sets the fields every tracer has: its trace and abstract value, and the tape
        fields a fresh value starts with (no graph, no gradient)."""
        self._trace = trace
        self.aval = aval
        self.stop_gradient = True
        self._node = None
        self.grad = None
        self._version = 0
        self.name = None

    @property
    def _shape(self):
        return self.aval.shape

    @property
    def _value(self):
        # the transform computes with the tracer's payload; a concrete array is asked for
        # only by Python control flow and conversions (bool, float, item, numpy), or by an
        # eager op when the tracer escaped its transform
        if not is_active(self._trace):
            raise escaped_tracer_error(self)
        name = self._trace.transform_name
        per_lane = " (under pf.vmap it has one value per lane)" if name == "pf.vmap" else ""
        raise NoConcreteValueError(
            f"Python control flow or a conversion (if, while, bool(), float(), .item(), "
            f".tolist()) needs the concrete value of a tensor traced by {name} ({self.aval}), "
            f"which it does not have{per_lane}. Compute with primflow ops instead: "
            f"pf.where(cond, a, b) to choose elementwise, pf.cond / pf.while_loop for control "
            f"flow, or run the function under pf.jit, which converts Python if/while on "
            f"tensors into them")

    @property
    def dtype(self):
        return self.aval.dtype

    def numpy(self):
        if not is_active(self._trace):
            raise escaped_tracer_error(self)
        raise TracerConversionError(
            f"cannot convert a traced value ({self.aval}) of {self._trace.transform_name} to "
            f"NumPy inside a transformed function; return it from the function instead")

    def _check_inplace(self, what: str):
        """Called before every in-place update of this tracer (``what``: ``"add_()"``,
        ``"x[...] = value"``, ``"set_value()"``...), which ops then performs functionally by
        rebinding the tracer to the new value. A transform whose tracers must not change
        raises here: ``pf.jit`` refuses updates of the function's arguments, since the
        compiled program cannot change the caller's tensors. Accepts by default."""

    def __repr__(self):
        return f"{type(self).__name__}({self.aval})"


# A tracer has no array to copy: its set_value rebinds it functionally, which is an op
# (implemented in primflow.ops.tensor_methods, looked up on first use like Tensor's methods)
for _name in ("set_value", "_set_value"):
    setattr(Tracer, _name, _Deferred(Tracer, _name, "primflow.ops.tensor_methods",
                                     "TRACER_METHODS"))
del _name


def _describe_tensor(t) -> str:
    """``tensor 'w' (float32[3])``: how error messages name a tensor."""
    name = f" {t.name!r}" if getattr(t, "name", None) else ""
    return f"tensor{name} ({t.dtype.name}{list(t._shape)})"


def outside_update_error(trace, target, what) -> TypeError:
    """The error for an in-place update (``what``) of ``target``, a tensor that ``trace``
    does not own, with a value that ``trace`` traces: ``target`` cannot hold that value
    (it would outlive the transform), so the update has to be written functionally."""
    if trace.stages_creation:  # e.g. jit: every tensor made inside is traced
        whose = "that it closes over (defined outside it)"
    else:  # vmap, jvp: tensors made from constants only (pf.zeros) are not traced either
        whose = ("that the transform does not trace (defined outside the function, or made "
                 "inside it from constants only, e.g. with pf.zeros)")
    return TypeError(
        f"{trace.transform_name}: the function modifies a {_describe_tensor(target)} {whose} in "
        f"place ({what}); a transformed function cannot write its values into tensors outside it. "
        f"Pass the tensor as an argument and return its new value, then assign it outside the "
        f"transformed function (w.set_value(new_w)), or build a new tensor instead of updating one "
        f"(w + x, pf.where(mask, value, w)): write the update functionally")


@contextlib.contextmanager
def new_trace(trace_cls, *args, **kwargs):
    """Pushes a new trace one level above the current innermost one; pops it on exit."""
    trace = trace_cls(len(state.trace_stack) + 1, *args, **kwargs)
    push_trace(trace)
    try:
        yield trace
    finally:
        pop_trace()


def staging_trace():
    """The innermost trace that stages operations (pf.jit's, a control-flow region's), or
    None when nothing is being staged.

    Example:
        >>> staging_trace() is None
        True
    """
    for t in reversed(state.trace_stack):
        if t.stages_creation:
            return t
    return None


# The attribute by which a function a transform returns (pf.grad(f), pf.vmap(f), ...) names
# the user functions it calls; see ``mark_transform``.
TRANSFORM_ATTR = "__pf_transform__"


def mark_transform(wrapper, inner, rebuild):
    """Records on ``wrapper`` (the function a transform returns) the user functions it
    calls, ``inner`` (a tuple), and ``rebuild(*new_inner)``, which makes the same transform
    of other functions. ``pf.jit``'s control-flow conversion (transforms/ast_convert.py)
    converts the inner functions and rebuilds the wrapper: the wrapper's own source is the
    transform's, so converting it would change nothing the user wrote. Returns ``wrapper``.

    Example:
        >>> def double(f):
        ...     def wrapper(x):
        ...         return 2 * f(x)
        ...     return mark_transform(wrapper, (f,), double)
        >>> getattr(double(abs), TRANSFORM_ATTR)[0]
        (<built-in function abs>,)
    """
    setattr(wrapper, TRANSFORM_ATTR, (tuple(inner), rebuild))
    return wrapper
