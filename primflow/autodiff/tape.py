"""Reverse mode on the eager tape: ``backward`` and ``grad`` (Paddle / torch.autograd style).

Eager ops record ``Node`` objects (see core/primitive.py). A backward pass walks the nodes
reachable from the outputs in topological order (Kahn's algorithm, so each node runs once,
after all of its consumers), calls each primitive's vjp rule for the inputs that need a
gradient, and routes the results along the node's edges. With ``create_graph=True`` the
rules run with recording on: they are primflow ops, so the gradients carry a graph of
their own and can be differentiated again, to any order.

Internal API for the layers above (the Hessian sweeps in transforms/second_order.py walk
the tape themselves): ``topological_order``, ``apply_vjp`` and ``saved_output``.
"""

from __future__ import annotations

import copy
import weakref

from ..core.primitive import Node, NonDifferentiableError
from ..core.state import set_grad_mode, state
from ..core.tensor import Tensor
from ..core.trace import Tracer
from ..prims import elementwise as ew
from ..prims import creation


def _as_list(x, what):
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        for i, t in enumerate(x):
            if not isinstance(t, Tensor):
                raise TypeError(f"{what}[{i}] must be a Tensor, got {type(t).__name__}")
        return list(x)
    raise TypeError(f"{what} must be a Tensor or a list of Tensors, got {type(x).__name__}")


def _ones_like(t):
    return creation.full(shape=tuple(t._shape), value=1, dtype=t.dtype)


