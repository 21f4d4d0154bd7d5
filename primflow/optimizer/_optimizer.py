"""The Optimizer base class (Paddle's calling conventions) and weight-decay regularizers.

An optimizer holds the parameters (optionally in groups), a learning rate (float or
``pf.optimizer.lr`` schedule), an optional ``weight_decay`` and ``grad_clip``, and per-
parameter state (moments, step counts). ``step()`` reads each parameter's ``.grad``, clips,
regularizes, and writes the new values with a copy-on-write update
(``param._set_value``) under ``no_grad``: nothing is recorded, and a graph that saved the
old values notices the version bump instead of silently using new ones.
"""

from __future__ import annotations

from ..core.state import enable_grad, no_grad
from ..autodiff import tape
from ..core.tensor import Tensor
from ..ops import math as _math
from ..ops.helpers import cast
from ..ops.creation import to_tensor
from .lr import LRScheduler

__all__ = ["L1Decay", "L2Decay", "Optimizer"]


class L2Decay:
    """L2 weight decay (coupled): adds ``coeff * param`` to the gradient, i.e. the
    gradient of ``coeff / 2 * ||param||^2``. A float ``weight_decay`` means ``L2Decay``.

    Example:
        >>> import primflow as pf
        >>> init = pf.nn.initializer.Constant(2.0)
        >>> p = pf.create_parameter([1], 'float32', default_initializer=init)
        >>> pf.optimizer.L2Decay(0.1)(p, pf.zeros([1])).numpy()  # adds 0.1 * p to the gradient
        array([0.2], dtype=float32)
    """

    def __init__(self, coeff=0.0):
        self.coeff = float(coeff)

    def __call__(self, param, grad):
        return _math.add(grad, _math.multiply(param.detach(), self.coeff))

    def penalty(self, flat_param):
        """The loss term whose gradient this adds (used by LBFGS)."""
        return 0.5 * self.coeff * float(_math.square(flat_param).sum())

    def __repr__(self):
        return f"L2Decay(coeff={self.coeff})"


class L1Decay:
    """L1 weight decay: adds ``coeff * sign(param)`` to the gradient.

    Example:
        >>> import primflow as pf
        >>> init = pf.nn.initializer.Constant(-2.0)
        >>> p = pf.create_parameter([1], 'float32', default_initializer=init)
        >>> pf.optimizer.L1Decay(0.1)(p, pf.zeros([1])).numpy()  # adds 0.1 * sign(p)
        array([-0.1], dtype=float32)
    """

    def __init__(self, coeff=0.0):
        self.coeff = float(coeff)

    def __call__(self, param, grad):
        return _math.add(grad, _math.multiply(_math.sign(param.detach()), self.coeff))

    def penalty(self, flat_param):
        return self.coeff * float(_math.abs(flat_param).sum())

    def __repr__(self):
        return f"L1Decay(coeff={self.coeff})"


def _as_regularizer(weight_decay, who):
    if weight_decay is None:
        return None
    if isinstance(weight_decay, (L1Decay, L2Decay)):
        return weight_decay
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)):
        raise TypeError(f"{who}: weight_decay must be a float, pf.optimizer.L2Decay or "
                        f"L1Decay, got {type(weight_decay).__name__}")
    if not weight_decay >= 0:  # (nan too) a negative decay pushes weights to grow
        raise ValueError(f"{who}: weight_decay must be >= 0, got {weight_decay}")
    return L2Decay(float(weight_decay))


def _check_lr(learning_rate, who):
    if isinstance(learning_rate, LRScheduler):
        return learning_rate
    if isinstance(learning_rate, Tensor) and learning_rate.size == 1:
        learning_rate = float(learning_rate)
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)):
        raise TypeError(f"{who}: learning_rate must be a float or a pf.optimizer.lr schedule, "
                        f"got {type(learning_rate).__name__}")
    if not learning_rate >= 0:  # (nan too)
        raise ValueError(f"{who}: learning_rate must be >= 0, got {learning_rate}")
    return float(learning_rate)


