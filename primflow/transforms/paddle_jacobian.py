"""Paddle-style lazy Jacobian and Hessian on the tape: ``pf.autograd.jacobian/hessian``.

``J = jacobian(ys, xs)`` computes nothing until indexed. ``J[:]`` is the dense matrix,
computed by one backward pass ``vmap``-ped over all rows' seeds (vectorised, no Python
loop over rows); ``J[i]`` evaluates just row i (one plain backward pass) and caches it. Tuple arguments give
nested tuples of Jacobians (``J[i][j]`` for output i and input j); rows are shared between
the blocks of one output, so every backward pass serves all inputs at once.

Shapes: without ``batch_axis`` the output and input are flattened, ``[M, N]`` (0-d
tensors contribute no dim). With ``batch_axis=0`` the first dim is a batch of independent
samples: ``ys [B, ...]``, ``xs [B, ...]`` give ``[B, M, N]``.
"""

from __future__ import annotations

from ..autodiff.tape import grad
from ..core.state import no_grad
from ..core.tensor import Tensor
from ..ops import creation, manipulation
from .vmap import vmap


class _RowEngine:
    """Rows of the Jacobian of one output with respect to several inputs, cached."""

    def __init__(self, y, xs, batch_axis):
        if batch_axis not in (None, 0):
            raise ValueError(f"batch_axis must be None or 0, got {batch_axis!r}")
        self.batched = batch_axis == 0
        self.y, self.xs = y, xs
        if self.batched:
            if y.ndim == 0:
                raise ValueError("batch_axis=0 needs outputs with a batch dim, got a 0-d tensor")
            for x in xs:
                if x.ndim == 0 or x._shape[0] != y._shape[0]:
                    raise ValueError(
                        f"batch_axis=0: input shape {x.shape} and output shape {y.shape} "
                        f"must share the batch size in dim 0")
            self.batch = y._shape[0]
            self.y_flat = manipulation.reshape(y, [self.batch, -1])
        else:
            self.y_flat = manipulation.reshape(y, [-1])
        self.m = self.y_flat._shape[-1]
        self.rows = {}

    def row(self, i):
        """d y_flat[..., i] / d x for every x: a list of flattened gradients."""
        if i not in self.rows:
            self.rows[i] = self._compute_row(i)
        return self.rows[i]

    def all_rows(self):
        """Every row at once: the backward pass mapped over the M seeds with vmap.
        Returns one tensor per input, shaped [M, N] (or [M, B, N] when batched)."""
        if len(self.rows) == self.m:
            return [manipulation.stack([self.rows[i][j] for i in range(self.m)])
                    for j in range(len(self.xs))]
        if self.y_flat.stop_gradient:
            return [creation.zeros([self.m] + r.shape, dtype=r.dtype)
                    for r in self._compute_row(0)]
        seeds = creation.eye(self.m, dtype=self.y_flat.dtype)  # row i seeds output i
        if self.batched:  # [M, M] -> [M, B, M]: the same seed for every sample
            seeds = manipulation.expand(manipulation.unsqueeze(seeds, 1),
                                        [self.m, self.batch, self.m])

        def pull(seed):
            grads = grad(self.y_flat, self.xs, grad_outputs=seed, retain_graph=True,
                         create_graph=True, allow_unused=True)
            return [manipulation.reshape(creation.zeros_like(x) if g is None else g,
                                         [self.batch, -1] if self.batched else [-1])
                    for g, x in zip(grads, self.xs)]

        return vmap(pull)(seeds)

    def _compute_row(self, i):
        if self.y_flat.stop_gradient:  # y does not depend on anything: the row is zero
            grads = [None] * len(self.xs)
        else:
            seed = creation.zeros_like(self.y_flat)
            with no_grad():
                seed[..., i] = 1.0
            grads = grad(self.y_flat, self.xs, grad_outputs=seed, retain_graph=True,
                         create_graph=True, allow_unused=True)
        out = []
        for g, x in zip(grads, self.xs):
            if g is None:
                g = creation.zeros_like(x)
            out.append(manipulation.reshape(g, [self.batch, -1] if self.batched else [-1]))
        return out


