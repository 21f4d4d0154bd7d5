"""Primitives, their registry, and ``bind``: the single dispatch point of primflow.

A primitive is the only thing a backend runs and the only thing with derivative rules.

How to declare a primitive
--------------------------
ONE ``Primitive(...)`` call in its family file under ``primflow/prims``, every rule passed
as a named module-level function (``_<prim>_<rule>``), nothing attached afterwards; plus
an OpInfo entry (``primflow/testing/opinfo/<family>.py``) that tests every rule. Its kernel is the
active backend's, by name, or its ``reference=``: a NumPy function that the NumPy backend
runs as the kernel and other backends without a kernel of their own run on the host
(``Backend.host_kernel``: copied to NumPy and back, with a one-time warning). Declaring a
primitive no kernel exists for fails. For example (``tl``: ``prims/_taylor.py``, ``sr``:
``prims/sharding.py``; all of it, with its OpInfo entry, is in
tests/test_primitive_declarations.py)::

    def _erfc_jvp(g, out, x):  # d erfc = -2/sqrt(pi) exp(-x^2)
        return mul(g, mul(full_like(x, -tl.TWO_OVER_SQRT_PI), exp(neg(mul(x, x)))))

    erfc = Primitive("erfc", family=ELEMENTWISE_TRANSCENDENTAL, reference="scipy.special:erfc",
                     lowering=Lowering(c="erfc({0})", real_only=True, float32_compute=True),
                     infer=float_unary_infer("erfc"), jvp=(_erfc_jvp,),
                     taylor=tl.unary_rule(_erfc_series), doc="complementary error function",
                     public=PublicOp("Complementary error function.", example, result))

(the real one is in ``prims/elementwise.py``). Name a kernel in an optional library as a
``"module:function"`` string, never by importing the library in ``prims/``: the backend
resolves it when it first needs it (``backends/references.py``: the library's function, a
per-element ``math`` fallback, or an error naming the extra), so ``import primflow`` works
without it. A reference kernel goes through the same wrappers as a native one (real-only,
bfloat16 in float32, the input's dtype restored).

* ``lowering`` (``core/lowering.py``): how the code generators and backends spell it (CUDA
  C, numba, the NumPy ufunc, the array-API name) and whether it is real-only or computes
  bfloat16 in float32; the code generators' and backends' tables are derived from it.
* ``public`` (``PublicOp``): the public op ``pf.<name>``, the Tensor method and its
  docstring example; without it the primitive is reached through ``prims`` and the ops
  written over it.
* ``family`` (``prims/families.py``): the facts the compiler reads (elementwise,
  transcendental, view, fusible reduction; ``ir/passes/fuse.py`` derives its classes from
  them) and the family's default batching rule.
* ``infer(*avals, **params) -> Aval``: output shape and dtype without computing.
* ``jvp``: one rule per input, ``rule(t, out, *primals, **params)`` (None: no derivative
  in that input, e.g. integer indices), or one ``rule(tangents, out, *primals, **params)``.
* ``vjp``: one rule per input, ``rule(g, out, *primals, **params) -> x_bar``, or one
  callable returning all cotangents (variable input counts).
* ``linear=True`` and ``transpose`` (vjp rules that read only shapes and the inputs whose
  entry is None): jointly linear, every second derivative zero. ``linear_in``: positions
  in which it is linear with the others fixed (mul, dot_general; div's numerator). The
  Hessian (transforms/second_order.py) skips what these say is zero.
* ``batch``: ``rule(vals, bdims, **params) -> (out, out_bdim)``; ``taylor``:
  ``rule(primals, series, out=None, **params) -> (out, out_series)``. A ``RuleTemplate``
  (a generic rule) is specialised to the primitive at its declaration.
* ``saves_out``: the rules read ``out``; ``saves_inputs``: the inputs whose values the vjp
  reads (None: all), the ones checked for in-place changes.
* ``differentiable=False``: steps and bool/integer results (derivatives raise
  ``NonDifferentiableError``). ``shard``: the sharding rule distributed tensors use
  (builders in ``prims/sharding.py``; the elementwise families derive it from ``linear``
  and ``linear_in``); ``regions``: control-flow bodies.
* ``reference``: a NumPy function (or ``"module:function"`` string) computing the primitive
  on arrays, its kernel where the backend has none of its own (see above); ``docs/backend-contract.md`` then does not
  list it among the kernels every backend must write.

Derived, as JAX's ``ad.py`` does, so each fact is written once: an elementwise
primitive's Jacobian is diagonal, so its jvp rules are its vjp rules (declare one); a
linear primitive's vjp is its transpose, its jvp and Taylor rule apply it to the tangents
or coefficients, ``saves_inputs`` are the inputs its transpose reads; batching defaults to
the family's; non-differentiable and nullary (creation) primitives get their Taylor rules.

Rules are written in primitives, so they differentiate like anything else: derivatives of
any order need nothing new. ``bind`` dispatches on the inputs: the innermost transform
whose tracer is among them processes the primitive; otherwise the kernel runs eagerly and,
if recording is on and an input requires grad, a ``Node`` is added to the tape.
"""

