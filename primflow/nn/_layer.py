"""Parameter, ParamAttr and the Layer base class (Paddle semantics), plus the bridge from
layers to functional transforms: layers are pytrees of their parameters, and
``functional_call`` runs a layer with parameters given as arguments.

Why both: Paddle-style code keeps state in the layer and differentiates with the tape
(``loss.backward()``), while JAX-style code passes the state explicitly
(``pf.grad(lambda params: loss(functional_call(net, params, x)))(params)``). A layer's
bookkeeping (names, registration order, sharing) is the single source both use.
"""

from __future__ import annotations

import copy
import itertools
import re
import warnings
from collections import OrderedDict

from ..core import dtypes
from ..core.state import no_grad
from ..core.tensor import Tensor
from ..ops.helpers import cast, int_list
from ..ops.creation import to_tensor
from ..ops.tensor_methods import to_device
from .. import amp as _amp
from . import initializer as _init

__all__ = ["Layer", "ParamAttr", "Parameter", "create_parameter", "functional_call"]

# ---- unique names (Paddle: "linear_0", "linear_0.w_0") -------------------------------------

_name_counters = {}


def _unique_name(prefix):
    n = _name_counters.get(prefix, 0)
    _name_counters[prefix] = n + 1
    return f"{prefix}_{n}"


def _snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


# ---- ParamAttr and Parameter --------------------------------------------------------------

class ParamAttr:
    """How a layer creates one parameter (Paddle's ``ParamAttr``).

    Args:
        name: the parameter's name (auto-generated when None).
        initializer: an ``pf.nn.initializer`` object for its first values.
        learning_rate: multiplier on the optimizer's learning rate for this parameter.
        regularizer: ``pf.optimizer.L2Decay(c)`` / ``L1Decay(c)``; overrides the
            optimizer's ``weight_decay`` for this parameter.
        trainable: False creates it with ``stop_gradient=True``.
        need_clip: False exempts it from the optimizer's ``grad_clip``.

    Layers also accept ``False`` for an attr (no such parameter, e.g. no bias), a string
    (the name) or an initializer in its place.

    Example:
        >>> import primflow as pf
        >>> lin = pf.nn.Linear(2, 3, weight_attr=pf.ParamAttr(
        ...     name="w", initializer=pf.nn.initializer.Constant(0.5)), bias_attr=False)
        >>> lin.weight.name, float(lin.weight.sum()), lin.bias
        ('w', 3.0, None)
    """

    def __init__(self, name=None, initializer=None, learning_rate=1.0, regularizer=None,
                 trainable=True, do_model_average=True, need_clip=True):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"ParamAttr name must be a str, got {type(name).__name__}")
        if initializer is not None and not isinstance(initializer, _init.Initializer):
            raise TypeError(f"ParamAttr initializer must be a pf.nn.initializer object, got "
                            f"{type(initializer).__name__}")
        self.name = name
        self.initializer = initializer
        self.learning_rate = float(learning_rate)
        self.regularizer = regularizer
        self.trainable = bool(trainable)
        self.do_model_average = do_model_average
        self.need_clip = bool(need_clip)

    @staticmethod
    def _to_attr(arg):
        """Normalises what layers accept as an attr; returns a ParamAttr or False."""
        if arg is None or arg is True:
            return ParamAttr()
        if arg is False:
            return False
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if isinstance(arg, _init.Initializer):
            return ParamAttr(initializer=arg)
        raise TypeError(f"a parameter attr must be a ParamAttr, a name, an initializer, None "
                        f"or False, got {type(arg).__name__}")

    def __repr__(self):
        return (f"ParamAttr(name={self.name!r}, initializer={self.initializer!r}, "
                f"learning_rate={self.learning_rate}, trainable={self.trainable})")


