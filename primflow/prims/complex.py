"""Complex-number primitives: ``complex`` (from parts), ``real``, ``imag`` and ``conj``.

Gradient convention (PyTorch's): the cotangent of a complex value ``z = x + iy`` under a
real loss ``L`` is ``dL/dx + i dL/dy`` (twice the conjugate Wirtinger derivative), so
``grad`` is the direction of steepest ascent and ``z - lr * grad`` descends. A vjp rule is
then the adjoint of the jvp under the real inner product ``Re <u, v> = Re sum conj(u) v``.
For a holomorphic ``f`` with derivative ``f'`` that adjoint is ``z_bar = conj(f') out_bar``:
the rule written for real numbers (``out_bar * f'``) applied between two conjugations,
which is what ``holomorphic_vjp`` does. The four primitives here are not holomorphic and
carry their own rules.

Example (``|z|^2`` has gradient ``2 z``):
    >>> import primflow as pf
    >>> z = pf.to_tensor([1 + 2j], dtype="complex128", stop_gradient=False)
    >>> (pf.real(z) ** 2 + pf.imag(z) ** 2).sum().backward()
    >>> z.grad.numpy()
    array([2.+4.j])
"""

from __future__ import annotations

from ..core import dtypes
from ..core.primitive import Aval, Primitive, PrimitiveError
from . import sharding as sr
from ._util import zeros_like
from .families import COMPLEX


def holomorphic_vjp(rule):
    """The vjp rule of a holomorphic primitive from its real-number rule: unchanged for real
    cotangents, ``conj(rule(conj(g)))`` for complex ones (= ``conj(f') g``)."""

    def vjp(g, out, *primals, **params):
        if g.dtype.is_complex:
            return conj(rule(conj(g), out, *primals, **params))
        return rule(g, out, *primals, **params)

    vjp.__name__ = getattr(rule, "__name__", "vjp")
    return vjp


# ---- complex(re, im) -----------------------------------------------------------------------

def _complex_infer(re, im):
    if re.dtype is not im.dtype or re.dtype.kind != "f":
        raise PrimitiveError(f"complex: expects two real floating parts of one dtype, got "
                             f"{re.dtype.name} and {im.dtype.name}")
    if re.shape != im.shape:
        raise PrimitiveError(f"complex: shapes {list(re.shape)} and {list(im.shape)} differ")
    return Aval(re.shape, dtypes.complex_of(re.dtype))


def _complex_re_vjp(g, out, re, im):  # dL = Re(conj(g)(d re + i d im)) = Re g d re + Im g d im
    return real(g)


def _complex_im_vjp(g, out, re, im):
    return imag(g)


complex = Primitive(  # noqa: A001 - primitive name
    "complex", family=COMPLEX, shard=sr.ADDITIVE, infer=_complex_infer, linear=True,
    transpose=(_complex_re_vjp, _complex_im_vjp), doc="re + i im from two real tensors")


# ---- real, imag, conj ----------------------------------------------------------------------

def _part_infer(name):
    def infer(z):
        if not z.dtype.is_complex:
            raise PrimitiveError(f"{name}: expects a complex tensor, got {z.dtype.name}")
        return Aval(z.shape, dtypes.real_of(z.dtype))

    return infer


def _real_vjp(g, out, z):  # dL = g Re(dz) = Re(conj(g) dz): z_bar = g + 0i
    return complex(g, zeros_like(g))


def _imag_vjp(g, out, z):  # dL = g Im(dz) = Re(conj(i g) dz): z_bar = 0 + i g
    return complex(zeros_like(g), g)


def _conj_infer(z):
    return Aval(z.shape, z.dtype)


def _conj_rule(g, out, z):  # dL = Re(conj(g) conj(dz)) = Re(conj(conj g) dz): z_bar = conj(g)
    return conj(g)


real = Primitive("real", family=COMPLEX, shard=sr.SINGLE, infer=_part_infer("real"), linear=True,
                 transpose=(_real_vjp,), doc="real part of a complex tensor")
imag = Primitive("imag", family=COMPLEX, shard=sr.SINGLE, infer=_part_infer("imag"), linear=True,
                 transpose=(_imag_vjp,), doc="imaginary part of a complex tensor")
conj = Primitive("conj", family=COMPLEX, shard=sr.SINGLE, infer=_conj_infer, linear=True,
                 transpose=(_conj_rule,), doc="complex conjugate")
