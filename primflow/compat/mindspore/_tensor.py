"""MindSpore's ``Tensor``, ``Parameter`` and ``initializer`` over primflow's tensors.

A MindSpore tensor differs from primflow's (Paddle's) in one method the seed code uses:
``Tensor.transpose(dim0, dim1)`` swaps two axes, where primflow's ``transpose(perm)`` takes
a permutation. The classes here are primflow tensors with MindSpore's ``transpose``;
primflow's own ``Tensor`` is unchanged, so results of operations are plain primflow tensors
(their ``transpose`` takes a permutation, and two ints raise a TypeError there).
"""

from __future__ import annotations

import math

from ...core import dtypes
from ...core.tensor import Tensor as _PrimflowTensor
from ...nn import initializer as _init
from ...nn import Parameter as _PrimflowParameter
from ...ops.manipulation import transpose as _permute


def _transpose(self, *dims):
    """MindSpore's ``Tensor.transpose``: ``(dim0, dim1)`` swaps two axes, one tuple or list
    is a permutation, no argument reverses the axes."""
    n = self.ndim
    if len(dims) == 2 and all(isinstance(d, int) for d in dims):
        for d in dims:
            if not -n <= d < n:
                raise ValueError(f"transpose: dim {d} is out of range for a tensor of rank {n} "
                                 f"(valid: [{-n}, {n - 1}])")
        perm = list(range(n))
        a, b = dims[0] % n, dims[1] % n
        perm[a], perm[b] = perm[b], perm[a]
    elif len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        perm = list(dims[0])
    elif not dims:
        perm = list(range(n))[::-1]
    else:
        raise TypeError(f"transpose takes (dim0, dim1), one permutation tuple or nothing, got "
                        f"{dims!r}")
    return _permute(self, perm)


class Tensor(_PrimflowTensor):
    """``mindspore.Tensor(input_data, dtype)``: a primflow tensor with MindSpore's
    ``transpose(dim0, dim1)``.

    Example:
        >>> from primflow.compat.mindspore import Tensor
        >>> Tensor([[1.0, 2.0, 3.0]]).transpose(0, 1).shape
        [3, 1]
    """

    __slots__ = ()

    def __init__(self, input_data=None, dtype=None):
        if input_data is None:
            raise ValueError("mindspore.Tensor needs input_data (a lazily initialised tensor "
                             "is not supported: use initializer(...) for one)")
        if isinstance(input_data, _PrimflowTensor):
            input_data = input_data.numpy()
        super().__init__(input_data, dtype=dtype)

    transpose = _transpose


class Parameter(_PrimflowParameter):
    """``mindspore.Parameter(default_input, name=None, requires_grad=True)``: a primflow
    ``nn.Parameter`` (so layers register it) with MindSpore's ``transpose(dim0, dim1)``.

    Example:
        >>> import primflow as pf
        >>> from primflow.compat.mindspore import Parameter
        >>> w = Parameter(pf.zeros([3, 2]), "w")
        >>> w.name, w.requires_grad, w.transpose(0, 1).shape
        ('w', True, [2, 3])
    """

    __slots__ = ()

    def __init__(self, default_input, name=None, requires_grad=True, layerwise_parallel=False,
                 parallel_optimizer=True):
        del layerwise_parallel, parallel_optimizer  # placement hints of MindSpore's graph mode
        super().__init__(default_input, name=name, trainable=requires_grad)

    transpose = _transpose


def _fans(shape):
    """MindSpore's (PyTorch's) fans: a weight is ``[out, in, *receptive]``."""
    if len(shape) < 2:
        return shape[0] if shape else 1, shape[0] if shape else 1
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _named_initializer(name, shape):
    fan_in, fan_out = _fans(shape)
    table = {
        "normal": lambda: _init.Normal(0.0, 0.01),
        "zeros": lambda: _init.Constant(0.0),
        "ones": lambda: _init.Constant(1.0),
        "uniform": lambda: _init.Uniform(-0.07, 0.07),
        "truncatednormal": lambda: _init.TruncatedNormal(0.0, 0.01, -0.02, 0.02),
        "xavier_uniform": lambda: _init.XavierUniform(fan_in=fan_in, fan_out=fan_out),
        "xavier_normal": lambda: _init.XavierNormal(fan_in=fan_in, fan_out=fan_out),
        "he_uniform": lambda: _init.KaimingUniform(fan_in=fan_in),
        "he_normal": lambda: _init.KaimingNormal(fan_in=fan_in),
    }
    make = table.get(name.lower())
    if make is None:
        raise ValueError(f"initializer: unknown name {name!r}; known: {sorted(table)}")
    return make()


def initializer(init, shape=None, dtype=dtypes.float32):
    """``mindspore.common.initializer.initializer(init, shape, dtype)``: a tensor of ``shape``
    filled by ``init`` (a name such as ``'normal'`` (std 0.01, MindSpore's), ``'zeros'``,
    ``'ones'``, ``'uniform'``, ``'xavier_uniform'``, ``'he_uniform'``, a number, a tensor, or
    a ``pf.nn.initializer`` object).

    Example:
        >>> from primflow.compat.mindspore import initializer, float32
        >>> initializer("ones", [2, 3], float32).numpy().sum()
        np.float32(6.0)
    """
    if isinstance(init, _PrimflowTensor):
        if shape is not None and list(shape) != init.shape:
            raise ValueError(f"initializer: the tensor has shape {init.shape}, not {list(shape)}")
        return Tensor(init, dtype=dtype)
    if shape is None:
        raise ValueError("initializer: shape is required unless init is a tensor")
    shape = [int(shape)] if isinstance(shape, int) else [int(d) for d in shape]
    if isinstance(init, bool) or not isinstance(init, (int, float, str, _init.Initializer)):
        raise TypeError(f"initializer: init must be a name, a number, a tensor or an "
                        f"initializer object, got {type(init).__name__}")
    if isinstance(init, (int, float)):
        init = _init.Constant(float(init))
    elif isinstance(init, str):
        init = _named_initializer(init, shape)
    value = init.generate(shape, dtypes.as_dtype(dtype))
    return Tensor(value)