class Parameter(Tensor):
    """A trainable tensor owned by a layer: ``stop_gradient=False``, a ``name`` and a
    ``trainable`` flag (its setter flips ``stop_gradient``), plus per-parameter optimizer
    settings (``optimize_attr['learning_rate']``, ``regularizer``, ``need_clip``).

    Arithmetic on a parameter gives plain tensors; only layers and ``create_parameter``
    make parameters.

    Example:
        >>> import primflow as pf
        >>> p = pf.nn.Parameter(pf.zeros([2]), name="p")
        >>> p.stop_gradient, p.trainable, p.name
        (False, True, 'p')
    """

    __slots__ = ("optimize_attr", "regularizer", "need_clip", "do_model_average")

    def __init__(self, data, dtype=None, name=None, trainable=True, learning_rate=1.0,
                 regularizer=None, need_clip=True):
        super().__init__(data, dtype=dtype, stop_gradient=not trainable)
        self.name = name if name is not None else _unique_name("param")
        self.optimize_attr = {"learning_rate": float(learning_rate)}
        self.regularizer = regularizer
        self.need_clip = bool(need_clip)
        self.do_model_average = True

    @property
    def trainable(self) -> bool:
        """Whether optimizers update it (``not stop_gradient``)."""
        return not self.stop_gradient

    @trainable.setter
    def trainable(self, value):
        self.stop_gradient = not bool(value)

    def __repr__(self):
        return f"Parameter containing:\n{Tensor.__repr__(self)}"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        new = Parameter(Tensor._wrap(self._value), name=self.name, trainable=self.trainable,
                        learning_rate=self.optimize_attr["learning_rate"],
                        regularizer=self.regularizer, need_clip=self.need_clip)
        new._value = copy.deepcopy(self._value, memo)
        new.grad = copy.deepcopy(self.grad, memo)
        memo[id(self)] = new
        return new


def _check_shape(shape, who):
    out = int_list(shape, f"{who}: shape")
    if any(d <= 0 for d in out):
        raise ValueError(f"{who}: every dimension of shape must be positive, got {out}")
    return out


def _as_dtype_or_default(dtype):
    return dtypes.default_float() if dtype is None else dtypes.as_dtype(dtype)


def _make_parameter(shape, dtype, attr, is_bias, default_initializer, default_name):
    attr = ParamAttr._to_attr(attr)
    if attr is False:
        return None
    shape = _check_shape(shape, "create_parameter")
    d = _as_dtype_or_default(dtype)
    init = attr.initializer or default_initializer
    if init is None:
        init = _init.Constant(0.0) if is_bias else _init.XavierUniform()
    if not isinstance(init, _init.Initializer):
        raise TypeError(f"default_initializer must be a pf.nn.initializer object, got "
                        f"{type(init).__name__}")
    with no_grad():
        value = init.generate(shape, d)
    return Parameter(value, dtype=d, name=attr.name or default_name, trainable=attr.trainable,
                     learning_rate=attr.learning_rate, regularizer=attr.regularizer,
                     need_clip=attr.need_clip)


def create_parameter(shape, dtype=None, name=None, attr=None, is_bias=False,
                     default_initializer=None) -> Parameter:
    """A new Parameter (Paddle's top-level ``paddle.create_parameter``).

    Args:
        shape: list of positive ints.
        dtype: its dtype (default: ``pf.get_default_dtype()``).
        name: its name (auto-generated when None).
        attr: a ParamAttr (name, initializer, learning rate, ...).
        is_bias: default initializer Constant(0) instead of XavierUniform.
        default_initializer: used when ``attr`` gives none.

    Example:
        >>> import primflow as pf
        >>> w = pf.create_parameter([2, 3], "float64",
        ...                         default_initializer=pf.nn.initializer.Constant(1.0))
        >>> w.shape, w.dtype.name, w.stop_gradient
        ([2, 3], 'float64', False)
    """
    attr = ParamAttr._to_attr(attr)
    if attr is not False and name is not None and attr.name is None:
        attr = copy.copy(attr)
        attr.name = name
    default_name = _unique_name("create_parameter") + (".b_0" if is_bias else ".w_0")
    return _make_parameter(shape, dtype, attr, is_bias, default_initializer, default_name)