from __future__ import annotations

from .backend import on_install
from .lowering import NOWHERE, Lowering, PublicOp, real_only_infer
from .state import departures, note_constant_reads, state
from .tensor import Tensor, defer_method
from .trace import EscapedTracerError, Tracer, escaped_tracer_error, is_active, staging_trace

_backend = None  # the installed backend (set through core/backend.py's on_install)
_registry: dict = {}


def _use_backend(backend):
    global _backend
    _backend = backend


on_install(_use_backend)


class Family:
    """A kind of primitive and the facts the compiler and backends read: ``elementwise``
    (output element i depends on input elements i; diagonal Jacobian), ``transcendental``
    (elementwise by a libm call: numba without SVML is slower than NumPy there),
    ``reduction`` (fusible with its producers), ``view`` (a view in generated code),
    ``nullary`` (no tensor inputs), ``float32_compute`` (its kernels compute bfloat16 in
    float32: LAPACK and FFT have no narrower types) and ``batch``, the family's default
    batching rule; ``shard(linear, linear_in, n_inputs)``, the family's sharding rule for a
    primitive that declares none, from what its declaration says it is linear in.

    Example:
        >>> Family("elementwise", transcendental=True).elementwise
        True
    """

    __slots__ = ("name", "elementwise", "transcendental", "reduction", "view", "nullary",
                 "float32_compute", "batch", "shard")

    def __init__(self, name, *, elementwise=False, transcendental=False, reduction=False,
                 view=False, nullary=False, float32_compute=False, batch=None, shard=None):
        self.name, self.batch, self.float32_compute = name, batch, float32_compute
        self.shard = shard
        self.elementwise, self.transcendental = elementwise or transcendental, transcendental
        self.reduction, self.view, self.nullary = reduction, view, nullary

    def __repr__(self):
        return f"Family({self.name})"


