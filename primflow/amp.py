"""``pf.amp``: automatic mixed precision for nn layers, Paddle's habit (``paddle.amp``).

Inside ``with pf.amp.auto_cast():`` (level ``"O1"``) the layers on the white list
(``nn.Linear``: matrix products) compute in ``dtype`` (float16, or bfloat16: float32's
range in 16 bits, on NumPy through the optional ml_dtypes package, ``primflow[bfloat16]``)
from float32 parameters cast on the fly, so gradients reach the float32 master weights;
the layers on the black list (normalisations, softmax, losses: reductions that lose
accuracy in 16 bits) compute in float32 on inputs cast up; every other layer runs
in the dtype of its inputs. ``GradScaler`` scales the loss so small float16 gradients do
not underflow, and skips steps whose gradients overflowed. ``pf.jit`` keys its programs on
the auto_cast state (the casts are traced in). On the NumPy backend float16 matrix products
compute in float32 and round once (NumPy's own float16 product has no BLAS), as bfloat16's
do; so do GPUs' tensor cores.

What it reaches (same seed and steps as float32; ``tests/test_amp_training.py``):

* MLP classifier (2-32-32-3 ReLU, three spirals, 120 Adam steps): the float32 test
  accuracy (1.0) in float16 and bfloat16, the final loss within 2% of float32's.
* Plate PINN (``Settings(amp=...)`` of ``primflow.science``; the biharmonic's Taylor passes
  run through the 16-bit layers): early in training the relative L2 error is the float32
  run's within 0.2% (float16) and 1% (bfloat16) (80 Adam steps, errors 4e-2 to 1e-1).
  16 bits floor it: after 1,000 Adam steps (2-20-20-20-1 tanh, 256 points) float32 reached
  9.9e-5, float16 1.4e-3 (with or without loss scaling) and bfloat16 2.6e-3. Below ~2e-3,
  finish in float32: the trainer's L-BFGS phase stays in the network's dtype, and the
  quick plate schedule (100 mixed Adam steps, 50 float32 L-BFGS iterations) ends at
  1.7e-4 to 3.7e-4 in all three dtypes (seeds 0-1; float32: 1.7e-4, 2.6e-4).
"""

from __future__ import annotations

import contextlib
import math

from .core import dtypes
from .core.state import no_grad, state

__all__ = ["GradScaler", "auto_cast", "amp_dtype", "is_auto_cast_enabled"]

WHITE_LIST = frozenset({"Linear"})
BLACK_LIST = frozenset({"LayerNorm", "RMSNorm", "Softmax", "LogSoftmax", "MSELoss", "L1Loss",
                        "BCEWithLogitsLoss", "CrossEntropyLoss"})