class Optimizer:
    """Base class of all optimizers.

    Args:
        learning_rate: a float or a ``pf.optimizer.lr`` schedule.
        parameters: the tensors to optimize (``net.parameters()``), or a list of groups
            ``{"params": [...], "learning_rate": scale, "weight_decay": ...}`` where the
            group's ``learning_rate`` multiplies the optimizer's (Paddle) and other keys
            override the optimizer's hyperparameters for that group.
        weight_decay: float (L2 coefficient), ``L2Decay`` or ``L1Decay``; a parameter's own
            ``regularizer`` (from its ParamAttr) takes precedence.
        grad_clip: ``pf.nn.ClipGradByGlobalNorm`` / ``ClipGradByNorm`` / ``ClipGradByValue``.

    Subclasses define ``_hyper`` (their hyperparameters' defaults), ``_state_tensors``
    (names of per-parameter state tensors shaped like the parameter) and ``_update``.

    Example:
        >>> import primflow as pf
        >>> p = pf.create_parameter([1], 'float32')
        >>> opt = pf.optimizer.SGD(learning_rate=0.1, parameters=[p])
        >>> isinstance(opt, pf.optimizer.Optimizer), opt.get_lr()
        (True, 0.1)
    """

    _hyper: dict = {}
    _state_tensors: tuple = ()

    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 name=None, **hyper):
        who = type(self).__name__
        self._name = name
        self._learning_rate = _check_lr(learning_rate, who)
        self.regularization = _as_regularizer(weight_decay, who)
        if grad_clip is not None and not callable(grad_clip):
            raise TypeError(f"{who}: grad_clip must be a pf.nn.ClipGradBy* object, got "
                            f"{type(grad_clip).__name__}")
        self._grad_clip = grad_clip
        self._defaults = dict(hyper)
        self._param_groups = self._make_groups(parameters, who)
        self._parameter_list = [p for g in self._param_groups for p in g["params"]]
        self._group_of = {id(p): g for g in self._param_groups for p in g["params"]}
        self._index_of = {id(p): i for i, p in enumerate(self._parameter_list)}
        self._accumulators = {}  # parameter index -> dict of state

    def _make_groups(self, parameters, who):
        if parameters is None:
            raise ValueError(f"{who} needs the parameters to optimize: pass "
                             f"parameters=net.parameters() (got None)")
        if isinstance(parameters, Tensor):
            raise TypeError(f"{who}: parameters must be a list of tensors, got a single "
                            f"Tensor; wrap it in a list: parameters=[t]")
        if isinstance(parameters, dict):
            raise TypeError(f"{who}: parameters must be a list of tensors or of group dicts, "
                            f"got a dict; pass list(net.parameters())")
        items = list(parameters)
        if not items:
            raise ValueError(f"{who} got an empty parameter list: nothing to optimize. Check "
                             f"that the layer has parameters (net.parameters())")
        if isinstance(items[0], dict):
            groups = []
            for g in items:
                if not isinstance(g, dict) or "params" not in g:
                    raise TypeError(f"{who}: parameter groups must be dicts with a 'params' "
                                    f"key")
                group = dict(self._defaults)
                group.update({k: v for k, v in g.items() if k != "params"})
                group["params"] = self._check_params(g["params"], who)
                group.setdefault("learning_rate", 1.0)
                if "weight_decay" in g:
                    group["weight_decay"] = _as_regularizer(g["weight_decay"], who)
                groups.append(group)
        else:
            group = dict(self._defaults)
            group["params"] = self._check_params(items, who)
            group["learning_rate"] = 1.0
            groups = [group]
        seen = set()
        for g in groups:
            for p in g["params"]:
                if id(p) in seen:
                    raise ValueError(f"{who}: a parameter (shape {p.shape}, name {p.name!r}) "
                                     f"appears more than once in parameters")
                seen.add(id(p))
        if not seen:
            raise ValueError(f"{who} got no parameters to optimize")
        return groups

    @staticmethod
    def _check_params(params, who):
        if isinstance(params, Tensor):
            params = [params]
        out = list(params)
        for i, p in enumerate(out):
            if not isinstance(p, Tensor):
                raise TypeError(f"{who}: parameters[{i}] is a {type(p).__name__}, not a "
                                f"Tensor")
            if not p.dtype.is_floating:
                raise TypeError(f"{who}: parameters[{i}] has dtype {p.dtype.name}; only "
                                f"floating-point tensors can be optimized")
            if not p.is_leaf:
                raise ValueError(f"{who}: parameters[{i}] (shape {p.shape}) is the result of "
                                 f"an operation, not a leaf tensor; optimize the leaf it was "
                                 f"computed from (or pass p.detach() with stop_gradient=False)")
        return out

    # ---- learning rate ------------------------------------------------------------------
    def get_lr(self):
        """The current learning rate (a float; the schedule's current value if any)."""
        if isinstance(self._learning_rate, LRScheduler):
            return float(self._learning_rate())
        return self._learning_rate

    def set_lr(self, value):
        """Sets a float learning rate (not allowed when a schedule drives it)."""
        if isinstance(self._learning_rate, LRScheduler):
            raise RuntimeError(f"{type(self).__name__} is driven by the schedule "
                               f"{type(self._learning_rate).__name__}; call "
                               f"set_lr_scheduler(...) to replace it instead of set_lr")
        self._learning_rate = _check_lr(value, type(self).__name__)

    def set_lr_scheduler(self, scheduler):
        """Replaces the learning rate with ``scheduler`` (a ``pf.optimizer.lr`` schedule)."""
        if not isinstance(scheduler, LRScheduler):
            raise TypeError(f"set_lr_scheduler needs a pf.optimizer.lr schedule, got "
                            f"{type(scheduler).__name__}")
        self._learning_rate = scheduler

    # ---- gradients ----------------------------------------------------------------------
    def clear_grad(self, set_to_zero=False):
        """Drops the gradients of all parameters (``set_to_zero=True`` keeps zero tensors
        instead; a parameter whose grad is None is skipped by ``step``)."""
        for p in self._parameter_list:
            if set_to_zero and p.grad is not None:
                with no_grad():
                    p.grad = _math.multiply(p.grad.detach(), 0.0)
            else:
                p.clear_grad()

    def zero_grad(self, set_to_none=True):
        """PyTorch spelling of ``clear_grad``."""
        self.clear_grad(set_to_zero=not set_to_none)

    def _params_grads(self):
        out = []
        for p in self._parameter_list:
            if p.stop_gradient or p.grad is None:
                continue
            out.append((p, p.grad.detach()))
        return out

    def _regularize(self, p, g, group):
        reg = getattr(p, "regularizer", None)
        if reg is None:
            reg = group.get("weight_decay", self.regularization)
        return g if reg is None or not reg.coeff else reg(p, g)

    # ---- stepping -----------------------------------------------------------------------
    def step(self):
        """One update of every parameter that has a gradient (``.grad`` not None)."""
        with no_grad():
            params_grads = self._params_grads()
            if self._grad_clip is not None:
                params_grads = self._grad_clip(params_grads)
            lr = self.get_lr()
            for p, g in params_grads:
                if g is None:
                    continue
                group = self._group_of[id(p)]
                g = self._regularize(p, cast(g, p.dtype), group)
                scale = group["learning_rate"] * getattr(p, "optimize_attr",
                                                         {}).get("learning_rate", 1.0)
                state = self._accumulators.setdefault(self._index_of[id(p)], {})
                self._update(p, g, lr * scale, group, state)

    def _update(self, p, g, lr, group, state):
        raise NotImplementedError

    @staticmethod
    def _assign(p, new):
        """Writes ``new`` into parameter ``p`` (copy-on-write; bumps the version counter).
        A distributed parameter takes the distributed result as it is (each rank keeps its
        block; a rank outside the parameter's mesh holds none), never its gathered value."""
        new = cast(new, p.dtype)
        p._set_value(new if p.is_dist() else new._value)

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Computes the gradients of ``loss`` (``loss.backward()``) and takes one step.

        If ``loss.backward()`` already ran (Paddle's ``loss.backward(); opt.minimize(loss)``
        pattern), the existing gradients are used instead of backpropagating twice.
        Gradients accumulate as with ``backward``; call ``clear_grad()`` between steps.

        Returns:
            ``(None, [(param, grad), ...])`` as Paddle's dygraph minimize.
        """
        del startup_program, parameters, no_grad_set
        if not isinstance(loss, Tensor):
            raise TypeError(f"minimize needs the loss tensor, got {type(loss).__name__}")
        node = loss._node
        if node is not None and not node.freed and node not in tape.backpropagated:
            with enable_grad():
                loss.backward()
        elif loss.stop_gradient:
            raise RuntimeError(f"minimize: the loss (shape {loss.shape}) does not depend on any "
                               f"tensor that requires grad, so there is nothing to minimize")
        self.step()
        return None, [(p, p.grad) for p in self._parameter_list if p.grad is not None]

    # ---- state ----------------------------------------------------------------------------
    def state_dict(self):
        """Everything needed to resume: per-parameter state (moments, step counts) keyed by
        the parameter's position in ``parameters``, the learning rate and the schedule.

        Tensors in it are the optimizer's own (never modified in place), so saving it with
        ``pf.save`` and loading it later restores the exact state.
        """
        state = {}
        for idx, acc in sorted(self._accumulators.items()):
            state[str(idx)] = dict(acc)
        out = {"state": state,
               "param_names": [getattr(p, "name", None) or f"param_{i}"
                               for i, p in enumerate(self._parameter_list)],
               "param_shapes": [p.shape for p in self._parameter_list],
               "optimizer": type(self).__name__}
        if isinstance(self._learning_rate, LRScheduler):
            out["LR_Scheduler"] = self._learning_rate.state_dict()
        else:
            out["learning_rate"] = self._learning_rate
        return out

    def set_state_dict(self, state_dict):
        """Restores a ``state_dict()`` (e.g. from ``pf.load``). The parameters must be the
        same in number, order and shapes; a mismatch raises a ValueError saying which."""
        who = type(self).__name__
        if not isinstance(state_dict, dict) or "state" not in state_dict:
            raise ValueError(f"{who}.set_state_dict expects a dict from {who}.state_dict() (with "
                             f"a 'state' entry), got {type(state_dict).__name__}"
                             + (f" with keys {sorted(state_dict)}" if isinstance(state_dict, dict)
                                else ""))
        saved_kind = state_dict.get("optimizer")
        if saved_kind is not None and saved_kind != who:
            raise ValueError(f"{who}.set_state_dict: the state was saved by {saved_kind}")
        shapes = state_dict.get("param_shapes")
        mine = [p.shape for p in self._parameter_list]
        if shapes is not None and [list(s) for s in shapes] != mine:
            raise ValueError(f"{who}.set_state_dict: the saved state is for parameters of "
                             f"shapes {[list(s) for s in shapes]}, but this optimizer has "
                             f"{mine}")
        new = {}
        for key, acc in state_dict["state"].items():
            idx = int(key)
            if not 0 <= idx < len(self._parameter_list):
                raise ValueError(f"{who}.set_state_dict: state for parameter {idx}, but there "
                                 f"are {len(self._parameter_list)} parameters")
            p = self._parameter_list[idx]
            entry = {}
            for name, value in acc.items():
                if name in self._state_tensors:
                    t = value if isinstance(value, Tensor) else to_tensor(value)
                    if t.shape != p.shape:
                        raise ValueError(f"{who}.set_state_dict: '{name}' of parameter {idx} "
                                         f"has shape {t.shape}, expected {p.shape}")
                    entry[name] = cast(t, p.dtype).detach()
                else:
                    entry[name] = value.item() if isinstance(value, Tensor) else value
            new[idx] = entry
        self._accumulators = new
        self._restore_lr(state_dict)

    def _restore_lr(self, state_dict):
        """The schedule's progress, or the float learning rate, from a state dict."""
        if isinstance(self._learning_rate, LRScheduler):
            if "LR_Scheduler" in state_dict:
                self._learning_rate.set_state_dict(state_dict["LR_Scheduler"])
        elif "learning_rate" in state_dict:
            self._learning_rate = _check_lr(state_dict["learning_rate"], type(self).__name__)

    set_dict = set_state_dict
    load_state_dict = set_state_dict

    def __repr__(self):
        return (f"{type(self).__name__}(learning_rate={self._learning_rate!r}, "
                f"parameters={len(self._parameter_list)})")
