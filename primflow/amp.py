"""``pf.amp``: automatic mixed precision for nn layers, Paddle's habit (``paddle.amp``).

Inside ``with pf.amp.auto_cast():`` (level ``"O1"``) the layers on the white list
(``nn.Linear``: matrix products) compute in ``dtype`` (float16, or bfloat16: float32's
range in 16 bits, on NumPy through the optional ml_dtypes package, ``primflow[bfloat16]``)
from float32 parameters cast on the fly, so gradients reach the float32 master weights;
the layers on the black list (normalisations, softmax, losses: reductions that lose
accuracy in 16 bits) compute in float32 on inputs cast up; every other layer runs
in the dtype of its inputs. ``GradScaler`` scales the loss so small float16 gradients do
not underflow, and skips steps whose gradients overflowed.
"""

from __future__ import annotations

import contextlib
import threading

from .core import dtypes
from .core.state import no_grad

__all__ = ["GradScaler", "auto_cast", "amp_dtype", "is_auto_cast_enabled"]

WHITE_LIST = frozenset({"Linear"})
BLACK_LIST = frozenset({"LayerNorm", "RMSNorm", "Softmax", "LogSoftmax", "MSELoss", "L1Loss",
                        "BCEWithLogitsLoss", "CrossEntropyLoss"})


class _State(threading.local):
    dtype = None  # the low-precision dtype while auto_cast is on, else None
    white = WHITE_LIST
    black = BLACK_LIST


_state = _State()


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
    saved = (_state.dtype, _state.white, _state.black)
    if enable and level == "O1":
        _state.dtype = low
        _state.white = (WHITE_LIST | set(custom_white_list or ())) - set(custom_black_list or ())
        _state.black = (BLACK_LIST | set(custom_black_list or ())) - set(custom_white_list or ())
    else:
        _state.dtype = None
    try:
        yield
    finally:
        _state.dtype, _state.white, _state.black = saved


def is_auto_cast_enabled() -> bool:
    """Whether an ``auto_cast`` block is active. Example: ``pf.amp.is_auto_cast_enabled()``
    is False outside one.

    Example:
        >>> is_auto_cast_enabled()
        False
    """
    return _state.dtype is not None


def amp_dtype(layer_name):
    """The dtype the layer class ``layer_name`` computes in now: the low-precision dtype
    (white list), float32 (black list), or None (its inputs' dtype; also outside auto_cast).

    Example:
        >>> with auto_cast(dtype="float16"):
        ...     amp_dtype("Linear"), amp_dtype("LayerNorm"), amp_dtype("Tanh")
        (primflow.float16, primflow.float32, None)
    """
    if _state.dtype is None:
        return None
    if layer_name in _state.white:
        return _state.dtype
    if layer_name in _state.black:
        return dtypes.float32
    return None


class GradScaler:
    """Loss scaling for float16 training (Paddle's ``paddle.amp.GradScaler``):
    ``scaler.scale(loss).backward(); scaler.step(opt); scaler.update()`` (or
    ``scaler.minimize(opt, scaled_loss)``). A step whose gradients hold inf/nan is skipped
    and the scale halves; after ``incr_every_n_steps`` good steps it doubles.

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

    def __init__(self, enable=True, init_loss_scaling=2.0 ** 15, incr_ratio=2.0,
                 decr_ratio=0.5, incr_every_n_steps=1000, decr_every_n_nan_or_inf=1):
        self.enable = enable
        self.scale_value = float(init_loss_scaling)
        self.incr_ratio, self.decr_ratio = incr_ratio, decr_ratio
        self.incr_every_n_steps = incr_every_n_steps
        self.decr_every_n_nan_or_inf = decr_every_n_nan_or_inf
        self._good = self._bad = 0
        self._found_inf = False

    def scale(self, loss):
        """``loss * scale`` (``loss`` itself when disabled)."""
        return loss * self.scale_value if self.enable else loss

    def unscale_(self, optimizer):
        """Divides the gradients of ``optimizer``'s parameters by the scale, in place, and
        records whether any is inf or nan."""
        if not self.enable:
            return
        from .ops import isfinite  # noqa: PLC0415 - ops sit below; imported when used

        found = False
        with no_grad():
            for p in optimizer._parameter_list:
                if p.grad is None:
                    continue
                p.grad = p.grad * (1.0 / self.scale_value)
                found = found or not bool(isfinite(p.grad).all())
        self._found_inf = found

    def step(self, optimizer):
        """Unscales, then steps ``optimizer`` unless a gradient overflowed."""
        self.unscale_(optimizer)
        if not self._found_inf:
            optimizer.step()

    def update(self):
        """Adjusts the scale after a step (halve after overflow, grow after a run)."""
        if not self.enable:
            return
        if self._found_inf:
            self._good, self._bad = 0, self._bad + 1
            if self._bad >= self.decr_every_n_nan_or_inf:
                self.scale_value = max(self.scale_value * self.decr_ratio, 1.0)
                self._bad = 0
        else:
            self._good, self._bad = self._good + 1, 0
            if self._good >= self.incr_every_n_steps:
                self.scale_value *= self.incr_ratio
                self._good = 0
        self._found_inf = False

    def minimize(self, optimizer, scaled_loss):
        """``step`` then ``update`` (Paddle's spelling); ``scaled_loss`` is unused."""
        del scaled_loss
        self.step(optimizer)
        self.update()

    def get_loss_scaling(self):
        """The current scale. Example: ``GradScaler(init_loss_scaling=8.0).get_loss_scaling()``."""
        return self.scale_value
