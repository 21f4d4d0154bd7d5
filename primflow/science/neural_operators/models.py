"""Fourier neural operators (Li et al., ICLR 2021) on ``pf.nn.SpectralConv1D/2D``.

Both models follow the paper's code (``fourier_1d.py``, ``fourier_2d.py``): the input
function with its grid coordinates appended is lifted to ``width`` channels by a linear
layer, goes through ``layers`` Fourier layers - each the sum of a spectral convolution and
a pointwise linear map, followed by GELU except after the last - and is projected back by
``width -> 128 -> 1`` linear layers with a GELU between.

Defaults are the paper's: FNO1D modes 16, width 64; FNO2D modes 12 x 12, width 32, and
the domain padded by 9 points (the Darcy problem is not periodic).

Example:
    >>> import primflow as pf
    >>> from primflow.science.neural_operators import FNO1D
    >>> model = FNO1D(modes=4, width=8)
    >>> model(pf.ones([2, 32])).shape
    [2, 32]
"""

from __future__ import annotations

import primflow as pf

__all__ = ["FNO1D", "FNO2D", "relative_l2_loss"]


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _channels_first_linear(layer, x):
    """``layer`` (a ``pf.nn.Linear``) applied pointwise to the channels of a channels-first
    tensor ``[N, C, *grid]``, computed where the data lie: ``W^T [out, C]`` times each
    sample's ``[C, points]`` matrix (one product per sample: no transposed copies of ``x``
    forward and backward, which applying the layer to channels-last views made; 7% of an
    FNO2D training step at s = 85)."""
    n, c = x.shape[0], x.shape[1]
    grid = list(x.shape[2:])
    flat = pf.reshape(x, [n, c, -1])
    out = pf.matmul(pf.transpose(layer.weight, [1, 0]), flat)  # [N, out, points]
    if layer.bias is not None:
        out = out + pf.reshape(layer.bias, [1, -1, 1])
    return pf.reshape(out, [n, out.shape[1]] + grid)


class FNO1D(pf.nn.Layer):
    """The 1-D Fourier neural operator: ``a [N, s] -> u [N, s]`` on a uniform grid of
    [0, 1) (any ``s >= 2 modes``).

    Args:
        modes: Fourier modes per layer (16).
        width: channels (64).
        layers: Fourier layers (4).
        projection: hidden units of the output projection (128).
    """

    def __init__(self, modes=16, width=64, layers=4, projection=128):
        super().__init__()
        for name, value in (("modes", modes), ("width", width), ("layers", layers),
                            ("projection", projection)):
            _check_positive(name, value)
        self.modes, self.width, self.n_layers = modes, width, layers
        self.lift = pf.nn.Linear(2, width)
        self.spectral = pf.nn.LayerList([pf.nn.SpectralConv1D(width, width, modes)
                                         for _ in range(layers)])
        self.pointwise = pf.nn.LayerList([pf.nn.Linear(width, width) for _ in range(layers)])
        self.project1 = pf.nn.Linear(width, projection)
        self.project2 = pf.nn.Linear(projection, 1)

    def forward(self, a):
        if a.ndim != 2:
            raise ValueError(f"FNO1D takes input functions [N, s], got shape {a.shape}")
        n, s = a.shape
        grid = pf.reshape(pf.linspace(0.0, 1.0 - 1.0 / s, s, dtype=a.dtype), [1, s, 1])
        x = pf.concat([pf.reshape(a, [n, s, 1]), pf.expand(grid, [n, s, 1])], axis=2)
        x = pf.transpose(self.lift(x), [0, 2, 1])  # [N, width, s]
        for i, (conv, linear) in enumerate(zip(self.spectral, self.pointwise)):
            x = conv(x) + _channels_first_linear(linear, x)
            if i < self.n_layers - 1:
                x = pf.nn.functional.gelu(x)
        x = pf.nn.functional.gelu(self.project1(pf.transpose(x, [0, 2, 1])))
        return pf.reshape(self.project2(x), [n, s])


