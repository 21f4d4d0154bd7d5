"""Containers: Sequential, LayerList, LayerDict, ParameterList, and the MLP helper."""

from __future__ import annotations

from collections import OrderedDict

from ..core.tensor import Tensor
from . import _layers
from ._layer import Layer, Parameter

__all__ = ["LayerDict", "LayerList", "MLP", "ParameterList", "Sequential"]


def _check_layer(layer, who):
    if not isinstance(layer, Layer):
        raise TypeError(f"{who} holds Layers, got {type(layer).__name__}")
    return layer


def _index(i, n, who):
    if not isinstance(i, int):
        raise TypeError(f"{who} indices must be ints or slices, got {type(i).__name__}")
    if not -n <= i < n:
        raise IndexError(f"{who} index {i} is out of range for {n} layers")
    return i % n


class Sequential(Layer):
    """Calls its layers in order. Built from layers, from ``(name, layer)`` pairs, or from
    an OrderedDict; indexable (ints, slices), with ``len``, iteration and ``append``.

    Example:
        >>> import primflow as pf
        >>> net = pf.nn.Sequential(pf.nn.Linear(2, 8), pf.nn.Tanh(), pf.nn.Linear(8, 1))
        >>> net(pf.ones([5, 2])).shape, len(net), [n for n, _ in net.named_parameters()][:2]
        ([5, 1], 3, ['0.weight', '0.bias'])
    """

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], (dict, OrderedDict)):
            layers = tuple(layers[0].items())
        if layers and isinstance(layers[0], (list, tuple)):
            for item in layers:
                if not (isinstance(item, (list, tuple)) and len(item) == 2):
                    raise TypeError("Sequential: give all layers, or all (name, layer) pairs")
                name, layer = item
                self.add_sublayer(str(name), _check_layer(layer, "Sequential"))
        else:
            for i, layer in enumerate(layers):
                self.add_sublayer(str(i), _check_layer(layer, "Sequential"))

    def _items(self):
        return [(k, v) for k, v in self._sub_layers.items() if v is not None]

    def __getitem__(self, i):
        items = self._items()
        if isinstance(i, slice):
            return Sequential(*[v for _, v in items[i]])  # renumbered from 0, as Paddle
        if isinstance(i, str):
            return self._sub_layers[i]
        return items[_index(i, len(items), "Sequential")][1]

    def __setitem__(self, i, layer):
        key = self._items()[_index(i, len(self), "Sequential")][0]
        self._sub_layers[key] = _check_layer(layer, "Sequential")

    def __delitem__(self, i):
        items = self._items()
        keys = [k for k, _ in (items[i] if isinstance(i, slice) else
                               [items[_index(i, len(items), "Sequential")]])]
        for k in keys:
            del self._sub_layers[k]

    def __len__(self):
        return len(self._items())

    def __iter__(self):
        return iter([v for _, v in self._items()])

    def append(self, layer):
        """Adds ``layer`` at the end (named by its position); returns self."""
        n = len(self._sub_layers)
        while str(n) in self._sub_layers:
            n += 1
        self.add_sublayer(str(n), _check_layer(layer, "Sequential"))
        return self

    def extend(self, layers):
        """Appends every layer of ``layers``; returns self."""
        for layer in layers:
            self.append(layer)
        return self

    def insert(self, index, layer):
        """Inserts ``layer`` before position ``index`` (the layers are renumbered)."""
        items = [v for _, v in self._items()]
        n = len(items)
        index = max(0, min(n, index + n if index < 0 else index))
        items.insert(index, _check_layer(layer, "Sequential"))
        self._sub_layers.clear()
        for j, v in enumerate(items):
            self._sub_layers[str(j)] = v
        return self

    def forward(self, input):  # noqa: A002 - Paddle's name
        for layer in self:
            input = layer(input)
        return input


class LayerList(Layer):
    """A list of layers whose parameters are registered (Paddle's ``LayerList``).

    Example:
        >>> import primflow as pf
        >>> blocks = pf.nn.LayerList([pf.nn.Linear(4, 4) for _ in range(3)])
        >>> len(blocks), len(blocks.parameters())
        (3, 6)
    """

    def __init__(self, sublayers=None):
        super().__init__()
        if sublayers is not None:
            for layer in sublayers:
                self.append(layer)

    def _list(self):
        return list(self._sub_layers.values())

    def _renumber(self, layers):
        self._sub_layers.clear()
        for j, v in enumerate(layers):
            self._sub_layers[str(j)] = v

    def __getitem__(self, i):
        layers = self._list()
        if isinstance(i, slice):
            return type(self)(layers[i])
        return layers[_index(i, len(layers), "LayerList")]

    def __setitem__(self, i, layer):
        layers = self._list()
        layers[_index(i, len(layers), "LayerList")] = _check_layer(layer, "LayerList")
        self._renumber(layers)

    def __delitem__(self, i):
        layers = self._list()
        if isinstance(i, slice):
            del layers[i]
        else:
            del layers[_index(i, len(layers), "LayerList")]
        self._renumber(layers)

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._list())

    def append(self, sublayer):
        """Adds a layer at the end; returns self."""
        self.add_sublayer(str(len(self._sub_layers)), _check_layer(sublayer, "LayerList"))
        return self

    def extend(self, sublayers):
        """Appends every layer of ``sublayers``; returns self."""
        for layer in sublayers:
            self.append(layer)
        return self

    def insert(self, index, sublayer):
        """Inserts a layer before position ``index``."""
        layers = self._list()
        layers.insert(index, _check_layer(sublayer, "LayerList"))
        self._renumber(layers)

    def forward(self, *args, **kwargs):
        raise TypeError("LayerList is a container and has no forward; iterate over it and call "
                        "the layers, or use Sequential")


