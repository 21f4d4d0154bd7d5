"""The OpInfo entry types and the sample-input generators the families build on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import primflow as pf

# ---- the entry types ------------------------------------------------------------------------

@dataclass(frozen=True)
class SampleInput:
    """One call: ``op(*args, **kwargs)``; ``diff`` = positions of args to differentiate."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    diff: tuple | None = None
    desc: str = ""

    def diff_indices(self) -> tuple:
        if self.diff is not None:
            return tuple(self.diff)
        return tuple(i for i, a in enumerate(self.args)
                     if isinstance(a, np.ndarray) and a.dtype.kind == "f")

    def bind(self, op):
        """``(fn, primals)``: ``fn(*tensors)`` calls ``op`` with the differentiated args
        replaced by ``tensors`` and the others as constant tensors (or as given)."""
        idx = self.diff_indices()
        consts = {i: _constant(a) for i, a in enumerate(self.args) if i not in idx}
        kwargs = self.kwargs

        def fn(*xs):
            it = iter(xs)
            args = [next(it) if i in idx else consts[i] for i in range(len(self.args))]
            return op(*args, **kwargs)

        return fn, [np.asarray(self.args[i], dtype=np.float64) for i in idx]

    def __repr__(self):
        shapes = ", ".join(str(np.shape(a)) if isinstance(a, np.ndarray) else repr(a)
                           for a in self.args)
        return f"SampleInput({self.desc or shapes}; {self.kwargs})"


def _constant(a):
    if isinstance(a, np.ndarray):
        return pf.to_tensor(a, dtype=str(a.dtype) if a.dtype.kind != "b" else "bool")
    return a


@dataclass(frozen=True)
class XFail:
    """An expected failure of one generic test (``orders`` restricts it to some orders)."""

    # "forward", "jvp", "vjp", "rev", "fwd_over_rev", "fwd", "rev_over_fwd", "vmap",
    # "claims" (negative claims of nondiff/nograd entries), "random"
    test: str
    reason: str
    orders: tuple = ()


@dataclass(frozen=True)
class Limit:
    """A declared limitation of an entry on the dtype/mode/backend matrix
    (``primflow.testing.opinfo.matrix``): the cells it matches skip, naming ``reason``. An
    empty axis matches every value of that axis."""

    reason: str
    dtypes: tuple = ()
    modes: tuple = ()
    backends: tuple = ()

    def matches(self, dtype, mode, backend):
        return all(not axis or value in axis for axis, value in (
            (self.dtypes, dtype), (self.modes, mode), (self.backends, backend)))


@dataclass
class OpInfo:
    """Everything the generic tests need to know about one op. See the module docstring."""

    name: str
    op: Callable
    ref: Callable | None
    sample_inputs: Callable  # (info, rng) -> list[SampleInput]
    kind: str = "diff"
    domain: tuple = (-2.0, 2.0)
    singularities: tuple = ()
    margin: float = 0.2
    max_order: int = 4
    order_samples: int | None = None  # how many samples orders >= 2 use (None: all)
    tol: dict = field(default_factory=dict)  # overrides of check_grads.DEFAULT_TOL
    fd_eps: float = 1e-5
    xfails: tuple = ()
    prims: tuple = ()  # primitives this entry exercises (the coverage test checks they bind)
    covers: tuple = ()  # public op names this entry stands for
    stats: Callable | None = None  # kind == "random": (out, **kwargs) -> None or raise
    notes: str = ""
    jet_order: int | None = None  # caps the Taylor tests' orders (costly: decompositions)
    extras: tuple = ()  # optional extras the op itself needs (its tests skip without them)
    limits: tuple = ()  # Limit(...): cells of the dtype/mode/backend matrix that cannot run
    # computes in complex numbers from real inputs (parts, signals): the matrix's float32
    # cells compute in complex64, its float64 cells in complex128
    computes_complex: bool = False

    def samples(self, rng=None):
        rng = np.random.default_rng(_seed_of(self.name)) if rng is None else rng
        return self.sample_inputs(self, rng)

    def make(self, rng, shape, domain=None, singularities=None):
        """Uniform draws in ``domain`` at least ``margin`` away from ``singularities``."""
        lo, hi = self.domain if domain is None else domain
        x = np.asarray(rng.uniform(lo, hi, size=shape), dtype=np.float64)
        points = self.singularities if singularities is None else singularities
        return _push_away(x, points, self.margin, lo, hi)

    def xfail(self, test, order=None):
        for xf in self.xfails:
            if xf.test == test and (not xf.orders or order in xf.orders):
                return xf
        return None

    def runs_here(self):
        """Whether this install has the extras the op needs (``extras``)."""
        from ..extras import has_extra

        return all(has_extra(extra) for extra in self.extras)

    def tolerance(self, key):
        from ..check_grads import DEFAULT_TOL

        return self.tol.get(key, DEFAULT_TOL[key])


