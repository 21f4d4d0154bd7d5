"""Custom derivative rules and recomputation: ``custom_vjp``, ``custom_jvp``, Paddle's
``PyLayer``, and ``checkpoint`` (alias ``recompute``).

All of them record one ``CustomRule`` node on the tape per output (core/primitive.py):
its backward is a Python function. Rules written in primflow ops are themselves recorded
when the backward is (``create_graph=True``), so custom rules can be differentiated again.
A function with several outputs gets one node per output; the backward of output k runs
the rule with zero cotangents for the others, which is exact because a vjp is linear in
its cotangent.
"""

from __future__ import annotations

import functools

from ..core.primitive import CustomRule, Node, record_custom
from ..core.pytree import replace_at, tree_flatten, tree_unflatten
from ..core.state import enable_grad, no_grad, state
from ..core.tensor import Tensor
from ..core.trace import Tracer, mark_transform
from ..ops.helpers import alias, as_tensor, cast
from ..ops.creation import full, zeros_like
from .forward import JVPTrace, JVPTracer, split_tangents
from .functional import external_leaves, grad_handle
from .tape import _run_backward, detached


def _tensor_outputs(out, rule_name):
    leaves, tree = tree_flatten(out)
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, Tensor):
            raise TypeError(f"{rule_name}: output {i} is a {type(leaf).__name__}, not a tensor; "
                            f"custom rules need functions whose outputs are tensors")
    return leaves, tree


def _needs_tape(tensors):
    return state.grad_enabled and any(not t.stop_gradient for t in tensors)


def _check_cotangents(rule_name, got, expected_tensors, what, kind="cotangent", of="input"):
    """``got`` (a flat list) must match ``expected_tensors`` in count, shapes and (for
    floating tensors) dtypes: a float64 cotangent must not become the gradient of a float32
    input (eagerly the leaf casts it back, but under pf.jit or pf.vmap it leaked)."""
    if len(got) != len(expected_tensors):
        raise ValueError(f"{rule_name}: {what} returned {len(got)} cotangents but the function "
                         f"has {len(expected_tensors)} differentiable inputs; return one per "
                         f"input (None for none)")
    out = []
    for i, (g, x) in enumerate(zip(got, expected_tensors)):
        if g is None:
            out.append(None)
            continue
        g = as_tensor(g)
        if tuple(g._shape) != tuple(x._shape):
            raise ValueError(f"{rule_name}: {what} returned a {kind} of shape {g.shape} for "
                             f"{of} {i} of shape {x.shape}")
        if x.dtype.is_floating and g.dtype is not x.dtype:
            raise TypeError(f"{rule_name}: {what} returned a {kind} of dtype {g.dtype.name} "
                            f"for {of} {i}, which is {x.dtype.name}{x.shape}; a {kind} must "
                            f"have its primal's dtype: return g.astype('{x.dtype.name}')")
        out.append(g)
    return out


def _attach(outputs, inputs, name, pullback):
    """Records one custom node per output; ``pullback(cotangents) -> list per input``."""
    result = []
    # the rules hold the outputs' shapes, not the outputs (no output -> rule -> output cycle)
    avals = [(tuple(o._shape), o.dtype) for o in outputs]
    for k, o in enumerate(outputs):
        o = detached(o)

        def vjp(g, _out, *_inputs, k=k):
            cts = [full(shape, 0, dtype=dtype) for shape, dtype in avals]
            cts[k] = g
            return tuple(pullback(cts))

        result.append(record_custom(o, inputs, name, vjp))
    return result


def recomputing_pullback(name, run, inputs, extra=()):
    """The backward of a recomputed function (``pf.checkpoint``, a jitted program):
    ``pullback(cotangents) -> list`` re-runs ``run(handles) -> list of outputs`` on fresh
    grad handles of ``inputs`` with the tape on and backpropagates the cotangents (None for
    none) to those handles and to ``extra`` (tensors ``run`` reads without taking them as
    arguments, e.g. closed-over parameters). Recorded when the backward itself is, so every
    order of derivative is available. Refuses tensors changed in place since the forward."""
    watched = list(inputs) + list(extra)
    versions = [t._version for t in watched]

    def pullback(cotangents):
        for t, v in zip(watched, versions):
            if t._version != v:
                raise RuntimeError(f"{name}: a tensor of shape {t.shape} that the function reads "
                                   f"was modified in place between the forward call and backward")
        create_graph = state.grad_enabled
        with enable_grad():
            handles = [grad_handle(x) for x in inputs]
            recomputed = run(handles)
        seeds = [(o, g) for o, g in zip(recomputed, cotangents)
                 if g is not None and not o.stop_gradient]
        return _run_backward(seeds, handles + list(extra), create_graph=create_graph,
                             retain_graph=create_graph)

    return pullback


