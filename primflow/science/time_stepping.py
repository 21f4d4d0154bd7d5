"""Time stepping inside ``pf.scan``: a classical RK4 integrator and a neural ODE trained
through it.

``odeint_rk4(f, y0, dt, n_steps, params)`` integrates ``dy/dt = f(y, params)`` with
``n_steps`` fixed RK4 steps in one ``pf.scan``: under ``pf.jit`` the step is traced and
compiled once (the program does not grow with ``n_steps``), and reverse mode runs a reverse
scan over the saved states, so ``pf.grad`` of a loss on the trajectory is exact to
rounding (the discrete adjoint of the integrator).

``NeuralODE`` fits an MLP vector field to observed trajectories: ``loss`` integrates the
model from the observed initial states and compares the states at the observation times;
``fit`` takes Adam steps, each one compiled ``pf.value_and_grad`` of the loss.

Example:
    >>> import primflow as pf
    >>> from primflow.science.time_stepping import odeint_rk4
    >>> decay = lambda y, k: -k * y
    >>> y_end, _ = odeint_rk4(decay, pf.to_tensor([1.0], dtype="float64"), 0.01, 100,
    ...                       pf.to_tensor(1.0, dtype="float64"))
    >>> round(float(y_end[0]), 6)  # exp(-1)
    0.367879
"""

from __future__ import annotations

import math

import primflow as pf

__all__ = ["NeuralODE", "mlp_field", "odeint_rk4", "rk4_step", "unrolled_rk4"]


def rk4_step(f, y, dt, params):
    """One classical Runge-Kutta step of ``dy/dt = f(y, params)`` of size ``dt``.

    Example:
        >>> import primflow as pf
        >>> y = rk4_step(lambda y, p: y * p, pf.to_tensor(1.0), 0.1, pf.to_tensor(1.0))
        >>> round(float(y), 6)  # exp(0.1) to 4th order
        1.105171
    """
    k1 = f(y, params)
    k2 = f(y + (0.5 * dt) * k1, params)
    k3 = f(y + (0.5 * dt) * k2, params)
    k4 = f(y + dt * k3, params)
    return y + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def odeint_rk4(f, y0, dt, n_steps, params, save_every=None):
    """Integrates ``dy/dt = f(y, params)`` from ``y0`` with ``n_steps`` RK4 steps of size
    ``dt`` in one ``pf.scan``.

    Returns ``(y at the end, saved states)``: with ``save_every=k`` the states after every
    ``k``-th step, stacked (shape ``[n_steps // k, *y0.shape]``; ``n_steps`` must be a
    multiple of ``k``), else None. ``y0`` may hold a batch of states (any leading shape).

    Example:
        >>> import primflow as pf
        >>> y, saved = odeint_rk4(lambda y, p: -y, pf.ones([2]), 0.1, 10, None,
        ...                       save_every=5)
        >>> saved.shape
        [2, 2]
    """
    if n_steps < 1:
        raise ValueError(f"odeint_rk4: n_steps must be at least 1, got {n_steps}")
    if save_every is None:
        def step(y, _):
            return rk4_step(f, y, dt, params), None

        return pf.scan(step, y0, None, length=n_steps)[0], None
    if n_steps % save_every:
        raise ValueError(f"odeint_rk4: n_steps={n_steps} is not a multiple of "
                         f"save_every={save_every}")

    def inner(y, _):
        return rk4_step(f, y, dt, params), None

    def outer(y, _):  # save_every steps, then keep the state
        y = pf.scan(inner, y, None, length=save_every)[0]
        return y, y

    return pf.scan(outer, y0, None, length=n_steps // save_every)


def unrolled_rk4(f, y0, dt, n_steps, params):
    """The same integration as a Python loop (no scan): the reference for tests and the
    unrolled baseline of the benchmark.

    Example:
        >>> import primflow as pf
        >>> round(float(unrolled_rk4(lambda y, p: -y, pf.to_tensor(1.0), 0.1, 10, None)), 4)
        0.3679
    """
    y = y0
    for _ in range(n_steps):
        y = rk4_step(f, y, dt, params)
    return y


def mlp_field(y, params):
    """``W2 tanh(y W1 + b1) + b2``: the neural vector field (``params`` = [W1, b1, W2,
    b2]; ``y`` of shape ``[..., d]``).

    Example:
        >>> import primflow as pf
        >>> ps = NeuralODE(2, hidden=4, seed=0).params
        >>> mlp_field(pf.zeros([3, 2], dtype="float64"), ps).shape
        [3, 2]
    """
    w1, b1, w2, b2 = params
    return pf.matmul(pf.tanh(pf.matmul(y, w1) + b1), w2) + b2


class NeuralODE:
    """A neural ODE ``dy/dt = mlp(y)`` integrated by RK4 in ``pf.scan`` and trained through
    the integrator (``loss``, ``fit``).

    Args:
        dim: state dimension. hidden: width of the MLP's hidden layer.
        dt, n_steps, save_every: the integration grid (observations after every
            ``save_every`` steps).
        seed, dtype: initialization.

    Example:
        >>> import primflow as pf
        >>> model = NeuralODE(2, hidden=8, dt=0.05, n_steps=20, save_every=5, seed=0)
        >>> y0 = pf.to_tensor([[1.0, 0.0]], dtype="float64")
        >>> model.trajectory(y0).shape
        [4, 1, 2]
    """

    def __init__(self, dim, hidden=32, dt=0.01, n_steps=1000, save_every=100, seed=0,
                 dtype="float64"):
        pf.seed(seed)
        scale1, scale2 = 1.0 / math.sqrt(dim), 0.1 / math.sqrt(hidden)
        self.params = [
            (pf.randn([dim, hidden], dtype=dtype) * scale1).detach(),
            pf.zeros([hidden], dtype=dtype),
            (pf.randn([hidden, dim], dtype=dtype) * scale2).detach(),
            pf.zeros([dim], dtype=dtype),
        ]
        for p in self.params:
            p.stop_gradient = False
        self.dt, self.n_steps, self.save_every = dt, n_steps, save_every
        self._step = None

    def trajectory(self, y0, params=None):
        """The states after every ``save_every`` steps from ``y0`` (``[n_obs, *y0.shape]``)."""
        params = self.params if params is None else params
        return odeint_rk4(mlp_field, y0, self.dt, self.n_steps, params,
                          save_every=self.save_every)[1]

    def loss(self, params, y0, observed):
        """Mean squared error between the model's and the observed states
        (``observed``: ``[n_obs, *y0.shape]``)."""
        diff = self.trajectory(y0, params) - observed
        return (diff * diff).mean()

    def fit(self, y0, observed, steps=100, learning_rate=1e-2):
        """Adam steps on ``loss``; each is one compiled ``value_and_grad`` (traced once).
        Returns the loss history (Python floats)."""
        if self._step is None:
            self._step = pf.jit(pf.value_and_grad(self.loss))
        optimizer = pf.optimizer.Adam(learning_rate=learning_rate, parameters=self.params)
        history = []
        for _ in range(steps):
            value, grads = self._step(self.params, y0, observed)
            for p, g in zip(self.params, grads):
                p.grad = g
            optimizer.step()
            history.append(float(value))
        return history
