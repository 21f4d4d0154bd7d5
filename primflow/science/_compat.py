"""Networks, optimizers and checkpoints for the science package.

Uses ``pf.nn``, ``pf.optimizer`` and ``pf.save``/``pf.load`` (Paddle semantics) when this
primflow has them, and small stand-ins from ``_fallback`` otherwise.
"""

from __future__ import annotations

import primflow as pf

from . import _fallback


def has_nn():
    nn = getattr(pf, "nn", None)
    return all(hasattr(nn, n) for n in ("Layer", "Linear", "Sequential", "Tanh"))


def has_optimizer():
    opt = getattr(pf, "optimizer", None)
    return opt is not None and hasattr(opt, "Adam") and hasattr(opt, "LBFGS")


def has_save():
    return hasattr(pf, "save") and hasattr(pf, "load")


_ACTIVATIONS = ("tanh", "sin", "silu", "gelu", "softplus")


def _activation_fn(name):
    table = {"tanh": pf.tanh, "sin": pf.sin, "silu": pf.silu, "gelu": pf.gelu,
             "softplus": pf.softplus}
    if name not in table:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(table)}")
    return table[name]


def make_mlp(in_dim, out_dim, hidden, depth, activation="tanh", dtype="float64"):
    """An MLP ``in_dim -> hidden x depth -> out_dim`` with the given activation, its
    parameters in ``dtype`` (Xavier-uniform weights, zero biases)."""
    sizes = [in_dim] + [hidden] * depth + [out_dim]
    if not has_nn():
        return _fallback.MLP(sizes, _activation_fn(activation), dtype)
    nn = pf.nn
    act_layers = {"tanh": "Tanh", "sin": "Sin", "silu": "SiLU", "gelu": "GELU",
                  "softplus": "Softplus"}
    if activation not in act_layers:
        raise ValueError(f"unknown activation {activation!r}; choose one of "
                         f"{', '.join(act_layers)}")
    previous = pf.get_default_dtype()
    pf.set_default_dtype(dtype)
    try:
        layers = []
        for a, b in zip(sizes[:-2], sizes[1:-1]):
            layers += [nn.Linear(a, b), getattr(nn, act_layers[activation])()]
        layers.append(nn.Linear(sizes[-2], sizes[-1]))
        return nn.Sequential(*layers)
    finally:
        pf.set_default_dtype(previous)


def adam(parameters, learning_rate):
    if has_optimizer():
        return pf.optimizer.Adam(learning_rate=learning_rate, parameters=parameters)
    return _fallback.Adam(learning_rate=learning_rate, parameters=parameters)


def lbfgs(parameters, max_iter, learning_rate=1.0, history_size=50):
    kwargs = dict(learning_rate=learning_rate, max_iter=max_iter, history_size=history_size,
                  tolerance_grad=1e-12, tolerance_change=1e-14,
                  line_search_fn="strong_wolfe", parameters=parameters)
    if has_optimizer():
        return pf.optimizer.LBFGS(**kwargs)
    return _fallback.LBFGS(**kwargs)


def set_lr(opt, value):
    if hasattr(opt, "set_lr"):
        opt.set_lr(value)
    else:  # pragma: no cover - optimizers without set_lr
        opt._learning_rate = value


def save(obj, path):
    if has_save():
        pf.save(obj, path)
    else:
        _fallback.save(obj, path)


def load(path):
    if has_save():
        return pf.load(path)
    return _fallback.load(path)
