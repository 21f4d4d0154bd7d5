"""MindSpore's names over primflow: MindSpore code runs with its imports changed.

Imports::

    import mindspore                         ->  import primflow.compat.mindspore as mindspore
    from mindspore import nn, Parameter      ->  from primflow.compat.mindspore import nn, Parameter
    import mindspore.nn as nn                ->  import primflow.compat.mindspore.nn as nn
    import mindspore.ops as ops              ->  import primflow.compat.mindspore.ops as ops
    import mindspore.numpy as mnp            ->  import primflow.compat.mindspore.numpy as mnp
    from mindspore.common.initializer import initializer
                                             ->  from primflow.compat.mindspore import initializer
    from mindspore.ops._grad.grad_base import bprop_getters
                                             ->  from primflow.compat.mindspore import bprop_getters

The mapping (this table is the one place it is written down; each row is tested in
``tests/compat/seeds/test_seeds_mindspore.py``):

==========================================  ==================================================
MindSpore                                   what runs
==========================================  ==================================================
``grad(fn, grad_position, weights,          ``pf.grad(fn, grad_position=, weights=,
has_aux)``                                  has_aux=)``; with ``has_aux`` the function returns
                                            ``(out, aux, ...)``, the result is
                                            ``(gradient, (aux, ...))``
``value_and_grad(fn, grad_position,         ``pf.value_and_grad`` (same positions); with
weights, has_aux)``                         ``has_aux`` the value is the whole ``(out, aux,
                                            ...)``
``jvp(fn, inputs, v, has_aux)``             ``pf.jvp(fn, primals, tangents)``; a single tensor
                                            may stand for the tuples
``vjp(fn, *inputs)``                        ``pf.vjp``
``vmap(fn, in_axes, out_axes)``             ``pf.vmap``
``jit`` / ``@jit(...)``                     ``pf.jit`` (MindSpore's compile options are
                                            accepted and have no effect on results)
``Tensor(data, dtype)``                     a primflow tensor with MindSpore's
                                            ``transpose(dim0, dim1)``
``Parameter(data, name, requires_grad)``    a ``pf.nn.Parameter`` with MindSpore's
                                            ``transpose(dim0, dim1)``
``initializer(init, shape, dtype)``         a tensor from ``pf.nn.initializer``
                                            (``'normal'`` has std 0.01 as in MindSpore)
``nn.Cell`` (``construct``,                 ``pf.nn.Layer`` (``forward``, ``parameters()``)
``trainable_params()``)
``nn.Dense(in, out)``                       ``x W^T + b``, ``W`` of shape ``[out, in]``
``nn.MSELoss``, ``L1Loss``,                 ``pf.nn.functional``'s losses
``BCEWithLogitsLoss``, ``CrossEntropyLoss``
``nn.WithLossCell(net, loss_fn)``           ``loss_fn(net(data), label)``
``nn.SGD/Momentum/Adam(params, lr, ...)``   ``pf.optimizer``'s of the same name;
                                            ``optimizer.parameters`` and
                                            ``optimizer(grads)`` apply given gradients
``ops.Sin()`` and other primitives          a callable computing ``pf.sin`` ...
``bprop_getters.register(ops.Sin)``         the primitive's backward becomes the registered
                                            ``bprop(*inputs, out, dout)``, run as a
                                            ``pf.custom_vjp``
``ops.matmul``, ``ops.sin``, ...;           primflow's ops of those names
``mindspore.numpy.tanh``, ...
``float16``, ``float32``, ``float64``,      primflow's dtypes
``int32``, ``int64``, ``bool_``
``set_seed(n)``                             ``pf.seed(n)``
==========================================  ==================================================

Example:
    >>> import primflow.compat.mindspore as mindspore
    >>> from primflow.compat.mindspore import grad
    >>> import primflow.compat.mindspore.numpy as mnp
    >>> round(float(grad(grad(mnp.tanh))(2.0)), 5)
    -0.13622
"""

from ...core import dtypes as _dtypes
from ...core.random import seed as _seed
from ...transforms import jit as _jit
from . import nn, numpy, ops
from ._tensor import Parameter, Tensor, initializer
from .ops import bprop_getters, grad, jvp, value_and_grad, vjp, vmap

float16, float32, float64 = _dtypes.float16, _dtypes.float32, _dtypes.float64
int32, int64, bool_ = _dtypes.int32, _dtypes.int64, _dtypes.bool_


def jit(function=None, **options):
    """``mindspore.jit``: ``@jit`` or ``@jit(...)`` compiles with ``pf.jit`` (MindSpore's
    options such as ``jit_level`` or ``capture_mode`` choose how MindSpore compiles, not
    what the function computes, and are accepted and not used).

    Example:
        >>> import primflow as pf
        >>> from primflow.compat.mindspore import jit
        >>> @jit(jit_level="O1")
        ... def f(x):
        ...     return x * 2
        >>> f(pf.ones([2])).numpy()
        array([2., 2.], dtype=float32)
    """
    del options
    if function is None:
        return _jit
    return _jit(function)


def set_seed(seed):
    """``mindspore.set_seed``: seeds primflow's random generator (``pf.seed``)."""
    _seed(seed)


__all__ = ["Parameter", "Tensor", "bool_", "bprop_getters", "float16", "float32", "float64",
           "grad", "initializer", "int32", "int64", "jit", "jvp", "nn", "numpy", "ops",
           "set_seed", "value_and_grad", "vjp", "vmap"]
