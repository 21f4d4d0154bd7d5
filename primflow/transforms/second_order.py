"""Hessians of scalar functions by second-order adjoints: what ``pf.hessian`` runs.

``jacfwd(jacrev(f))`` pushes d input directions through the whole backward pass, so every
linear map of f is applied d more times on the way back: for an MLP that is a second
matrix product per layer, as large as the forward one. The Hessian of a scalar f has a
cheaper symmetric form. Write f as primitive applications ``v = p(u_1, ..., u_k)``; with
the forward Jacobians ``J_u = du/dx`` (d directions, one forward sweep) and the adjoints
``g_v = df/dv`` (one backward sweep),

    H = sum over v of  sum over i, j of  J_{u_i}^T  d2<g_v, p>/du_i du_j  J_{u_j}

(the second-order chain rule: f's curvature is the curvature each primitive adds, seen
through the Jacobians of its inputs). Linear primitives (``prim.linear``: add, reshape,
reduce_sum...) add nothing, and neither do primitives linear in their only x-dependent
input (``prim.linear_in``: ``x @ W``, ``x * c``). An elementwise function adds
``J_u^T diag(g_v * p''(u)) J_u``, a product ``a * b`` of two x-dependent factors
``J_a^T diag(g_v) J_b`` plus its transpose; any other primitive (``div``, ``pow``, a matrix
product of two x-dependent operands...) adds ``J^T (its Hessian-vector products of
<g_v, p> along J)``, computed from its own rules. For ``tanh(tanh(x W1) W2) w`` that is
one matrix product of the size of forward mode's plus two d x d contractions, instead of
forward-over-reverse's two large products and one contraction.

Everything here is primflow ops on the tape's values, so the result differentiates again,
batches under ``vmap`` and compiles under ``jit``, like ``jacfwd(jacrev(f))``, whose result
it equals (up to rounding). Composites (softmax, layer_norm...) run as their primitives.
Functions whose Hessian this cannot take (non-scalar output, custom_vjp / checkpoint rules
on the path, inputs of mixed dtypes) return None and ``pf.hessian`` falls back
to ``jacfwd(jacrev(f))``; so do functions for which a rough count of multiply-adds says
forward over reverse is cheaper: the d x d contractions cost d^2 per element of each
curving primitive's input, which loses when d is large next to the widths of the linear
maps (``sum(sin(x))`` with x of 1,000 elements).
"""

from __future__ import annotations

import itertools
import math

from ..autodiff.forward import jvp, push_tangents
from ..autodiff.functional import check_argnums, grad_handle, reaches_outside, split_aux
from ..autodiff.tape import apply_vjp, saved_output, topological_order
from ..core.primitive import Aval, Node, Primitive
from ..core.pytree import replace_at, tree_flatten, tree_unflatten
from ..core.state import decompose, enable_grad, set_grad_mode, state
from ..core.tensor import Tensor
from ..ops import math as ew
from ..ops import manipulation
from ..ops.helpers import as_tensor, exact_reshape
from ..ops.complex_ops import conj, real
from ..ops.creation import eye, ones_like, zeros
from ..ops.linalg import matmul
from .vmap import vmap


def hessian_by_adjoints(f, args, argnums=0, has_aux=False, always=False):
    """The Hessian of ``f(*args)`` with respect to the ``argnums`` arguments, nested like
    ``jacfwd(jacrev(f, argnums), argnums)(*args)`` (with aux: ``(hessian, aux)``), or None
    when this method does not apply or (unless ``always``) is estimated to cost more than
    forward over reverse (see the module docstring).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0])
        >>> hessian_by_adjoints(lambda x: (x ** 3).sum(), (x,)).numpy()
        array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
    """
    nums = check_argnums(argnums, len(args))
    in_leaves, in_tree = tree_flatten(tuple(args[i] for i in nums))
    in_leaves = [as_tensor(x) for x in in_leaves]
    if len({x.dtype for x in in_leaves}) != 1:
        return None
    # composites run as their primitives (no fused kernels, whose tape nodes are custom
    # rules without forward rules): their second derivatives are the decomposition's anyway
    with enable_grad(), decompose():
        handles = [grad_handle(x) for x in in_leaves]
        result = f(*replace_at(args, nums, tree_unflatten(in_tree, handles)))
    result, aux = split_aux(result, has_aux)
    out_leaves, _ = tree_flatten(result)
    if len(out_leaves) != 1 or not isinstance(out_leaves[0], Tensor):
        return None
    out = out_leaves[0]
    if out.size != 1 or not out.dtype.is_floating:
        return None
    create_graph = (bool(state.trace_stack) or any(not x.stop_gradient for x in in_leaves)
                    or reaches_outside([out], handles))
    prev = set_grad_mode(create_graph)
    try:
        h = _accumulate(out, handles, create_graph, always)
    finally:
        set_grad_mode(prev)
    if h is None:
        return None
    hessian = _nest(h, out, handles, in_tree, argnums)
    return (hessian, aux) if has_aux else hessian


