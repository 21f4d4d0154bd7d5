"""``pf.jit`` of a function called with distributed tensors.

``pf.jit`` cannot trace a ``DistTensor`` itself (it is the tracer of the ambient
``DistTrace``), so it hands such calls to ``DistTensor._jit_call``, which compiles them the
way ``dist.to_static`` compiles its step: this rank's local blocks are the program's inputs,
the distributed tensors are rebuilt from them inside a ``staging()`` DistTrace pushed above
the jit trace, so every relayout the function needs becomes a collective op of the program
(``all_reduce``, ``all_gather``, ...), and the results' blocks are the program's outputs,
rebuilt into distributed tensors with the layouts the trace found. The arguments' layouts
(mesh, placements, global shape) are part of the cache signature: equal blocks can belong to
different global tensors.

Calls that cannot be staged run eagerly, with a one-time ``UserWarning`` saying why: a rank
outside an argument's mesh (it holds no block), or an argument that requires grad while
grad is enabled (the compiled program would cut the distributed tape; call it under
``pf.no_grad()``, or differentiate inside the function).
"""

from __future__ import annotations

import warnings
import weakref

from ..core.primitive import Aval
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.state import no_grad, state
from ..core.trace import Tracer
from ..transforms.jit import Jitted
from .dtensor import DistTensor, staging
from .layout import is_member

__all__ = []

_staged = weakref.WeakKeyDictionary()  # the user's Jitted -> its _StagedProgram


class _StagedProgram:
    """The per-rank program of one ``pf.jit`` function called with distributed tensors."""

    def __init__(self, jitted):
        self.fun = jitted.fun
        self.layouts = None  # the call being traced: per argument leaf, its layout or None
        self.out_layouts = {}  # layouts -> (outputs' treedef, per output leaf layout or None)
        self.warned = False
        name = getattr(jitted.fun, "__name__", "f")
        self.program = Jitted(self._on_blocks, static_argnums=jitted.static_argnums,
                              static_argnames=jitted.static_argnames,
                              optimize=jitted.optimize, backend=jitted.backend,
                              extra_key=lambda: self.layouts,
                              name=name if name.isidentifier() else "f",
                              tiered=jitted.tiered, blocking=jitted.blocking)

    def _on_blocks(self, *args, **kwargs):
        """The traced function: rebuilds the distributed arguments from their blocks (the
        jit tracers), runs ``fun`` staged, and returns the results' blocks."""
        leaves, treedef = tree_flatten((args, kwargs))
        with staging():
            leaves = [leaf if layout is None else
                      DistTensor._make(leaf, layout[0], layout[1], Aval(layout[2], leaf.dtype))
                      for leaf, layout in zip(leaves, self.layouts)]
            a, kw = tree_unflatten(treedef, leaves)
            out_leaves, out_def = tree_flatten(self.fun(*a, **kw))
        self.out_layouts[self.layouts] = (out_def, tuple(
            _layout(o) if isinstance(o, DistTensor) else None for o in out_leaves))
        return [o._local if isinstance(o, DistTensor) else o for o in out_leaves]

    def blocks(self, args, kwargs):
        """The arguments with every distributed tensor replaced by this rank's block, and
        the layouts set for tracing."""
        leaves, treedef = tree_flatten((args, kwargs))
        self.layouts = tuple(_layout(x) if isinstance(x, DistTensor) else None for x in leaves)
        leaves = [x._local.detach() if isinstance(x, DistTensor) else x for x in leaves]
        return tree_unflatten(treedef, leaves)


def _layout(x):
    return (x._mesh, x._specs, tuple(x._shape))


def _program_of(jitted):
    staged = _staged.get(jitted)
    if staged is None:
        staged = _staged[jitted] = _StagedProgram(jitted)
    return staged


def _why_eager(args, kwargs):
    """Why this call cannot be staged (a sentence), or None."""
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, Tracer) and not isinstance(x, DistTensor):
            return "an argument is another transform's tracer"
        if isinstance(x, DistTensor):
            if not is_member(x._mesh):
                return (f"this rank is outside the mesh {x._mesh} of an argument (it holds no "
                        f"block)")
            if state.grad_enabled and not x.stop_gradient:
                return ("an argument requires grad and grad is enabled (a compiled program "
                        "would cut the distributed tape); call it under pf.no_grad(), or take "
                        "the gradient inside the function")
    return None


def jit_call(jitted, args, kwargs):
    """``jitted(*args, **kwargs)`` where some arguments are distributed tensors."""
    staged = _program_of(jitted)
    reason = _why_eager(args, kwargs)
    if reason is not None:
        if not staged.warned:
            staged.warned = True
            warnings.warn(f"pf.jit({getattr(staged.fun, '__name__', 'f')}): called"
                          f" with distributed tensors, but {reason}: it runs eagerly",
                          UserWarning, stacklevel=4)
        return jitted.fun(*args, **kwargs)
    a, kw = staged.blocks(args, kwargs)
    layouts = staged.layouts
    with no_grad():
        out_blocks = staged.program(*a, **kw)
    out_def, out_layouts = staged.out_layouts[layouts]
    outs = [b if layout is None else
            DistTensor._make(b, layout[0], layout[1], Aval(layout[2], b.dtype))
            for b, layout in zip(out_blocks, out_layouts)]
    return tree_unflatten(out_def, outs)


def jit_lower(jitted, args, kwargs):
    """``jitted.lower(*args, **kwargs)`` where some arguments are distributed tensors: this
    rank's program (``as_text()`` shows the collectives)."""
    reason = _why_eager(args, kwargs)
    if reason is not None and "requires grad" not in reason:
        raise ValueError(f"pf.jit(...).lower: called with distributed tensors, but {reason}, "
                         f"so there is no program")
    staged = _program_of(jitted)
    a, kw = staged.blocks(args, kwargs)
    with no_grad():
        return staged.program.lower(*a, **kw)
