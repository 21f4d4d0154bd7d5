"""Functional reverse mode (JAX / MindSpore style): grad, value_and_grad, vjp. They take
functions and return functions, accept pytrees of tensors and Python scalars, and compose
in any order with each other, ``jvp`` and ``vmap`` (Jacobians built from them live in
``transforms/jacobians.py``).

Reverse mode runs on the same tape as ``Tensor.backward``: the inputs are re-bound to fresh
handles that require grad (tracers too: the tape records at whatever level the values
live), the function runs, and the tape's backward produces the cotangents with
``create_graph=True`` so that an enclosing transform can differentiate them again.
"""

from __future__ import annotations

import contextlib
import functools

from .. import prims
from ..core.pytree import replace_at, tree_flatten, tree_unflatten
from ..core.state import enable_grad, state
from ..core.tensor import Tensor
from ..core.trace import mark_transform
from ..ops.helpers import as_tensor
from ..ops.creation import ones_like, zeros_like
from .tape import _run_backward, fresh_leaf


def grad_handle(x):
    """A handle on ``x`` that the tape can differentiate with respect to.

    If ``x`` already requires grad (an enclosing reverse-mode transform or the user's tape
    is watching it), the handle is a recorded identity, so derivatives flow on to ``x``;
    otherwise it is a new leaf that shares ``x``'s value.
    """
    x = as_tensor(x)
    if not x.dtype.is_floating:
        raise TypeError(f"cannot differentiate with respect to a {x.dtype.name} input; "
                        f"differentiable inputs must be floating point (cast with "
                        f".astype('float32'))")
    if not x.stop_gradient:
        return prims.reshape(x, shape=tuple(x._shape))  # a recorded identity
    return fresh_leaf(x)


@contextlib.contextmanager
def _watching(weights):
    """Makes ``weights`` require grad while the forward pass records (MindSpore's weights
    argument), restoring their flags afterwards."""
    flags = [w.stop_gradient for w in weights]
    for w in weights:
        w.stop_gradient = False
    try:
        yield
    finally:
        for w, flag in zip(weights, flags):
            w.stop_gradient = flag


def _vjp_with_weights(f, primals, weights, has_aux):
    """Runs ``f(*primals)`` on the tape. Returns the output, a pullback giving
    ``(cotangents of primals as a tuple, cotangents of weights as a list)``, and aux."""
    flat, in_tree = tree_flatten(tuple(primals))
    weights = list(weights)
    with enable_grad(), _watching(weights):
        handles = [grad_handle(p) for p in flat]
        result = f(*tree_unflatten(in_tree, handles))
    result, aux = split_aux(result, has_aux)
    out_flat, out_tree = tree_flatten(result)
    out_flat = [as_tensor(o) for o in out_flat]
    targets = handles + weights
    # Record the backward only when something outside may differentiate the result: an
    # enclosing transform, inputs the user's tape watches, or closed-over watched tensors.
    create_graph = (bool(state.trace_stack) or any(not as_tensor(p).stop_gradient for p in flat)
                    or reaches_outside(out_flat, targets))

    def pullback(cotangent):
        ct_flat, ct_tree = tree_flatten(cotangent)
        if ct_tree != out_tree:
            raise ValueError(f"the cotangent must have the output's structure {out_tree!r}, "
                             f"got {ct_tree!r}")
        seeds = []
        for i, (o, ct) in enumerate(zip(out_flat, ct_flat)):
            # a Python number takes its output's dtype (numbers are weak)
            ct = as_tensor(ct, o.dtype) if isinstance(ct, (int, float)) else as_tensor(ct)
            if tuple(ct._shape) != tuple(o._shape):
                raise ValueError(f"cotangent {i} has shape {ct.shape} but output {i} has shape "
                                 f"{o.shape}")
            if o.dtype.is_floating and ct.dtype is not o.dtype:
                raise TypeError(f"cotangent {i} has dtype {ct.dtype.name} but output {i} is "
                                f"{o.dtype.name}{o.shape}; a cotangent must have its output's "
                                f"dtype (ct.astype('{o.dtype.name}'))")
            if not o.stop_gradient:
                seeds.append((o, ct))
        grads = _run_backward(seeds, targets, create_graph=create_graph, retain_graph=True)
        grads = [zeros_like(t) if g is None else g for g, t in zip(grads, targets)]
        return tuple(tree_unflatten(in_tree, grads[:len(handles)])), grads[len(handles):]

    return tree_unflatten(out_tree, out_flat), pullback, aux


