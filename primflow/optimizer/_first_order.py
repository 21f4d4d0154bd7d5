"""First-order optimizers: SGD, Momentum, Adam, AdamW (Paddle's formulas and arguments).

Every update is written in primflow ops on the parameter's values and runs under
``no_grad`` (see ``Optimizer.step``); state tensors are replaced, never modified in place.
"""

from __future__ import annotations

import math

from ..ops import math as _math
from ..ops.creation import zeros_like
from ._optimizer import Optimizer

__all__ = ["SGD", "Adam", "AdamW", "Momentum"]


class SGD(Optimizer):
    """Plain gradient descent: ``param -= lr * grad``.

    Example:
        >>> import primflow as pf
        >>> w = pf.to_tensor([1.0], stop_gradient=False)
        >>> opt = pf.optimizer.SGD(learning_rate=0.1, parameters=[w])
        >>> (w * w).sum().backward(); opt.step(); w.numpy()
        array([0.8], dtype=float32)
    """

    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 multi_precision=False, name=None):
        del multi_precision
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _update(self, p, g, lr, group, state):
        self._assign(p, _math.subtract(p, _math.multiply(g, lr)))


class Momentum(Optimizer):
    """Heavy-ball momentum (Paddle's form): ``v = momentum * v + grad`` then
    ``param -= lr * v``, or with ``use_nesterov=True`` ``param -= lr * (grad + momentum * v)``.

    Args:
        momentum: the decay of the velocity (default 0.9).
        use_nesterov: Nesterov's variant (``nesterov=`` is accepted too).
        rescale_grad: multiplies the gradient first.

    Example:
        >>> import primflow as pf
        >>> w = pf.to_tensor([1.0], stop_gradient=False)
        >>> opt = pf.optimizer.Momentum(0.1, momentum=0.9, parameters=[w], use_nesterov=True)
    """

    _state_tensors = ("velocity",)

    def __init__(self, learning_rate=0.001, momentum=0.9, parameters=None, use_nesterov=False,
                 weight_decay=None, grad_clip=None, multi_precision=False, rescale_grad=1.0,
                 use_multi_tensor=False, name=None, nesterov=None):
        del multi_precision, use_multi_tensor
        if nesterov is not None:
            use_nesterov = nesterov
        if not momentum >= 0:
            raise ValueError(f"Momentum: momentum must be >= 0, got {momentum}")
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name,
                         momentum=float(momentum), use_nesterov=bool(use_nesterov),
                         rescale_grad=float(rescale_grad))

    def _update(self, p, g, lr, group, state):
        mu = group["momentum"]
        if group["rescale_grad"] != 1.0:
            g = _math.multiply(g, group["rescale_grad"])
        v = state.get("velocity")
        v = g if v is None else _math.add(_math.multiply(v, mu), g)
        state["velocity"] = v
        direction = _math.add(g, _math.multiply(v, mu)) if group["use_nesterov"] else v
        self._assign(p, _math.subtract(p, _math.multiply(direction, lr)))


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction:
    ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``,
    ``param -= lr * m_hat / (sqrt(v_hat) + epsilon)`` with ``m_hat = m / (1 - b1^t)``,
    ``v_hat = v / (1 - b2^t)``. ``amsgrad=True`` uses the running maximum of ``v``.

    Example:
        >>> import primflow as pf
        >>> net = pf.nn.Linear(2, 1)
        >>> opt = pf.optimizer.Adam(learning_rate=1e-3, parameters=net.parameters())
        >>> loss = net(pf.ones([4, 2])).pow(2).mean()
        >>> loss.backward(); opt.step(); opt.clear_grad()
    """

    _state_tensors = ("moment1", "moment2", "moment2_max")

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08,
                 parameters=None, weight_decay=None, grad_clip=None, lazy_mode=False,
                 multi_precision=False, use_multi_tensor=False, amsgrad=False, name=None):
        del lazy_mode, multi_precision, use_multi_tensor
        beta1, beta2, epsilon = float(beta1), float(beta2), float(epsilon)
        for what, b in (("beta1", beta1), ("beta2", beta2)):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{type(self).__name__}: {what} must be in [0, 1), got {b}")
        if not epsilon >= 0:
            raise ValueError(f"{type(self).__name__}: epsilon must be >= 0, got {epsilon}")
        super().__init__(learning_rate, parameters, self._coupled_decay(weight_decay),
                         grad_clip, name, beta1=beta1, beta2=beta2, epsilon=epsilon,
                         amsgrad=bool(amsgrad))

    @staticmethod
    def _coupled_decay(weight_decay):
        return weight_decay

    def _adam_step(self, p, g, lr, group, state):
        b1, b2, eps = group["beta1"], group["beta2"], group["epsilon"]
        t = state.get("step", 0) + 1
        m = state.get("moment1")
        v = state.get("moment2")
        if m is None:
            m, v = zeros_like(p), zeros_like(p)
        m = _math.add(_math.multiply(m, b1), _math.multiply(g, 1.0 - b1))
        v = _math.add(_math.multiply(v, b2), _math.multiply(_math.square(g), 1.0 - b2))
        state["moment1"], state["moment2"], state["step"] = m, v, t
        if group["amsgrad"]:
            v_max = state.get("moment2_max")
            v = v if v_max is None else _math.maximum(v_max, v)
            state["moment2_max"] = v
        bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
        # lr * m_hat / (sqrt(v_hat) + eps), rearranged as Paddle does to one scalar factor:
        # lr * sqrt(bc2) / bc1 * m / (sqrt(v) + eps * sqrt(bc2))
        denom = _math.add(_math.sqrt(v), eps * math.sqrt(bc2))
        step = _math.multiply(_math.divide(m, denom), lr * math.sqrt(bc2) / bc1)
        self._assign(p, _math.subtract(p, step))

    _update = _adam_step


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, Paddle's AdamW): before the
    Adam step, ``param *= 1 - lr * weight_decay`` (default ``weight_decay=0.01``).

    Args:
        weight_decay: the decay coefficient (a float).
        lr_ratio: optional ``fn(param) -> float`` scaling the learning rate per parameter.
        apply_decay_param_fun: optional ``fn(param.name) -> bool``; only parameters for
            which it returns True are decayed.

    Example:
        >>> import primflow as pf
        >>> net = pf.nn.Linear(2, 1)
        >>> opt = pf.optimizer.AdamW(learning_rate=1e-3, parameters=net.parameters(),
        ...                          weight_decay=0.01,
        ...                          apply_decay_param_fun=lambda n: not n.endswith("b_0"))
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08,
                 parameters=None, weight_decay=0.01, lr_ratio=None, apply_decay_param_fun=None,
                 grad_clip=None, lazy_mode=False, multi_precision=False, amsgrad=False,
                 name=None):
        coeff = getattr(weight_decay, "coeff", weight_decay)
        if isinstance(coeff, bool) or not isinstance(coeff, (int, float)):
            raise TypeError(f"AdamW: weight_decay must be a float coefficient, got "
                            f"{type(weight_decay).__name__}")
        if not coeff >= 0:
            raise ValueError(f"AdamW: weight_decay must be >= 0, got {coeff}")
        self._coeff = float(coeff)
        self._lr_ratio = lr_ratio
        self._apply_decay_param_fun = apply_decay_param_fun
        super().__init__(learning_rate, beta1, beta2, epsilon, parameters, None, grad_clip,
                         lazy_mode, multi_precision, False, amsgrad, name)
        for group in self._param_groups:  # groups may set their own decoupled coefficient
            wd = group.pop("weight_decay", None)
            group["coeff"] = self._coeff if wd is None else wd.coeff

    def _update(self, p, g, lr, group, state):
        if self._lr_ratio is not None:
            lr = lr * float(self._lr_ratio(p))
        coeff = group["coeff"]
        decay = coeff and (self._apply_decay_param_fun is None
                           or self._apply_decay_param_fun(getattr(p, "name", None)))
        if decay:
            self._assign(p, _math.multiply(p, 1.0 - lr * coeff))
        self._adam_step(p, g, lr, group, state)
