"""Taylor mode: ``pf.jet(f, primals, series)`` propagates truncated Taylor series through
any function built from primflow ops, to any order, using each primitive's ``taylor``
rule (see prims/_taylor.py).

Where nested derivatives cost grows like 2^k with the order k, one Taylor pass of order k
costs O(k^2) per element. Values travel as ``TaylorTracer``s holding normalised
coefficients ``[x0, x1, ..., xK]`` (``x(t) = sum_k x[k] t^k``; ``None`` for an exact zero);
``jet`` takes and returns JAX's derivative form ``x_k = k! x[k]``. Rules bind primitives one
level down, so jet composes with the tape (reverse over Taylor), with vmap and with itself.
"""

from __future__ import annotations

import math

from ..backends import fast_paths, get_backend
from ..core.primitive import Aval, NonDifferentiableError
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.tensor import Tensor
from ..core.trace import Trace, Tracer, new_trace
from ..ops.helpers import as_tensor
from ..ops.creation import zeros_like
from ..ops.math import multiply

class TaylorTracer(Tracer):
    """A value with its truncated Taylor series ``series = [x0, x1, ..., xK]``."""

    __slots__ = ("series",)

    def __init__(self, trace, series):
        self._init_tracer(trace, Aval(series[0]._shape, series[0].dtype))
        self.series = series

    def detach(self):
        """The primal alone: a constant along the path."""
        return self.series[0].detach()


class TaylorTrace(Trace):
    transform_name = "pf.jet"

    def __init__(self, level, order):
        super().__init__(level)
        self.order = order

    def process_primitive(self, prim, args, params):
        series = [a.series if isinstance(a, TaylorTracer) and a._trace is self else None
                  for a in args]
        primals = [a if s is None else s[0] for a, s in zip(args, series)]
        if all(s is None for s in series):
            return prim.bind(*primals, **params)
        if prim.taylor is None:
            raise NonDifferentiableError(f"primitive '{prim.name}' has no Taylor rule")
        out, out_series = prim.taylor(primals, series, None, **params)
        if prim.multiple_results:  # control flow: a list of results
            return [o if s is None else TaylorTracer(self, [o] + list(s[1:]))
                    for o, s in zip(out, out_series)]
        if out_series is None or not out.dtype.is_floating or all(
                c is None for c in out_series[1:]):
            return out
        out_series[0] = out
        return TaylorTracer(self, out_series)


def _check_order(order):
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"the Taylor order must be a positive int, got {order!r}")


def taylor_series(f, primals, series, order):
    """Runs ``f`` on truncated series given in normalised form; returns the outputs'
    normalised series (lists of K + 1, ``None`` for zeros) as a pytree like f's output."""
    _check_order(order)
    for i, s in enumerate(series):
        if s is not None and len(s) != order:
            raise ValueError(f"taylor_series: input {i} has {len(s)} coefficients, the order "
                             f"is {order}")
    with new_trace(TaylorTrace, order) as trace:
        wrapped = [TaylorTracer(trace, [p] + list(s)) if s is not None else p
                   for p, s in zip(primals, series)]
        out = f(*wrapped)
    leaves, treedef = tree_flatten(out)
    results = []
    for leaf in leaves:
        if isinstance(leaf, TaylorTracer) and leaf._trace is trace:
            results.append(leaf.series)
        else:
            results.append([as_tensor(leaf)] + [None] * order)
    return tree_unflatten(treedef, results)


