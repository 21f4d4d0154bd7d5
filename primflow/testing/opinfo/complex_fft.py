"""Complex numbers and the FFT."""

from __future__ import annotations

import numpy as np

import primflow as pf

from .base import OpInfo, SampleInput, _s, fixed, unary, with_params

# Complex ops are checked through a real embedding: the entry takes the real and imaginary
# parts as two float64 inputs and returns pf.as_real of the result (parts in a last dim of
# 2), so every finite difference moves along real and imaginary directions and the dot-
# product test uses the real inner product Re<u, v> under which the vjp rules are adjoints.

def _to_complex(re, im):
    return pf.complex(re, im)


def _np_parts(z):
    z = np.asarray(z)
    return np.stack([z.real, z.imag], axis=-1) if np.iscomplexobj(z) else z


def _parts(t):
    return pf.as_real(t) if t.dtype.is_complex else t


def _complex_in_out(op):
    return lambda re, im, **kw: _parts(op(_to_complex(re, im), **kw))


def _np_complex_in_out(ref):
    return lambda re, im, **kw: _np_parts(ref(re + 1j * im, **kw))


def _complex_pair(shape_params, lo=-1.5, hi=1.5, im_lo=None, im_hi=None):
    """Samples (re, im) of one complex input, with per-sample kwargs."""

    def gen(info, rng):
        return [SampleInput((rng.uniform(lo, hi, s), rng.uniform(
            lo if im_lo is None else im_lo, hi if im_hi is None else im_hi, s)), dict(kw),
            desc=f"{s} {kw}") for s, kw in shape_params]

    return gen


_C_SHAPES = [((2, 3), {}), ((), {})]


def _complex_unary_entry(name, op, ref, prims=(), covers=(), lo=-1.5, hi=1.5, **kw):
    return OpInfo(f"complex_{name}", _complex_in_out(op), _np_complex_in_out(ref),
                  _complex_pair(_C_SHAPES, lo, hi), prims=prims, covers=covers,
                  order_samples=1, **kw)


def _complex_binary(op):
    return lambda a, b, c, d: _parts(op(_to_complex(a, b), _to_complex(c, d)))


def _np_complex_binary(ref):
    return lambda a, b, c, d: _np_parts(ref(a + 1j * b, c + 1j * d))


def _complex_quad(shapes, lo=-1.5, hi=1.5):
    def gen(info, rng):
        return [SampleInput(tuple(rng.uniform(lo, hi, s) for s in (x, x, y, y)),
                            desc=f"{x} x {y}") for x, y in shapes]

    return gen


_FFT_SIZES = [((2, 5), {}), ((6,), {"norm": "ortho"}), ((3, 4), {"norm": "forward",
                                                                 "axis": 0})]
_FFT2_SIZES = [((2, 3, 4), {}), ((4, 3), {"norm": "ortho", "s": (3, 5)}),
               ((2, 3, 2), {"axes": (0, 2), "norm": "forward"})]

