"""``mindspore.ops`` over primflow: functions, primitive classes (``ops.Sin()``) whose
backward ``bprop_getters`` can replace, and the function transforms.

Example:
    >>> import primflow as pf
    >>> import primflow.compat.mindspore.ops as ops
    >>> round(float(ops.grad(lambda x: ops.Sin()(x))(pf.to_tensor(0.0))), 6)
    1.0
"""

from __future__ import annotations

from ... import ops as _pf
from ...autodiff import jvp as _jvp, value_and_grad as _value_and_grad, vjp as _vjp
from ...autodiff.custom import custom_vjp
from ...autodiff.functional import grad as _grad
from ...core.tensor import Tensor
from ...transforms import vmap

# ---- functions ---------------------------------------------------------------------------

sin, cos, tan, exp, log, tanh, sqrt, square, abs, neg = (  # noqa: A001 - MindSpore's names
    _pf.sin, _pf.cos, _pf.tan, _pf.exp, _pf.log, _pf.tanh, _pf.sqrt, _pf.square, _pf.abs,
    _pf.neg)
sigmoid, relu = _pf.sigmoid, _pf.relu
add, sub, mul, div, pow, maximum, minimum = (  # noqa: A001
    _pf.add, _pf.subtract, _pf.multiply, _pf.divide, _pf.pow, _pf.maximum, _pf.minimum)
matmul, reshape, concat, stack, where = _pf.matmul, _pf.reshape, _pf.concat, _pf.stack, _pf.where
ones, zeros, ones_like, zeros_like = _pf.ones, _pf.zeros, _pf.ones_like, _pf.zeros_like


def transpose(input, input_perm):  # noqa: A002 - MindSpore's names
    """``ops.transpose(input, input_perm)``: axes permuted (a permutation, as in MindSpore)."""
    return _pf.transpose(input, list(input_perm))


def _axes(axis):
    """MindSpore's reduction axis (an int, a tuple, or () for all) as primflow's."""
    if isinstance(axis, int):
        return [axis]
    return list(axis) or None


def reduce_sum(input, axis=(), keep_dims=False):  # noqa: A002
    """``ops.ReduceSum`` as a function: the sum over ``axis`` (all axes when empty)."""
    return _pf.sum(input, axis=_axes(axis), keepdim=keep_dims)


def reduce_mean(input, axis=(), keep_dims=False):  # noqa: A002
    """``ops.ReduceMean`` as a function: the mean over ``axis`` (all axes when empty)."""
    return _pf.mean(input, axis=_axes(axis), keepdim=keep_dims)


# ---- transforms (MindSpore's signatures) ---------------------------------------------------

def _split_aux(fn):
    """``fn`` returning ``(out, aux1, ...)`` as ``(out, (aux1, ...))`` (JAX's has_aux pair)."""
    def split(*args, **kwargs):
        result = fn(*args, **kwargs)
        if not isinstance(result, (tuple, list)) or len(result) < 2:
            raise TypeError(f"has_aux=True: the function must return a tuple (output, aux, "
                            f"...), got {type(result).__name__}")
        return result[0], tuple(result[1:])
    return split


def grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """``mindspore.grad``: the gradient function of ``fn`` with respect to the inputs at
    ``grad_position`` (int, tuple or None) and/or ``weights``; with ``has_aux`` the function
    returns ``(output, aux, ...)`` and the result is ``(gradient, (aux, ...))``.

    Example:
        >>> import primflow.compat.mindspore as ms
        >>> round(float(ms.grad(ms.numpy.tanh)(2.0)), 6)
        0.070651
    """
    if return_ids:
        raise ValueError("grad: return_ids=True is not supported; match gradients to inputs "
                         "by position")
    if has_aux:
        return _grad(_split_aux(fn), grad_position=grad_position, weights=weights, has_aux=True)
    return _grad(fn, grad_position=grad_position, weights=weights)


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """``mindspore.value_and_grad``: ``(value, gradient)``; with ``has_aux`` the value is the
    function's whole output ``(output, aux, ...)`` and only ``output`` is differentiated.

    Example:
        >>> import primflow as pf
        >>> import primflow.compat.mindspore as ms
        >>> value, g = ms.value_and_grad(lambda x: (x * x).sum())(pf.to_tensor([3.0]))
        >>> float(value), g.numpy()
        (9.0, array([6.], dtype=float32))
    """
    if return_ids:
        raise ValueError("value_and_grad: return_ids=True is not supported")
    if not has_aux:
        return _value_and_grad(fn, grad_position, weights, False)
    inner = _value_and_grad(_split_aux(fn), grad_position, weights, True)

    def run(*args, **kwargs):
        (value, aux), gradient = inner(*args, **kwargs)
        return (value, *aux), gradient
    return run


