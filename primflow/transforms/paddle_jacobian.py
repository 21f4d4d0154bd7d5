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

from ..autodiff.forward import jvp as _forward_jvp
from ..autodiff.tape import grad
from ..core.state import no_grad
from ..core.tensor import Tensor
from ..ops import creation, manipulation
from .vmap import vmap


class _RowEngine:
    """Rows of the Jacobian of one output with respect to several inputs, cached."""

    def __init__(self, y, xs, batch_axis):
        if batch_axis is not None and (not isinstance(batch_axis, int) or batch_axis != 0):
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
        self.flat = [self.batch, -1] if self.batched else [-1]  # a row's shape per input
        self.y_flat = manipulation.reshape(y, self.flat)
        self.m = self.y_flat._shape[-1]
        self.rows = {}

    def row(self, i):
        """d y_flat[..., i] / d x for every x: a list of flattened gradients."""
        if i not in self.rows:
            self.rows[i] = self._row(i)
        return self.rows[i]

    def all_rows(self):
        """Every row at once: the backward pass mapped over the M seeds with vmap.
        Returns one tensor per input, shaped [M, N] (or [M, B, N] when batched)."""
        if len(self.rows) == self.m:
            return [manipulation.stack([self.rows[i][j] for i in range(self.m)])
                    for j in range(len(self.xs))]
        if self.y_flat.stop_gradient:
            return [creation.zeros([self.m] + r.shape, dtype=r.dtype) for r in self._row(0)]
        seeds = creation.eye(self.m, dtype=self.y_flat.dtype)  # row i seeds output i
        if self.batched:  # [M, M] -> [M, B, M]: the same seed for every sample
            seeds = manipulation.expand(manipulation.unsqueeze(seeds, 1),
                                        [self.m, self.batch, self.m])
        return vmap(self._pull)(seeds)

    def _row(self, i):
        if self.y_flat.stop_gradient:  # y does not depend on anything: the row is zero
            return [manipulation.reshape(creation.zeros_like(x), self.flat) for x in self.xs]
        seed = creation.zeros_like(self.y_flat)
        with no_grad():
            seed[..., i] = 1.0
        return self._pull(seed)

    def _pull(self, seed):
        grads = _grads(self.y_flat, self.xs, grad_outputs=seed, retain_graph=True)
        return [manipulation.reshape(g, self.flat) for g in grads]


def _grads(y, xs, **kwargs):
    """``grad(y, xs)``, differentiable again, with zeros for the inputs ``y`` does not reach."""
    grads = grad(y, list(xs), create_graph=True, allow_unused=True, **kwargs)
    return [creation.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]


class LazyMatrix:
    """What Paddle's lazy Jacobian/Hessian objects share: arithmetic and comparisons work on
    the dense value (``J + 1.0``, ``H @ H``, ``J == J``), and tensor attributes (``dtype``,
    ``stop_gradient``, ``numpy()``, ...) are forwarded to it. Subclasses define ``_value()``,
    the dense tensor."""

    _kind = "Jacobian"  # what repr() calls it

    def _value(self):
        raise NotImplementedError

    def __repr__(self):
        return f"{self._kind}(shape={self.shape})"

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._value(), name)

    def __array__(self, dtype=None, copy=None):
        arr = self._value().numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        return self._value()[key]


def _binary(name):
    def method(self, other):
        if isinstance(other, LazyMatrix):
            other = other._value()
        return getattr(self._value(), name)(other)

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__mod__", "__rmod__",
              "__matmul__", "__rmatmul__", "__floordiv__", "__rfloordiv__", "__eq__", "__ne__",
              "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(LazyMatrix, _name, _binary(_name))
LazyMatrix.__neg__ = lambda self: -self._value()
LazyMatrix.__hash__ = object.__hash__