def jet(f, primals, series):
    """Taylor-mode propagation (JAX ``jax.experimental.jet`` convention).

    Args:
        f: function of tensors.
        primals: tuple of input tensors ``x0``.
        series: tuple (one per primal) of lists ``[x1, x2, ..., xK]`` of derivative-form
            coefficients: the input path is ``x(t) = x0 + sum_k x_k t^k / k!``.

    Returns:
        ``(f(x0), [y1, ..., yK])`` with ``y_k`` the k-th derivative of ``f(x(t))`` at
        ``t = 0`` (a pytree of these for pytree outputs).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor(0.5, dtype="float64")
        >>> y0, ys = pf.jet(pf.sin, (x,), ([pf.ones_like(x), pf.zeros_like(x)],))
        >>> [round(float(v), 6) for v in ys]  # cos(0.5), -sin(0.5)
        [0.877583, -0.479426]
    """
    primals = tuple(as_tensor(p) for p in primals)
    if not isinstance(series, (tuple, list)) or len(series) != len(primals):
        raise ValueError(f"jet: series must be a tuple with one list per primal "
                         f"({len(primals)}), got {type(series).__name__} of length "
                         f"{len(series) if hasattr(series, '__len__') else '?'}")
    for i, s in enumerate(series):
        if not isinstance(s, (tuple, list)):
            raise TypeError(f"jet: series[{i}] must be a list of coefficients [x1, ..., xK], "
                            f"got {type(s).__name__}")
    orders = {len(s) for s in series}
    if len(orders) != 1:
        raise ValueError(f"jet: every primal needs a series of the same length, got lengths "
                         f"{sorted(len(s) for s in series)}")
    order = orders.pop()
    _check_order(order)
    normalised = []
    for i, (p, s) in enumerate(zip(primals, series)):
        if not p.dtype.is_floating:
            raise TypeError(f"jet: input {i} is {p.dtype.name}; Taylor series need floating "
                            f"inputs (cast it, e.g. x.astype('float64'))")
        coeffs = []
        for k, c in enumerate(s, start=1):
            # numbers and arrays take the primal's dtype; a tensor must already have it
            c = c if isinstance(c, Tensor) else as_tensor(c, dtype=p.dtype)
            if tuple(c._shape) != tuple(p._shape):
                raise ValueError(f"jet: coefficient {k} of input {i} has shape {c.shape} but "
                                 f"the primal has shape {p.shape}")
            if c.dtype is not p.dtype:
                raise TypeError(f"jet: coefficient {k} of input {i} is {c.dtype.name} but the "
                                f"primal is {p.dtype.name}; give the series in the primal's "
                                f"dtype (c.astype('{p.dtype.name}'))")
            factor = 1.0 / math.factorial(k)  # to the normalised form
            coeffs.append(None if _is_zero(c) else c if k == 1 else multiply(c, factor))
        normalised.append(coeffs)
    out = taylor_series(f, primals, normalised, order)
    # a series is a list [y0 (a Tensor), y1, ...]; f's own lists hold series, not tensors
    leaves, treedef = tree_flatten(out, is_leaf=lambda v: isinstance(v, list) and len(
        v) == order + 1 and isinstance(v[0], Tensor))
    primal_out = [s[0] for s in leaves]
    series_out = _derivative_form([s[1:] for s in leaves], primal_out)
    return tree_unflatten(treedef, primal_out), tree_unflatten(treedef, series_out)


def _derivative_form(series, primals):
    """Each output's ``[k! z_k for k = 1..K]``, zeros for ``None``. Concrete coefficients
    go to the backend in one call, which scales in place those only its Taylor kernels
    have seen (no fresh memory to write); tracers and the rest are multiplied."""
    out = [[zeros_like(p) if c is None else c for c in s] for s, p in zip(series, primals)]
    scaled, kept = [], list(primals)  # (i, k) to scale; tensors returned as they are
    rescale = fast_paths.lookup("jet", "rescale", ())
    for i, s in enumerate(out):
        for k, c in enumerate(s, start=1):
            if k == 1 or series[i][k - 1] is None:
                kept.append(c)
            elif rescale is not None and c.stop_gradient and fast_paths.allowed((c,)):
                scaled.append((i, k))
            else:
                s[k - 1] = multiply(c, float(math.factorial(k)))
    if scaled:
        values = rescale([out[i][k - 1]._value for i, k in scaled],
                         [float(math.factorial(k)) for _, k in scaled],
                         [c._value for c in kept if not isinstance(c, Tracer)])
        for (i, k), v in zip(scaled, values):
            out[i][k - 1] = Tensor._wrap(v)
    return out


def _is_zero(c):
    """Whether a concrete coefficient is identically zero, so the rules can skip it (the
    usual directional-derivative series is [v, 0, 0, ...]). Traced values are never
    treated as zero; nor is anything that requires grad (its derivative may be wanted)."""
    if isinstance(c, Tracer) or not c.stop_gradient or not c.dtype.is_floating:
        return False
    is_zero = fast_paths.lookup("jet", "is_zero", (c,))
    if is_zero is not None:  # one pass at most, no temporaries
        return is_zero(c._value)
    # on the array itself: under pf.jit, ops on c would be staged and have no value
    return not get_backend().to_numpy(c._value).any()
