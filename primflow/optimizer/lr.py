"""``pf.optimizer.lr``: learning-rate schedules (Paddle's ``paddle.optimizer.lr``).

A schedule is passed as an optimizer's ``learning_rate``; the optimizer reads its current
value on every step, and you advance it with ``scheduler.step()`` (per epoch or per
iteration, as you choose); ``scheduler()`` gives the current value.

As in Paddle, constructing a schedule performs its first ``step()``: ``last_epoch`` is 0 and
the value is the one for epoch 0. ``get_lr()`` computes the value for ``last_epoch``;
``last_lr`` / ``scheduler()`` return the value set by the latest ``step``.

Example:
    >>> import primflow as pf
    >>> sched = pf.optimizer.lr.StepDecay(learning_rate=1.0, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(5):
    ...     lrs.append(sched()); sched.step()
    >>> lrs
    [1.0, 1.0, 0.5, 0.5, 0.25]
"""

from __future__ import annotations

import math

__all__ = ["CosineAnnealingDecay", "ExponentialDecay", "LRScheduler", "LambdaDecay",
           "LinearWarmup", "MultiStepDecay", "PiecewiseDecay", "PolynomialDecay",
           "ReduceOnPlateau", "StepDecay"]


def _check_float(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a float, got {type(value).__name__}")
    return float(value)


class LRScheduler:
    """Base class: subclasses implement ``get_lr()`` from ``self.base_lr`` and
    ``self.last_epoch``; ``state_dict`` saves the attributes named in ``self.keys``.

    Example:
        >>> import primflow as pf
        >>> class Halving(pf.optimizer.lr.LRScheduler):
        ...     def get_lr(self):
        ...         return self.base_lr * 0.5 ** self.last_epoch
        >>> s = Halving(1.0); s.step(); s.step(); s()
        0.25
    """

    def __init__(self, learning_rate=0.1, last_epoch=-1, verbose=False):
        self.base_lr = _check_float(learning_rate, f"{type(self).__name__} learning_rate")
        self.last_lr = self.base_lr
        self.last_epoch = int(last_epoch)
        self.verbose = verbose
        self.keys = ["last_epoch", "last_lr"]
        self.step()

    def __call__(self):
        """The current learning rate."""
        return self.last_lr

    def step(self, epoch=None):
        """Advances one epoch (or jumps to ``epoch``) and updates the learning rate."""
        if epoch is None:
            self.last_epoch += 1
        else:
            self.last_epoch = int(epoch)
        self.last_lr = float(self.get_lr())
        if self.verbose:
            print(f"Epoch {self.last_epoch}: {type(self).__name__} set learning rate to "
                  f"{self.last_lr}.")

    def get_lr(self):
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr()")

    def state_dict(self):
        """The schedule's progress (plain numbers), for checkpoints."""
        return {k: getattr(self, k) for k in self.keys}

    def set_state_dict(self, state_dict):
        """Restores progress saved by ``state_dict``."""
        for k in self.keys:
            if k not in state_dict:
                raise KeyError(f"{type(self).__name__}.set_state_dict: missing key {k!r} "
                               f"(got {sorted(state_dict)})")
            setattr(self, k, state_dict[k])

    set_dict = set_state_dict

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self.last_lr})"


