"""Primitives, their registry, and ``bind``: the single dispatch point of primflow.

A primitive is the only thing a backend runs and the only thing with derivative rules. Its
definition (in ``primflow/prims``) gives, in one place:

* ``infer(*avals, **params) -> Aval``: output shape and dtype without computing,
* ``jvp``: one rule per input, ``rule(x_dot, out, *primals, **params) -> out_dot``,
* ``vjp``: one rule per input, ``rule(out_bar, out, *primals, **params) -> x_bar``
  (or one callable returning all cotangents, for primitives with a variable input count),
* ``saves_out``: whether those rules read ``out`` (so the tape keeps the output's value),
* ``saves_inputs``: positions of the inputs whose *values* the vjp rules read (None: all).
  Only those are checked for in-place changes; linear ops read only shapes, so writing
  into their inputs afterwards (``y[i] = y[i - 1] * 2``) stays legal.
* ``linear`` (jointly linear in its floating inputs: every second derivative is zero) and
  ``linear_in`` (positions in which it is linear while the others stay fixed: ``mul`` and
  ``dot_general`` in both, ``div`` in the numerator), set next to the Taylor rules; the
  Hessian accumulation (transforms/second_order.py) skips what they say is zero.

All rules are written in primitives, so a rule can be differentiated like anything else:
derivatives of any order need nothing new. A rule entry of ``None`` means "no derivative
with respect to this input" (integer inputs such as gather indices, select's predicate);
``jvp=None`` / ``vjp=None`` for the whole primitive means it is not differentiable and asking
for a derivative through it raises ``NonDifferentiableError``.

``bind`` dispatches on what the inputs are: if a transform's tracer is among them, the
innermost such transform processes the primitive; otherwise the kernel runs eagerly and, if
recording is on and an input requires grad, a ``Node`` is added to the tape.
"""

from __future__ import annotations

from .backend import active as _active
from .state import departures, state
from .tensor import Tensor
from .trace import Tracer

_registry: dict = {}