class RuleTemplate:
    """A generic rule (elementwise batching, a unary Taylor recurrence) that calls its own
    primitive: the declaration passes the primitive to ``make(prim)``, which returns the rule.

    Example:
        >>> callable(RuleTemplate(lambda prim: prim.bind).make)
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
        return isinstance(other, Aval) and self.shape == other.shape and self.dtype is other.dtype

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

    multiple_results = False  # one output (RegionPrimitive: a list, core/region_primitive.py)

    def __init__(self, name, *, family, infer, jvp=None, vjp=None, transpose=None,
                 linear=False, linear_in=(), batch=None, taylor=None, saves_out=False,
                 saves_inputs=None, differentiable=True, shard=None, regions=None,
                 reference=None, lowering=None, public=None, doc=""):
        if name in _registry:
            raise ValueError(f"primitive {name!r} is defined twice")
        if not isinstance(family, Family):
            raise TypeError(f"primitive {name!r}: family must be a Family (prims/families.py), "
                            f"got {family!r}")
        if linear and transpose is None:
            raise ValueError(f"primitive {name!r} is declared linear: give its transpose=")
        if lowering is not None and not isinstance(lowering, Lowering):
            raise TypeError(f"primitive {name!r}: lowering must be a Lowering "
                            f"(core/lowering.py), got {lowering!r}")
        self.lowering = lowering = lowering or NOWHERE
        if lowering.real_only:  # traced code refuses complex inputs as the kernel does
            infer = real_only_infer(name, infer)
        try:  # the backend's own, derived, default or reference kernel (backends/base.py)
            self.impl = _backend.kernel_for(name, family, reference, lowering)
        except KeyError:
            raise ValueError(f"backend {_backend.name!r} has no kernel for primitive {name!r}; "
                             f"give its declaration reference= (a NumPy function) or add "
                             f"one to the backend's kernel table") from None
        self.reference = reference
        self.name, self.family, self.infer, self.transpose = name, family, infer, transpose
        self.linear, self.linear_in, self.saves_out = linear, frozenset(linear_in), saves_out
        self.differentiable = differentiable and not family.nullary
        self.regions = regions
        # an elementwise primitive linear in its inputs shards like its inputs (sharding.py)
        if shard is None and family.shard is not None:
            shard = family.shard(linear, frozenset(linear_in),
                                 len(transpose) if isinstance(transpose, tuple) else None)
        self.shard = shard
        self.public = public
        if public is not None:
            if not isinstance(public, PublicOp):
                raise TypeError(f"primitive {name!r}: public must be a PublicOp "
                                f"(core/lowering.py), got {public!r}")
            defer_method(public.name or name, "primflow.ops.tensor_methods")
        self.__doc__ = doc or f"The {name!r} primitive."
        # the inputs a linear primitive is not linear in (indices, a predicate): None entries
        static = () if transpose is None or callable(transpose) else tuple(
            i for i, r in enumerate(transpose) if r is None)
        if family.nullary:  # nothing to differentiate
            jvp = vjp = ()
        elif not differentiable:
            if (jvp, vjp, transpose) != (None, None, None):
                raise ValueError(f"primitive {name!r} is declared not differentiable but "
                                 f"has derivative rules")
        else:
            # elementwise: a diagonal Jacobian, the same rules both ways (conjugated for
            # complex values)
            jvp, vjp = self._derive_jvp(jvp, vjp, transpose, static), vjp or transpose or (
                tuple(None if r is None else _conjugated_for_complex(r) for r in jvp)
                if family.elementwise and isinstance(jvp, tuple) else None)
            if jvp is None and vjp is None:
                raise ValueError(
                    f"primitive {name!r} has no derivative rule: give jvp= (and vjp= where it "
                    f"cannot be derived), or linear=True with transpose=, or differentiable=False")
        self.jvp, self.vjp = jvp, vjp
        if saves_inputs is None and transpose is not None and vjp is transpose:
            saves_inputs = static
        self.saves_inputs = None if saves_inputs is None else frozenset(saves_inputs)
        self.batch = self._made(batch if batch is not None else family.batch)
        if taylor is None and family.nullary:
            taylor = _constant_taylor(self)
        elif taylor is None and not differentiable:
            taylor = _nondifferentiable_taylor(self)
        elif taylor is None and linear:
            taylor = _linear_taylor(self, static)
        self.taylor = self._made(taylor)
        _registry[name] = self

    def _made(self, rule):
        return rule.make(self) if isinstance(rule, RuleTemplate) else rule

    def _derive_jvp(self, jvp, vjp, transpose, static):
        if jvp is not None:
            return jvp
        if isinstance(transpose, tuple) and len(transpose) - len(static) == 1:
            # linear in one input: the primitive applied to its tangent
            (i,) = (j for j in range(len(transpose)) if j not in static)
            return tuple(_apply_to_tangent(self, i) if j == i else None
                         for j in range(len(transpose)))
        if self.family.elementwise and isinstance(transpose or vjp, tuple):
            return transpose or vjp  # diagonal Jacobian: the same rules both ways
        if transpose is not None:  # jointly linear: applied to all tangents
            return _apply_to_tangents(self, static)
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
                    if not is_active(trace):  # a tracer kept from a transform that ended
                        raise escaped_tracer_error(next(
                            a for a in args if isinstance(a, Tracer) and a._trace is trace))
                    return self._bind_traced(trace, args, params)
            recording = state.grad_enabled
        else:
            recording = True
        try:  # (an empty **params costs ~0.1 us a call: a tenth of a small op's overhead)
            values = [a._value for a in args]
            out_value = self.impl(*values, **params) if params else self.impl(*values)
        except EscapedTracerError:  # a tracer kept from a finished transform: it says so
            raise
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

def _conjugated_for_complex(rule):
    """The vjp of a holomorphic elementwise primitive from its jvp rule ``g * f'(x)``: the
    same for real values, ``conj(rule(conj(g))) = g * conj(f'(x))`` for complex ones (the
    adjoint under the real inner product ``Re <u, v>``, PyTorch's gradient convention; see
    ``prims/complex.py``)."""

    def vjp(g, out, *primals, **params):
        if g.dtype.is_complex:
            conj = _registry["conj"]
            return conj.bind(rule(conj.bind(g), out, *primals, **params))
        return rule(g, out, *primals, **params)

    vjp.__name__ = getattr(rule, "__name__", "vjp")
    vjp.__wrapped__ = rule
    return vjp


def _zeros_like(x):
    """Zeros shaped like ``x``, from the ``full`` primitive (traced like any other)."""
    return _registry["full"].bind(shape=tuple(x._shape), value=0, dtype=x.dtype)


def _apply_to_tangent(prim, i):
    """jvp of a primitive linear in input ``i`` alone: the primitive on the tangent."""

    def rule(t, out, *primals, **params):
        args = list(primals)
        args[i] = t
        return prim.bind(*args, **params)

    return rule


def _apply_to_tangents(prim, static):
    """jvp of a jointly linear primitive: the primitive applied to all tangents at once
    (zeros for missing ones; the ``static`` inputs stay primal)."""

    def rule(tangents, out, *primals, **params):
        args = [p if i in static else (t if t is not None else _zeros_like(p))
                for i, (p, t) in enumerate(zip(primals, tangents))]
        return prim.bind(*args, **params)

    return rule


def _linear_taylor(prim, static):
    """Taylor rule of a linear primitive: itself on each coefficient (``static`` inputs fixed)."""

    def rule(primals, series, out=None, **params):
        order = next(len(s) - 1 for s in series if s is not None)
        out = prim.bind(*primals, **params) if out is None else out
        out_series = [out]
        for k in range(1, order + 1):
            coeffs = [None if i in static or s is None else s[k] for i, s in enumerate(series)]
            if all(c is None for c in coeffs):
                out_series.append(None)
                continue
            args = [p if i in static else (c if c is not None else _zeros_like(p))
                    for i, (p, c) in enumerate(zip(primals, coeffs))]
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
        note_constant_reads(args)  # computed now: a staging trace bakes in the result
        return None
    return staging_trace()


def _innermost_trace(args):
    best = None
    for a in args:
        if isinstance(a, Tracer):
            t = a._trace
            if best is None or t.level > best.level:
                best = t
    return best


def bind_kernels(backend) -> None:
    """Runs every registered primitive on ``backend``'s kernels (``backends.install`` calls
    this). Raises ``ValueError`` naming the primitives it has no kernel for, changing nothing.

    Example:
        >>> from primflow.backends import get_backend
        >>> bind_kernels(get_backend())  # the active backend has them all
    """
    global _backend
    missing = []
    for name in sorted(_registry):
        try:  # its own, derived, default or reference kernel (backends/base.py)
            prim = _registry[name]
            backend.kernel_for(name, prim.family, prim.reference, prim.lowering)
        except KeyError:
            missing.append(name)
    if missing:
        raise ValueError(f"backend {backend.name!r} has no kernel for the primitive(s) "
                         f"{', '.join(repr(n) for n in missing)}; add them to its kernel "
                         f"table (see backends/numpy_backend.py)")
    for name, prim in _registry.items():
        prim.impl = backend.kernels[name]
    _backend = backend


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