def jvp(fn, inputs, v, has_aux=False):
    """``mindspore.jvp(fn, inputs, v)``: ``(output, J v)`` (``(output, J v, aux)`` with
    ``has_aux``); ``inputs`` and ``v`` are a tensor or a tuple of tensors.

    Example:
        >>> import primflow as pf
        >>> import primflow.compat.mindspore as ms
        >>> out, tangent = ms.jvp(pf.sin, pf.to_tensor([0.0]), pf.to_tensor([2.0]))
        >>> tangent.numpy()
        array([2.], dtype=float32)
    """
    primals = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    tangents = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if not has_aux:
        return _jvp(fn, primals, tangents)
    (out, aux), (tangent, _) = _jvp(_split_aux(fn), primals, tangents)
    return out, tangent, aux[0] if len(aux) == 1 else aux


def vjp(fn, *inputs, weights=None, has_aux=False):
    """``mindspore.vjp(fn, *inputs)``: ``(output, vjp_fn)``; ``vjp_fn(v)`` gives one
    cotangent per input."""
    if weights is not None:
        raise ValueError("vjp: weights= is not supported; make the weights inputs of fn")
    return _vjp(fn, *inputs, has_aux=has_aux)


# ---- primitives and their backward rules ---------------------------------------------------

class _BpropRegistry(dict):
    """MindSpore's ``bprop_getters``: primitive name -> ``getter(primitive) -> bprop`` where
    ``bprop(*inputs, out, dout)`` returns one cotangent per input. A registered rule replaces
    the primitive's derivative (it runs as a ``pf.custom_vjp``; written in ops, it can be
    differentiated again). ``pop(name)`` restores the primitive's own rule."""

    def register(self, primitive):
        """Decorator: ``@bprop_getters.register(ops.Sin)`` (a class or its name)."""
        name = primitive if isinstance(primitive, str) else primitive.__name__

        def deco(getter):
            self[name] = getter
            return getter
        return deco


bprop_getters = _BpropRegistry()


class Primitive:
    """A MindSpore primitive: construct it once (``sin = ops.Sin()``), call it like a
    function. Its derivative is primflow's unless ``bprop_getters`` holds a rule for its
    class name."""

    def __call__(self, *args):
        getter = bprop_getters.get(type(self).__name__)
        if getter is None:
            return self.compute(*args)
        return _with_bprop(self, getter(self), args)

    def compute(self, *args):
        raise TypeError(f"{type(self).__name__} defines no computation")


def _with_bprop(primitive, bprop, args):
    """``primitive.compute(*args)`` with ``bprop(*args, out, dout)`` as its backward."""
    name = type(primitive).__name__

    @custom_vjp
    def call(*xs):
        return primitive.compute(*xs)

    def fwd(*xs):
        out = primitive.compute(*xs)
        return out, (xs, out)

    def bwd(residuals, dout):
        xs, out = residuals
        grads = bprop(*xs, out, dout)
        if not isinstance(grads, (tuple, list)) or len(grads) != len(xs):
            raise TypeError(f"the bprop registered for {name} must return a tuple of "
                            f"{len(xs)} gradient(s), one per input, got {grads!r}")
        return tuple(grads)

    call.__name__ = name
    call.defvjp(fwd, bwd)
    return call(*(a if isinstance(a, Tensor) else _pf.to_tensor(a) for a in args))


def _primitive(name, fn):
    """A Primitive class computing ``fn``."""
    return type(name, (Primitive,), {
        "compute": lambda self, *args: fn(*args),
        "__doc__": f"``ops.{name}()``: primflow's ``{fn.__name__}`` as a MindSpore "
                   f"primitive.",
        "__module__": __name__})


Sin, Cos, Tan, Exp, Log, Tanh, Sqrt, Square, Abs, Neg, Sigmoid, ReLU = (
    _primitive(n, f) for n, f in [
        ("Sin", sin), ("Cos", cos), ("Tan", tan), ("Exp", exp), ("Log", log), ("Tanh", tanh),
        ("Sqrt", sqrt), ("Square", square), ("Abs", abs), ("Neg", neg), ("Sigmoid", sigmoid),
        ("ReLU", relu)])
Add, Sub, Mul, Div = (_primitive(n, f) for n, f in [("Add", add), ("Sub", sub),
                                                      ("Mul", mul), ("Div", div)])


class MatMul(Primitive):
    """``ops.MatMul(transpose_a=False, transpose_b=False)`` of two matrices."""

    def __init__(self, transpose_a=False, transpose_b=False):
        self.transpose_a, self.transpose_b = transpose_a, transpose_b

    def compute(self, a, b):
        return _pf.matmul(a, b, self.transpose_a, self.transpose_b)


__all__ = ["Abs", "Add", "Cos", "Div", "Exp", "Log", "MatMul", "Mul", "Neg", "Primitive",
           "ReLU", "Sigmoid", "Sin", "Sqrt", "Square", "Sub", "Tan", "Tanh", "abs", "add",
           "bprop_getters", "concat", "cos", "div", "exp", "grad", "jvp", "log", "matmul",
           "maximum", "minimum", "mul", "neg", "ones", "ones_like", "pow", "reduce_mean",
           "reduce_sum", "relu", "reshape", "sigmoid", "sin", "sqrt", "square", "stack", "sub",
           "tan", "tanh", "transpose", "value_and_grad", "vjp", "vmap", "where", "zeros",
           "zeros_like"]
