"""Vectorising map: ``pf.vmap(f, in_axes, out_axes)`` by a batch trace.

Inside ``f``, each mapped input is a ``BatchTracer`` that looks like one example (its shape
lacks the mapped dim) while its payload holds the whole batch. Each primitive applied to a
tracer runs once, on the whole batch, through the primitive's ``batch`` rule: there is no
Python loop over the batch anywhere. Nested vmaps nest traces.
"""

from __future__ import annotations

import functools

from ..core.primitive import Aval
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.tensor import Tensor
from ..core.trace import Trace, Tracer, escaped_tracer_error, is_active, mark_transform, new_trace
from ..ops.helpers import as_tensor
from ..prims import move_axis, with_batch_front


class BatchTracer(Tracer):
    """One example's view of a batched value: ``val`` holds the batch at dim ``bdim``."""

    __slots__ = ("val", "bdim")

    def __init__(self, trace, val, bdim):
        shape = list(val._shape)
        del shape[bdim]
        self._init_tracer(trace, Aval(shape, val.dtype))
        self.val = val
        self.bdim = bdim

    def detach(self):
        """The same batch, cut from the graph."""
        return BatchTracer(self._trace, self.val.detach(), self.bdim)


class BatchTrace(Trace):
    transform_name = "pf.vmap"

    def __init__(self, level, size):
        super().__init__(level)
        self.size = size

    def process_primitive(self, prim, args, params):
        mine = [isinstance(a, BatchTracer) and a._trace is self for a in args]
        vals = [a.val if m else a for a, m in zip(args, mine)]
        bdims = [a.bdim if m else None for a, m in zip(args, mine)]
        if all(b is None for b in bdims):
            return prim.bind(*vals, **params)
        if prim.batch is None:
            raise TypeError(f"primitive '{prim.name}' has no batching rule, so it cannot be "
                            f"used under vmap")
        out, out_bdim = prim.batch(vals, bdims, **params)
        if prim.multiple_results:  # control flow: a list of results
            return [o if b is None else BatchTracer(self, o, b) for o, b in zip(out, out_bdim)]
        return out if out_bdim is None else BatchTracer(self, out, out_bdim)


def _axes_per_leaf(spec, args, what):
    """Expands in_axes (int, None, or one entry per argument, each int/None/pytree) into
    one axis per flattened argument leaf."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_flatten(args)[0])
    if not isinstance(spec, (tuple, list)):
        raise TypeError(f"vmap {what} must be an int, None, or a tuple with one entry per "
                        f"argument, got {spec!r}")
    if len(spec) != len(args):
        raise ValueError(f"vmap {what} has {len(spec)} entries but the function got "
                         f"{len(args)} positional arguments; give one entry per argument")
    out = []
    for i, (s, a) in enumerate(zip(spec, args)):
        n = len(tree_flatten(a)[0])
        if s is None or isinstance(s, int):
            out += [s] * n
            continue
        s_leaves, s_def = tree_flatten(s, is_leaf=lambda v: v is None)  # None maps nothing
        a_def = tree_flatten(a)[1]
        if s_def != a_def:
            raise ValueError(f"vmap {what}[{i}] has structure {s_def!r} but argument {i} has "
                             f"structure {a_def!r}")
        out += s_leaves
    return out


def vmap(f, in_axes=0, out_axes=0):
    """Vectorises ``f`` over a mapped axis of its inputs (JAX semantics).

    Args:
        f: function of tensors (or pytrees of tensors).
        in_axes: int, None (not mapped), or a tuple with one entry per positional argument
            (each int, None, or a pytree of those matching the argument).
        out_axes: where the mapped axis goes in each output (int, None, or a pytree).

    Example:
        >>> import primflow as pf
        >>> xs = pf.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> pf.vmap(lambda x: (x * x).sum())(xs).numpy()
        array([ 5., 25.], dtype=float32)
    """

    @functools.wraps(f)
    def vmapped(*args):
        leaves, treedef = tree_flatten(args)
        axes = _axes_per_leaf(in_axes, args, "in_axes")
        sizes = []
        for i, (leaf, ax) in enumerate(zip(leaves, axes)):
            if ax is None:
                continue
            if not isinstance(leaf, Tensor):
                leaf = leaves[i] = as_tensor(leaf)
            if not -leaf.ndim <= ax < leaf.ndim or leaf.ndim == 0:
                raise ValueError(f"vmap: in_axes {ax} is out of range for an input of shape "
                                 f"{leaf.shape}")
            sizes.append((i, ax, leaf._shape[ax]))
        if not sizes:
            raise ValueError("vmap needs at least one mapped input (an in_axes entry that is "
                             "not None)")
        size = sizes[0][2]
        if any(s != size for _, _, s in sizes):
            desc = ", ".join(f"input {i} axis {ax} has size {s}" for i, ax, s in sizes)
            raise ValueError(f"vmap got inconsistent sizes for the mapped axes: {desc}")
        with new_trace(BatchTrace, size) as trace:
            wrapped = [leaf if ax is None else BatchTracer(trace, leaf, ax % leaf.ndim)
                       for leaf, ax in zip(leaves, axes)]
            out = f(*tree_unflatten(treedef, wrapped))
        out_leaves, out_def = tree_flatten(out)
        if out_axes is None or isinstance(out_axes, int):
            o_axes = [out_axes] * len(out_leaves)
        else:
            o_axes, o_def = tree_flatten(out_axes, is_leaf=lambda v: v is None)
            if len(o_axes) != len(out_leaves):
                raise ValueError(f"vmap out_axes structure {o_def!r} does not match the "
                                 f"output structure {out_def!r}")
        results = [_unbatch(o, trace, ax, size) for o, ax in zip(out_leaves, o_axes)]
        return tree_unflatten(out_def, results)

    return mark_transform(vmapped, (f,), lambda new: vmap(new, in_axes, out_axes))


def _unbatch(out, trace, out_axis, size):
    """The output leaf with the mapped axis at ``out_axis`` (broadcast if f ignored it)."""
    batched = isinstance(out, BatchTracer) and out._trace is trace
    if not batched and isinstance(out, Tracer) and not is_active(out._trace):
        raise escaped_tracer_error(out)  # kept from an earlier transform, returned now
    if out_axis is None:
        if batched:
            raise ValueError("vmap: out_axes=None but the output depends on the mapped input")
        return out
    if not isinstance(out_axis, int) or isinstance(out_axis, bool):
        raise TypeError(f"vmap out_axes entries must be ints or None, got {out_axis!r}")
    if not batched:
        out = as_tensor(out)
        val, bdim = with_batch_front(out, None, size), 0
    else:
        val, bdim = out.val, out.bdim
    ndim = len(val._shape)
    if not -ndim <= out_axis < ndim:
        raise ValueError(f"vmap: out_axes {out_axis} is out of range for an output of shape "
                         f"{list(val._shape[:bdim]) + list(val._shape[bdim + 1:])} per example "
                         f"({ndim} dims with the mapped one); it must lie in [{-ndim}, "
                         f"{ndim - 1}]")
    return move_axis(val, bdim, out_axis % ndim)
