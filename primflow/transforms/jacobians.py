"""Jacobians and Hessians of functions, vectorised with ``vmap`` (JAX semantics):
``jacrev`` maps ``vjp`` over the output basis, ``jacfwd`` maps ``jvp`` over the input
basis, ``hessian = jacfwd(jacrev)``. Output dims come first in every result.
"""

from __future__ import annotations

import functools

from ..autodiff.forward import jvp
from ..autodiff.functional import (check_argnums, check_input_dtypes, check_output_dtypes,
                                   holomorphic_result, vjp)
from ..core.pytree import replace_at, tree_flatten, tree_unflatten
from ..core.trace import mark_transform
from ..ops.helpers import as_tensor, exact_reshape
from ..ops.creation import eye, zeros_like
from .second_order import hessian_by_adjoints
from .vmap import vmap


def _basis(n, like, shape):
    """The n unit vectors of a space shaped ``shape``, stacked: shape ``[n, *shape]``."""
    return exact_reshape(eye(n, dtype=like.dtype), [n] + list(shape))


def _assemble(blocks_per_out, out_tree, in_tree, argnums):
    """Nests Jacobian blocks like JAX: output structure outside, input structure inside."""
    per_out = []
    for blocks in blocks_per_out:
        inner = tree_unflatten(in_tree, blocks)  # a tuple over the differentiated args
        per_out.append(inner[0] if isinstance(argnums, int) else tuple(inner))
    return tree_unflatten(out_tree, per_out)


def jacrev(f, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by reverse mode: ``vmap`` of ``vjp`` over the output basis. Output dims
    come first: ``jacrev(f)(x).shape == f(x).shape + x.shape``.

    Inputs and outputs must be real (JAX's rule: the Jacobian of a complex function is
    ambiguous); ``holomorphic=True`` takes complex ones and gives the complex derivative
    ``df_i/dz_j`` of a holomorphic function.

    Example:
        >>> import primflow as pf
        >>> pf.jacrev(lambda x: x * x)(pf.to_tensor([1.0, 2.0])).numpy()
        array([[2., 0.],
               [0., 4.]], dtype=float32)
    """

    @functools.wraps(f)
    def wrapped(*args):
        nums = check_argnums(argnums, len(args))

        def restricted(*diff):
            return f(*replace_at(args, nums, diff))

        diff_args = tuple(args[i] for i in nums)
        check_input_dtypes("jacrev", diff_args, holomorphic, complex_allowed=False)
        out, vjp_fn, *aux = vjp(restricted, *diff_args, has_aux=has_aux)
        check_output_dtypes("jacrev", out, holomorphic)
        out_leaves, out_tree = tree_flatten(out)
        in_leaves, in_tree = tree_flatten(diff_args)
        in_leaves = [as_tensor(x) for x in in_leaves]
        blocks_per_out = []
        for k, o in enumerate(out_leaves):

            def pull(ct, k=k):
                cts = [zeros_like(p) for p in out_leaves]
                cts[k] = ct
                return vjp_fn(tree_unflatten(out_tree, cts))

            rows = tree_flatten(vmap(pull)(_basis(o.size, o, o._shape)))[0]
            blocks_per_out.append([exact_reshape(r, o.shape + x.shape)
                                   for r, x in zip(rows, in_leaves)])
        result = _assemble(blocks_per_out, out_tree, in_tree, argnums)
        if holomorphic:  # reverse mode gives conj(J) (PyTorch's convention)
            result = holomorphic_result(result)
        return (result, aux[0]) if has_aux else result

    return mark_transform(wrapped, (f,), lambda new: jacrev(new, argnums, has_aux, holomorphic))


def jacfwd(f, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by forward mode: ``vmap`` of ``jvp`` over the input basis. Output dims
    come first, as for ``jacrev``.

    Inputs must be real (JAX's rule; complex outputs are fine: the Jacobian of a map from
    reals to complex numbers); ``holomorphic=True`` takes complex inputs and outputs and
    gives the complex derivative of a holomorphic function.

    Example:
        >>> import primflow as pf
        >>> pf.jacfwd(pf.sin)(pf.zeros([2])).numpy()
        array([[1., 0.],
               [0., 1.]], dtype=float32)
    """

    @functools.wraps(f)
    def wrapped(*args):
        nums = check_argnums(argnums, len(args))
        in_leaves, in_tree = tree_flatten(tuple(args[i] for i in nums))
        in_leaves = [as_tensor(x) for x in in_leaves]
        check_input_dtypes("jacfwd", in_leaves, holomorphic, complex_allowed=False)
        aux_box = []

        def restricted(*leaves):
            out = f(*replace_at(args, nums, tree_unflatten(in_tree, list(leaves))))
            if has_aux:
                out, aux = out
                aux_box.append(aux)
            return out

        columns_per_in, out_tree = [], None
        for j, x in enumerate(in_leaves):

            def push(t, j=j):
                def of_leaf_j(xj):
                    return restricted(*in_leaves[:j], xj, *in_leaves[j + 1:])

                return jvp(of_leaf_j, (in_leaves[j],), (t,))[1]

            cols = vmap(push, out_axes=-1)(_basis(x.size, x, x._shape))
            col_leaves, out_tree = tree_flatten(cols)
            if holomorphic:
                check_output_dtypes("jacfwd", col_leaves, holomorphic)
            columns_per_in.append([exact_reshape(c, c.shape[:-1] + x.shape) for c in col_leaves])
        blocks_per_out = [list(col) for col in zip(*columns_per_in)]
        result = _assemble(blocks_per_out, out_tree, in_tree, argnums)
        if has_aux:
            return result, aux_box[-1] if aux_box else None
        return result

    return mark_transform(wrapped, (f,), lambda new: jacfwd(new, argnums, has_aux, holomorphic))


def hessian(f, argnums=0, has_aux=False, holomorphic=False):
    """Hessian of a function, equal to ``jacfwd(jacrev(f))`` (forward over reverse), the
    output dims first. For a scalar output it is computed by second-order adjoints
    (transforms/second_order.py), which is cheaper: one forward Jacobian sweep instead of
    a backward pass repeated for every input direction.

    Two Hessians, side by side: ``pf.hessian`` (this one, JAX's ``jax.hessian``) is a
    *transform*: it takes a function and returns a function. ``pf.autograd.hessian(ys, xs)``
    (Paddle's ``paddle.autograd.hessian``) takes an already computed scalar ``ys`` on the
    tape and returns a lazy object, evaluated block by block when indexed (``H[:]``).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0])
        >>> pf.hessian(lambda x: (x ** 3).sum())(x).numpy()
        array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
        >>> x.stop_gradient = False  # the Paddle form: from a recorded output
        >>> pf.autograd.hessian((x ** 3).sum(), x)[:].numpy()
        array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
    """
    forward_over_reverse = jacfwd(jacrev(f, argnums, has_aux=has_aux, holomorphic=holomorphic),
                                  argnums, has_aux=has_aux, holomorphic=holomorphic)

    @functools.wraps(f)
    def wrapped(*args):
        nums = check_argnums(argnums, len(args))
        check_input_dtypes("hessian", [args[i] for i in nums], holomorphic, complex_allowed=False)
        result = None if holomorphic else hessian_by_adjoints(f, args, argnums, has_aux)
        return forward_over_reverse(*args) if result is None else result

    return mark_transform(wrapped, (f,), lambda new: hessian(new, argnums, has_aux, holomorphic))