class Jacobian(LazyMatrix):
    """A lazily evaluated Jacobian block; index it (``J[:]``, ``J[i]``, ``J[i, j]``).

    Arithmetic, comparisons and tensor attributes act on the dense value (``J + 1.0``,
    ``J.dtype``). A 0-d block (scalar by scalar) has no dim to slice: read it with
    ``J[()]`` (``J[:]`` raises IndexError, as in NumPy and Paddle).

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

    def _value(self):
        rows = self._engine.all_rows()[self._index]  # [M, N] or [M, B, N]
        if self._engine.batched:
            rows = manipulation.transpose(rows, [1, 0, 2])
        return manipulation.reshape(rows, self.shape)

    def __getitem__(self, key):
        if key is Ellipsis or (isinstance(key, tuple) and any(k is Ellipsis for k in key)):
            raise IndexError("a lazy Jacobian/Hessian cannot be indexed with '...'; use "
                             "slices and integers, e.g. J[:] or J[:, 0]")
        if self._m_axis is None:
            dense = self._value()
            if dense.ndim == 0:
                if isinstance(key, tuple) and not key:
                    return dense
                raise IndexError("a 0-d Jacobian/Hessian (a scalar by a scalar) has no dim "
                                 "to index; read its value with J[()]")
            return dense[key]
        if not isinstance(key, tuple):
            key = (key,)
        a = self._m_axis
        rows = key[a] if len(key) > a else None
        if isinstance(rows, int):  # one row: evaluate only that backward pass
            row = self._engine.row(rows % self._engine.m)[self._index]
            row = manipulation.reshape(row, self.shape[:a] + self.shape[a + 1:])
            rest = key[:a] + key[a + 1:]
            return row[rest] if rest else row
        if isinstance(rows, slice):
            parts = [self._engine.row(i)[self._index] for i in range(*rows.indices(self._engine.m))]
            shape = list(self.shape)
            shape[a] = len(parts)  # (a 0-d input has no dim in the shape)
            block = manipulation.reshape(manipulation.stack(parts, axis=a), shape)
            return block[key[:a] + (slice(None),) + key[a + 1:]]
        return self._value()[key]


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
        if not isinstance(batch_axis, int) or isinstance(batch_axis, bool):
            raise ValueError(f"batch_axis must be None or 0, got {batch_axis!r}")
        if ys.ndim == 0:  # Paddle reads ys[0] here
            raise IndexError(f"hessian with batch_axis={batch_axis} needs ys with a batch dim "
                             f"(shape [B] or [B, 1]), got a 0-d tensor")
        if ys.size != ys._shape[0]:
            raise ValueError(f"hessian with batch_axis=0 needs ys of shape [B] or [B, 1], got "
                             f"{ys.shape}")
        if batch_axis != 0:
            raise ValueError(f"batch_axis must be None or 0, got {batch_axis!r}")
        total = ys.sum()
    most = 1 if batch_axis is None else 2
    for i, x in enumerate(xs_t):
        if x.ndim > most:  # Paddle: Hessians are of vectors (of a batch of vectors)
            raise ValueError(
                f"hessian: xs[{i}] has shape {x.shape}; with batch_axis={batch_axis} inputs "
                f"must have at most {most} dim(s). Reshape it, e.g. x.reshape([-1])"
                + ("" if batch_axis is None else " or x.reshape([B, -1])"))
    grads = [creation.zeros_like(x) for x in xs_t] if total.stop_gradient else _grads(total, xs_t)
    blocks = jacobian(tuple(grads), xs_t, batch_axis=batch_axis)
    return blocks if xs_multi else blocks[0][0]


# ---- pf.incubate.autograd: Paddle's functional vjp / jvp / Jacobian / Hessian ---------------
# They take a function and its inputs (Paddle's signatures, next to the JAX-style pf.vjp and
# pf.jvp) and differentiate with respect to fresh copies of the inputs, so a function that
# closes over one of its inputs sees that closure as a constant (Paddle's behaviour).

def _separate(xs):
    _check_tensors(xs, "xs")

    def fresh(x):
        t = x.detach()
        t.stop_gradient = False
        return t

    if isinstance(xs, Tensor):
        x = fresh(xs)
        return x, (x,)
    out = [fresh(x) for x in xs]
    return (tuple(out) if isinstance(xs, tuple) else out), tuple(out)


def _check_tensors(xs, what):
    if isinstance(xs, Tensor) or (isinstance(xs, (list, tuple)) and xs
                                  and all(isinstance(x, Tensor) for x in xs)):
        return
    raise TypeError(f"{what} must be a Tensor or a non-empty list/tuple of Tensors, got "
                    f"{type(xs).__name__}")


def _call(func, xs):
    return func(*xs) if isinstance(xs, (list, tuple)) else func(xs)


def _as_seq(v):
    return (v,) if isinstance(v, Tensor) else tuple(v)


def _check_like(v, refs, what, ref_what):
    _check_tensors(v, what)
    v_t = _as_seq(v)
    if len(v_t) != len(refs) or any(a.shape != b.shape for a, b in zip(v_t, refs)):
        raise RuntimeError(f"{what} must match {ref_what} in number and shapes: got "
                           f"{[a.shape for a in v_t]}, expected {[b.shape for b in refs]}")
    return v_t


def functional_vjp(func, xs, v=None):
    """Paddle's ``paddle.incubate.autograd.vjp``: ``(func(xs), v^T J)``.

    Args:
        func: a function of tensors returning a Tensor or a sequence of Tensors.
        xs: a Tensor or a list/tuple of Tensors (the inputs).
        v: cotangents shaped like the outputs (default: ones).

    Returns:
        ``(ys, vjp)`` with one gradient per input (a Tensor when ``xs`` is one; None for
        an unused input).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0])
        >>> ys, g = pf.incubate.autograd.vjp(lambda t: t * t, x)
        >>> g.numpy()
        array([2., 4.], dtype=float32)
    """
    xs_sep, xs_t = _separate(xs)
    ys = _call(func, xs_sep)
    ys_t = _as_seq(ys)
    v_t = None if v is None else _check_like(v, ys_t, "v", "the outputs of func")
    live = [i for i, y in enumerate(ys_t) if not y.stop_gradient]
    grads = [None] * len(xs_t)
    if live:
        grads = grad([ys_t[i] for i in live], list(xs_t),
                     grad_outputs=None if v_t is None else [v_t[i] for i in live],
                     create_graph=True, allow_unused=True)
    return ys, (grads[0] if isinstance(xs, Tensor) else grads)


def functional_jvp(func, xs, v=None):
    """Paddle's ``paddle.incubate.autograd.jvp``: ``(func(xs), J v)`` by forward mode.

    Args:
        func: a function of tensors returning a Tensor or a sequence of Tensors.
        xs: a Tensor or a list/tuple of Tensors.
        v: tangents shaped like ``xs`` (default: ones).

    Returns:
        ``(ys, jvp)``, the tangent shaped like the outputs.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0])
        >>> ys, t = pf.incubate.autograd.jvp(lambda a: a * a, x)
        >>> t.numpy()
        array([2., 4.], dtype=float32)
    """
    xs_sep, xs_t = _separate(xs)
    v_t = (tuple(creation.ones_like(x) for x in xs_t) if v is None
           else _check_like(v, xs_t, "v", "xs"))
    return _forward_jvp(lambda *args: func(*args) if isinstance(xs, (list, tuple))
                        else func(args[0]), xs_t, v_t)


class FunctionJacobian(LazyMatrix):
    """Paddle's ``paddle.incubate.autograd.Jacobian(func, xs, is_batched=False)``: the
    Jacobian of ``func`` at ``xs``, all outputs and inputs flattened and joined, shape
    ``[M, N]`` (``[B, M, N]`` when batched along dim 0). Evaluated on first access.

    Example:
        >>> import primflow as pf
        >>> J = pf.incubate.autograd.Jacobian(lambda x: x * x, pf.to_tensor([1.0, 2.0]))
        >>> J.shape, J[:].numpy().tolist()
        ([2, 2], [[2.0, 0.0], [0.0, 4.0]])
    """

    def __init__(self, func, xs, is_batched=False):
        xs_sep, xs_t = _separate(xs)
        ys_t = _as_seq(_call(func, xs_sep))
        self.is_batched = bool(is_batched)
        if self.is_batched:
            batch = xs_t[0]._shape[0] if xs_t[0].ndim else None
            for t in xs_t + ys_t:
                if t.ndim == 0 or t._shape[0] != batch:
                    raise ValueError(f"is_batched=True needs every input and output to share "
                                     f"the batch size in dim 0, got shapes "
                                     f"{[a.shape for a in xs_t + ys_t]}")
            y = manipulation.concat([manipulation.reshape(t, [batch, -1]) for t in ys_t], 1)
            n = sum(x.size // batch for x in xs_t)
            self.shape = [batch, y._shape[1], n]
        else:
            y = manipulation.concat([manipulation.reshape(t, [-1]) for t in ys_t])
            self.shape = [y._shape[0], sum(x.size for x in xs_t)]
        self._engine = _RowEngine(y, xs_t, 0 if self.is_batched else None)
        self._dense_value = None

    def _value(self):
        if self._dense_value is None:
            blocks = self._engine.all_rows()  # per input [M, N_j] or [M, B, N_j]
            dense = manipulation.concat(list(blocks), axis=-1)
            if self.is_batched:
                dense = manipulation.transpose(dense, [1, 0, 2])
            self._dense_value = dense
        return self._dense_value


class FunctionHessian(LazyMatrix):
    """Paddle's ``paddle.incubate.autograd.Hessian(func, xs, is_batched=False)``: the
    Hessian of a scalar ``func`` (one scalar per sample when batched), inputs flattened and
    joined: shape ``[N, N]`` or ``[B, N, N]``. A function with more than one output value
    (per sample) raises RuntimeError, as in Paddle.

    Example:
        >>> import primflow as pf
        >>> H = pf.incubate.autograd.Hessian(lambda x: (x ** 3).sum(),
        ...                                  pf.to_tensor([1.0, 2.0]))
        >>> H[:].numpy().tolist()
        [[6.0, 0.0], [0.0, 12.0]]
    """

    def __init__(self, func, xs, is_batched=False):
        def gradient(*inputs):
            y = func(*inputs)
            per_sample = y.size // (y._shape[0] if is_batched and y.ndim else 1) \
                if isinstance(y, Tensor) else None
            if per_sample != 1 or (is_batched and y.ndim == 0):
                raise RuntimeError(
                    f"Hessian needs func to return one value{' per sample' if is_batched else ''}"
                    f", got {getattr(y, 'shape', type(y).__name__)}")
            if y.stop_gradient:
                return tuple(creation.zeros_like(x) for x in inputs)
            return tuple(_grads(y.sum() if is_batched else y, inputs))

        self._jacobian = FunctionJacobian(gradient, xs, is_batched)
        self.shape = self._jacobian.shape

    _kind = "Hessian"

    def _value(self):
        return self._jacobian._value()