def split_aux(result, has_aux):
    """``(output, aux)`` of a function's result: the pair it returned with ``has_aux``,
    else ``(result, None)``.

    Example:
        >>> split_aux((1.0, "aux"), True)
        (1.0, 'aux')
    """
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"has_aux=True needs the function to return a pair (output, aux), "
                        f"but it returned {describe_value(result)}")
    return result[0], result[1]


def describe_value(value) -> str:
    """How error messages name what a function returned: ``a list of 1 element
    (Tensor float32[])``, ``None``, ``a Tensor float32[3]``.

    Example:
        >>> describe_value([1.0, 2.0])
        'a list of 2 elements (float, float)'
    """
    def one(v):
        if isinstance(v, Tensor):
            return f"Tensor {v.dtype.name}{list(v._shape)}"
        return "None" if v is None else type(v).__name__

    if isinstance(value, (list, tuple)):
        inner = ", ".join(one(v) for v in value[:4]) + (", ..." if len(value) > 4 else "")
        n = len(value)
        return f"a {type(value).__name__} of {n} element{'s' if n != 1 else ''} ({inner})"
    if isinstance(value, dict):
        return f"a dict with keys {list(value)[:4]}"
    return "None" if value is None else f"a {one(value)}"


def _scalar_output(fun, out, has_aux):
    """The output ``grad`` differentiates: refuses what is not a tensor or a number (a list
    holding the loss, None) with a message naming the function and what it returned."""
    name = (getattr(fun, "__qualname__", None) or type(fun).__name__).rpartition("<locals>.")[2]
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"grad(has_aux=True) of {name}: the function must return a pair "
                            f"(output, aux), but it returned {describe_value(out)}")
        out = out[0]
    if not isinstance(out, (Tensor, int, float)):
        raise TypeError(f"grad of {name}: the gradient is defined only for a function "
                        f"returning a scalar (a one-element tensor or a number), but it "
                        f"returned {describe_value(out)}. Return the scalar itself (y, not "
                        f"[y] or (y,)), or return (y, extra) with has_aux=True; for several "
                        f"outputs use pf.vjp or pf.jacrev")
    return as_tensor(out)


def reaches_outside(outputs, targets):
    """Whether the recorded graph of ``outputs`` reaches a leaf other than ``targets``."""
    return bool(external_leaves(outputs, targets))


def external_leaves(outputs, targets, stop_at_targets=False):
    """The leaf tensors the recorded graph of ``outputs`` reads, other than ``targets``
    (with ``stop_at_targets`` the walk does not go past the targets' own nodes: what
    computed them lies outside, e.g. the parameters a checkpointed function closes over)."""
    inside = {id(t) for t in targets}
    stop = {t._node for t in targets if t._node is not None} if stop_at_targets else set()
    found, seen = {}, set()
    stack = [o._node for o in outputs if o._node is not None]
    while stack:
        node = stack.pop()
        if node in seen or node in stop:
            continue
        seen.add(node)
        for e in node.edges:  # None, a leaf Tensor or a Node
            if isinstance(e, Tensor):
                if id(e) not in inside:
                    found[id(e)] = e
            elif e is not None:
                stack.append(e)
    return list(found.values())