# ---- Layer --------------------------------------------------------------------------------

class Layer:
    """Base class of all layers (Paddle's ``paddle.nn.Layer``).

    Subclasses create parameters and sublayers in ``__init__`` (after calling
    ``super().__init__()``) and compute in ``forward``. Assigning a Parameter, a Layer or a
    Tensor to an attribute registers it (as parameter, sublayer or non-persistable buffer).

    Example:
        >>> import primflow as pf
        >>> class Affine(pf.nn.Layer):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = self.create_parameter([2, 2])
        ...         self.b = self.create_parameter([2], is_bias=True)
        ...     def forward(self, x):
        ...         return x @ self.w + self.b
        >>> net = Affine()
        >>> [n for n, _ in net.named_parameters()], net(pf.ones([3, 2])).shape
        (['w', 'b'], [3, 2])
    """

    training: bool

    def __init__(self, name_scope=None, dtype=None):
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", OrderedDict())
        set_(self, "_sub_layers", OrderedDict())
        set_(self, "_buffers", OrderedDict())
        set_(self, "_non_persistable_buffer_names_set", set())
        set_(self, "_forward_pre_hooks", OrderedDict())
        set_(self, "_forward_post_hooks", OrderedDict())
        set_(self, "_dtype", _as_dtype_or_default(dtype))
        set_(self, "_full_name", _unique_name(name_scope or _snake(type(self).__name__)))
        set_(self, "_param_counts", {"w": 0, "b": 0})

    # ---- forward ------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __call__(self, *inputs, **kwargs):
        d = self.__dict__
        if "_parameters" not in d:
            raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() "
                               f"before the layer is used")
        for hook in list(d["_forward_pre_hooks"].values()):
            result = hook(self, inputs)
            if result is not None:
                inputs = result if isinstance(result, tuple) else (result,)
        if _amp.is_auto_cast_enabled():  # pf.amp.auto_cast: black-list layers in float32
            inputs = _amp_inputs(type(self).__name__, inputs)
        outputs = self.forward(*inputs, **kwargs)
        for hook in list(d["_forward_post_hooks"].values()):
            result = hook(self, inputs, outputs)
            if result is not None:
                outputs = result
        return outputs

    def register_forward_pre_hook(self, hook):
        """``hook(layer, inputs)`` runs before forward; a non-None result replaces the inputs.
        Returns a handle with ``remove()``."""
        return _HookHandle(self._forward_pre_hooks, hook)

    def register_forward_post_hook(self, hook):
        """``hook(layer, inputs, outputs)`` runs after forward; a non-None result replaces
        the outputs. Returns a handle with ``remove()``."""
        return _HookHandle(self._forward_post_hooks, hook)

    # ---- attribute registration (Paddle's __setattr__) ----------------------------------
    def _require_init(self, what):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"cannot assign {what} before {type(self).__name__}.__init__ "
                               f"calls super().__init__()")

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(getattr(type(self), name, None), property):
            object.__setattr__(self, name, value)
            return
        params = d.get("_parameters")
        # distributed parameters (dist.shard_tensor of a parameter) register like Parameters
        if isinstance(value, Parameter) or getattr(value, "_is_dist_parameter", False):
            self._require_init("parameters")
            _discard(name, d, d["_sub_layers"], d["_buffers"])
            params[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"assignment to parameter '{name}' of {type(self).__name__} "
                                f"must be a Parameter or None, got {type(value).__name__}; to "
                                f"change its values use {name}.set_value(...)")
            params[name] = None
        elif isinstance(value, Layer):
            self._require_init("sublayers")
            _discard(name, d, params, d["_buffers"])
            d["_sub_layers"][name] = value
        elif "_sub_layers" in d and name in d["_sub_layers"]:
            if value is not None:
                raise TypeError(f"assignment to sublayer '{name}' of {type(self).__name__} "
                                f"must be a Layer or None, got {type(value).__name__}")
            d["_sub_layers"][name] = None
        elif isinstance(value, Tensor):
            self._require_init("tensors")
            buffers = d["_buffers"]
            _discard(name, d, params, d["_sub_layers"])
            if name not in buffers:  # Paddle: only register_buffer makes persistable ones
                d["_non_persistable_buffer_names_set"].add(name)
            buffers[name] = value
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None:
                raise TypeError(f"assignment to buffer '{name}' of {type(self).__name__} must "
                                f"be a Tensor or None, got {type(value).__name__}")
            d["_buffers"][name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # only called when normal lookup fails; must not recurse on a half-built object
        d = self.__dict__
        for table in ("_parameters", "_sub_layers", "_buffers"):
            entries = d.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_sub_layers", "_buffers"):
            entries = d.get(table)
            if entries is not None and name in entries:
                del entries[name]
                d["_non_persistable_buffer_names_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__())
        for table in ("_parameters", "_sub_layers", "_buffers"):
            keys.extend(self.__dict__.get(table, {}))
        return sorted(set(keys))

    # ---- explicit registration ----------------------------------------------------------
    def create_parameter(self, shape, attr=None, dtype=None, is_bias=False,
                         default_initializer=None):
        """A new Parameter for this layer (not yet registered: assign it to an attribute or
        call ``add_parameter``). Paddle's argument order; ``dtype`` defaults to the layer's.

        Args:
            shape: list of positive ints.
            attr: ParamAttr, name, initializer, or False (returns None: no parameter).
            dtype: defaults to the layer's dtype (the default dtype when it was built).
            is_bias: default initializer Constant(0) instead of XavierUniform.
            default_initializer: used when ``attr`` gives none.
        """
        if isinstance(attr, str) and dtype is None and attr in dtypes.BY_NAME:
            attr, dtype = None, attr  # create_parameter(shape, "float64"): a dtype, not a name
        kind = "b" if is_bias else "w"
        n = self._param_counts[kind]
        self._param_counts[kind] = n + 1
        return _make_parameter(shape, self._dtype if dtype is None else dtype, attr, is_bias,
                               default_initializer, f"{self._full_name}.{kind}_{n}")

    def add_parameter(self, name, parameter):
        """Registers ``parameter`` (a Parameter or None) under ``name``; returns it."""
        self._require_init("parameters")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"parameter name must be a non-empty str without '.', got {name!r}")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"'{name}' is already an attribute of {type(self).__name__}")
        if parameter is not None and not isinstance(parameter, Parameter):
            raise TypeError(f"add_parameter('{name}', ...) needs a Parameter (make one with "
                            f"self.create_parameter or pf.nn.Parameter), got "
                            f"{type(parameter).__name__}")
        self._parameters[name] = parameter
        return parameter

    def add_sublayer(self, name, sublayer):
        """Registers ``sublayer`` under ``name``; returns it."""
        self._require_init("sublayers")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"sublayer name must be a non-empty str without '.', got {name!r}")
        if sublayer is not None and not isinstance(sublayer, Layer):
            raise TypeError(f"add_sublayer('{name}', ...) needs a Layer, got "
                            f"{type(sublayer).__name__}")
        _discard(name, self.__dict__, self._parameters, self._buffers)
        self._sub_layers[name] = sublayer
        return sublayer

    def register_buffer(self, name, tensor, persistable=True):
        """Registers a non-trainable tensor (saved in ``state_dict`` when ``persistable``)."""
        self._require_init("buffers")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"buffer name must be a non-empty str without '.', got {name!r}")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer('{name}', ...) needs a Tensor or None, got "
                            f"{type(tensor).__name__}")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"'{name}' is already an attribute of {type(self).__name__}")
        self._buffers[name] = tensor
        if persistable:
            self._non_persistable_buffer_names_set.discard(name)
        else:
            self._non_persistable_buffer_names_set.add(name)

    # ---- traversal ----------------------------------------------------------------------
    def named_sublayers(self, prefix="", include_self=False, layers_set=None):
        """``(name, layer)`` for every sublayer, depth first, each layer once."""
        if layers_set is None:
            layers_set = set()
        if include_self and id(self) not in layers_set:
            layers_set.add(id(self))
            yield prefix, self
        for key, layer in self._sub_layers.items():
            if layer is None or id(layer) in layers_set:
                continue
            name = f"{prefix}.{key}" if prefix else key
            layers_set.add(id(layer))
            yield name, layer
            yield from layer.named_sublayers(prefix=name, include_self=False,
                                             layers_set=layers_set)

    def sublayers(self, include_self=False):
        """All sublayers (depth first, deduplicated) as a list."""
        return [layer for _, layer in self.named_sublayers(include_self=include_self)]

    def named_children(self):
        """``(name, layer)`` for the direct sublayers."""
        seen = set()
        for name, layer in self._sub_layers.items():
            if layer is not None and id(layer) not in seen:
                seen.add(id(layer))
                yield name, layer

    def children(self):
        """The direct sublayers."""
        for _, layer in self.named_children():
            yield layer

    def named_parameters(self, prefix="", include_sublayers=True):
        """``(name, parameter)`` pairs in registration order, each parameter once (a shared
        parameter keeps its first name). Names are structured: ``"0.weight"``."""
        seen = set()
        layers = (self.named_sublayers(prefix=prefix, include_self=True) if include_sublayers
                  else [(prefix, self)])
        for layer_prefix, layer in layers:
            for key, param in layer._parameters.items():
                if param is None or id(param) in seen:
                    continue
                seen.add(id(param))
                yield (f"{layer_prefix}.{key}" if layer_prefix else key), param

    def parameters(self, include_sublayers=True):
        """All parameters as a list (registration order, deduplicated)."""
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def named_buffers(self, prefix="", include_sublayers=True):
        """``(name, tensor)`` for every buffer, each once."""
        seen = set()
        layers = (self.named_sublayers(prefix=prefix, include_self=True) if include_sublayers
                  else [(prefix, self)])
        for layer_prefix, layer in layers:
            for key, buf in layer._buffers.items():
                if buf is None or id(buf) in seen:
                    continue
                seen.add(id(buf))
                yield (f"{layer_prefix}.{key}" if layer_prefix else key), buf

    def buffers(self, include_sublayers=True):
        """All buffers as a list."""
        return [b for _, b in self.named_buffers(include_sublayers=include_sublayers)]

    def full_name(self):
        """The layer's unique name, e.g. ``"linear_0"`` (prefix of its parameters' names)."""
        return self._full_name

    # ---- modes and utilities ------------------------------------------------------------
    def train(self, mode=True):
        """Training mode for this layer and all sublayers (``self.training = True``)."""
        for layer in self.sublayers(include_self=True):
            object.__setattr__(layer, "training", bool(mode))
        return self

    def eval(self):
        """Evaluation mode (dropout off) for this layer and all sublayers."""
        return self.train(False)

    def apply(self, fn):
        """Calls ``fn(layer)`` on every sublayer, then on self; returns self."""
        for layer in self.children():
            layer.apply(fn)
        fn(self)
        return self

    def clear_gradients(self, set_to_zero=False):
        """Drops every parameter's gradient (``set_to_zero=True`` keeps zero tensors)."""
        for p in self.parameters():
            if set_to_zero and p.grad is not None:
                with no_grad():
                    p.grad = p.grad * 0
            else:
                p.clear_grad()

    clear_grad = clear_gradients

    def to(self, device=None, dtype=None, blocking=None):
        """Moves parameters and buffers to ``device`` (``"cpu"``, ``"gpu:0"``) and/or casts
        the floating ones to ``dtype``, in place: ``net.to("gpu")``, ``net.to("float64")``,
        ``net.to(device="cpu", dtype="float32")``. Optimizers made before keep working:
        the parameters are the same tensors.

        Example:
            >>> import primflow as pf
            >>> net = pf.nn.Linear(2, 1).to("cpu", dtype="float64")
            >>> net.weight.place, net.weight.dtype
            (Place(cpu), primflow.float64)
        """
        del blocking
        if dtype is None and device is not None and _looks_like_dtype(device):
            device, dtype = None, device
        if device is not None:  # devices
            with no_grad():
                for t in itertools.chain(self.parameters(), self.buffers()):
                    moved = to_device(t, device)
                    if moved is not t:
                        t._set_value(moved._value)
                        if t.grad is not None:
                            t.grad = to_device(t.grad, device)
        if dtype is None:
            return self
        d = dtypes.as_dtype(dtype)
        if not d.is_floating:
            raise TypeError(f"Layer.to: dtype must be floating (float32 or float64), got "
                            f"{d.name}")
        with no_grad():
            for t in itertools.chain(self.parameters(), self.buffers()):
                if t.dtype.is_floating and t.dtype is not d:
                    t._set_value(cast(t, d)._value)
                    if t.grad is not None:
                        t.grad = cast(t.grad, d)
        for layer in self.sublayers(include_self=True):
            object.__setattr__(layer, "_dtype", d)
        return self

    astype = to

    def float(self):
        """Casts to float32. Example: ``net.float()``."""
        return self.to(dtype="float32")

    def double(self):
        """Casts to float64. Example: ``net.double()``."""
        return self.to(dtype="float64")

    # ---- state dicts --------------------------------------------------------------------
    def state_dict(self, destination=None, include_sublayers=True, structured_name_prefix="",
                   use_hook=True, keep_vars=True):
        """Parameters and persistable buffers by structured name (``"0.weight"``), as an
        OrderedDict of the tensors themselves (Paddle). A parameter shared by two sublayers
        appears under both names."""
        del use_hook, keep_vars
        out = OrderedDict() if destination is None else destination
        self._state_dict_into(out, structured_name_prefix, include_sublayers, set())
        return out

    def _state_dict_into(self, out, prefix, include_sublayers, visiting):
        for key, p in self._parameters.items():
            if p is not None:
                out[prefix + key] = p
        for key, b in self._buffers.items():
            if b is not None and key not in self._non_persistable_buffer_names_set:
                out[prefix + key] = b
        if include_sublayers:
            visiting.add(id(self))
            for key, layer in self._sub_layers.items():
                if layer is not None and id(layer) not in visiting:
                    layer._state_dict_into(out, f"{prefix}{key}.", True, visiting)
            visiting.discard(id(self))

    to_static_state_dict = state_dict

    def set_state_dict(self, state_dict, use_structured_name=True, strict=False):
        """Loads values from ``state_dict`` (tensors or arrays) into the parameters and
        buffers, casting to their dtypes.

        Shapes must match: any mismatch raises a ValueError listing every mismatched name
        with the expected and given shapes, and nothing is loaded. Missing and unexpected
        names are reported: a warning lists them (Paddle), or with ``strict=True`` a KeyError
        does and nothing is loaded.

        Returns:
            ``(missing_keys, unexpected_keys)``, two lists of names.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"set_state_dict expects a dict of name -> tensor, got "
                            f"{type(state_dict).__name__}")
        own = self.state_dict()
        matched, missing, bad_shapes = [], [], []
        used = set()
        for key, target in own.items():
            lookup = key if use_structured_name else target.name
            if lookup not in state_dict:
                missing.append(lookup)
                continue
            used.add(lookup)
            value = state_dict[lookup]
            shape = _shape_of(value)
            if shape is None:
                raise TypeError(f"set_state_dict: entry '{lookup}' is a "
                                f"{type(value).__name__}, not a tensor or array")
            if list(shape) != target.shape:
                bad_shapes.append(f"'{lookup}': expected shape {target.shape}, got "
                                  f"{list(shape)}")
                continue
            matched.append((target, value))
        unexpected = [k for k in state_dict if k not in used]
        if bad_shapes:
            raise ValueError(f"set_state_dict: shapes do not match for {len(bad_shapes)} "
                             f"entr{'y' if len(bad_shapes) == 1 else 'ies'} of "
                             f"{type(self).__name__} (nothing was loaded): "
                             + "; ".join(bad_shapes))
        if (missing or unexpected) and strict:
            raise KeyError(f"set_state_dict(strict=True) for {type(self).__name__}: missing "
                           f"keys {missing}, unexpected keys {unexpected} (nothing was loaded)")
        with no_grad():
            for target, value in matched:
                t = value if isinstance(value, Tensor) else to_tensor(value)
                target._set_value(cast(t, target.dtype)._value)
        if missing or unexpected:
            warnings.warn(f"set_state_dict for {type(self).__name__}: missing keys {missing}, "
                          f"unexpected keys {unexpected}", stacklevel=2)
        return missing, unexpected

    set_dict = set_state_dict
    load_dict = set_state_dict

    def load_state_dict(self, state_dict, strict=True):
        """PyTorch spelling of ``set_state_dict`` (strict by default)."""
        return self.set_state_dict(state_dict, strict=strict)

    # ---- printing -----------------------------------------------------------------------
    def extra_repr(self):
        """The text inside the parentheses of this layer's repr (override in subclasses)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = []
        for key, layer in self._sub_layers.items():
            if layer is None:
                continue
            body = repr(layer).replace("\n", "\n  ")
            children.append(f"({key}): {body}")
        if not children:
            return f"{type(self).__name__}({extra})"
        inner = "\n  ".join(lines + children)
        return f"{type(self).__name__}(\n  {inner}\n)"

    # ---- pytree protocol ----------------------------------------------------------------
    def _tree_flatten(self):
        """Leaves: the parameters (``named_parameters`` order); the rest is structure."""
        names, params = [], []
        for name, p in self.named_parameters():
            names.append(name)
            params.append(p)
        return params, _LayerDef(self, tuple(names))

    @classmethod
    def _tree_unflatten(cls, aux, children):
        return aux.rebuild(children)