class Jacobian:
    """A lazily evaluated Jacobian block; index it (``J[:]``, ``J[i]``, ``J[i, j]``).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> J = pf.autograd.jacobian(x * x, x)
        >>> J[:].numpy()
        array([[2., 0.],
               [0., 4.]], dtype=float32)
        >>> J[0].numpy()
        array([2., 0.], dtype=float32)
    """

    def __init__(self, engine, index, y, x):
        self._engine, self._index = engine, index
        batched = engine.batched
        n = x.size // (x._shape[0] if batched else 1) if x.size else 0
        m = engine.m
        if batched:
            self.shape = [engine.batch, m, n]
        else:
            self.shape = ([m] if y.ndim > 0 else []) + ([n] if x.ndim > 0 else [])
        self._m_axis = 1 if batched else (0 if y.ndim > 0 else None)

    def _rows(self, rows):
        parts = [self._engine.row(i)[self._index] for i in rows]
        block = manipulation.stack(parts, axis=self._m_axis or 0)
        shape = list(self.shape)
        if self._m_axis is not None:
            shape[self._m_axis] = len(parts)
        return manipulation.reshape(block, shape)  # a 0-d input adds no dim

    def _dense(self):
        rows = self._engine.all_rows()[self._index]  # [M, N] or [M, B, N]
        if self._engine.batched:
            rows = manipulation.transpose(rows, [1, 0, 2])
        return manipulation.reshape(rows, self.shape)

    def __getitem__(self, key):
        if self._m_axis is None:
            dense = self._dense()
            if dense.ndim == 0 and (key is Ellipsis or (isinstance(key, tuple) and not key) or (
                    isinstance(key, slice) and key == slice(None))):
                return dense  # J[:] of a scalar by a scalar
            return dense[key]
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self._m_axis and isinstance(key[self._m_axis], int):
            # one row: evaluate only that backward pass
            i = key[self._m_axis] % self._engine.m
            row = self._engine.row(i)[self._index]
            rest = key[:self._m_axis] + key[self._m_axis + 1:]
            row = manipulation.reshape(row, [s for k, s in enumerate(self.shape)
                                             if k != self._m_axis])
            return row[rest] if rest else row
        if len(key) > self._m_axis and isinstance(key[self._m_axis], slice):
            rows = range(*key[self._m_axis].indices(self._engine.m))
            block = self._rows(rows)
            inner = list(key)
            inner[self._m_axis] = slice(None)
            return block[tuple(inner)]
        return self._dense()[key]

    def numpy(self):
        return self[:].numpy()

    def __repr__(self):
        return f"Jacobian(shape={self.shape})"


def _as_tuple(x, what):
    if isinstance(x, Tensor):
        return (x,), False
    if isinstance(x, (list, tuple)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), True
    raise TypeError(f"{what} must be a Tensor or a tuple of Tensors")


def jacobian(ys, xs, batch_axis=None):
    """Lazy Jacobian of ``ys`` with respect to ``xs`` (Paddle's ``paddle.autograd.jacobian``).

    Args:
        ys: output Tensor or tuple of Tensors (computed from ``xs`` with recording on).
        xs: input Tensor or tuple of Tensors with ``stop_gradient=False``.
        batch_axis: None, or 0 when dim 0 of every tensor is an independent batch.

    Returns:
        A ``Jacobian`` (index with ``[:]``), or tuples of them: ``J[i][j]`` for tuple ys
        and tuple xs, ``J[j]`` for one ys and tuple xs.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> pf.autograd.jacobian(x * x, x)[:].numpy()
        array([[2., 0.],
               [0., 4.]], dtype=float32)
    """
    ys_t, ys_multi = _as_tuple(ys, "ys")
    xs_t, xs_multi = _as_tuple(xs, "xs")
    for i, x in enumerate(xs_t):
        if x.stop_gradient:
            raise RuntimeError(f"xs[{i}] (shape {x.shape}) has stop_gradient=True; set "
                               f"x.stop_gradient = False before computing ys")
    blocks = []
    for y in ys_t:
        engine = _RowEngine(y, xs_t, batch_axis)
        row = tuple(Jacobian(engine, j, y, x) for j, x in enumerate(xs_t))
        blocks.append(row if xs_multi else row[0])
    return tuple(blocks) if ys_multi else blocks[0]


def hessian(ys, xs, batch_axis=None):
    """Lazy Hessian of a scalar ``ys`` (or one scalar per sample with ``batch_axis=0``).

    Tuple ``xs`` give nested blocks: ``H[i][j][:]`` has shape ``[n_i, n_j]``.

    Two Hessians, side by side: ``pf.autograd.hessian(ys, xs)`` (this one, Paddle's
    ``paddle.autograd.hessian``) differentiates an output already recorded on the tape and
    returns a lazy object, evaluated block by block when indexed. ``pf.hessian(f)`` (JAX's
    ``jax.hessian``) is a transform: it takes a function and returns the function computing
    its Hessian, and composes with ``pf.vmap`` and ``pf.jit``.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> pf.autograd.hessian((x ** 3).sum(), x)[:].numpy()
        array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
        >>> pf.hessian(lambda x: (x ** 3).sum())(x).numpy()  # the JAX form: of a function
        array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
    """
    if not isinstance(ys, Tensor):
        raise TypeError("hessian: ys must be a single Tensor")
    xs_t, xs_multi = _as_tuple(xs, "xs")
    if batch_axis is None:
        if ys.size != 1:
            raise ValueError(f"hessian needs a scalar output, got shape {ys.shape}; reduce it "
                             f"(e.g. y.sum()) or use batch_axis=0 for one scalar per sample")
        total = ys
    else:
        if ys.ndim == 0 or ys.size != ys._shape[0]:
            raise ValueError(f"hessian with batch_axis=0 needs ys of shape [B] or [B, 1], got "
                             f"{ys.shape}")
        total = ys.sum()
    if total.stop_gradient:
        grads = [None] * len(xs_t)
    else:
        grads = grad(total, list(xs_t), create_graph=True, allow_unused=True)
    grads = [creation.zeros_like(x) if g is None else g for g, x in zip(grads, xs_t)]
    blocks = jacobian(tuple(grads), xs_t, batch_axis=batch_axis)
    if xs_multi:
        return blocks
    return blocks[0][0]