def _seed_gradients(outputs, grad_outputs):
    """Pairs each output with the gradient it starts with, checking shapes and grad-ness."""
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    else:
        grad_outputs = list(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else [
            grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"got {len(grad_outputs)} grad_outputs for {len(outputs)} outputs; "
                         f"pass one per output (None for the default)")
    seeds = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if out.stop_gradient:
            raise RuntimeError(
                f"output {i} (shape {out.shape}) does not require grad: no recorded op links it "
                f"to a tensor with stop_gradient=False. Set x.stop_gradient = False on the "
                f"inputs before computing it (integer results such as argmax, comparisons and "
                f"casts to int also cut the graph)")
        if g is None:
            if out.size != 1:
                raise RuntimeError(
                    f"grad can be created implicitly only for scalar outputs, but output {i} "
                    f"has shape {out.shape}; pass grad_outputs (e.g. pf.ones_like(y)) or "
                    f"reduce it first (y.sum())")
            g = _ones_like(out)
        elif not isinstance(g, Tensor):
            raise TypeError(f"grad_outputs[{i}] must be a Tensor or None")
        elif tuple(g._shape) != tuple(out._shape):
            raise ValueError(f"grad_outputs[{i}] has shape {g.shape} but output {i} has shape "
                             f"{out.shape}; they must match")
        seeds.append((out, g))
    return seeds


def topological_order(root_nodes, stop=()):
    """Nodes reachable from the roots, each after every node that consumes it (Kahn).
    The walk does not go past the nodes in ``stop`` (their inputs count as outside)."""
    consumers = {}  # node -> number of edges into it from reachable nodes
    stack = list(root_nodes)
    seen = set(stack)
    while stack:
        node = stack.pop()
        if node in stop:
            continue
        for e in node.edges:
            if e.__class__ is Node:
                if e in consumers:
                    consumers[e] += 1
                else:
                    consumers[e] = 1
                    if e not in seen:  # roots are already seen
                        seen.add(e)
                        stack.append(e)
    ready = [n for n in seen if n not in consumers]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        if node in stop:
            continue
        for e in node.edges:
            if e.__class__ is Node:
                left = consumers[e] - 1
                consumers[e] = left
                if not left:
                    ready.append(e)
    return order


def _accumulate(table, key, g):
    old = table.get(key)
    table[key] = g if old is None else ew.add(old, g)


def _run_backward(seeds, targets, create_graph, retain_graph, blocked=frozenset()):
    """The backward pass. ``targets`` is a list of tensors whose gradients are returned, or
    None to accumulate into the ``.grad`` of every leaf reached (``Tensor.backward``).
    ``blocked`` holds nodes and leaf ids that gradients must not flow through."""
    node_grads = {}  # Node -> gradient of that node's output
    leaf_grads = {}  # id(leaf tensor) -> gradient (grad() mode only)
    results = {}
    for out, g in seeds:
        if out._node is None:  # the output is itself a leaf
            _accumulate(leaf_grads, id(out), g)
        else:
            _accumulate(node_grads, out._node, g)
    order = topological_order([out._node for out, _ in seeds if out._node is not None])

    if targets is None:
        target_nodes, needed, wanted = {}, None, None
    else:
        wanted_leaves = {id(t) for t in targets if t._node is None} - blocked
        target_nodes = {t._node: t for t in targets if t._node is not None}
        needed = _nodes_leading_to_targets(order, wanted_leaves, target_nodes, blocked)
        wanted = needed | set(target_nodes) | wanted_leaves

    prev = set_grad_mode(create_graph)
    try:
        for node in order:
            g = node_grads.pop(node, None)
            if g is None:
                continue
            if node in target_nodes:
                _accumulate(results, id(target_nodes[node]), g)
            if needed is not None and node not in needed:
                continue
            apply_vjp(node, g, node_grads, leaf_grads, wanted, create_graph)
            if not retain_graph:
                node.free()
    finally:
        set_grad_mode(prev)

    if targets is None:
        return None
    for t in targets:
        if t._node is None and id(t) in leaf_grads:
            results[id(t)] = leaf_grads[id(t)]
    return [results.get(id(t)) for t in targets]


def _nodes_leading_to_targets(order, wanted_leaves, target_nodes, blocked):
    """Nodes whose vjp must run: those with an edge into a target or into such a node."""
    needed = set()
    for node in reversed(order):  # inputs before consumers
        if node in blocked:
            continue
        for e in node.edges:
            if e is None:
                continue
            if type(e) is Node:
                if e in needed or e in target_nodes:
                    needed.add(node)
                    break
            elif id(e) in wanted_leaves:
                needed.add(node)
                break
    return needed


def apply_vjp(node, g, node_grads, leaf_grads, wanted, create_graph):
    """Runs one node's vjp rules and routes the cotangents along its edges. ``wanted`` holds
    the nodes and leaf ids worth sending gradients to (None: everything, backward mode)."""
    prim = node.prim
    if node.freed:
        raise RuntimeError(
            f"trying to backward through the graph a second time (through '{prim.name}'): its "
            f"saved values were freed after the first backward. Pass retain_graph=True to the "
            f"first backward()/grad() call if you need to backward twice")
    inputs = node.inputs
    versions = node.versions
    saved = prim.saves_inputs  # inputs whose values the rules read (None: all)
    for i in (range(len(inputs)) if saved is None else saved):
        if inputs[i]._version != versions[i]:
            a = inputs[i]
            raise RuntimeError(
                f"a tensor of shape {a.shape} saved for the backward of '{prim.name}' was "
                f"modified in place after it was used (version {versions[i]} -> "
                f"{a._version}); compute on a copy (x.clone()) instead of changing it in place")
    rules = prim.vjp
    if rules is None:
        raise NonDifferentiableError(
            f"primitive '{prim.name}' is not differentiable (its derivative is zero almost "
            f"everywhere and undefined at jumps) but lies on the path being differentiated. If "
            f"a zero gradient is what you want, detach its input: {prim.name}(x.detach())")
    out = saved_output(node, create_graph) if prim.saves_out else None
    params = node.params
    bars = rules(g, out, *inputs, **params) if callable(rules) else None
    for i, e in enumerate(node.edges):
        if e is None:
            continue
        is_node = e.__class__ is Node
        if wanted is not None and not (e in wanted if is_node else id(e) in wanted):
            continue
        if bars is not None:
            x_bar = bars[i]
        else:
            rule = rules[i]
            if rule is None:
                raise NonDifferentiableError(
                    f"primitive '{prim.name}' has no derivative with respect to input {i}")
            x_bar = rule(g, out, *inputs, **params)
        if x_bar is None:  # a custom rule with no cotangent for this input
            continue
        if is_node:
            old = node_grads.get(e)
            node_grads[e] = x_bar if old is None else ew.add(old, x_bar)
        elif wanted is not None:
            _accumulate(leaf_grads, id(e), x_bar)
        else:
            e.grad = x_bar if e.grad is None else ew.add(e.grad, x_bar)


def saved_output(node, create_graph):
    """The node's output for its rules, linked to the node when the backward is recorded."""
    value = node.out_value
    if isinstance(value, Tracer):  # recorded inside a transform: the output is its tracer
        out = copy.copy(value)
        out._node = node if create_graph else None
        out.stop_gradient = not create_graph
        return out
    return Tensor._wrap(value, node if create_graph else None)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=False, no_grad_vars=None):
    """Gradients of ``outputs`` with respect to ``inputs`` (Paddle's ``paddle.grad``).

    Args:
        outputs: a Tensor or list of Tensors to differentiate.
        inputs: a Tensor or list of Tensors (leaves or intermediate results).
        grad_outputs: starting gradients, one per output (None: ones, scalar outputs only).
        retain_graph: keep the graph for another backward (defaults to ``create_graph``).
        create_graph: record the backward pass so the result can be differentiated again.
        allow_unused: return None for inputs the outputs do not depend on instead of raising.
        no_grad_vars: tensors treated as constants for this call.

    Returns:
        A list with one gradient per input.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor(2.0, stop_gradient=False)
        >>> dy, = pf.grad(x ** 3, x, create_graph=True)
        >>> d2y, = pf.grad(dy, x)
        >>> float(dy), float(d2y)
        (12.0, 12.0)
    """
    outputs = _as_list(outputs, "outputs")
    inputs_list = _as_list(inputs, "inputs")
    for i, x in enumerate(inputs_list):
        if x.stop_gradient:
            raise RuntimeError(
                f"input {i} (shape {x.shape}) has stop_gradient=True, so no gradient can be "
                f"computed for it; set x.stop_gradient = False (x.requires_grad = True) before "
                f"using it")
    if retain_graph is None:
        retain_graph = create_graph
    blocked = set()
    if no_grad_vars is not None:
        for t in _as_list(no_grad_vars, "no_grad_vars"):
            blocked.add(t._node if t._node is not None else id(t))
    seeds = _seed_gradients(outputs, grad_outputs)
    results = _run_backward(seeds, inputs_list, create_graph, retain_graph, blocked)
    for i, r in enumerate(results):
        if r is None and not allow_unused:
            raise RuntimeError(
                f"input {i} (shape {inputs_list[i].shape}) was not used to compute the outputs; "
                f"pass allow_unused=True to get None for it")
    return results