# ---- custom_vjp ----------------------------------------------------------------------------

class custom_vjp:
    """A function with a hand-written reverse-mode rule (JAX's interface).

    ``f = pf.custom_vjp(f); f.defvjp(fwd, bwd)`` where ``fwd(*args) -> (out, residuals)`` and
    ``bwd(*nondiff_args, residuals, cotangent) -> tuple`` with one cotangent per
    differentiable argument. The rule replaces differentiation of ``f`` on the tape and in
    every reverse-mode transform; written in primflow ops it can be differentiated again.

    Example:
        >>> import primflow as pf
        >>> @pf.custom_vjp
        ... def clip_grad_identity(x):
        ...     return x
        >>> clip_grad_identity.defvjp(lambda x: (x, None),
        ...                           lambda res, g: (pf.clip(g, -1.0, 1.0),))
        <...>
        >>> float(pf.grad(lambda x: 5.0 * clip_grad_identity(x))(2.0))
        1.0
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = self.bwd = None
        self._in_rule = False  # fwd may call the function itself: then run it plainly

    def defvjp(self, fwd, bwd):
        """Sets the forward (returning residuals) and backward rules; returns self."""
        self.fwd, self.bwd = fwd, bwd
        return self

    @property
    def __pf_transform__(self):  # core.trace.TRANSFORM_ATTR: pf.jit converts f and the rules
        def rebuild(fun, fwd, bwd):
            return custom_vjp(fun, self.nondiff_argnums).defvjp(fwd, bwd)

        return (self.fun, self.fwd, self.bwd), rebuild

    def __call__(self, *args):
        if self.fwd is None:
            raise TypeError(f"custom_vjp function {self.__name__!r} has no rule yet: call "
                            f".defvjp(fwd, bwd) first")
        name = f"custom_vjp({self.__name__})"
        static = [args[i] for i in self.nondiff_argnums]
        dynamic = [a for i, a in enumerate(args) if i not in self.nondiff_argnums]
        leaves, in_tree = tree_flatten(dynamic)
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        if self._in_rule or not _needs_tape(tensors):
            return self.fun(*args)
        self._in_rule = True
        try:
            out, residuals = self.fwd(*args)
        finally:
            self._in_rule = False
        out_leaves, out_tree = _tensor_outputs(out, name)

        def pullback(cotangents):
            ct = tree_unflatten(out_tree, cotangents)
            got = self.bwd(*static, residuals, ct)
            if not isinstance(got, (tuple, list)):
                raise TypeError(f"{name}: bwd must return a tuple with one cotangent per "
                                f"differentiable argument, got {type(got).__name__}")
            got_leaves, got_tree = tree_flatten(list(got), is_leaf=lambda v: v is None)
            expected_tree = tree_flatten(dynamic, is_leaf=lambda v: v is None)[1]
            if got_tree != expected_tree:
                raise ValueError(f"{name}: bwd returned the structure {got_tree!r}; expected "
                                 f"{expected_tree!r} (one entry per differentiable argument)")
            picked = [g for g, x in zip(got_leaves, leaves) if isinstance(x, Tensor)]
            return _check_cotangents(name, picked, tensors, "bwd")

        return tree_unflatten(out_tree, _attach(out_leaves, tensors, name, pullback))


# ---- custom_jvp ----------------------------------------------------------------------------

class custom_jvp:
    """A function with a hand-written forward-mode rule (JAX's interface).

    ``f = pf.custom_jvp(f); f.defjvp(rule)`` with
    ``rule(*nondiff_args, primals, tangents) -> (out, tangent_out)``. Forward mode uses the
    rule directly; reverse mode transposes it (the tangent output is linear in the tangents,
    so its gradient with respect to them is the vjp), so both modes honour it.

    Example:
        >>> import primflow as pf
        >>> @pf.custom_jvp
        ... def softplus(x):  # log(1 + e^x), written so that e^x never overflows
        ...     return pf.maximum(x, 0.0) + pf.log1p(pf.exp(-pf.abs(x)))
        >>> @softplus.defjvp
        ... def _(primals, tangents):  # one sigmoid instead of the chain through max and abs
        ...     (x,), (t,) = primals, tangents
        ...     return softplus(x), t * pf.sigmoid(x)
        >>> round(float(pf.grad(softplus)(100.0)), 6), round(float(pf.grad(softplus)(0.0)), 6)
        (1.0, 0.5)
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp_rule = None
        self._in_rule = False  # the rule may call the function itself: then run it plainly

    def defjvp(self, rule):
        """Sets the jvp rule; returns it (so it works as a decorator)."""
        self.jvp_rule = rule
        return rule

    @property
    def __pf_transform__(self):  # core.trace.TRANSFORM_ATTR: pf.jit converts f and the rule
        def rebuild(fun, rule):
            new = custom_jvp(fun, self.nondiff_argnums)
            new.defjvp(rule)
            return new

        return (self.fun, self.jvp_rule), rebuild

    def __call__(self, *args):
        if self.jvp_rule is None:
            raise TypeError(f"custom_jvp function {self.__name__!r} has no rule yet: call "
                            f".defjvp(rule) first")
        name = f"custom_jvp({self.__name__})"
        if self._in_rule:
            return self.fun(*args)
        static = [args[i] for i in self.nondiff_argnums]
        primals = [a for i, a in enumerate(args) if i not in self.nondiff_argnums]
        trace = _innermost_jvp_trace(primals)
        if trace is not None:
            return self._forward_mode(trace, static, primals, name)
        tensors = [p for p in primals if isinstance(p, Tensor)]
        if not _needs_tape(tensors):
            return self.fun(*args)
        return self._reverse_mode(static, primals, tensors, name)

    def _call_rule(self, *args):
        self._in_rule = True
        try:
            return self.jvp_rule(*args)
        finally:
            self._in_rule = False

    def _forward_mode(self, trace, static, primals, name):
        inner, tangents = split_tangents(trace, primals, fill=True)
        out, tangent_out = self._call_rule(*static, tuple(inner), tuple(tangents))
        outs, out_tree = _tensor_outputs(out, name)
        touts = _rule_tangents(name, tangent_out, outs)
        wrapped = [JVPTracer(trace, o, t) for o, t in zip(outs, touts)]
        return tree_unflatten(out_tree, wrapped)

    def _reverse_mode(self, static, primals, tensors, name):
        # tangent_out is linear in the tangents: its gradient with respect to them is J^T g
        with enable_grad():
            t_leaves = []
            for p in primals:
                t = zeros_like(as_tensor(p))
                t.stop_gradient = False
                t_leaves.append(t)
            out, tangent_out = self._call_rule(*static, tuple(primals), tuple(t_leaves))
        outs, out_tree = _tensor_outputs(out, name)
        touts = _rule_tangents(name, tangent_out, outs)
        picked = [t for t, p in zip(t_leaves, primals) if isinstance(p, Tensor)]

        def pullback(cotangents):
            seeds = [(t, g) for t, g in zip(touts, cotangents)
                     if t is not None and not t.stop_gradient]
            return _run_backward(seeds, picked, create_graph=state.grad_enabled, retain_graph=True)

        return tree_unflatten(out_tree, _attach(outs, tensors, name, pullback))


def _rule_tangents(name, tangent_out, outs):
    """A custom jvp rule's tangents, one per output, checked against the outputs."""
    touts = tree_flatten(tangent_out)[0]
    if len(touts) != len(outs):
        raise ValueError(f"{name}: the rule returned {len(touts)} tangents for {len(outs)} outputs")
    return _check_cotangents(name, touts, outs, "the jvp rule", "tangent", "output")


def _innermost_jvp_trace(values):
    best = None
    for v in tree_flatten(values)[0]:
        if isinstance(v, Tracer) and (best is None or v._trace.level > best.level):
            best = v._trace
    return best if isinstance(best, JVPTrace) else None


# ---- PyLayer (Paddle) ----------------------------------------------------------------------

class PyLayerContext:
    """The ``ctx`` of a PyLayer: keeps tensors for backward, any attributes you set, and
    Paddle's flags for outputs (non-differentiable, not in place) and gradients.

    Example:
        >>> import primflow as pf
        >>> ctx = pf.autograd.PyLayerContext()
        >>> ctx.save_for_backward(pf.ones([2]))
        >>> [t.shape for t in ctx.saved_tensor()]
        [[2]]
    """

    def __init__(self):
        self._saved = ()
        self._non_differentiable = set()  # ids of outputs that get no gradient
        self._not_inplace = set()  # ids of inputs returned as new outputs, not in place
        self.materialize_grads = True
        self.grad_in_dtype_consistent = True

    def save_for_backward(self, *tensors):
        """Keeps tensors for ``backward`` (read them back with ``ctx.saved_tensor()``)."""
        self._saved = tensors

    def saved_tensor(self):
        """The tensors given to ``save_for_backward``, as a tuple."""
        return self._saved

    saved_tensors = property(saved_tensor)

    def mark_non_differentiable(self, *tensors):
        """Marks outputs of ``forward`` that get no gradient: they come out with
        ``stop_gradient=True`` and ``backward`` receives zeros (or None) for them."""
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_not_inplace(self, *tensors):
        """Marks inputs that ``forward`` returns unchanged as new outputs; without it an
        input returned as an output counts as modified in place (Paddle's rule)."""
        self._not_inplace.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool):
        """Whether ``backward`` receives zeros (True, the default) or None for outputs that
        got no gradient."""
        self.materialize_grads = bool(value)

    def set_grad_in_dtype_consistent(self, value: bool):
        """Whether gradients reaching ``backward`` are cast to their output's dtype (True,
        the default)."""
        self.grad_in_dtype_consistent = bool(value)


