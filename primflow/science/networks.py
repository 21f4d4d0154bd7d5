"""Networks and optimizers for PINN training, on ``pf.nn`` and ``pf.optimizer``.

Example:
    >>> from primflow.science.networks import make_mlp
    >>> net = make_mlp(2, 1, hidden=16, depth=3)
    >>> [p.shape for p in net.parameters()][:2]
    [[2, 16], [16]]
"""

from __future__ import annotations

import itertools

import primflow as pf

_ACTIVATIONS = {"tanh": "Tanh", "sin": "Sin", "silu": "SiLU", "gelu": "GELU",
                "softplus": "Softplus"}


def make_mlp(in_dim, out_dim, hidden, depth, activation="tanh", dtype="float64"):
    """``pf.nn.Sequential``: ``in_dim -> hidden x depth -> out_dim`` with the activation
    between layers and parameters in ``dtype`` (Linear's default init: Xavier-uniform
    weights, zero biases)."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose one of "
                         f"{', '.join(_ACTIVATIONS)}")
    nn = pf.nn
    sizes = [in_dim] + [hidden] * depth + [out_dim]
    previous = pf.get_default_dtype()
    pf.set_default_dtype(dtype)
    try:
        layers = []
        for a, b in itertools.pairwise(sizes[:-1]):
            layers += [nn.Linear(a, b), getattr(nn, _ACTIVATIONS[activation])()]
        layers.append(nn.Linear(sizes[-2], sizes[-1]))
        return nn.Sequential(*layers)
    finally:
        pf.set_default_dtype(previous)


def adam(parameters, learning_rate):
    """``pf.optimizer.Adam`` over ``parameters``."""
    return pf.optimizer.Adam(learning_rate=learning_rate, parameters=parameters)


def lbfgs(parameters, max_iter, learning_rate=1.0, history_size=50):
    """``pf.optimizer.LBFGS`` with the strong-Wolfe line search and tolerances tight
    enough that PINN runs stop by their iteration budget, not by a tolerance."""
    return pf.optimizer.LBFGS(learning_rate=learning_rate, max_iter=max_iter,
                              history_size=history_size, tolerance_grad=1e-12,
                              tolerance_change=1e-14, line_search_fn="strong_wolfe",
                              parameters=parameters)


