"""Primitives, their registry, and ``bind``: the single dispatch point of primflow.

A primitive is the only thing a backend runs and the only thing with derivative rules.

How to declare a primitive
--------------------------
A primitive is ONE call to ``Primitive(...)`` in its family file under ``primflow/prims``,
with every rule passed to the constructor as a named module-level function
(``_<prim>_<rule>``); nothing is attached to it afterwards. Its kernel comes from the
active backend's table, looked up by name (``backends/numpy_backend.py``; a new family file
puts its kernels in its own ``backends/numpy_<family>.py`` whose ``KERNELS`` dict the NumPy
backend merges), and the declaration fails if the backend has none. Example (an
``erfc``; ``ELEMENTWISE_TRANSCENDENTAL`` comes from ``prims/families.py``)::

    def _erfc_jvp(g, out, x):  # d erfc = -2/sqrt(pi) exp(-x^2)
        return mul(g, mul(full_like(x, -_TWO_OVER_SQRT_PI), exp(neg(mul(x, x)))))

    erfc = Primitive("erfc", family=ELEMENTWISE_TRANSCENDENTAL, infer=float_unary_infer,
                     jvp=(_erfc_jvp,), taylor=tl.unary_rule(_erfc_series),
                     doc="1 - erf(x)")

plus an OpInfo entry (``primflow/testing/opinfo.py``) that tests every rule against
finite differences. What the arguments say:

* ``family`` (a ``Family``, see ``prims/families.py``): the facts passes and code
  generators read (elementwise? transcendental? a view? a fusible reduction?) and the
  family's default batching rule. ``ir/passes/fuse.py`` derives its classes from it.
* ``infer(*avals, **params) -> Aval``: output shape and dtype without computing.
* ``jvp``: one rule per input, ``rule(t, out, *primals, **params) -> out_tangent`` (None for
  an input without a derivative: integer indices, a predicate), or one callable
  ``rule(tangents, out, *primals, **params)`` over all tangents (None entries: zero).
* ``vjp``: one rule per input, ``rule(g, out, *primals, **params) -> x_bar``, or one
  callable returning all cotangents (primitives with a variable input count).
* ``linear=True`` with ``transpose`` (same signature as vjp rules, reading only shapes and
  the inputs whose transpose entry is None): the primitive is jointly linear in its other
  inputs, so every second derivative is zero.
* ``linear_in``: positions in which it is linear while the others stay fixed (``mul`` and
  ``dot_general`` in both, ``div`` in the numerator); the Hessian accumulation
  (transforms/second_order.py) skips what ``linear``/``linear_in`` say is zero.
* ``batch``: the vmap rule ``rule(vals, bdims, **params) -> (out, out_bdim)``;
  ``taylor``: ``rule(primals, series, out=None, **params) -> (out, out_series)``
  (prims/_taylor.py). A ``RuleTemplate`` (generic rules such as elementwise batching or a
  unary Taylor recurrence) is specialised to the primitive when it is declared.
* ``saves_out``: whether the rules read ``out`` (the tape keeps the output's value);
  ``saves_inputs``: positions of the inputs whose *values* the vjp rules read (None: all);
  only those are checked for in-place changes.
* ``differentiable=False``: a step function or a bool/integer result; asking for a
  derivative through it raises ``NonDifferentiableError``.
* ``shard`` (a sharding rule) and ``regions`` (control-flow bodies): stored for the
  transforms that read them.

What is derived (as JAX's ``ad.py`` does), so each fact is written once:

* elementwise primitive: its Jacobian is diagonal, so the jvp rules ARE the vjp rules
  (declare ``jvp``, or ``transpose`` when linear; the other follows);
* linear primitive: the vjp is its ``transpose`` and the jvp applies the primitive to the
  tangents (missing ones as zeros), its Taylor rule applies it to each coefficient,
  ``saves_inputs`` is the inputs the transpose reads (its None entries);
* batch: the family's default (elementwise, reductions); taylor: linear (above),
  non-differentiable (no series for bool/integer results, an error otherwise), nullary
  (creation: a constant).

All rules are written in primitives, so a rule can be differentiated like anything else:
derivatives of any order need nothing new.

``bind`` dispatches on what the inputs are: if a transform's tracer is among them, the
innermost such transform processes the primitive; otherwise the kernel runs eagerly and, if
recording is on and an input requires grad, a ``Node`` is added to the tape.
"""

from __future__ import annotations

from .backend import on_install
from .state import departures, state
from .tensor import Tensor
from .trace import Tracer

_backend = None  # the installed backend (set through core/backend.py's on_install)
_registry: dict = {}


def _use_backend(backend):
    global _backend
    _backend = backend


on_install(_use_backend)


