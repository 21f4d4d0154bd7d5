"""Fused NumPy kernels for the Taylor rules of elementwise unary primitives.

A primitive's Taylor rule is *defined* by its recurrence written in primitives
(``primflow/prims/_taylor.py``): that is what transforms trace, what reverse-over-Taylor
differentiates and what ``pf.decompose()`` forces. Written that way, an order-K series costs
O(K^2) primitive calls, each a fresh full-size array and a pass over memory. In eager mode,
when nothing records or traces the coefficients, the rule may instead call the kernel here
(``primflow/backends/fast_paths.py: taylor_series`` decides), which runs the same recurrence

* block by block (``BLOCK`` elements at a time), so that the series of a block stay in
  cache between the O(K^2) passes over them;
* into preallocated buffers (``out=``), with the K output coefficients in one allocation;
* summing each run of products ``sum_i a[i] b[m - i]`` by one ``einsum`` over stacked
  coefficients (one pass instead of a multiply and an add per term);
* skipping exact-zero (``None``) coefficients exactly where the primitive rule does, so both
  paths return ``None`` for the same coefficients.

``TAYLOR[name] = kernel`` with ``kernel(x0, z0, xs, top_weights=None, **params) -> zs``:

* ``x0`` the primal input and ``z0 = prim(x0)`` the primal output (native arrays, one shape
  S, never written);
* ``xs = [x1, ..., xK]`` normalised input coefficients, ``None`` for an exact zero; the
  others all of one shape, either S or ``(*lead, *S)`` (several series at once, e.g. one per
  direction in collapsed Taylor mode; the primal broadcasts against them). A constant
  coefficient (a broadcast scalar, as ``ones_like`` makes) is read as one number;
* ``top_weights``: optional weights over the lead dims (one per series); then ``zK`` comes
  back as ``sum_r w[r] zK[r]`` of shape S, summed block by block (collapsed Taylor mode's
  top coefficient, never stored per series);
* returns ``[z1, ..., zK]``: arrays of the coefficients' shape (views of one fresh
  allocation), or ``None`` where the primitive rule gives ``None``.

The caller guarantees a floating dtype shared by all arrays and ``x0.size > 0``.

Example:
    >>> import numpy as np
    >>> x0 = np.array([0.5]); z0 = np.tanh(x0)
    >>> z1, z2 = TAYLOR["tanh"](x0, z0, [np.ones(1), None])
    >>> bool(np.allclose(z1, 1 - z0 ** 2)), bool(np.allclose(2 * z2, -2 * z0 * (1 - z0 ** 2)))
    (True, True)
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

# Elements per block (across the leading dims), times K + 1. A block's working set is
# O(K) arrays and its NumPy calls O(K^2): smaller blocks keep the arrays in cache, larger
# ones pay less Python overhead per call. Measured best on a 2 MiB L2 (100,000 points at
# K = 2..8, and [4, 4096, 64] at K = 4): about 2^18 / (K + 1).
BLOCK = 1 << 18


class _Stack:
    """Coefficients 0..K of one series within a block, stacked: an (K + 1, R, n) array
    whose row i holds coefficient i once *filled*, so that a run of them can be summed
    against another series by one einsum.

    A row is filled either by computing the coefficient into it (``put``) or, the first
    time a run needs it, from ``source[i]`` times a factor: i for a derivative stack (which
    holds ``i c[i]``, the coefficients of ``t c'(t)``), ``first`` for entry 0. A source is
    an array or, for a constant coefficient, a Python float. A coefficient used alone is
    read from its source, with no copy (``lazy``). Rows in ``solo`` never join a run: their
    stack row is not to be written (it is not there, or lives at ``home[i]``)."""

    __slots__ = ("derivative", "filled", "first", "home", "present", "rows", "solo",
                 "source")

    def __init__(self, rows, source=(), derivative=False, first=1, solo=(), home=None):
        self.rows = rows
        self.source = list(source) + [None] * (len(rows) - len(source))
        self.present = [c is not None for c in self.source]
        self.filled = [False] * len(rows)
        self.derivative = derivative
        self.first = first
        self.solo = solo
        self.home = home or {}

    def row(self, i):
        return self.home[i] if i in self.home else self.rows[i]

    def put(self, i):
        """Row i, for coefficient i to be computed into."""
        self.present[i] = self.filled[i] = True
        return self.row(i)

    def set_source(self, i, c):
        self.source[i] = c
        self.present[i] = c is not None

    def lazy(self, i):
        """``(value, factor)`` with ``factor * value`` = entry i, copy-free; the value is an
        array or a float (a constant)."""
        if self.filled[i]:
            return self.row(i), 1
        return self.source[i], (i if self.derivative else 1) if i else self.first

    def get(self, i):
        """Entry i as one array or float (filled if it needs scaling)."""
        c, factor = self.lazy(i)
        if factor == 1:
            return c
        if isinstance(c, float):
            return c * factor
        self._fill(i)
        return self.row(i)

    def run(self, i, length, step):
        """Entries i, i + step, ... (``length`` of them) as one (length, R, n) view."""
        stop = i + step * length
        for r in range(i, stop, step):
            if not self.filled[r]:
                self._fill(r)
        return self.rows[i:stop if stop >= 0 else None:step]

    def _fill(self, i):
        c, factor = self.lazy(i)
        if isinstance(c, float):
            self.row(i).fill(c * factor)
        elif factor == 1:
            np.copyto(self.row(i), c)  # broadcasts a primal-shaped source
        else:
            np.multiply(c, factor, out=self.row(i))
        self.filled[i] = True


class _Block:
    """One block of a kernel call: views of the inputs, the output stack and scratch.
    Coefficient-shaped arrays are ``(R, n)`` views, primal-shaped ones ``(n,)``."""

    __slots__ = ("K", "_call", "_e", "_prows", "_rows", "_s", "outputs", "x0", "xs", "z0")

    def __init__(self, call, s, e):
        self._call, self._s, self._e = call, s, e
        self.x0 = call.x0[s:e]
        self.z0 = call.z0[s:e]
        # a constant coefficient (a broadcast scalar, e.g. ones_like) is its value
        self.xs = [None] + [c if c is None or isinstance(c, float) else c[:, s:e]
                            for c in call.xs]
        self.K = len(call.xs)
        self._rows = self._prows = 0
        self.outputs = None

    def output_stack(self, c0):
        """The stack of output coefficients (row 0, never returned, starts as ``c0``)."""
        call, K = self._call, self.K
        solo, home = [], {}
        if call.coeff_rows > 1:  # row 0 would be c0 repeated: peel it off runs instead
            solo.append(0)
        if call.weights is not None:  # the top is summed at the end of the block
            solo.append(K)
            home[K] = self.row()
        self.outputs = _Stack(call.outs[:, :, self._s:self._e], [c0], solo=solo, home=home)
        return self.outputs

    def finish(self):
        """Sums the block's top coefficient over the leading dims, if asked to."""
        call, K = self._call, self.K
        if call.weights is not None and self.outputs.present[K]:
            np.matmul(call.weights, self.outputs.row(K), out=call.top[self._s:self._e])

    def stack(self, source=(), derivative=False, first=1):
        """A scratch stack of K + 1 rows (see _Stack)."""
        i = self._rows
        self._rows += self.K + 1
        return _Stack(self._call.rows[i:self._rows, :, :self._e - self._s], source,
                      derivative, first)

    def row(self):
        """A scratch coefficient-shaped array."""
        self._rows += 1
        return self._call.rows[self._rows - 1, :, :self._e - self._s]

    def prow(self):
        """A scratch primal-shaped array."""
        self._prows += 1
        return self._call.prows[self._prows - 1, :self._e - self._s]


# scratch rows a kernel may take per block: two stacks, one row and the summed top's row
def _scratch_rows(K):
    return 2 * (K + 1) + 2


class _Call:
    """The whole-array state of one kernel call: flattened inputs, outputs, scratch.

    The K output coefficients are one allocation: the allocator then reuses that memory
    from call to call, where K separate arrays of this size are handed back to the system
    and page-faulted in again on every call (at K = 8, as costly as the arithmetic). The
    price: one coefficient kept alive keeps the whole allocation, as any view does.
    Scratch is kept per thread from call to call for the same reason."""

    def __init__(self, x0, z0, xs, weights=None):
        first = next(c for c in xs if c is not None)
        K, m = len(xs), x0.size
        r = first.size // m
        self.x0 = x0.reshape(m)  # views unless an input is non-contiguous
        self.z0 = z0.reshape(m)
        self.xs = [None if c is None else float(c.flat[0]) if not any(c.strides) else
                   c.reshape(r, m) for c in xs]
        self.shape, self.primal_shape = first.shape, x0.shape
        self.coeff_rows = r
        # equal blocks of about BLOCK elements (no small last block: each costs the same
        # Python overhead, whatever its size)
        blocks = max(1, round(m * r * (K + 1) / BLOCK))
        self.width = -(-m // blocks)
        # Rows 1..K hold the outputs, row 0 z0 (for runs; untouched when r > 1, as is row
        # K when the top is summed: pages never written cost nothing)
        self.outs = np.empty((K + 1, r, m), first.dtype)
        _mark_private(self.outs)
        self.weights = None if weights is None else weights.reshape(r)
        self.top = None if weights is None else np.empty(m, first.dtype)
        self.rows = _scratch(first.dtype, (_scratch_rows(K), r, self.width))
        self.prows = _scratch(first.dtype, (2, self.width))
        self.present = None

    def run(self, recurrence, params):
        m = self.x0.size
        for s in range(0, m, self.width):
            block = _Block(self, s, min(m, s + self.width))
            recurrence(block, block.K, **params)
            block.finish()
            self.present = block.outputs.present  # the same in every block
        K = len(self.present) - 1
        out = [self.outs[k].reshape(self.shape) if self.present[k] else None
               for k in range(1, K + 1)]
        if self.weights is not None and self.present[K]:
            out[K - 1] = self.top.reshape(self.primal_shape)
        return out


_cache = threading.local()


def _scratch(dtype, shape):
    """Scratch space of ``shape``, kept from call to call (per thread), so that it costs
    no allocation and stays in cache."""
    pool = getattr(_cache, "pool", None)
    if pool is None:
        pool = _cache.pool = {}
    key = (dtype, len(shape))
    size = math.prod(shape)
    buf = pool.get(key)
    if buf is None or buf.size < size:
        buf = pool[key] = np.empty(size, dtype)
    return buf[:size].reshape(shape)


def _kernel(recurrence):
    """A kernel on whole arrays from ``recurrence(block, K, **params)``, which computes one
    block of every output coefficient into ``block.output_stack(...)``."""

    def kernel(x0, z0, xs, top_weights=None, **params):
        return _Call(x0, z0, xs, top_weights).run(recurrence, params)

    kernel.__doc__ = recurrence.__doc__
    return kernel


# ---- sums of products ----------------------------------------------------------------------

def _scale(out, factor):
    if factor == -1:
        np.negative(out, out=out)
    elif factor != 1:
        np.multiply(out, factor, out=out)
    return out


def _dot(dst, tmp, A, B, pairs, scale=1):
    """``scale * sum A[i] B[j]`` over ``pairs`` of (i, j) into ``dst = (stack, row)``;
    None when there are no pairs (the row then stays absent). Each run of pairs (i, j),
    (i + 1, j - 1), ... is summed by one einsum; a single pair is one multiply that reads
    both factors where they are (their pending factors, constants included, join
    ``scale``)."""
    if not pairs:
        return None
    out = dst[0].put(dst[1])
    if len(pairs) == 1:
        ((i, j),) = pairs
        (a, fa), (b, fb) = A.lazy(i), B.lazy(j)
        factor, arrays = scale * fa * fb, []
        for v in (a, b):
            if isinstance(v, float):  # a constant joins the scale
                factor *= v
            else:
                arrays.append(v)
        if not arrays:
            out.fill(factor)
        elif len(arrays) == 1:
            np.multiply(arrays[0], factor, out=out)
        else:
            _scale(np.multiply(*arrays, out=out), factor)
        return out
    runs = []  # [i, j, length]
    for i, j in pairs:
        if i in A.solo or j in B.solo:
            runs.append([i, j, 0])  # a single pair that starts no run
        elif runs and runs[-1][2] and (i, j) == (runs[-1][0] + runs[-1][2],
                                                  runs[-1][1] - runs[-1][2]):
            runs[-1][2] += 1
        else:
            runs.append([i, j, 1])
    for n, (i, j, length) in enumerate(runs):
        target = out if n == 0 else tmp
        if length <= 1:
            np.multiply(A.get(i), B.get(j), out=target)
        elif target.dtype.kind == "V":  # bfloat16 (ml_dtypes): einsum has no loop for it
            np.sum(A.run(i, length, 1) * B.run(j, length, -1), axis=0, out=target)
        else:
            np.einsum("irj,irj->rj", A.run(i, length, 1), B.run(j, length, -1), out=target)
        if n:
            np.add(out, tmp, out=out)
    return _scale(out, scale)


def _square(dst, tmp, Z, m, scale=1, start=0):
    """``scale * sum_{i=start..m-start} z[i] z[m-i]`` into ``dst`` (the m-th coefficient
    of z^2 for start 0); None when no term is present (as ``square_coefficient`` gives).
    Odd m sums each symmetric pair once and doubles. Even m sums all terms in one einsum,
    which costs less than the middle term's separate multiply and add, unless z[0] cannot
    join runs (then the pairs are doubled and the middle term added)."""
    half = m % 2 == 1 or (start == 0 and 0 in Z.solo)
    if not half:
        pairs = [(i, m - i) for i in range(start, m - start + 1)
                 if Z.present[i] and Z.present[m - i]]
        return _dot(dst, tmp, Z, Z, pairs, scale)
    pairs = [(i, m - i) for i in range(start, (m + 1) // 2)
             if Z.present[i] and Z.present[m - i]]
    out = _dot(dst, tmp, Z, Z, pairs, 2 * scale)
    h = m // 2
    if m % 2 or not Z.present[h]:
        return out
    if out is None:
        return _dot(dst, tmp, Z, Z, [(h, h)], scale)
    mid = Z.get(h)
    np.add(out, _scale(np.multiply(mid, mid, out=tmp), scale), out=out)
    return out


def _weighted_sum(dst, tmp, DX, W, k, sign=1):
    """``(sign/k) sum_{j=1..k} j x[j] w[k-j]`` into ``dst`` over the present terms (the
    step of ``derivative_product_series``, ``exp_series`` and ``sincos_series``); ``DX``
    is the derivative stack of x."""
    pairs = [(j, k - j) for j in range(1, k + 1) if DX.present[j] and W.present[k - j]]
    return _dot(dst, tmp, DX, W, pairs, sign / k)


def _derivative_product(block, Z, W, sign, w_next=None):
    """``z' = w x'``: ``z[k] = (1/k) sum_{j=1..k} j x[j] w[k-j]`` for k = 1..K (mirrors
    ``_taylor.derivative_product_series``), where ``W`` holds ``sign * w`` (W is Z itself
    for exp). ``w_next(m, dst, scale, tmp)`` computes ``scale * W[m]`` into ``dst`` once
    z[0..m] are known, returning it (None for an exact zero)."""
    DX, tmp, K = block.stack(block.xs, derivative=True), block.row(), block.K
    present = [j for j in range(1, K + 1) if DX.present[j]]
    if w_next is not None and len(present) == 1:
        # One input coefficient x[j] (a line x0 + t^j x[j], or the collapsed top): then
        # z[m + j] = (sign j / (m + j)) x[j] w[m], and w[m] serves only that coefficient, so
        # it is computed straight into it, the factor (with a constant x[j]) included.
        (j,) = present
        x, factor = DX.lazy(j)
        _weighted_sum((Z, j), tmp, DX, W, j, sign)
        for m in range(1, K - j + 1):
            scale = sign * factor / (m + j)
            if isinstance(x, float):
                scale *= x
            z = w_next(m, (Z, m + j), scale, tmp)
            if z is not None and not isinstance(x, float):
                np.multiply(z, x, out=z)
        return
    for k in range(1, K + 1):
        _weighted_sum((Z, k), tmp, DX, W, k, sign)
        if k < K and w_next is not None:
            w_next(k, (W, k), 1, tmp)


# ---- the kernels ---------------------------------------------------------------------------

def _tanh(block, K):
    """tanh: z' = (1 - z^2) x'."""
    # W holds -w, -w[m] = (z^2)[m] for m >= 1, which saves a negation per m; entry 0 is
    # w0 = 1 - z0^2 with a pending factor -1 (so that z[j] = x[j] w0 needs no negation)
    w0 = np.multiply(block.z0, block.z0, out=block.prow())
    W = block.stack([np.subtract(1, w0, out=w0)], first=-1)
    Z = block.output_stack(block.z0)
    _derivative_product(block, Z, W, -1,
                        lambda m, dst, scale, tmp: _square(dst, tmp, Z, m, scale))


def _logistic(block, K):
    """logistic: z' = (z - z^2) x'."""
    # W holds -w: -w[m] = (z^2)[m] - z[m], and entry 0 is w0 = z0 - z0^2 with a factor -1
    w0 = np.multiply(block.z0, block.z0, out=block.prow())
    W = block.stack([np.subtract(block.z0, w0, out=w0)], first=-1)
    Z = block.output_stack(block.z0)

    def w_next(m, dst, scale, tmp):
        w = _square(dst, tmp, Z, m)
        if Z.present[m]:
            if w is None:
                w = np.negative(Z.get(m), out=dst[0].put(dst[1]))
            else:
                np.subtract(w, Z.get(m), out=w)
        return None if w is None else _scale(w, scale)

    _derivative_product(block, Z, W, -1, w_next)


def _exp(block, K):
    """exp: z' = z x'."""
    Z = block.output_stack(block.z0)
    _derivative_product(block, Z, Z, 1)


def _expm1(block, K):
    """expm1: z' = (z + 1) x'."""
    # row 0 of the output stack is never returned: it holds w[0] = z0 + 1
    Z = block.output_stack(np.add(block.z0, 1, out=block.prow()))
    _derivative_product(block, Z, Z, 1)


def _sincos(want_sin):
    def recurrence(block, K):
        DX, tmp = block.stack(block.xs, derivative=True), block.row()
        if want_sin:
            S = block.output_stack(block.z0)
            C = block.stack([np.cos(block.x0, out=block.prow())])
        else:
            S = block.stack([np.sin(block.x0, out=block.prow())])
            C = block.output_stack(block.z0)
        for k in range(1, K + 1):
            # s[k] = (1/k) sum j x[j] c[k-j], c[k] = -(1/k) sum j x[j] s[k-j]; the other
            # function's top coefficient is never needed
            if want_sin or k < K:
                _weighted_sum((S, k), tmp, DX, C, k)
            if not want_sin or k < K:
                _weighted_sum((C, k), tmp, DX, S, k, -1)

    recurrence.__doc__ = ("sin: s' = c x', c' = -s x'" if want_sin else
                          "cos: c' = -s x', s' = c x'")
    return recurrence


def _log_like(shift):
    def recurrence(block, K):
        # z[k] = (x[k] - (1/k) sum_{j=1..k-1} j z[j] x[k-j]) / x[0]  (log_series)
        X, DZ, tmp = block.stack(block.xs), block.stack(derivative=True), block.row()
        r0 = np.add(block.x0, 1, out=block.prow()) if shift else block.x0
        r0 = np.divide(1, r0, out=block.prow())
        Z = block.output_stack(block.z0)
        for k in range(1, K + 1):
            pairs = [(j, k - j) for j in range(1, k) if DZ.present[j] and X.present[k - j]]
            z = _dot((Z, k), tmp, DZ, X, pairs, -1.0 / k)
            if z is not None:
                if X.present[k]:
                    np.add(z, X.get(k), out=z)
                np.multiply(z, r0, out=z)
            elif X.present[k]:
                z = np.multiply(X.get(k), r0, out=Z.put(k))
            DZ.set_source(k, z)

    recurrence.__doc__ = "log1p: z' = x' / (1 + x)" if shift else "log: z' = x' / x"
    return recurrence


def _sqrt(block, K):
    """sqrt: z^2 = x, z[k] = (x[k] - sum_{j=1..k-1} z[j] z[k-j]) / (2 z[0])."""
    tmp = block.row()
    r0 = np.divide(0.5, block.z0, out=block.prow())
    Z = block.output_stack(block.z0)
    for k in range(1, K + 1):
        x = block.xs[k]
        z = _square((Z, k), tmp, Z, k, scale=-1, start=1)
        if z is not None:
            if x is not None:
                np.add(z, x, out=z)
            np.multiply(z, r0, out=z)
        elif x is not None:
            np.multiply(x, r0, out=Z.put(k))


TAYLOR = {
    "tanh": _kernel(_tanh),
    "logistic": _kernel(_logistic),
    "exp": _kernel(_exp),
    "expm1": _kernel(_expm1),
    "sin": _kernel(_sincos(True)),
    "cos": _kernel(_sincos(False)),
    "log": _kernel(_log_like(False)),
    "log1p": _kernel(_log_like(True)),
    "sqrt": _kernel(_sqrt),
}


# Output blocks of kernel calls that nothing outside the Taylor machinery has seen: their
# rows are coefficients inside a Taylor pass, which ``rescale`` may overwrite once the pass
# has ended. ``rescale`` removes the blocks it is shown (they are about to be returned).
_private = {}  # id(block) -> weak reference to the block (arrays are not hashable)


def _mark_private(block):
    key = id(block)

    def forget(ref):
        if _private.get(key) is ref:
            del _private[key]

    _private[key] = weakref.ref(block, forget)


def _is_private(a):
    ref = _private.get(id(a))
    return ref is not None and ref() is a


def _root(a):
    while a.base is not None and isinstance(a.base, np.ndarray):
        a = a.base
    return a


def rescale(values, factors, others=()):
    """``[f * v for v, f in zip(values, factors)]`` for ``pf.jet``'s last step (normalised
    to derivative-form coefficients). A value that lies in a kernel's private output
    block, overlapping no other array given (``values`` and ``others``, the rest of the
    results), is scaled in place: the one multiply then writes no fresh memory. The
    blocks seen are no longer private afterwards.

    Example:
        >>> rescale([np.ones(2)], [2.0])[0]  # not a kernel's block: a fresh array
        array([2., 2.])
    """
    arrays = list(values) + list(others)
    roots = [_root(a) for a in arrays]
    out = []
    for i, (v, f) in enumerate(zip(values, factors)):
        # (a read-only value is a broadcast view, whose elements alias each other)
        private = v.flags.writeable and _is_private(roots[i]) and not any(
            roots[j] is roots[i] and np.may_share_memory(v, arrays[j])
            for j in range(len(arrays)) if j != i)
        out.append(np.multiply(v, f, out=v) if private else np.multiply(v, f))
    for r in roots:
        if _is_private(r):
            del _private[id(r)]
    return out


def is_zero(a):
    """Whether the array is identically zero, without temporaries: a broadcast constant
    (all strides 0, what ``zeros_like``/``full`` make) is read at one element, and any
    other array is first checked at its first element (nonzero in most coefficients)."""
    if not a.size:
        return True
    if a.flat[0] != 0:
        return False
    if not any(a.strides):
        return True
    return not np.any(a)