class FNO2D(pf.nn.Layer):
    """The 2-D Fourier neural operator: ``a [N, s1, s2] -> u [N, s1, s2]`` on the grid of
    [0, 1]^2 including the boundary.

    Args:
        modes1, modes2: Fourier modes per layer along each axis (12, 12).
        width: channels (32).
        layers: Fourier layers (4).
        padding: zero points appended along each axis before the Fourier layers and
            removed after them (9: the problem is not periodic).
        projection: hidden units of the output projection (128).

    Example:
        >>> import primflow as pf
        >>> from primflow.science.neural_operators import FNO2D
        >>> FNO2D(modes1=3, modes2=3, width=4, padding=2)(pf.ones([1, 9, 9])).shape
        [1, 9, 9]
    """

    def __init__(self, modes1=12, modes2=12, width=32, layers=4, padding=9, projection=128):
        super().__init__()
        for name, value in (("modes1", modes1), ("modes2", modes2), ("width", width),
                            ("layers", layers), ("projection", projection)):
            _check_positive(name, value)
        if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
            raise ValueError(f"padding must be a non-negative int, got {padding!r}")
        self.width, self.n_layers, self.padding = width, layers, padding
        self.lift = pf.nn.Linear(3, width)
        self.spectral = pf.nn.LayerList([pf.nn.SpectralConv2D(width, width, modes1, modes2)
                                         for _ in range(layers)])
        self.pointwise = pf.nn.LayerList([pf.nn.Linear(width, width) for _ in range(layers)])
        self.project1 = pf.nn.Linear(width, projection)
        self.project2 = pf.nn.Linear(projection, 1)

    def forward(self, a):
        if a.ndim != 3:
            raise ValueError(f"FNO2D takes input functions [N, s1, s2], got shape {a.shape}")
        n, s1, s2 = a.shape
        gx = pf.reshape(pf.linspace(0.0, 1.0, s1, dtype=a.dtype), [1, s1, 1, 1])
        gy = pf.reshape(pf.linspace(0.0, 1.0, s2, dtype=a.dtype), [1, 1, s2, 1])
        x = pf.concat([pf.reshape(a, [n, s1, s2, 1]), pf.expand(gx, [n, s1, s2, 1]),
                       pf.expand(gy, [n, s1, s2, 1])], axis=3)
        x = pf.transpose(self.lift(x), [0, 3, 1, 2])  # [N, width, s1, s2]
        p = self.padding
        if p:
            x = pf.concat([x, pf.zeros([n, self.width, p, s2], dtype=x.dtype)], axis=2)
            x = pf.concat([x, pf.zeros([n, self.width, s1 + p, p], dtype=x.dtype)], axis=3)
        for i, (conv, linear) in enumerate(zip(self.spectral, self.pointwise)):
            x = conv(x) + _channels_first_linear(linear, x)
            if i < self.n_layers - 1:
                x = pf.nn.functional.gelu(x)
        if p:
            x = x[:, :, :s1, :s2]
        x = pf.nn.functional.gelu(self.project1(pf.transpose(x, [0, 2, 3, 1])))
        return pf.reshape(self.project2(x), [n, s1, s2])


def relative_l2_loss(prediction, target):
    """The mean over samples of ``||prediction - target|| / ||target||`` (the FNO code's
    ``LpLoss``), both ``[N, ...]``.

    Example:
        >>> import primflow as pf
        >>> from primflow.science.neural_operators import relative_l2_loss
        >>> t = pf.to_tensor([[3.0, 4.0]])
        >>> round(float(relative_l2_loss(t * 1.1, t)), 6)
        0.1
    """
    n = prediction.shape[0]
    diff = pf.reshape(prediction - target, [n, -1])
    ref = pf.reshape(target, [n, -1])
    return (pf.sqrt((diff * diff).sum(axis=1)) / pf.sqrt((ref * ref).sum(axis=1))).mean()