ENTRIES = [
    OpInfo("complex", lambda re, im: pf.as_real(pf.complex(re, im)),
           lambda re, im: _np_parts(re + 1j * im),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (2, 3)))),
                 _s(lambda i, r: (i.make(r, (3, 1)), i.make(r, (4,))), desc="broadcast")),
           prims=("complex", "real", "imag"), covers=("complex", "as_real", "is_complex"),
           notes="is_complex is checked in tests/test_numerics.py"),
    OpInfo("as_complex", lambda x: pf.as_real(pf.as_complex(x)), lambda x: x,
           unary((2, 3, 2), (2,)), prims=("complex",), covers=("as_complex",)),
    _complex_unary_entry("real", pf.real, np.real, ("real",), ("real",)),
    _complex_unary_entry("imag", pf.imag, np.imag, ("imag",), ("imag",)),
    _complex_unary_entry("conj", pf.conj, np.conj, ("conj",), ("conj",)),
    _complex_unary_entry("abs", pf.abs, np.abs, ("real", "imag", "sqrt")),
    _complex_unary_entry("angle", pf.angle, np.angle, ("atan2",), ("angle",), lo=0.3, hi=1.5,
                         notes="kept off the branch cut (negative real axis)"),
    OpInfo("polar", lambda r, t: pf.as_real(pf.polar(r, t)),
           lambda r, t: _np_parts(r * np.exp(1j * t)),
           fixed(_s(lambda i, r: (r.uniform(0.5, 2, (2, 3)), r.uniform(-3, 3, (2, 3))))),
           prims=("complex", "sin", "cos"), covers=("polar",)),
    _complex_unary_entry("neg", pf.neg, np.negative, ("neg",)),
    _complex_unary_entry("exp", pf.exp, np.exp, ("exp",)),
    _complex_unary_entry("log", pf.log, np.log, ("log",), lo=0.3, hi=1.5),
    _complex_unary_entry("sqrt", pf.sqrt, np.sqrt, ("sqrt",), lo=0.3, hi=1.5),
    _complex_unary_entry("rsqrt", pf.rsqrt, lambda z: 1 / np.sqrt(z), ("rsqrt",), lo=0.3,
                         hi=1.5),
    _complex_unary_entry("sin", pf.sin, np.sin, ("sin",)),
    _complex_unary_entry("cos", pf.cos, np.cos, ("cos",)),
    _complex_unary_entry("tanh", pf.tanh, np.tanh, ("tanh",), lo=-0.7, hi=0.7),
    _complex_unary_entry("log1p", pf.log1p, np.log1p, ("log1p",), lo=0.1, hi=1.0),
    _complex_unary_entry("expm1", pf.expm1, np.expm1, ("expm1",)),
    _complex_unary_entry("square", pf.square, np.square, ("integer_pow",)),
    OpInfo("complex_integer_pow", _complex_in_out(lambda z: pf.pow(z, 3)),
           _np_complex_in_out(lambda z: z ** 3), _complex_pair(_C_SHAPES),
           prims=("integer_pow",), order_samples=1),
    OpInfo("complex_mul", _complex_binary(pf.multiply), _np_complex_binary(np.multiply),
           _complex_quad([((2, 3), (2, 3)), ((3, 1), (4,))]), prims=("mul",),
           order_samples=1),
    OpInfo("complex_add_sub", _complex_binary(lambda a, b: a + b - a * 0.5),
           _np_complex_binary(lambda a, b: a + b - a * 0.5),
           _complex_quad([((2, 3), (2, 3))]), prims=("add", "sub"), order_samples=1),
    OpInfo("complex_div", _complex_binary(pf.divide), _np_complex_binary(np.divide),
           _complex_quad([((2, 3), (2, 3))], lo=0.5, hi=1.5), prims=("div",),
           order_samples=1),
    OpInfo("complex_pow", _complex_binary(pf.pow), _np_complex_binary(np.power),
           _complex_quad([((2, 3), (2, 3))], lo=0.5, hi=1.5), prims=("pow",),
           order_samples=1),
    OpInfo("complex_matmul", _complex_binary(pf.matmul), _np_complex_binary(np.matmul),
           _complex_quad([((2, 3), (3, 2)), ((2, 2, 3), (3,))]), prims=("dot_general",),
           order_samples=1),
    OpInfo("complex_sum_reshape", _complex_in_out(lambda z: (z.reshape([-1]) * 2.0).sum()),
           _np_complex_in_out(lambda z: (z.reshape(-1) * 2.0).sum()),
           _complex_pair(_C_SHAPES), prims=("reduce_sum",), order_samples=1),
    OpInfo("complex_cast", lambda x: pf.as_real(x.astype("complex128") * (1 + 2j)),
           lambda x: _np_parts(x * (1 + 2j)), unary((2, 3)),
           prims=("convert_element_type",)),
    # ---- FFT: one primitive, all public transforms ----
    OpInfo("fft", _complex_in_out(pf.fft.fft), _np_complex_in_out(np.fft.fft),
           _complex_pair(_FFT_SIZES + [((5,), {"n": 7})]), prims=("fft",), order_samples=1),
    OpInfo("ifft", _complex_in_out(pf.fft.ifft), _np_complex_in_out(np.fft.ifft),
           _complex_pair(_FFT_SIZES + [((6,), {"n": 4})]), prims=("fft",), order_samples=1),
    OpInfo("rfft", lambda x, **kw: pf.as_real(pf.fft.rfft(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.rfft(x, **kw)),
           with_params(_FFT_SIZES + [((5,), {"n": 8}), ((7,), {})]), prims=("fft",),
           order_samples=1),
    OpInfo("irfft", _complex_in_out(pf.fft.irfft), _np_complex_in_out(np.fft.irfft),
           _complex_pair([((2, 4), {}), ((4,), {"n": 7, "norm": "ortho"}),
                          ((3, 4), {"axis": 0, "norm": "forward"}), ((3,), {"n": 8})]),
           prims=("fft",), order_samples=1),
    OpInfo("hfft", _complex_in_out(pf.fft.hfft), _np_complex_in_out(np.fft.hfft),
           _complex_pair([((2, 4), {}), ((4,), {"n": 7, "norm": "ortho"})]),
           prims=("fft", "conj"), order_samples=1),
    OpInfo("ihfft", lambda x, **kw: pf.as_real(pf.fft.ihfft(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.ihfft(x, **kw)),
           with_params([((2, 5), {}), ((6,), {"norm": "forward"})]), prims=("fft", "conj"),
           order_samples=1),
    OpInfo("fft2", _complex_in_out(pf.fft.fft2), _np_complex_in_out(np.fft.fft2),
           _complex_pair(_FFT2_SIZES), prims=("fft",), order_samples=1),
    OpInfo("ifft2", _complex_in_out(pf.fft.ifft2), _np_complex_in_out(np.fft.ifft2),
           _complex_pair(_FFT2_SIZES[:2]), prims=("fft",), order_samples=1),
    OpInfo("fftn", _complex_in_out(pf.fft.fftn), _np_complex_in_out(np.fft.fftn),
           _complex_pair([((2, 3, 2), {}), ((2, 3), {"axes": (1,), "s": (5,)})]),
           prims=("fft",), order_samples=1),
    OpInfo("ifftn", _complex_in_out(pf.fft.ifftn), _np_complex_in_out(np.fft.ifftn),
           _complex_pair([((2, 3, 2), {"norm": "ortho"})]), prims=("fft",), order_samples=1),
    OpInfo("rfft2", lambda x, **kw: pf.as_real(pf.fft.rfft2(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.rfft2(x, **kw)),
           with_params(_FFT2_SIZES), prims=("fft",), order_samples=1),
    OpInfo("rfftn", lambda x, **kw: pf.as_real(pf.fft.rfftn(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.rfftn(x, **kw)),
           with_params([((2, 3, 4), {}), ((3, 5), {"axes": (0,)})]), prims=("fft",),
           order_samples=1),
    OpInfo("irfft2", _complex_in_out(pf.fft.irfft2), _np_complex_in_out(np.fft.irfft2),
           _complex_pair([((2, 3, 3), {}), ((3, 4), {"s": (3, 5), "norm": "ortho"})]),
           prims=("fft",), order_samples=1),
    OpInfo("irfftn", _complex_in_out(pf.fft.irfftn), _np_complex_in_out(np.fft.irfftn),
           _complex_pair([((2, 3, 3), {"norm": "forward"}), ((4, 2), {"axes": (0,)})]),
           prims=("fft",), order_samples=1),
    OpInfo("fftshift", lambda x, **kw: pf.fft.fftshift(x, **kw), np.fft.fftshift,
           with_params([((2, 5), {}), ((4, 3), {"axes": 0}), ((5,), {"axes": (-1,)})]),
           prims=("slice", "concatenate"), order_samples=1),
    OpInfo("ifftshift", lambda x, **kw: pf.fft.ifftshift(x, **kw), np.fft.ifftshift,
           with_params([((2, 5), {}), ((4, 3), {"axes": (1,)})]),
           prims=("slice", "concatenate"), order_samples=1),
    OpInfo("fftfreq", lambda n, d=1.0: pf.fft.fftfreq(n, d, dtype="float64"), np.fft.fftfreq,
           fixed(lambda i, r: SampleInput((5,), {"d": 0.3}), lambda i, r: SampleInput((4,))),
           kind="creation"),
    OpInfo("rfftfreq", lambda n, d=1.0: pf.fft.rfftfreq(n, d, dtype="float64"),
           np.fft.rfftfreq,
           fixed(lambda i, r: SampleInput((5,), {"d": 0.3}), lambda i, r: SampleInput((4,))),
           kind="creation"),
]

# every entry here but the real shifts and frequency grids computes in complex numbers: the
# matrix (opinfo/matrix.py) runs it in complex64 and complex128
for _info in ENTRIES:
    _info.computes_complex = _info.name not in ("fftshift", "ifftshift", "fftfreq", "rfftfreq")