def vjp(f, *primals, has_aux=False):
    """Reverse-mode derivative: ``(f(*primals), vjp_fn)`` where ``vjp_fn(cotangent)``
    returns a tuple with one cotangent per primal (JAX semantics).

    Example:
        >>> import primflow as pf
        >>> out, vjp_fn = pf.vjp(lambda x: x * x, pf.to_tensor([1.0, 2.0]))
        >>> vjp_fn(pf.ones([2]))[0].numpy()
        array([2., 4.], dtype=float32)
    """
    out, pullback, aux = _vjp_with_weights(f, primals, (), has_aux)

    def vjp_fn(cotangent):
        return pullback(cotangent)[0]

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def check_argnums(argnums, n_args):
    """``argnums`` as a tuple of ints, checked against ``n_args`` positional arguments
    (shared with the transforms that take ``argnums``, jacrev/jacfwd/hessian)."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or not -n_args <= a < n_args:
            raise ValueError(f"argnums {argnums!r} is out of range for a function called with "
                             f"{n_args} positional arguments")
    return tuple(a % n_args for a in nums)


def check_input_dtypes(transform, values, holomorphic, complex_allowed=True):
    """Refuses inputs a transform cannot differentiate as asked (JAX's rules): with
    ``holomorphic`` every input must be complex; without it complex inputs are refused
    unless ``complex_allowed`` (grad takes them: the gradient of a real function of complex
    inputs is defined, PyTorch's convention)."""
    for i, v in enumerate(tree_flatten(values)[0]):
        dtype = as_tensor(v).dtype
        if holomorphic and not dtype.is_complex:
            raise TypeError(f"{transform}(holomorphic=True) requires complex inputs, got "
                            f"{dtype.name} for differentiated input {i}; cast it "
                            f"(x.astype('complex64')) or drop holomorphic=True")
        if not holomorphic and not complex_allowed and dtype.is_complex:
            raise TypeError(f"{transform} requires real-valued inputs, got {dtype.name} for "
                            f"differentiated input {i}. For a holomorphic function pass "
                            f"holomorphic=True; for a non-holomorphic function of complex "
                            f"inputs use pf.vjp / pf.jvp directly")


def check_output_dtypes(transform, values, holomorphic, complex_allowed=False):
    """Refuses outputs a transform cannot differentiate as asked (JAX's rules): with
    ``holomorphic`` every output must be complex; without it a complex output is refused
    (its derivative is ambiguous: which real part of it?) unless ``complex_allowed``."""
    for i, v in enumerate(tree_flatten(values)[0]):
        dtype = as_tensor(v).dtype
        if holomorphic and not dtype.is_complex:
            raise TypeError(f"{transform}(holomorphic=True) requires a complex output, got "
                            f"{dtype.name} for output {i}")
        if not holomorphic and not complex_allowed and dtype.is_complex:
            raise TypeError(f"{transform} requires a real-valued output, got {dtype.name} for "
                            f"output {i}: the derivative of a complex output is ambiguous. For a "
                            f"holomorphic function pass holomorphic=True (the complex derivative "
                            f"f'(z)); otherwise differentiate a real function of it (pf.real(y), "
                            f"pf.abs(y) ** 2) or use pf.vjp with the cotangent you mean")


def holomorphic_result(tree):
    """The complex derivative from what the tape returns for a holomorphic function: the
    tape's reverse mode gives ``conj(f'(z))`` (PyTorch's convention, the gradient of the
    real part), so this conjugates each leaf."""
    from ..ops.complex_ops import conj

    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [conj(g) for g in leaves])


_UNSET = object()


def value_and_grad(fun, argnums=0, weights=None, has_aux=False, *, grad_position=_UNSET,
                   holomorphic=False):
    """Returns a function computing ``(fun(*args), gradient)`` (JAX / MindSpore semantics;
    MindSpore's keyword ``grad_position`` is accepted for ``argnums``).

    ``argnums`` (int or tuple) picks the positional arguments to differentiate. With
    ``weights`` (a list or tuple of tensors that ``fun`` reads, e.g. a network's parameters)
    the gradient is also taken with respect to them: ``argnums=None`` gives only the weights'
    gradients (MindSpore's ``value_and_grad(fn, None, weights)``), both give
    ``(grads_of_args, grads_of_weights)``. With ``has_aux`` the function returns
    ``(value, aux)`` and the result is ``((value, aux), grads)``.

    Complex numbers (JAX's rules): the output must be real; the gradient with respect to a
    complex input of a real function is PyTorch's (the direction of steepest ascent, usable
    in gradient descent as it is). ``holomorphic=True`` takes complex inputs and a complex
    output and gives the complex derivative ``f'(z)`` (only meaningful where ``f`` is
    holomorphic).

    Example:
        >>> import primflow as pf
        >>> v, g = pf.value_and_grad(lambda x: (x ** 2).sum())(pf.to_tensor([1.0, 3.0]))
        >>> float(v), g.numpy()
        (10.0, array([2., 6.], dtype=float32))
    """
    if grad_position is not _UNSET:
        argnums = grad_position
    if isinstance(argnums, (list, tuple)) and not argnums:
        argnums = None

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        nums = None if argnums is None else check_argnums(argnums, len(args))
        if nums is None and weights is None:
            raise ValueError("value_and_grad: argnums (grad_position) is None and no weights "
                             "were given: nothing to differentiate")

        def restricted(*diff):
            out = fun(*replace_at(args, nums or (), diff), **kwargs)
            main = _scalar_output(fun, out, has_aux)
            if main.size != 1:
                raise TypeError(f"grad requires a function with a scalar output, got shape "
                                f"{main.shape}; reduce it (e.g. .sum()) or use pf.vjp / pf.jacrev")
            if not main.dtype.is_floating:
                raise TypeError(f"grad requires a floating-point output, got {main.dtype}")
            check_output_dtypes("grad", main, holomorphic)
            return (main, out[1]) if has_aux else main

        diff_args = tuple(args[i] for i in nums or ())
        check_input_dtypes("grad", diff_args, holomorphic)
        weight_list = list(weights) if weights is not None else []
        value, pullback, aux = _vjp_with_weights(restricted, diff_args, weight_list, has_aux)
        arg_grads, weight_grads = pullback(ones_like(value))
        if holomorphic:
            arg_grads, weight_grads = holomorphic_result((arg_grads, weight_grads))
        if isinstance(argnums, int):
            arg_grads = arg_grads[0]
        if isinstance(weights, tuple):
            weight_grads = tuple(weight_grads)
        if nums is None:
            grads = weight_grads
        elif weights is None:
            grads = arg_grads
        else:
            grads = (arg_grads, weight_grads)
        return ((value, aux), grads) if has_aux else (value, grads)

    return mark_transform(wrapped, (fun,), lambda new: value_and_grad(
        new, argnums=argnums, weights=weights, has_aux=has_aux, holomorphic=holomorphic))


def grad(fun, argnums=0, has_aux=False, weights=None, *, grad_position=_UNSET, holomorphic=False):
    """Returns a function computing the gradient of scalar-valued ``fun`` (JAX semantics;
    ``has_aux`` gives ``(grads, aux)``). MindSpore's ``ops.grad(fn, grad_position,
    weights)`` becomes ``pf.grad(fn, grad_position=..., weights=...)`` (keywords: the third
    positional argument is JAX's ``has_aux``). The output must be real unless
    ``holomorphic=True`` (complex inputs and output: the complex derivative ``f'(z)``; see
    ``value_and_grad``).

    Example:
        >>> import primflow as pf
        >>> round(float(pf.grad(pf.tanh)(2.0)), 6)
        0.070651
        >>> round(float(pf.grad(pf.grad(pf.tanh))(2.0)), 6)
        -0.136219
    """
    if grad_position is not _UNSET:
        argnums = grad_position
    value_and_grad_fn = value_and_grad(fun, argnums=argnums, weights=weights, has_aux=has_aux,
                                       holomorphic=holomorphic)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if has_aux:
            (_, aux), grads = value_and_grad_fn(*args, **kwargs)
            return grads, aux
        return value_and_grad_fn(*args, **kwargs)[1]

    return mark_transform(wrapped, (fun,), lambda new: grad(
        new, argnums=argnums, has_aux=has_aux, weights=weights, holomorphic=holomorphic))