class _HookHandle:
    _ids = itertools.count()

    def __init__(self, table, hook):
        self._table = table
        self._id = next(self._ids)
        table[self._id] = hook

    def remove(self):
        self._table.pop(self._id, None)


def _discard(name, *tables):
    for t in tables:
        if t is not None and name in t:
            del t[name]


def _looks_like_dtype(x):
    if isinstance(x, dtypes.DType):
        return True
    return isinstance(x, str) and x in dtypes.BY_NAME


def _shape_of(value):
    if isinstance(value, Tensor):
        return value.shape
    shape = getattr(value, "shape", None)
    if shape is not None:
        return list(shape)
    if isinstance(value, (list, tuple, int, float)):
        return to_tensor(value).shape
    return None


# ---- layers as pytrees; functional_call ----------------------------------------------------

def _param_slots(layer):
    """Every place a parameter sits: ``(owner_layer, key, param)``, shared ones included."""
    slots = []
    for owner in layer.sublayers(include_self=True):
        for key, p in owner._parameters.items():
            if p is not None:
                slots.append((owner, key, p))
    return slots


class _LayerDef:
    """A layer's structure for the pytree machinery. Equal for layers of the same classes,
    nesting and parameter names, so trees of two such layers (a net and its gradient) match."""

    __slots__ = ("template", "names", "signature")

    def __init__(self, template, names):
        self.template = template
        self.names = names
        self.signature = (names, tuple((n, type(sub)) for n, sub in
                                       template.named_sublayers(include_self=True)))

    def __eq__(self, other):
        return isinstance(other, _LayerDef) and self.signature == other.signature

    def __hash__(self):
        return hash(self.names)

    def __repr__(self):
        return f"{type(self.template).__name__}<{', '.join(self.names)}>"

    def rebuild(self, leaves):
        """A structural copy of the template whose parameter slots hold ``leaves`` (the
        template itself is untouched; shared parameters and sublayers stay shared)."""
        clones = {}

        def clone(layer):
            if id(layer) in clones:
                return clones[id(layer)]
            new = copy.copy(layer)
            clones[id(layer)] = new
            d = new.__dict__
            d["_parameters"] = OrderedDict(layer._parameters)
            d["_buffers"] = OrderedDict(layer._buffers)
            d["_sub_layers"] = OrderedDict(
                (k, None if v is None else clone(v)) for k, v in layer._sub_layers.items())
            return new

        root = clone(self.template)
        by_id = {id(p): leaf for p, leaf in zip(self.template.parameters(), leaves)}
        for owner, key, p in _param_slots(self.template):
            clones[id(owner)]._parameters[key] = by_id[id(p)]
        return root