class Family:
    """A kind of primitive, with the facts the compiler and the backends read.

    Attributes:
        name: short name (``"elementwise"``, ``"reduce"``, ...).
        elementwise: same-shaped inputs and output, element i of the output depends only on
            element i of the inputs (fusible; its Jacobian is diagonal).
        transcendental: elementwise and computed by a libm call (exp, tanh, ...): numba
            without SVML computes these slower than NumPy's vectorised ufuncs.
        reduction: reduces ``axes`` of one input (fusible with its producers).
        view: the output is a view of the input's elements in the generated code.
        nullary: no tensor inputs (creation, random draws): no derivative rules.
        batch: the default batching rule of the family (a ``RuleTemplate``) or None.

    Example:
        >>> fam = Family("elementwise", elementwise=True)
        >>> fam.elementwise, fam.view
        (True, False)
    """

    __slots__ = ("name", "elementwise", "transcendental", "reduction", "view", "nullary",
                 "batch")

    def __init__(self, name, *, elementwise=False, transcendental=False, reduction=False,
                 view=False, nullary=False, batch=None):
        self.name = name
        self.elementwise = elementwise or transcendental
        self.transcendental = transcendental
        self.reduction = reduction
        self.view = view
        self.nullary = nullary
        self.batch = batch

    def __repr__(self):
        return f"Family({self.name})"


class RuleTemplate:
    """A generic rule specialised to a primitive when it is declared: ``make(prim)``
    returns the rule. Generic rules (elementwise batching, a unary Taylor recurrence) call
    their own primitive, which does not exist until its declaration runs.

    Example:
        >>> template = RuleTemplate(lambda prim: (lambda vals, bdims: (prim.bind(*vals), 0)))
        >>> callable(template.make)
        True
    """

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


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
    """A derivative was requested through a primitive that has none.

    Example:
        >>> import primflow as pf
        >>> try:
        ...     pf.grad(lambda x: pf.floor(x))(1.5)
        ... except pf.NonDifferentiableError as e:
        ...     print(type(e).__name__)
        NonDifferentiableError
    """


class PrimitiveError(ValueError):
    """A primitive was given inputs its kernel cannot handle (wrong shapes, dtypes...).

    Example:
        >>> import primflow as pf
        >>> try:
        ...     pf.prims.add(pf.ones([2]), pf.ones([3]))
        ... except pf.PrimitiveError as e:
        ...     print(type(e).__name__)
        PrimitiveError
    """


class Primitive:
    """One primitive operator with all of its rules. See the module docstring.

    Example:
        >>> import primflow as pf
        >>> from primflow import prims
        >>> prims.sin(pf.to_tensor([0.0])).numpy()
        array([0.], dtype=float32)
    """

    def __init__(self, name, *, family, infer, jvp=None, vjp=None, transpose=None,
                 linear=False, linear_in=(), batch=None, taylor=None, saves_out=False,
                 saves_inputs=None, differentiable=True, shard=None, regions=None, doc=""):
        if name in _registry:
            raise ValueError(f"primitive {name!r} is defined twice")
        if not isinstance(family, Family):
            raise TypeError(f"primitive {name!r}: family must be a Family (prims/families.py), "
                            f"got {family!r}")
        if linear and transpose is None:
            raise ValueError(f"primitive {name!r} is declared linear: give its transpose=")
        try:
            self.impl = _backend.kernels[name]
        except KeyError:
            raise ValueError(f"backend {_backend.name!r} has no kernel for primitive {name!r}; "
                             f"add one to its kernel table (backends/numpy_backend.py)") from None
        self.name = name
        self.family = family
        self.infer = infer
        self.linear = linear
        self.linear_in = frozenset(linear_in)
        self.transpose = transpose
        self.saves_out = saves_out
        self.differentiable = differentiable and not family.nullary
        self.shard = shard
        self.regions = regions
        self.__doc__ = doc or f"The {name!r} primitive."
        if family.nullary:  # nothing to differentiate
            jvp = vjp = ()
        elif not differentiable:
            if jvp is not None or vjp is not None or transpose is not None:
                raise ValueError(f"primitive {name!r} is declared not differentiable but "
                                 f"has derivative rules")
        else:
            jvp, vjp = self._derive_jvp(jvp, vjp, transpose), self._derive_vjp(jvp, vjp,
                                                                              transpose)
            if jvp is None and vjp is None:
                raise ValueError(
                    f"primitive {name!r} has no derivative rule: give jvp= (and vjp= "
                    f"where it cannot be derived), or linear=True with transpose=, or "
                    f"differentiable=False")
        self.jvp = jvp
        self.vjp = vjp
        if saves_inputs is None and transpose is not None and vjp is transpose:
            saves_inputs = (() if callable(transpose) else
                            tuple(i for i, r in enumerate(transpose) if r is None))
        self.saves_inputs = None if saves_inputs is None else frozenset(saves_inputs)
        self.batch = self._made(batch if batch is not None else family.batch)
        if taylor is None:
            taylor = self._derive_taylor(differentiable)
        self.taylor = self._made(taylor)
        _registry[name] = self

    def _made(self, rule):
        return rule.make(self) if isinstance(rule, RuleTemplate) else rule

    def _derive_jvp(self, jvp, vjp, transpose):
        if jvp is not None:
            return jvp
        if transpose is not None:
            linear_inputs = (None if callable(transpose) else
                             [i for i, r in enumerate(transpose) if r is not None])
            if linear_inputs is not None and len(linear_inputs) == 1:
                return _apply_to_tangent(self, linear_inputs[0], len(transpose))
            if self.family.elementwise and linear_inputs is not None:
                return transpose  # diagonal Jacobian per input: the transpose is the jvp
            return _apply_to_tangents(self, transpose)
        if self.family.elementwise and isinstance(vjp, tuple):
            return vjp  # diagonal Jacobian: the same rule both ways
        return None

    def _derive_vjp(self, jvp, vjp, transpose):
        if vjp is not None:
            return vjp
        if transpose is not None:
            return transpose
        if self.family.elementwise and isinstance(jvp, tuple):
            return jvp  # diagonal Jacobian: the same rule both ways
        return None

    def _derive_taylor(self, differentiable):
        if self.family.nullary:
            return _constant_taylor(self)
        if not differentiable:
            return _nondifferentiable_taylor(self)
        if self.linear:
            static = (() if callable(self.transpose) else
                      tuple(i for i, r in enumerate(self.transpose) if r is None))
            return _linear_taylor(self, static)
        return None

    def __repr__(self):
        return f"Primitive({self.name})"

    def bind(self, *args, **params):
        """Applies the primitive to tensors (or tracers) with static ``params``."""
        if departures.count:  # a transform is active or recording is off somewhere
            if state.trace_stack or departures.ambient:  # ambient: distributed tensors
                trace = _innermost_trace(args) or _staging_trace(args)
                # (with no trace pushed only an ambient one (level 0) may process a call:
                # a tracer escaped from a finished transform fails as before)
                if trace is not None and (state.trace_stack or not trace.level):
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