def _accumulate(out, handles, create_graph, always):
    """The [d, d] Hessian of ``out`` with respect to the flattened ``handles`` (d entries
    in all), or None if a node on the path is not a primitive (a custom rule) or if
    forward over reverse looks cheaper (unless ``always``)."""
    d = sum(h.size for h in handles)
    if out._node is None or any(out is h for h in handles):  # out does not depend on x
        return zeros([d, d], dtype=out.dtype)
    start = _start_tangents(handles, d)  # handle -> its Jacobian, [d, *shape]
    sources = {h._node: t for h, t in zip(handles, start) if h._node is not None}
    leaf_sources = {id(h): t for h, t in zip(handles, start) if h._node is None}
    order = topological_order([out._node], stop=sources)  # consumers first
    dependent = _depending_on_x(order, sources, leaf_sources)
    if any(not isinstance(n.prim, Primitive) for n in dependent if n not in sources):
        return None

    adjoints = _adjoints(out, order, dependent, sources, create_graph)
    curving = {n for n in dependent
               if n not in sources and n in adjoints and _may_curve(n, dependent, leaf_sources)}
    needed = set()  # nodes whose Jacobian a curving node reads (directly or through others)
    for node in order:
        if node in curving or node in needed:
            needed.update(e for e in node.edges if e.__class__ is Node and e in dependent)

    if not always and _cost(curving, needed, d) > _cost_forward_over_reverse(dependent, d):
        return None
    jacobians = dict(sources)
    readers = {}  # node -> how many later nodes still read its Jacobian
    for node in dependent:
        for e in node.edges:
            if e.__class__ is Node and e in needed:
                readers[e] = readers.get(e, 0) + 1
    total = None
    for node in reversed(order):  # inputs before consumers
        if node in sources or node not in dependent:
            continue
        ts = [(jacobians.get(e) if e.__class__ is Node else leaf_sources.get(id(e)))
              if _is_x(e, dependent, leaf_sources) else None for e in node.edges]
        if node in curving:
            part = _curvature(node, ts, adjoints.pop(node))
            if part is not None:
                total = part if total is None else ew.add(total, part)
        if node in needed:
            jacobians[node] = _push(node, ts, create_graph)
        for e in node.edges:  # free each Jacobian after its last reader (eager memory)
            if e.__class__ is Node and e in readers:
                readers[e] -= 1
                if not readers[e]:
                    jacobians.pop(e, None)
    return zeros([d, d], dtype=out.dtype) if total is None else total


def _adjoints(out, order, dependent, sources, create_graph):
    """``df/dv`` for the nodes v between the inputs and ``out``: one backward sweep by the
    primitives' vjp rules, keeping every node's cotangent."""
    adjoints = {out._node: ones_like(out)}
    for node in order:  # consumers first: a node's cotangent is complete when it is reached
        if node in dependent and node not in sources and node in adjoints:
            apply_vjp(node, adjoints[node], adjoints, {}, dependent, create_graph)
    return adjoints


def _work(node):
    """Multiply-adds of one application of the node's primitive (its output's size, times
    the contracted size for a matrix product)."""
    shape = node.prim.abstract_eval(*[Aval(x._shape, x.dtype) for x in node.inputs],
                                    **node.params).shape
    work = math.prod(shape)
    if node.prim.name == "dot_general":
        lhs = node.inputs[0]._shape
        work *= math.prod(lhs[i] for i in node.params["contracting"][0])
    return work


def _cost(curving, needed, d):
    """Rough multiply-adds of this method: the d-direction Jacobian sweep over ``needed``
    and, per curving node, a d x d contraction over its inputs' elements."""
    sweep = sum(d * _work(n) for n in needed | curving)
    contractions = sum(d * d * sum(x.size for x in n.inputs) for n in curving)
    return sweep + contractions


def _cost_forward_over_reverse(dependent, d):
    """Rough multiply-adds of jacfwd(jacrev): d directions through the forward and the
    backward pass of every node depending on x."""
    return sum(2 * d * _work(n) for n in dependent)


def _start_tangents(handles, d):
    """Each handle's Jacobian with respect to all handles: its rows of the identity."""
    basis = eye(d, dtype=handles[0].dtype)
    out, offset = [], 0
    for h in handles:
        rows = basis if len(handles) == 1 else basis[:, offset:offset + h.size]
        out.append(exact_reshape(rows, [d] + list(h._shape)))
        offset += h.size
    return out


def _is_x(edge, dependent, leaf_sources):
    """Whether a node's input (its edge: a node, a leaf or None) depends on x."""
    if edge.__class__ is Node:
        return edge in dependent
    return edge is not None and id(edge) in leaf_sources