def functional_call(layer, params, *args, **kwargs):
    """Runs ``layer(*args, **kwargs)`` with some parameters (or buffers) replaced by the
    given tensors, leaving the layer unchanged afterwards. This is how functional transforms
    take a layer's parameters as inputs.

    Args:
        layer: the Layer.
        params: dict from structured name (as in ``named_parameters``/``named_buffers``) to
            tensor, or a list/tuple in ``parameters()`` order. Names not given keep the
            layer's own values.

    Example:
        >>> import primflow as pf
        >>> net = pf.nn.Linear(2, 1)
        >>> params = dict(net.named_parameters())
        >>> x = pf.ones([4, 2])
        >>> grads = pf.grad(lambda p: pf.nn.functional_call(net, p, x).sum())(params)
        >>> grads["weight"].numpy().ravel().tolist()
        [4.0, 4.0]
    """
    if not isinstance(layer, Layer):
        raise TypeError(f"functional_call needs a Layer, got {type(layer).__name__}")
    named = OrderedDict(layer.named_parameters())
    buffers = OrderedDict(layer.named_buffers())
    if isinstance(params, (list, tuple)):
        if len(params) != len(named):
            raise ValueError(f"functional_call: got {len(params)} tensors for the "
                             f"{len(named)} parameters of {type(layer).__name__}")
        params = dict(zip(named, params))
    elif not isinstance(params, dict):
        raise TypeError(f"functional_call: params must be a dict name -> tensor or a list in "
                        f"parameters() order, got {type(params).__name__}")
    replace = {}
    for name, value in params.items():
        old = named.get(name)
        if old is None:
            old = buffers.get(name)
        if old is None:
            raise KeyError(f"functional_call: {name!r} is not a parameter or buffer of "
                           f"{type(layer).__name__}; its parameters are {list(named)}")
        shape = _shape_of(value)
        if shape is not None and list(shape) != old.shape:
            raise ValueError(f"functional_call: {name!r} has shape {list(shape)} but the "
                             f"layer's has shape {old.shape}")
        replace[id(old)] = value
    swapped = []
    try:
        for owner in layer.sublayers(include_self=True):
            for table in (owner._parameters, owner._buffers):
                for key, old in table.items():
                    if old is not None and id(old) in replace:
                        swapped.append((table, key, old))
                        table[key] = replace[id(old)]
        return layer(*args, **kwargs)
    finally:
        for table, key, old in reversed(swapped):
            table[key] = old


def _amp_inputs(layer_name, inputs):
    """The inputs of a layer under ``pf.amp.auto_cast``: floating tensors cast to float32 for
    black-list layers (normalisations, softmax, losses); unchanged otherwise (white-list
    layers cast inside ``forward``, where their weights are)."""
    if _amp.amp_dtype(layer_name) is not dtypes.float32:
        return inputs
    return tuple(cast(x, dtypes.float32) if isinstance(x, Tensor) and x.dtype.is_floating
                 and not x.dtype.is_complex and x.dtype.itemsize < 4 else x for x in inputs)