# ---- derived rules (see the module docstring) ---------------------------------------------

def _zeros_like(x):
    """Zeros shaped like ``x``, from the ``full`` primitive (traced like any other)."""
    return _registry["full"].bind(shape=tuple(x._shape), value=0, dtype=x.dtype)


def _apply_to_tangent(prim, i, arity):
    """jvp of a primitive linear in its input ``i`` alone (the others are static: indices,
    a predicate): the primitive applied to the tangent."""

    def rule(t, out, *primals, **params):
        args = list(primals)
        args[i] = t
        return prim.bind(*args, **params)

    return tuple(rule if j == i else None for j in range(arity))


def _apply_to_tangents(prim, transpose):
    """jvp of a jointly linear primitive: the primitive applied to all tangents at once
    (zeros for the missing ones; inputs with a None transpose entry stay primal)."""
    static = () if callable(transpose) else tuple(
        i for i, r in enumerate(transpose) if r is None)

    def rule(tangents, out, *primals, **params):
        args = [p if i in static else (t if t is not None else _zeros_like(p))
                for i, (p, t) in enumerate(zip(primals, tangents))]
        return prim.bind(*args, **params)

    return rule


def _linear_taylor(prim, static):
    """Taylor rule of a linear primitive: the primitive applied to each coefficient (the
    ``static`` inputs stay fixed)."""

    def rule(primals, series, out=None, **params):
        order = next(len(s) - 1 for s in series if s is not None)
        out = prim.bind(*primals, **params) if out is None else out
        out_series = [out]
        for k in range(1, order + 1):
            coeffs = [None if i in static or s is None else s[k] for i, s in enumerate(series)]
            if all(c is None for c in coeffs):
                out_series.append(None)
                continue
            args = [primals[i] if i in static else (c if c is not None else
                                                    _zeros_like(primals[i]))
                    for i, c in enumerate(coeffs)]
            out_series.append(prim.bind(*args, **params))
        return out, out_series

    return rule


def _constant_taylor(prim):
    """Taylor rule of a primitive without tensor inputs: a constant along any path."""

    def rule(primals, series, out=None, **params):
        return (prim.bind(**params) if out is None else out), None

    return rule


def _nondifferentiable_taylor(prim):
    """Taylor rule of a non-differentiable primitive: a bool or integer result carries no
    series; a floating one (a step function) has none to give."""

    def rule(primals, series, out=None, **params):
        out = prim.bind(*primals, **params) if out is None else out
        if not out.dtype.is_floating:
            return out, None
        raise NonDifferentiableError(
            f"primitive '{prim.name}' is not differentiable, so it has no Taylor series; "
            f"detach its input if constant coefficients are meant")

    return rule


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
    if _backend.is_floating(out_value):
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


def get_primitive(name: str, default=KeyError) -> Primitive:
    """The registered primitive called ``name`` (``default`` when there is none, if given).

    Example:
        >>> get_primitive("sin").family.transcendental, get_primitive("nope", None)
        (True, None)
    """
    try:
        return _registry[name]
    except KeyError:
        if default is not KeyError:
            return default
        raise KeyError(f"no primitive named {name!r}; see primflow.primitives()") from None