class _PyLayerBackwardMissing(NotImplementedError, OSError):
    """A PyLayer without ``backward`` reached in a backward pass (Paddle raises OSError)."""


class PyLayer:
    """Paddle's custom-operator class: subclass with static ``forward(ctx, *args)`` and
    ``backward(ctx, *output_grads)``, call with ``MyLayer.apply(*args, **kwargs)``.

    ``forward`` runs without recording. Its tensor inputs are every Tensor among the
    arguments, keyword arguments and the lists, tuples and dicts inside them, in order;
    ``backward`` receives one gradient per tensor output (non-tensor outputs such as
    numbers, strings or None are passed through) and returns one gradient (or None) per
    tensor input. An input returned unchanged counts as modified in place unless marked
    with ``ctx.mark_not_inplace``.

    Example:
        >>> import primflow as pf
        >>> class Cube(pf.autograd.PyLayer):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x ** 3
        ...     @staticmethod
        ...     def backward(ctx, dy):
        ...         (x,) = ctx.saved_tensor()
        ...         return 3 * x ** 2 * dy
        >>> x = pf.to_tensor(2.0, stop_gradient=False)
        >>> Cube.apply(x).backward(); float(x.grad)
        12.0
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a PyLayer subclass must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise _PyLayerBackwardMissing(
            "a PyLayer subclass must define a static backward(ctx, *grads) to be differentiated")

    @classmethod
    def apply(cls, *args, **kwargs):
        name = f"PyLayer({cls.__name__})"
        ctx = PyLayerContext()
        leaves, _ = tree_flatten((args, kwargs))
        inputs = [a for a in leaves if isinstance(a, Tensor)]
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        items = list(out) if isinstance(out, (tuple, list)) else [out]
        positions = [i for i, o in enumerate(items) if isinstance(o, Tensor)]
        if not positions:
            raise ValueError(f"{name}: forward must return at least one Tensor (alone or in a "
                             f"tuple/list), got {type(out).__name__}")
        if not _needs_tape(inputs):
            return out
        outs = [items[i] for i in positions]
        by_id = {id(x): x for x in inputs}
        node_inputs = list(inputs)
        inplace = []  # the positions in outs of inputs returned in place
        for k, o in enumerate(outs):
            if id(o) not in by_id or id(o) in ctx._not_inplace:
                outs[k] = detached(o)
            else:
                if o._node is None and not o.stop_gradient:
                    raise ValueError(
                        f"{name}: forward returns its input (shape {o.shape}), a leaf tensor "
                        f"that requires grad, unchanged: Paddle counts that as an in-place "
                        f"update, which leaves may not have. Return a copy (x.clone()) or "
                        f"call ctx.mark_not_inplace(x) in forward")
                j = next(i for i, x in enumerate(inputs) if x is o)
                node_inputs[j] = alias(o)  # the node reads the value before the update
                inplace.append(k)
        out_dtypes = [o.dtype for o in outs]
        out_shapes = [tuple(o._shape) for o in outs]  # (the rules hold no output: no cycle)
        differentiable = [id(items[i]) not in ctx._non_differentiable for i in positions]

        def pullback(cotangents):
            cts = []
            for g, dt in zip(cotangents, out_dtypes):
                if g is not None and ctx.grad_in_dtype_consistent and g.dtype != dt:
                    g = cast(g, dt)
                cts.append(g)
            got = cls.backward(ctx, *cts)
            got = list(got) if isinstance(got, (tuple, list)) else [got]
            if len(got) != len(inputs):
                raise ValueError(f"{name}: backward returned {len(got)} gradients but forward "
                                 f"has {len(inputs)} tensor inputs; return one per tensor "
                                 f"input (None for none)")
            for i, g in enumerate(got):
                if g is not None and not isinstance(g, Tensor):
                    raise ValueError(f"{name}: backward returned a {type(g).__name__} for "
                                     f"tensor input {i}; return a Tensor or None")
            return _check_cotangents(name, got, inputs, "backward", "gradient")

        for k, o in enumerate(outs):
            if not differentiable[k]:
                o.stop_gradient = True
                continue

            def vjp(g, _out, *_inputs, k=k):
                cts = [full(shape, 0, dtype=dt) if ctx.materialize_grads else None
                       for shape, dt in zip(out_shapes, out_dtypes)]
                cts[k] = g
                return tuple(pullback(cts))

            o._node = Node(CustomRule(name, vjp), {}, tuple(node_inputs), None)
            o.stop_gradient = False
        for k in inplace:
            outs[k]._version += 1  # nodes that saved the input before now refuse
        items = replace_at(items, positions, outs)
        if isinstance(out, Tensor):
            return items[0]
        return type(out)(items) if isinstance(out, tuple) else items


# ---- checkpoint ----------------------------------------------------------------------------

def checkpoint(f):
    """Recomputation: ``checkpoint(f)`` keeps only ``f``'s inputs for the backward pass and
    runs ``f`` again during backward, trading compute for memory. Works nested, under
    transforms and for higher-order derivatives; parameters that ``f`` closes over (leaf
    tensors, e.g. a layer's weights) receive their gradients too.

    Example:
        >>> import primflow as pf
        >>> w = pf.to_tensor([2.0], stop_gradient=False)
        >>> block = pf.checkpoint(lambda x: pf.tanh(x * w))
        >>> x = pf.to_tensor([0.5], stop_gradient=False)
        >>> block(x).sum().backward()
        >>> round(float(x.grad), 6), round(float(w.grad), 6)
        (0.839949, 0.209987)
    """

    @functools.wraps(f)
    def wrapped(*args):
        if not state.grad_enabled:
            return f(*args)
        name = f"checkpoint({getattr(f, '__name__', 'f')})"
        leaves, in_tree = tree_flatten(args)
        positions = [i for i, x in enumerate(leaves)
                     if isinstance(x, Tensor) and x.dtype.is_floating]
        inputs = [leaves[i] for i in positions]
        versions = [x._version for x in inputs]

        def run(handles):
            return f(*tree_unflatten(in_tree, replace_at(leaves, positions, handles)))

        with enable_grad():  # a recorded pass, only to find closed-over parameters
            handles = [grad_handle(x) for x in inputs]
            handle_versions = [h._version for h in handles]
            out = run(handles)
        outs, out_tree = _tensor_outputs(out, name)
        if any(t._version != v for t, v in zip(inputs + handles, versions + handle_versions)):
            raise RuntimeError(f"{name}: the function modified an input in place; a "
                               f"checkpointed function must be free of side effects on "
                               f"tensors, because backward runs it again")
        params = external_leaves(outs, handles, stop_at_targets=True)
        originals = inputs + params
        if not any(not t.stop_gradient for t in originals):
            return tree_unflatten(out_tree, [detached(o) for o in outs])
        del handles, out
        pullback = recomputing_pullback(name, lambda again: tree_flatten(run(again))[0],
                                        inputs, params)
        return tree_unflatten(out_tree, _attach(outs, originals, name, pullback))

    return mark_transform(wrapped, (f,), checkpoint)


__all__ = ["PyLayer", "PyLayerContext", "checkpoint", "custom_jvp", "custom_vjp", "recompute",
           "recomputing_pullback"]