# the nodes of tensors whose gradients ``backward`` accumulated into the leaves (weakly
# held): ``optimizer.minimize(loss)`` after ``loss.backward(retain_graph=True)`` must not
# backpropagate (and accumulate) a second time
backpropagated = weakref.WeakSet()


def backward(tensors, grad_tensors=None, retain_graph=False):
    """Accumulates gradients of ``tensors`` into the ``.grad`` of the leaves they depend on.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> pf.autograd.backward([(x * x).sum()])
        >>> x.grad.numpy()
        array([2., 4.], dtype=float32)
    """
    tensors = _as_list(tensors, "tensors")
    seeds = _seed_gradients(tensors, grad_tensors)
    _run_backward(seeds, None, create_graph=False, retain_graph=retain_graph)
    for t in tensors:
        if t._node is not None:
            backpropagated.add(t._node)


def _tensor_backward(self, grad_tensor=None, retain_graph=False, *, grad=None, gradient=None):
    """Accumulates this tensor's gradient into the leaves' ``.grad`` (Paddle ``backward``).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor(3.0, stop_gradient=False)
        >>> (x * x).backward(); float(x.grad)
        6.0
    """
    # DESIGN names the seed ``grad``, Paddle ``grad_tensor``, PyTorch ``gradient``: take all
    seed = next((g for g in (grad_tensor, grad, gradient) if g is not None), None)
    backward([self], None if seed is None else [seed], retain_graph)


# Tensor.backward (core/tensor.py declares it and looks it up here on first use)
TENSOR_METHODS = {"backward": _tensor_backward}