class StepDecay(LRScheduler):
    """``base_lr * gamma ** (epoch // step_size)``.

    Example:
        >>> import primflow as pf
        >>> s = pf.optimizer.lr.StepDecay(learning_rate=0.1, step_size=2, gamma=0.5)
        >>> rates = []
        >>> for _ in range(4):
        ...     rates.append(s()); s.step()
        >>> rates
        [0.1, 0.1, 0.05, 0.05]
    """

    def __init__(self, learning_rate, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"StepDecay: step_size must be a positive int, got {step_size!r}")
        if not gamma < 1.0:
            raise ValueError(f"StepDecay: gamma must be < 1.0, got {gamma}")
        self.step_size, self.gamma = step_size, float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class MultiStepDecay(LRScheduler):
    """Multiplies by ``gamma`` at each epoch in ``milestones``.

    Example:
        >>> import primflow as pf
        >>> s = pf.optimizer.lr.MultiStepDecay(0.1, milestones=[1, 3], gamma=0.5)
        >>> rates = []
        >>> for _ in range(4):
        ...     rates.append(s()); s.step()
        >>> rates
        [0.1, 0.05, 0.05, 0.025]
    """

    def __init__(self, learning_rate, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        milestones = list(milestones)
        if any(b <= a for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"MultiStepDecay: milestones must increase, got {milestones}")
        if not gamma < 1.0:
            raise ValueError(f"MultiStepDecay: gamma must be < 1.0, got {gamma}")
        self.milestones, self.gamma = milestones, float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        passed = sum(1 for m in self.milestones if self.last_epoch >= m)
        return self.base_lr * self.gamma ** passed


class PiecewiseDecay(LRScheduler):
    """``values[i]`` while ``epoch < boundaries[i]`` (``values`` has one more entry).

    Example:
        >>> import primflow as pf
        >>> s = pf.optimizer.lr.PiecewiseDecay(boundaries=[2], values=[0.1, 0.01])
        >>> rates = []
        >>> for _ in range(3):
        ...     rates.append(s()); s.step()
        >>> rates
        [0.1, 0.1, 0.01]
    """

    def __init__(self, boundaries, values, last_epoch=-1, verbose=False):
        self.boundaries, self.values = list(boundaries), [float(v) for v in values]
        if len(self.values) != len(self.boundaries) + 1:
            raise ValueError(f"PiecewiseDecay: values needs len(boundaries) + 1 = "
                             f"{len(self.boundaries) + 1} entries, got {len(self.values)}")
        super().__init__(self.values[0], last_epoch, verbose)

    def get_lr(self):
        for boundary, value in zip(self.boundaries, self.values):
            if self.last_epoch < boundary:
                return value
        return self.values[-1]


class ExponentialDecay(LRScheduler):
    """``base_lr * gamma ** epoch``.

    Example:
        >>> import primflow as pf
        >>> s = pf.optimizer.lr.ExponentialDecay(learning_rate=1.0, gamma=0.5)
        >>> s.step(); s.step(); s()
        0.25
    """

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        if not 0.0 < gamma:
            raise ValueError(f"ExponentialDecay: gamma must be > 0, got {gamma}")
        self.gamma = float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** self.last_epoch


class CosineAnnealingDecay(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`` (the closed form;
    it continues periodically past ``T_max`` as Paddle's does).

    Example:
        >>> import primflow as pf
        >>> s = pf.optimizer.lr.CosineAnnealingDecay(learning_rate=1.0, T_max=2)
        >>> s.step(); round(s(), 6)  # half way: (1 + cos(pi / 2)) / 2
        0.5
    """

    def __init__(self, learning_rate, T_max, eta_min=0, last_epoch=-1, verbose=False):  # noqa: N803
        if not isinstance(T_max, int) or T_max <= 0:
            raise ValueError(f"CosineAnnealingDecay: T_max must be a positive int, got {T_max!r}")
        self.T_max, self.eta_min = T_max, float(eta_min)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        cos = math.cos(math.pi * self.last_epoch / self.T_max)
        return self.eta_min + (self.base_lr - self.eta_min) * (1.0 + cos) / 2.0


class PolynomialDecay(LRScheduler):
    """``(base_lr - end_lr) * (1 - epoch / decay_steps) ** power + end_lr`` until
    ``decay_steps``, then ``end_lr`` (``cycle=True`` restarts with a longer period).

    Example:
        >>> import primflow as pf
        >>> s = pf.optimizer.lr.PolynomialDecay(1.0, decay_steps=2, end_lr=0.0)
        >>> s.step(); s()
        0.5
    """

    def __init__(self, learning_rate, decay_steps, end_lr=0.0001, power=1.0, cycle=False,
                 last_epoch=-1, verbose=False):
        if not isinstance(decay_steps, int) or decay_steps <= 0:
            raise ValueError(f"PolynomialDecay: decay_steps must be a positive int, got "
                             f"{decay_steps!r}")
        self.decay_steps, self.end_lr = decay_steps, float(end_lr)
        self.power, self.cycle = float(power), bool(cycle)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        epoch, steps = self.last_epoch, self.decay_steps
        if self.cycle:
            steps = steps * max(1, math.ceil(epoch / steps))
        else:
            epoch = min(epoch, steps)
        return (self.base_lr - self.end_lr) * (1.0 - epoch / steps) ** self.power + self.end_lr


class LambdaDecay(LRScheduler):
    """``base_lr * lr_lambda(epoch)``. (Its state_dict holds progress only, not the
    function.)

    Example:
        >>> import primflow as pf
        >>> s = pf.optimizer.lr.LambdaDecay(0.5, lr_lambda=lambda e: 0.9 ** e)
        >>> s.step(); round(s(), 6)
        0.45
    """

    def __init__(self, learning_rate, lr_lambda, last_epoch=-1, verbose=False):
        if not callable(lr_lambda):
            raise TypeError(f"LambdaDecay: lr_lambda must be callable, got "
                            f"{type(lr_lambda).__name__}")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * float(self.lr_lambda(self.last_epoch))


class LinearWarmup(LRScheduler):
    """Rises linearly from ``start_lr`` to ``end_lr`` over ``warmup_steps`` epochs, then
    follows ``learning_rate`` (a float, or a schedule stepped from 0 from then on).

    Example:
        >>> import primflow as pf
        >>> sched = pf.optimizer.lr.LinearWarmup(0.1, warmup_steps=2, start_lr=0.0, end_lr=0.1)
        >>> lrs = []
        >>> for _ in range(4):
        ...     lrs.append(sched()); sched.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.1]
    """

    def __init__(self, learning_rate, warmup_steps, start_lr, end_lr, last_epoch=-1,
                 verbose=False):
        if not isinstance(learning_rate, LRScheduler):
            learning_rate = _check_float(learning_rate, "LinearWarmup learning_rate")
        if not isinstance(warmup_steps, int) or warmup_steps <= 0:
            raise ValueError(f"LinearWarmup: warmup_steps must be a positive int, got "
                             f"{warmup_steps!r}")
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps
        self.start_lr, self.end_lr = float(start_lr), float(end_lr)
        super().__init__(start_lr, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch < self.warmup_steps:
            frac = self.last_epoch / self.warmup_steps
            return self.start_lr + (self.end_lr - self.start_lr) * frac
        if isinstance(self.learning_rate, LRScheduler):
            self.learning_rate.step(self.last_epoch - self.warmup_steps)
            return self.learning_rate()
        return self.learning_rate

    def state_dict(self):
        out = super().state_dict()
        if isinstance(self.learning_rate, LRScheduler):
            out["LinearWarmup_LR"] = self.learning_rate.state_dict()
        return out

    def set_state_dict(self, state_dict):
        super().set_state_dict(state_dict)
        if isinstance(self.learning_rate, LRScheduler) and "LinearWarmup_LR" in state_dict:
            self.learning_rate.set_state_dict(state_dict["LinearWarmup_LR"])


class ReduceOnPlateau(LRScheduler):
    """Multiplies the learning rate by ``factor`` when ``metrics`` (passed to ``step``) has
    not improved for ``patience`` steps (Paddle's arguments).

    Example:
        >>> import primflow as pf
        >>> sched = pf.optimizer.lr.ReduceOnPlateau(1.0, patience=1, factor=0.5)
        >>> for loss in [3.0, 2.0, 2.0, 2.0]:
        ...     sched.step(loss)
        >>> sched()
        0.5
    """

    def __init__(self, learning_rate, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, epsilon=1e-8, verbose=False):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceOnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceOnPlateau: threshold_mode must be 'rel' or 'abs', got "
                             f"{threshold_mode!r}")
        if not factor < 1.0:
            raise ValueError(f"ReduceOnPlateau: factor must be < 1.0, got {factor}")
        self.mode, self.factor, self.patience = mode, float(factor), int(patience)
        self.threshold, self.threshold_mode = float(threshold), threshold_mode
        self.cooldown, self.min_lr, self.epsilon = int(cooldown), float(min_lr), float(epsilon)
        self.best = None
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.base_lr = _check_float(learning_rate, "ReduceOnPlateau learning_rate")
        self.last_lr = self.base_lr
        self.last_epoch = 0
        self.verbose = verbose
        self.keys = ["best", "num_bad_epochs", "cooldown_counter", "last_epoch", "last_lr"]

    def _better(self, current, best):
        if best is None:
            return True
        if self.mode == "min":
            bound = best * (1 - self.threshold) if self.threshold_mode == "rel" \
                else best - self.threshold
            return current < bound
        bound = best * (1 + self.threshold) if self.threshold_mode == "rel" \
            else best + self.threshold
        return current > bound

    def step(self, metrics, epoch=None):
        """Records ``metrics`` (a float or one-element tensor) and reduces the rate on a
        plateau."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        if self._better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:  # no reductions counted while cooling down
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            new_lr = max(self.last_lr * self.factor, self.min_lr)
            if self.last_lr - new_lr > self.epsilon:
                self.last_lr = new_lr
                if self.verbose:
                    print(f"Epoch {self.last_epoch}: ReduceOnPlateau set learning rate to "
                          f"{self.last_lr}.")
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def get_lr(self):
        return self.last_lr