def _depending_on_x(order, sources, leaf_sources):
    """The nodes of ``order`` whose output depends on the differentiated inputs."""
    dependent = set(sources)
    for node in reversed(order):
        if any(_is_x(e, dependent, leaf_sources) for e in node.edges):
            dependent.add(node)
    return dependent


def _may_curve(node, dependent, leaf_sources):
    """Whether the node's primitive can have a nonzero second derivative along x."""
    prim = node.prim
    if prim.linear:
        return False
    idx = [i for i, e in enumerate(node.edges) if _is_x(e, dependent, leaf_sources)]
    return not (len(idx) == 1 and idx[0] in prim.linear_in)


def _push(node, ts, create_graph):
    """The node's output Jacobian [d, *shape] from its inputs' (None: zero), by the jvp
    rules mapped over the d directions."""
    idx = [i for i, t in enumerate(ts) if t is not None]
    out = saved_output(node, create_graph)

    def one_direction(*tangents):
        full = replace_at([None] * len(ts), idx, tangents)
        return push_tangents(node.prim, full, out, node.inputs, node.params)

    return vmap(one_direction)(*[ts[i] for i in idx])


def _curvature(node, ts, g):
    """The node's term of the Hessian, [d, d]: ``sum_ij J_i^T d2<g, p>/du_i du_j J_j``."""
    prim, params, inputs = node.prim, node.params, node.inputs
    idx = [i for i, t in enumerate(ts) if t is not None]
    if any(x.dtype.is_complex for x in inputs):
        pass  # the shortcuts below are written for real values: take the general form
    elif prim.family.elementwise and len(inputs) == 1:
        u = inputs[0]
        weights = ew.multiply(g, _second_derivative(prim, u, params))
        return _contract(ew.multiply(ts[0], weights), ts[0])
    elif prim.name == "mul" and len(idx) == 2:  # d2<g, a b> pairs J_a with g J_b, both ways
        half = _contract(ts[0], ew.multiply(ts[1], g))
        return ew.add(half, manipulation.transpose(half, [1, 0]))

    def gradient_of_pairing(*us):  # d<g, p(u)>/du_i for the x-dependent inputs
        full = replace_at(inputs, idx, us)
        out = prim.bind(*full, **params)
        return tuple(_input_cotangent(prim, i, g, out, full, params) for i in idx)

    def hvp(*tangents):
        return jvp(gradient_of_pairing, tuple(inputs[i] for i in idx), tangents)[1]

    products = vmap(hvp)(*[ts[i] for i in idx])
    total = None
    for i, w in zip(idx, products):
        part = _contract(ts[i], w)
        total = part if total is None else ew.add(total, part)
    return total


def _input_cotangent(prim, i, g, out, inputs, params):
    rules = prim.vjp
    if callable(rules):
        return rules(g, out, *inputs, **params)[i]
    return rules[i](g, out, *inputs, **params)


def _second_derivative(prim, u, params):
    """``p''(u)`` of an elementwise primitive, by its jvp rule applied twice."""
    ones = ones_like(u)

    def first(v):
        return push_tangents(prim, [ones], prim.bind(v, **params), [v], params)

    return jvp(first, (u,), (ones,))[1]


def _contract(a, b):
    """``sum over the value's elements of a[i, ...] * b[j, ...]``: a [d, d] matrix (for
    complex values the real inner product ``Re(conj(a) b)`` of the gradient convention)."""
    d, m = a._shape[0], math.prod(a._shape[1:])
    complex_ = a.dtype.is_complex
    product = matmul(exact_reshape(conj(a) if complex_ else a, [d, m]), exact_reshape(b, [d, m]),
                     transpose_y=True)
    return real(product) if complex_ else product


def _nest(h, out, handles, in_tree, argnums):
    """Splits the [d, d] Hessian into blocks shaped ``out.shape + x_i.shape + x_j.shape``,
    nested as jacfwd(jacrev) nests them (the arguments' structure, twice)."""
    h = h.astype(out.dtype) if h.dtype != out.dtype else h

    def nest(items):
        inner = tree_unflatten(in_tree, items)
        return inner[0] if isinstance(argnums, int) else tuple(inner)

    offsets = [0, *itertools.accumulate(x.size for x in handles)]
    rows = []
    for i, xi in enumerate(handles):
        blocks = []
        for j, xj in enumerate(handles):
            block = h if len(handles) == 1 else h[offsets[i]:offsets[i + 1],
                                                   offsets[j]:offsets[j + 1]]
            blocks.append(exact_reshape(
                block, list(out._shape) + list(xi._shape) + list(xj._shape)))
        rows.append(nest(blocks))
    return nest(rows)