class Aval:
    """Abstract value: shape (tuple) and dtype, what tracing knows about a tensor."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self):
        return f"{self.dtype.name}{list(self.shape)}"

    def __eq__(self, other):
        return (isinstance(other, Aval) and self.shape == other.shape
                and self.dtype is other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))


class NonDifferentiableError(RuntimeError):
    """A derivative was requested through a primitive that has none."""


class PrimitiveError(ValueError):
    """A primitive was given inputs its kernel cannot handle (wrong shapes, dtypes...)."""


class Primitive:
    """One primitive operator with all of its rules. See the module docstring.

    Example:
        >>> import primflow as pf
        >>> from primflow import prims
        >>> prims.sin(pf.to_tensor([0.0])).numpy()
        array([0.], dtype=float32)
    """

    def __init__(self, name, *, family, infer, jvp, vjp, saves_out=False, saves_inputs=None,
                 batch=None, taylor=None, doc=""):
        if name in _registry:
            raise ValueError(f"primitive {name!r} is defined twice")
        self.name = name
        self.family = family
        self.infer = infer
        self.jvp = jvp
        self.vjp = vjp
        self.saves_out = saves_out
        self.saves_inputs = None if saves_inputs is None else frozenset(saves_inputs)
        self.batch = batch  # vmap rule, filled in by the transforms issue
        self.taylor = taylor  # Taylor-mode rule, filled in by the Taylor issue
        self.linear = False  # see the module docstring; set next to the Taylor rules
        self.linear_in = frozenset()
        self.__doc__ = doc or f"The {name!r} primitive."
        backend = _active.backend
        try:
            self.impl = backend.kernels[name]
        except KeyError:
            raise ValueError(f"backend {backend.name!r} has no kernel for {name!r}") from None
        _registry[name] = self

    def __repr__(self):
        return f"Primitive({self.name})"

    def bind(self, *args, **params):
        """Applies the primitive to tensors (or tracers) with static ``params``."""
        if departures.count:  # a transform is active or recording is off somewhere
            if state.trace_stack:
                trace = _innermost_trace(args) or _staging_trace(args)
                if trace is not None:
                    return self._bind_traced(trace, args, params)
            recording = state.grad_enabled
        else:
            recording = True
        try:
            out_value = self.impl(*[a._value for a in args], **params)
        except Exception as e:  # a raw backend traceback helps nobody: say what was called
            raise PrimitiveError(
                f"primitive {self.name!r} failed on inputs "
                f"{', '.join(_describe(a) for a in args) or '()'} with params {params}: "
                f"{type(e).__name__}: {e}") from e
        if recording:
            for a in args:
                if not a.stop_gradient:
                    return _record(self, args, params, out_value)
        return Tensor._wrap(out_value)

    def _bind_traced(self, trace, args, params):
        out = trace.process_primitive(self, args, params)
        if state.grad_enabled and isinstance(out, Tracer) and out.dtype.is_floating:
            # the tape records at the level the user works at, so pf.grad works inside
            # transforms (pf.jvp of pf.grad is forward-over-reverse, vmap of pf.grad batches)
            for a in args:
                if not a.stop_gradient:
                    out._node = Node(self, params, args, out)
                    out.stop_gradient = False
                    break
        return out

    __call__ = bind

    def abstract_eval(self, *avals, **params) -> Aval:
        """Shape and dtype of the output for inputs with ``avals`` (no computation)."""
        return self.infer(*avals, **params)


def _describe(a):
    try:
        return f"{a.dtype.name}{a.shape}"
    except Exception:  # noqa: BLE001 - describing must never raise
        return type(a).__name__


class Node:
    """A recorded application of a primitive: the tape's unit (PyTorch's grad_fn).

    ``edges[i]`` says where the gradient for input i goes: a ``Node`` (the input was
    computed), a leaf ``Tensor`` (accumulate into it) or ``None`` (no gradient needed).
    ``inputs`` and ``out_value`` are what the rules read; backward frees them unless the
    graph is retained. ``versions`` detects inputs modified in place after recording.
    """

    __slots__ = ("prim", "params", "edges", "inputs", "versions", "out_value", "freed",
                 "__weakref__")

    def __init__(self, prim, params, inputs, out_value):
        self.prim = prim
        self.params = params
        self.inputs = inputs
        edges = []
        for a in inputs:
            edges.append(None if a.stop_gradient else (a._node or a))
        self.edges = edges
        self.versions = [a._version for a in inputs]
        self.out_value = out_value if prim.saves_out else None
        self.freed = False

    def __repr__(self):
        return f"<Node {self.prim.name}{' (freed)' if self.freed else ''}>"

    def free(self):
        self.inputs = None
        self.out_value = None
        self.freed = True


class CustomRule:
    """Stands in for a primitive in a ``Node`` whose backward is a Python function: custom
    vjp rules, recomputation (checkpoint) and fused composite kernels record these.

    ``vjp(g, out, *inputs)`` returns one cotangent per input (None where there is none).
    It runs like a primitive's rule: with recording on when the backward is recorded.
    """

    __slots__ = ("name", "vjp", "saves_out", "saves_inputs")

    def __init__(self, name, vjp):
        self.name = name
        self.vjp = vjp
        self.saves_out = False
        self.saves_inputs = frozenset()  # the rule holds what it needs itself

    def __repr__(self):
        return f"CustomRule({self.name})"


def record_custom(out, inputs, name, vjp):
    """Makes ``out`` (a fresh tensor or tracer) the output of a recorded custom rule over
    ``inputs``, if recording is on and an input requires grad. Returns ``out``."""
    if not state.grad_enabled or not out.dtype.is_floating:
        return out
    if any(not a.stop_gradient for a in inputs):
        out._node = Node(CustomRule(name, vjp), {}, tuple(inputs), None)
        out.stop_gradient = False
    return out


def _record(prim, args, params, out_value):
    if _active.backend.is_floating(out_value):
        return Tensor._wrap(out_value, Node(prim, params, args, out_value))
    return Tensor._wrap(out_value)


def _staging_trace(args):
    """The innermost staging trace (jit's), for primitives with no tracer among their inputs
    that it must still record: creation primitives (full, iota, random draws) and
    operations on tensors that require grad (parameters a jitted function reads must be
    program inputs, so that later updates to them are seen)."""
    if args and all(a.stop_gradient for a in args):
        return None
    for t in reversed(state.trace_stack):
        if t.stages_creation:
            return t
    return None


def _innermost_trace(args):
    best = None
    for a in args:
        if isinstance(a, Tracer):
            t = a._trace
            if best is None or t.level > best.level:
                best = t
    return best


def primitives() -> list:
    """Names of all registered primitives, sorted.

    Example:
        >>> import primflow as pf
        >>> "dot_general" in pf.primitives()
        True
    """
    return sorted(_registry)


def get_primitive(name: str) -> Primitive:
    """The registered primitive called ``name``."""
    try:
        return _registry[name]
    except KeyError:
        raise KeyError(f"no primitive named {name!r}; see primflow.primitives()") from None