def _seed_of(name):
    return sum((i + 1) * ord(c) for i, c in enumerate(name)) % (2 ** 31)


def _push_away(x, points, margin, lo, hi):
    x = np.array(x, dtype=np.float64)
    for p in points:
        close = np.abs(x - p) < margin
        if np.any(close):
            up = p + margin + 0.5 * margin * (np.abs(x - p) / margin)
            down = p - margin - 0.5 * margin * (np.abs(x - p) / margin)
            pick_up = (x >= p) & (up <= hi) | (down < lo)
            x = np.where(close, np.where(pick_up, up, down), x)
    return x


def distinct(rng, shape, lo=-2.0, hi=2.0):
    """Values in [lo, hi] with pairwise gaps of at least (hi - lo) / (2 n): no ties."""
    n = int(np.prod(shape, dtype=np.int64))
    slots = (rng.permutation(n) + 0.5 + rng.uniform(-0.25, 0.25, size=n)) / n
    return np.asarray(lo + (hi - lo) * slots, dtype=np.float64).reshape(shape)


def _ints(rng, shape, lo, hi):
    return np.asarray(rng.integers(lo, hi, size=shape), dtype=np.int64)


# ---- sample generators ----------------------------------------------------------------------

def unary(*shapes, **kwargs):
    """One sample per shape, drawn in the entry's domain. Default: (2,3), 0-d, (4,), a
    0-size (0,2), and a non-contiguous (2,3) (the transpose of a (3,2) array)."""
    default = not shapes
    shapes = shapes or ((2, 3), (), (4,), (0, 2))

    def gen(info, rng):
        out = [SampleInput((info.make(rng, s),), dict(kwargs), desc=str(s)) for s in shapes]
        if default:
            out.append(SampleInput((info.make(rng, (3, 2)).T,), dict(kwargs),
                                   desc="(2, 3) non-contiguous"))
        return out

    return gen


def with_params(shape_params):
    """Samples of one input with per-sample kwargs: ``[(shape, kwargs), ...]``."""

    def gen(info, rng):
        return [SampleInput((info.make(rng, s),), dict(kw), desc=f"{s} {kw}")
                for s, kw in shape_params]

    return gen


BINARY_SHAPES = (((2, 3), (2, 3)), ((3, 1), (4,)), ((), (2, 3)), ((2, 3), ()),
                 ((0, 3), (1, 3)))


def binary(shapes=BINARY_SHAPES, y_domain=None, y_singularities=None):
    """Pairs (same shape, broadcasting (3,1)x(4,), scalar with array)."""

    def gen(info, rng):
        return [SampleInput((info.make(rng, a), info.make(rng, b, y_domain, y_singularities)),
                            desc=f"{a} x {b}") for a, b in shapes]

    return gen


def untied(shapes=BINARY_SHAPES):
    """Pairs for max/min-like ops: all values of x and y are distinct (no ties under any
    broadcast pairing), drawn in the entry's domain."""

    def gen(info, rng):
        out = []
        for a, b in shapes:
            na, nb = int(np.prod(a, dtype=np.int64)), int(np.prod(b, dtype=np.int64))
            vals = distinct(rng, (na + nb,), *info.domain)
            out.append(SampleInput((vals[:na].reshape(a), vals[na:].reshape(b)),
                                   desc=f"{a} x {b}"))
        return out

    return gen


def fixed(*samples):
    """Samples built by ``samples[i](info, rng) -> SampleInput``."""

    def gen(info, rng):
        return [s(info, rng) for s in samples]

    return gen

def _s(args, kwargs=None, diff=None, desc=""):
    """A sample from a builder ``args(info, rng) -> tuple``."""

    def build(info, rng):
        return SampleInput(tuple(args(info, rng)), dict(kwargs or {}), diff, desc)

    return build


def _unary_entry(name, op, ref, prim=None, covers=None, **kw):
    return OpInfo(name, op, ref, kw.pop("sample_inputs", unary()),
                  prims=(prim,) if prim else (), covers=covers if covers is not None else (
                      (name,)), **kw)