class LayerDict(Layer):
    """A dict of named layers whose parameters are registered.

    Example:
        >>> import primflow as pf
        >>> heads = pf.nn.LayerDict({"u": pf.nn.Linear(4, 1), "v": pf.nn.Linear(4, 1)})
        >>> sorted(heads.keys()), heads["u"](pf.ones([2, 4])).shape
        (['u', 'v'], [2, 1])
    """

    def __init__(self, sublayers=None):
        super().__init__()
        if sublayers is not None:
            self.update(sublayers)

    def __getitem__(self, key):
        return self._sub_layers[key]

    def __setitem__(self, key, layer):
        self.add_sublayer(key, _check_layer(layer, "LayerDict"))

    def __delitem__(self, key):
        del self._sub_layers[key]

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers)

    def __contains__(self, key):
        return key in self._sub_layers

    def keys(self):
        return self._sub_layers.keys()

    def values(self):
        return self._sub_layers.values()

    def items(self):
        return self._sub_layers.items()

    def pop(self, key):
        return self._sub_layers.pop(key)

    def clear(self):
        self._sub_layers.clear()

    def update(self, sublayers):
        items = sublayers.items() if isinstance(sublayers, dict) else sublayers
        for key, layer in items:
            self[key] = layer

    def forward(self, *args, **kwargs):
        raise TypeError("LayerDict is a container and has no forward; call its layers")


class ParameterList(Layer):
    """A list of parameters that registers them (Paddle's ``ParameterList``).

    Example:
        >>> import primflow as pf
        >>> ps = pf.nn.ParameterList([pf.nn.Parameter(pf.zeros([2])) for _ in range(3)])
        >>> len(ps), [n for n, _ in ps.named_parameters()]
        (3, ['0', '1', '2'])
    """

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            for p in parameters:
                self.append(p)

    def __getitem__(self, i):
        params = list(self._parameters.values())
        return params[_index(i, len(params), "ParameterList")]

    def __setitem__(self, i, param):
        key = list(self._parameters)[_index(i, len(self), "ParameterList")]
        self._parameters[key] = self._checked(param)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(list(self._parameters.values()))

    @staticmethod
    def _checked(param):
        if not isinstance(param, Parameter):
            if isinstance(param, Tensor):
                raise TypeError("ParameterList holds Parameters; wrap the tensor with "
                                "pf.nn.Parameter(t)")
            raise TypeError(f"ParameterList holds Parameters, got {type(param).__name__}")
        return param

    def append(self, parameter):
        """Adds a parameter at the end; returns self."""
        self.add_parameter(str(len(self._parameters)), self._checked(parameter))
        return self

    def extend(self, parameters):
        for p in parameters:
            self.append(p)
        return self

    def forward(self, *args, **kwargs):
        raise TypeError("ParameterList is a container and has no forward")


_ACTIVATIONS = {
    "tanh": _layers.Tanh, "relu": _layers.ReLU, "gelu": _layers.GELU,
    "gelu_tanh": lambda: _layers.GELU(approximate=True), "silu": _layers.SiLU,
    "swish": _layers.Swish, "sigmoid": _layers.Sigmoid, "softplus": _layers.Softplus,
    "sin": _layers.Sin, "identity": _layers.Identity, "linear": _layers.Identity,
    "leaky_relu": _layers.LeakyReLU, "elu": _layers.ELU, "mish": _layers.Mish,
    "relu6": _layers.ReLU6, "softsign": _layers.Softsign,
}


class _Lambda(Layer):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)

    def extra_repr(self):
        return getattr(self.fn, "__name__", repr(self.fn))


def _make_activation(activation):
    if isinstance(activation, str):
        make = _ACTIVATIONS.get(activation.lower())
        if make is None:
            raise ValueError(f"MLP: unknown activation {activation!r}; use one of "
                             f"{sorted(_ACTIVATIONS)}, a Layer, or a function")
        return make()
    if isinstance(activation, type) and issubclass(activation, Layer):
        return activation()
    if isinstance(activation, Layer):
        return activation  # stateless activation layers can be shared
    if callable(activation):
        return _Lambda(activation)
    raise TypeError(f"MLP: activation must be a name, a Layer or a function, got "
                    f"{type(activation).__name__}")


class MLP(Sequential):
    """A multilayer perceptron for PINNs and regression: ``Linear`` layers of the given
    sizes with ``activation`` between them and none after the last.

    Args:
        sizes: layer widths, input first: ``[2, 64, 64, 1]`` is 2 -> 64 -> 64 -> 1.
        activation: a name ('tanh', 'sin', 'silu', 'gelu', 'relu', 'softplus', ...), a
            Layer (instance or class), or a function of one tensor.
        weight_init, bias_init: initializers for every Linear (default XavierUniform and
            zeros, as Linear).
        last_activation: optional activation after the final Linear.

    Example:
        >>> import primflow as pf
        >>> net = pf.nn.MLP([2, 16, 16, 1], activation="tanh")
        >>> net(pf.ones([10, 2])).shape, len(net)
        ([10, 1], 5)
    """

    def __init__(self, sizes, activation="tanh", weight_init=None, bias_init=None,
                 last_activation=None):
        sizes = list(sizes)
        if len(sizes) < 2 or any(not isinstance(s, int) or isinstance(s, bool) or s <= 0
                                 for s in sizes):
            raise ValueError(f"MLP: sizes must list at least two positive ints (input and "
                             f"output widths), got {sizes}")
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(_layers.Linear(n_in, n_out, weight_attr=weight_init,
                                         bias_attr=bias_init))
            if i < len(sizes) - 2:
                layers.append(_make_activation(activation))
        if last_activation is not None:
            layers.append(_make_activation(last_activation))
        super().__init__(*layers)
        self.sizes = sizes