@contextlib.contextmanager
def auto_cast(enable=True, custom_white_list=None, custom_black_list=None, level="O1",
              dtype="float16"):
    """Mixed precision for nn layers in the block (see the module docstring).

    Example:
        >>> import primflow as pf
        >>> net = pf.nn.Linear(4, 2)
        >>> with pf.amp.auto_cast():
        ...     y = net(pf.ones([3, 4]))
        >>> y.dtype, net.weight.dtype
        (primflow.float16, primflow.float32)
    """
    if level not in ("O0", "O1"):
        raise ValueError(f"auto_cast: level must be 'O0' (off) or 'O1' (white-list layers in "
                         f"low precision), got {level!r}")
    if str(getattr(dtype, "name", dtype)) not in ("float16", "bfloat16"):
        raise ValueError(f"auto_cast: dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    low = dtypes.as_dtype(dtype)
    saved = state.amp
    if enable and level == "O1":
        white = frozenset(WHITE_LIST | set(custom_white_list or ())) - set(custom_black_list or ())
        black = frozenset(BLACK_LIST | set(custom_black_list or ())) - set(custom_white_list or ())
        state.amp = (low, white, black)
    else:
        state.amp = None
    try:
        yield
    finally:
        state.amp = saved


def is_auto_cast_enabled() -> bool:
    """Whether an ``auto_cast`` block is active. Example: ``pf.amp.is_auto_cast_enabled()``
    is False outside one.

    Example:
        >>> is_auto_cast_enabled()
        False
    """
    return state.amp is not None


def amp_dtype(layer_name):
    """The dtype the layer class ``layer_name`` computes in now: the low-precision dtype
    (white list), float32 (black list), or None (its inputs' dtype; also outside auto_cast).

    Example:
        >>> with auto_cast(dtype="float16"):
        ...     amp_dtype("Linear"), amp_dtype("LayerNorm"), amp_dtype("Tanh")
        (primflow.float16, primflow.float32, None)
    """
    if state.amp is None:
        return None
    low, white, black = state.amp
    if layer_name in white:
        return low
    if layer_name in black:
        return dtypes.float32
    return None


class GradScaler:
    """Dynamic loss scaling for float16 training (Paddle's ``paddle.amp.GradScaler``, with
    its defaults; PyTorch's ``torch.amp.GradScaler`` calls them ``init_scale``,
    ``growth_factor``, ``backoff_factor``, ``growth_interval``).

    ``scaler.scale(loss).backward(); scaler.step(opt); scaler.update()`` (or
    ``scaler.minimize(opt, scaled_loss)``). The loss is multiplied by the scale (in float32:
    a float16 loss is cast up first) so that small float16 gradients do not flush to zero;
    ``step`` divides the gradients by it (``unscale_``, once per ``update``: call it
    yourself before clipping) and skips the optimizer's step when any gradient is inf or
    nan. ``update`` then multiplies the scale by ``decr_ratio`` after
    ``decr_every_n_nan_or_inf`` overflowing steps (never below 1) and by ``incr_ratio``
    after ``incr_every_n_steps`` finite ones in a row (only while the result is finite);
    ``use_dynamic_loss_scaling=False`` keeps it fixed. bfloat16 has float32's range and
    needs no scaling (as in Paddle and PyTorch).

    Example:
        >>> import primflow as pf
        >>> w = pf.create_parameter([2], "float32")
        >>> opt = pf.optimizer.SGD(learning_rate=0.1, parameters=[w])
        >>> scaler = pf.amp.GradScaler(init_loss_scaling=1024.0)
        >>> scaler.scale((w * w).sum()).backward()
        >>> scaler.minimize(opt, None)
        >>> w.grad is None or float(abs(w.grad).max()) < 1e3  # unscaled before the step
        True
    """

    def __init__(self, enable=True, init_loss_scaling=2.0 ** 16, incr_ratio=2.0,
                 decr_ratio=0.5, incr_every_n_steps=2000, decr_every_n_nan_or_inf=1,
                 use_dynamic_loss_scaling=True):
        if not float(init_loss_scaling) > 0 or not math.isfinite(init_loss_scaling):
            raise ValueError(f"GradScaler: init_loss_scaling must be a positive finite "
                             f"number, got {init_loss_scaling!r}")
        if not incr_ratio > 1.0:
            raise ValueError(f"GradScaler: incr_ratio must be > 1, got {incr_ratio!r}")
        if not 0.0 < decr_ratio < 1.0:
            raise ValueError(f"GradScaler: decr_ratio must be in (0, 1), got {decr_ratio!r}")
        for name, n in (("incr_every_n_steps", incr_every_n_steps),
                        ("decr_every_n_nan_or_inf", decr_every_n_nan_or_inf)):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"GradScaler: {name} must be a positive int, got {n!r}")
        self.enable = bool(enable)
        self.use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        self.init_loss_scaling = float(init_loss_scaling)
        self.scale_value = float(init_loss_scaling)
        self.incr_ratio, self.decr_ratio = float(incr_ratio), float(decr_ratio)
        self.incr_every_n_steps = incr_every_n_steps
        self.decr_every_n_nan_or_inf = decr_every_n_nan_or_inf
        self._good = self._bad = 0
        self._found_inf = False
        self._unscaled = {}  # id(optimizer) -> "unscaled" or "stepped", until update()

    def is_enable(self):
        """Whether loss scaling is on. Example: ``GradScaler(enable=False).is_enable()``
        is False."""
        return self.enable

    def is_use_dynamic_loss_scaling(self):
        """Whether ``update`` adapts the scale. Example:
        ``GradScaler().is_use_dynamic_loss_scaling()`` is True."""
        return self.use_dynamic_loss_scaling

    def scale(self, loss):
        """``loss * scale`` in float32 (``loss`` itself when disabled).

        Example:
            >>> import primflow as pf
            >>> pf.amp.GradScaler(init_loss_scaling=8.0).scale(pf.to_tensor(0.5)).item()
            4.0
        """
        if not self.enable:
            return loss
        if loss.dtype.is_floating and not loss.dtype.is_complex and loss.dtype.itemsize < 4:
            loss = loss.astype(dtypes.float32)  # float16 overflows from 65504 on
        return loss * self.scale_value

    def unscale_(self, optimizer):
        """Divides the gradients of ``optimizer``'s parameters by the scale, in place, and
        records whether any is inf or nan. Once per optimizer between ``update`` calls
        (``step`` calls it unless you did, e.g. to clip the true gradients first).

        Example:
            >>> import primflow as pf
            >>> w = pf.create_parameter([2], "float32")
            >>> opt = pf.optimizer.SGD(learning_rate=0.1, parameters=[w])
            >>> scaler = pf.amp.GradScaler(init_loss_scaling=4.0)
            >>> scaler.scale(w.sum()).backward()
            >>> scaler.unscale_(opt)
            >>> w.grad.numpy().tolist()
            [1.0, 1.0]
        """
        if not self.enable:
            return
        stage = self._unscaled.get(id(optimizer))
        if stage is not None:
            raise RuntimeError(f"GradScaler.unscale_: already called on this optimizer since "
                               f"the last update() ({'unscale_' if stage == 'unscaled' else 'step'}"
                               f" unscaled its gradients); call update() after each step")
        from .ops import isfinite  # noqa: PLC0415 - ops sit below; imported when used

        found = False
        with no_grad():
            for p in optimizer._parameter_list:
                if p.grad is None:
                    continue
                p.grad = p.grad * (1.0 / self.scale_value)
                found = found or not bool(isfinite(p.grad).all())
        self._found_inf = self._found_inf or found
        self._unscaled[id(optimizer)] = "unscaled"

    def step(self, optimizer):
        """Unscales (unless ``unscale_`` already did), then steps ``optimizer`` unless a
        gradient overflowed; the optimizer's state is then left as it was."""
        if not self.enable:
            optimizer.step()
            return
        if self._unscaled.get(id(optimizer)) == "stepped":
            raise RuntimeError("GradScaler.step: already called on this optimizer since the "
                               "last update(); call update() after each step")
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if not self._found_inf:
            optimizer.step()
        self._unscaled[id(optimizer)] = "stepped"

    def update(self):
        """Adjusts the scale after a step (see the class docstring)."""
        found_inf, self._found_inf = self._found_inf, False
        self._unscaled = {}
        if not self.enable or not self.use_dynamic_loss_scaling:
            return
        if found_inf:
            self._good, self._bad = 0, self._bad + 1
            if self._bad >= self.decr_every_n_nan_or_inf:
                self.scale_value = max(self.scale_value * self.decr_ratio, 1.0)
                self._bad = 0
        else:
            self._good, self._bad = self._good + 1, 0
            if self._good >= self.incr_every_n_steps:
                grown = self.scale_value * self.incr_ratio
                self.scale_value = grown if math.isfinite(grown) else self.scale_value
                self._good = 0

    def minimize(self, optimizer, *args, **kwargs):
        """``step`` then ``update`` (Paddle's spelling; the scaled loss it takes is unused)."""
        del args, kwargs
        self.step(optimizer)
        self.update()

    def get_loss_scaling(self):
        """The current scale. Example: ``GradScaler(init_loss_scaling=8.0).get_loss_scaling()``
        is 8.0."""
        return self.scale_value

    def state_dict(self):
        """The scale and its counters, for checkpoints (``load_state_dict`` restores them).

        Example:
            >>> GradScaler(init_loss_scaling=8.0).state_dict()["scale"]
            8.0
        """
        return {"scale": self.scale_value, "incr_ratio": self.incr_ratio,
                "decr_ratio": self.decr_ratio, "incr_every_n_steps": self.incr_every_n_steps,
                "decr_every_n_nan_or_inf": self.decr_every_n_nan_or_inf,
                "incr_count": self._good, "decr_count": self._bad,
                "use_dynamic_loss_scaling": self.use_dynamic_loss_scaling}

    def load_state_dict(self, state_dict):
        """Restores what ``state_dict`` returned.

        Example:
            >>> s = GradScaler()
            >>> s.load_state_dict(GradScaler(init_loss_scaling=8.0).state_dict())
            >>> s.get_loss_scaling()
            8.0
        """
        missing = {"scale", "incr_count", "decr_count"} - set(state_dict)
        if missing:
            raise ValueError(f"GradScaler.load_state_dict: the state lacks {sorted(missing)}; "
                             f"pass what GradScaler.state_dict() returned")
        self.scale_value = float(state_dict["scale"])
        self._good, self._bad = int(state_dict["incr_count"]), int(state_dict["decr_count"])
        for key in ("incr_ratio", "decr_ratio", "incr_every_n_steps",
                    "decr_every_n_nan_or_inf", "use_dynamic_loss_scaling"):
            if key in state_dict:
                setattr(self, key, type(getattr(self, key))(state_dict[key]))
