"""Complex numbers: ``complex``, ``real``, ``imag``, ``conj``, ``angle``, ``polar`` (and
``abs`` of complex tensors, in ``math.abs``).

Gradients follow PyTorch's convention: for a real loss ``L`` of a complex tensor
``z = x + iy`` the gradient is ``dL/dx + i dL/dy``, the direction of steepest ascent, so
``z - lr * z.grad`` descends (see ``primflow/prims/complex.py``).

Example (``L = |z|^2`` has gradient ``2 z``):
    >>> import primflow as pf
    >>> z = pf.to_tensor([3 + 4j], dtype="complex128", stop_gradient=False)
    >>> (pf.abs(z) ** 2).sum().backward()
    >>> z.grad.numpy()
    array([6.+8.j])
"""

from __future__ import annotations

import math as _math

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from .helpers import as_tensor, binary_operands, cast, float_operand, full
from . import math


def complex(real, imag) -> Tensor:  # noqa: A001 - Paddle's name
    """The complex tensor ``real + i imag`` (broadcast; integer parts become float).

    Example:
        >>> import primflow as pf
        >>> pf.complex(pf.to_tensor([1.0]), pf.to_tensor([2.0])).numpy()
        array([1.+2.j], dtype=complex64)
    """
    re, im = binary_operands(float_operand(real), float_operand(imag))
    for name, part in (("real", re), ("imag", im)):
        if part.dtype.is_complex:
            raise TypeError(f"complex: the {name} part must be a real tensor, got "
                            f"{part.dtype.name}{part.shape}")
    return prims.complex(re, im)


def real(x) -> Tensor:
    """Real part (a real tensor; real input is returned as is).

    Example:
        >>> import primflow as pf
        >>> pf.real(pf.to_tensor([1 + 2j])).numpy()
        array([1.], dtype=float32)
    """
    x = as_tensor(x)
    return prims.real(x) if x.dtype.is_complex else x


def imag(x) -> Tensor:
    """Imaginary part (zeros for real input).

    Example:
        >>> import primflow as pf
        >>> pf.imag(pf.to_tensor([1 + 2j])).numpy()
        array([2.], dtype=float32)
    """
    x = as_tensor(x)
    if x.dtype.is_complex:
        return prims.imag(x)
    return full(x._shape, 0, x.dtype)


def conj(x) -> Tensor:
    """Complex conjugate (real input is returned as is).

    Example:
        >>> import primflow as pf
        >>> pf.conj(pf.to_tensor([1 + 2j])).numpy()
        array([1.-2.j], dtype=complex64)
    """
    x = as_tensor(x)
    return prims.conj(x) if x.dtype.is_complex else x


def angle(x) -> Tensor:
    """Argument of each element in (-pi, pi] (``atan2(imag, real)``); pi for negative reals.

    Example:
        >>> import primflow as pf
        >>> pf.angle(pf.to_tensor([1j], dtype="complex128")).numpy()
        array([1.57079633])
    """
    x = as_tensor(x)
    if x.dtype.is_complex:
        return prims.atan2(prims.imag(x), prims.real(x))
    x = float_operand(x)
    return math.where(math.less_than(x, 0.0), _math.pi, full(x._shape, 0.0, x.dtype))


def polar(abs, angle) -> Tensor:  # noqa: A002 - PyTorch/Paddle argument names
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``.

    Example:
        >>> import primflow as pf
        >>> z = pf.polar(pf.to_tensor([2.0], dtype="float64"),
        ...              pf.to_tensor([0.0], dtype="float64"))
        >>> z.numpy()
        array([2.+0.j])
    """
    r, theta = binary_operands(float_operand(abs), float_operand(angle))
    return prims.complex(prims.mul(r, prims.cos(theta)), prims.mul(r, prims.sin(theta)))


def is_complex(x) -> bool:
    """Whether ``x`` has a complex dtype.

    Example:
        >>> import primflow as pf
        >>> pf.is_complex(pf.ones([1])), pf.is_complex(pf.complex(pf.ones([1]), pf.ones([1])))
        (False, True)
    """
    return as_tensor(x).dtype.is_complex


def as_real(x) -> Tensor:
    """A complex tensor's parts stacked in a new last dim of size 2 (Paddle's as_real).

    Example:
        >>> import primflow as pf
        >>> pf.as_real(pf.to_tensor([1 + 2j])).numpy()
        array([[1., 2.]], dtype=float32)
    """
    x = as_tensor(x)
    if not x.dtype.is_complex:
        raise TypeError(f"as_real expects a complex tensor, got {x.dtype.name}")
    shape = tuple(x._shape) + (1,)
    parts = [prims.reshape(p, shape=shape) for p in (prims.real(x), prims.imag(x))]
    return prims.concatenate(*parts, axis=len(shape) - 1)


def as_complex(x) -> Tensor:
    """Inverse of ``as_real``: the last dim (size 2) holds the real and imaginary parts.

    Example:
        >>> import primflow as pf
        >>> pf.as_complex(pf.to_tensor([[1.0, 2.0]])).numpy()
        array([1.+2.j], dtype=complex64)
    """
    x = float_operand(x)
    if x.ndim == 0 or x._shape[-1] != 2:
        raise ValueError(f"as_complex expects a last dim of size 2, got shape {x.shape}")
    nd, shape = x.ndim, tuple(x._shape)

    def part(k):
        start = (0,) * (nd - 1) + (k,)
        piece = prims.slice(x, start=start, limit=shape[:-1] + (k + 1,), strides=(1,) * nd)
        return prims.reshape(piece, shape=shape[:-1])

    return prims.complex(part(0), part(1))


del cast, dtypes
