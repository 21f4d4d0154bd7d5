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
import threading
import warnings
import weakref

from ..core.primitive import Node, NonDifferentiableError, record_custom
from ..core.state import set_grad_mode, state
from ..core.tensor import Tensor
from ..core.trace import Tracer
from ..prims import elementwise as ew
from ..prims import compare as compare_prims
from ..prims import creation
from ..prims import shape as shape_prims


class GradArgumentTypeError(TypeError, AssertionError):
    """A wrong argument type for ``grad``/``backward``. Also an AssertionError, which is
    what Paddle raises for these (its checks are asserts), so Paddle code catching either
    works."""


class GradArgumentValueError(ValueError, AssertionError):
    """A wrong argument value (e.g. the number of grad_outputs) for ``grad``/``backward``;
    also an AssertionError, as in Paddle."""


def _as_list(x, what):
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        for i, t in enumerate(x):
            if not isinstance(t, Tensor):
                raise GradArgumentTypeError(f"{what}[{i}] must be a Tensor, got {type(t).__name__}")
        return list(x)
    raise GradArgumentTypeError(
        f"{what} must be a Tensor or a list of Tensors, got {type(x).__name__}")


# Hooks registered with ``Tensor.register_hook``: on a computed tensor they belong to its
# node (weakly keyed: they go when the graph goes), on a leaf to the tensor (by id, removed
# when the tensor is collected). Each is called with the gradient the tensor receives in a
# backward pass and may return a replacement.
_node_hooks = weakref.WeakKeyDictionary()
_leaf_hooks = {}
# whether a node hook was ever registered: until then backward skips the lookup per node
# (the WeakKeyDictionary's len() is Python code, ~10% of a small op's backward)
_node_hooks_used = [False]


def _tensor_register_hook(self, hook):
    """Registers ``hook(grad) -> Tensor or None`` to run when this tensor's gradient is
    computed in a backward pass; a returned tensor replaces the gradient. Works on leaves
    and on computed tensors. Returns a handle whose ``remove()`` unregisters it.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> y = x * 3.0
        >>> _ = y.register_hook(lambda g: g * 2.0)
        >>> y.sum().backward(); x.grad.numpy()
        array([6., 6.], dtype=float32)
    """
    if not callable(hook):
        raise TypeError(f"register_hook expects a callable, got {type(hook).__name__}")
    if self.stop_gradient:
        raise RuntimeError(
            f"cannot register a hook on a tensor (shape {self.shape}) that does not require "
            f"grad: no gradient ever reaches it. Set stop_gradient = False first")
    if self._node is not None:
        hooks = _node_hooks.setdefault(self._node, [])
        _node_hooks_used[0] = True
    else:
        key = id(self)
        if key not in _leaf_hooks:
            _leaf_hooks[key] = []
            weakref.finalize(self, _leaf_hooks.pop, key, None)
        hooks = _leaf_hooks[key]
    hooks.append(hook)
    return _HookHandle(hooks, hook)


class _HookHandle:
    """What ``register_hook`` returns: ``handle.remove()`` unregisters the hook."""

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _run_hooks(hooks, g):
    for hook in list(hooks):
        new = hook(g)
        if new is not None:
            if not isinstance(new, Tensor) or tuple(new._shape) != tuple(g._shape):
                raise ValueError(
                    f"a gradient hook must return None or a Tensor of the gradient's shape "
                    f"{g.shape}, got {getattr(new, 'shape', type(new).__name__)}")
            g = new
    return g


def _tensor_retain_grads(self):
    """Keeps the gradient of a computed (non-leaf) tensor in its ``.grad`` during
    ``backward()``, as leaves do (a no-op on leaves).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> y = x * 3.0
        >>> y.retain_grads(); y.sum().backward(); y.grad.numpy()
        array([1., 1.], dtype=float32)
    """
    if self._node is None or self.stop_gradient:
        return
    target = weakref.ref(self)

    def keep(g):
        t = target()
        if t is not None and _mode.backward:
            accumulate_grad(t, g)

    _tensor_register_hook(self, keep)


# Accumulating into .grad reads the old gradient and writes the sum: two threads running
# backward() on losses that share a parameter would lose each other's contributions. One
# lock per tensor would need a field in Tensor; a fixed set of locks picked by the tensor's
# id serializes only updates that may touch the same tensor, and costs one uncontended
# acquire per leaf in a single thread.
_GRAD_LOCKS = tuple(threading.Lock() for _ in range(64))


def accumulate_grad(t, g):
    """Adds ``g`` to ``t.grad`` (or sets it), atomically with respect to other threads.

    Example:
        >>> import primflow as pf
        >>> w = pf.ones([2]); accumulate_grad(w, pf.ones([2])); accumulate_grad(w, pf.ones([2]))
        >>> w.grad.numpy()
        array([2., 2.], dtype=float32)
    """
    with _GRAD_LOCKS[(id(t) >> 4) % len(_GRAD_LOCKS)]:
        old = t.grad
        t.grad = g if old is None else ew.add(old, g)


def _tensor_gradient(self):
    """The gradient as a NumPy array, or None (Paddle's ``Tensor.gradient()``).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> (x * x).sum().backward(); x.gradient()
        array([2., 4.], dtype=float32)
    """
    return None if self.grad is None else self.grad.numpy()


class _Mode(threading.local):
    backward = False  # whether this thread's running pass is backward() (retain_grads applies)


_mode = _Mode()


def _seed_gradients(outputs, grad_outputs, skip_constant=False, inputs=None):
    """Pairs each output with the gradient it starts with (ones where none is given),
    checking shapes and grad-ness. ``skip_constant`` drops outputs that do not require grad
    instead of raising (``backward()``, as in Paddle). ``inputs``: what the gradient is
    taken with respect to (``grad``), for the error's diagnosis."""
    grad_outputs = _check_grad_outputs(outputs, grad_outputs)
    seeds = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if out.stop_gradient:
            if skip_constant:
                continue
            raise RuntimeError(unrecorded_message(f"output {i}", out, inputs))
        if g is None:  # Paddle: a missing starting gradient means ones, of any shape
            if out.dtype.is_complex:  # PyTorch's rule: which real part would ones pick?
                raise RuntimeError(
                    f"output {i} is complex ({out.dtype.name}, shape {out.shape}): a starting "
                    f"gradient can be created implicitly only for real outputs. Differentiate a "
                    f"real function of it (y.real().sum(), (y.abs() ** 2).sum()), or pass the "
                    f"cotangent explicitly (grad_outputs= / y.backward(grad)); for the complex "
                    f"derivative of a holomorphic function use pf.grad(f, holomorphic=True)")
            g = creation.full(shape=tuple(out._shape), value=1, dtype=out.dtype)
        elif tuple(g._shape) != tuple(out._shape):
            if g.size != out.size:
                raise ValueError(f"grad_outputs[{i}] has shape {g.shape} but output {i} has "
                                 f"shape {out.shape}; they must match")
            # same elements, another shape (Paddle passes [1] for a 0-d output): reshape,
            # recorded, so a gradient with respect to the seed keeps the seed's shape
            g = shape_prims.reshape(g, shape=tuple(out._shape))
        seeds.append((out, g))
    return seeds


def unrecorded_message(what, out, inputs=None):
    """Why ``out`` (named ``what``) does not require grad, as precisely as can be told
    afterwards: an integer result, recording off now, an integer input, or (inputs that
    require grad) an output computed without recording or not from them.

    Example:
        >>> import primflow as pf
        >>> unrecorded_message("output 0", pf.to_tensor(1))[:60]
        'output 0 (int64[]) does not require grad: it is int64, and i'
    """
    head = f"{what} ({out.dtype.name}{out.shape}) does not require grad: "
    if not out.dtype.is_floating:
        return head + (f"it is {out.dtype.name}, and integer and bool results (argmax, "
                       f"comparisons, casts to int, integer arithmetic) carry no gradient; "
                       f"compute it in floating point (cast the inputs with "
                       f".astype('float32'))")
    if not state.grad_enabled:
        return head + ("recording is off here (inside pf.no_grad() or pf.set_grad_enabled(False)); "
                       "compute it, and differentiate it, with recording on (pf.enable_grad())")
    if inputs:
        for j, x in enumerate(inputs):
            if not x.dtype.is_floating:
                return head + (f"input {j} is {x.dtype.name}, and operations on integer "
                               f"tensors are never recorded: make it floating point "
                               f"(x.astype('float32')) before computing with it")
        return head + ("the inputs require grad (stop_gradient=False), so it was computed without "
                       "recording: under pf.no_grad() (or pf.set_grad_enabled(False)), from "
                       "detached copies (.detach(), .numpy(), pf.to_tensor(t)) or through an "
                       "integer result (a cast to int, argmax, a comparison), or it is a constant "
                       "that does not depend on them")
    return head + ("no recorded operation links it to a tensor that requires grad. Set "
                   "x.stop_gradient = False on the inputs before computing it, and compute "
                   "it with recording on (not under pf.no_grad())")


def _check_grad_outputs(outputs, grad_outputs):
    """``grad_outputs`` as a list with one entry (a Tensor or None) per output."""
    if grad_outputs is None:
        return [None] * len(outputs)
    grad_outputs = list(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else [grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise GradArgumentValueError(
            f"got {len(grad_outputs)} grad_outputs for {len(outputs)} outputs; pass one per "
            f"output (None for the default, ones)")
    for i, g in enumerate(grad_outputs):
        if g is not None and not isinstance(g, Tensor):
            raise GradArgumentTypeError(
                f"grad_outputs[{i}] must be a Tensor or None, got {type(g).__name__}")
    return grad_outputs


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
    """The backward pass. ``targets`` is a list of tensors whose gradients are returned (all
    None when there are no seeds), or None to accumulate into the ``.grad`` of every leaf
    reached (``Tensor.backward``). ``blocked``: nodes and leaf ids gradients must not pass."""
    node_grads = {}  # Node -> gradient of that node's output
    leaf_grads = {}  # id(leaf tensor) -> gradient of this pass
    leaves = {}  # id(leaf tensor) -> the tensor (backward() mode: accumulated into .grad)
    results = {}
    for out, g in seeds:
        if out._node is None:  # the output is itself a leaf
            _accumulate(leaf_grads, id(out), g)
            leaves[id(out)] = out
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
    prev_mode = _mode.backward
    _mode.backward = targets is None
    try:
        for node in order:
            g = node_grads.pop(node, None)
            if g is None:
                continue
            if _node_hooks_used[0]:
                hooks = _node_hooks.get(node)
                if hooks:
                    g = _run_hooks(hooks, g)
            if node in target_nodes:
                _accumulate(results, id(target_nodes[node]), g)
            if needed is not None and node not in needed:
                continue
            apply_vjp(node, g, node_grads, leaf_grads, wanted, create_graph, leaves)
            if not retain_graph:
                node.free()
        if targets is None:  # backward(): the leaves' .grad accumulate this pass's gradient
            for key, t in leaves.items():
                accumulate_grad(t, _leaf_gradient(t, leaf_grads[key]))
    finally:
        set_grad_mode(prev)
        _mode.backward = prev_mode

    if targets is None:
        return None
    for t in targets:
        if t._node is None and id(t) in leaf_grads:
            results[id(t)] = _leaf_gradient(t, leaf_grads[id(t)])
    results = [results.get(id(t)) for t in targets]
    return _tied(targets, results, order) if create_graph else results


def _leaf_gradient(t, g):
    """A leaf's gradient of one pass: its hooks applied, in the leaf's dtype (a custom rule,
    e.g. a PyLayer backward, may return another dtype)."""
    if id(t) in _leaf_hooks:
        g = _run_hooks(_leaf_hooks[id(t)], g)
    if g.dtype != t.dtype and not isinstance(g, Tracer):
        g = compare_prims.convert_element_type(g, dtype=t.dtype)
    return g


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


def apply_vjp(node, g, node_grads, leaf_grads, wanted, create_graph, leaves=None):
    """Runs one node's vjp rules and routes the cotangents along its edges. ``wanted`` holds
    the nodes and leaf ids worth sending gradients to (None: everything, backward mode,
    which also records the leaves reached in ``leaves``)."""
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
                f"{a._version}; Paddle's words: received tensor_version:{a._version} != "
                f"wrapper_version_snapshot:{versions[i]}); compute on a copy (x.clone()) "
                f"instead of changing it in place")
    rules = prim.vjp
    if rules is None:
        raise NonDifferentiableError(
            f"primitive '{prim.name}' is not differentiable (its derivative is zero almost "
            f"everywhere and undefined at jumps) but lies on the path being differentiated. If "
            f"a zero gradient is what you want, detach its input: {prim.name}(x.detach())")
    out = saved_output(node, create_graph) if prim.saves_out else None
    params = node.params
    if not callable(rules):
        bars = None
    else:  # (without an empty **params: see Primitive.bind)
        bars = rules(g, out, *inputs, **params) if params else rules(g, out, *inputs)
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
            x_bar = rule(g, out, *inputs, **params) if params else rule(g, out, *inputs)
        if x_bar is None:  # a custom rule with no cotangent for this input
            continue
        if is_node:
            old = node_grads.get(e)
            node_grads[e] = x_bar if old is None else ew.add(old, x_bar)
        else:
            _accumulate(leaf_grads, id(e), x_bar)
            if leaves is not None:
                leaves[id(e)] = e


_GRADIENT_NODE = "gradient_node"  # the custom rule _tied records


def _tied(targets, results, order):
    """``paddle.grad(..., create_graph=True)``'s results as the outputs of one gradient node
    (Paddle's model): each differentiable result also depends, with a zero derivative, on
    every leaf among ``targets`` that got a gradient, so a later ``backward()`` from one of
    them gives the other leaves zeros (not None), as Paddle does. Values are unchanged.
    Only for first-order gradients: a graph that already holds gradient nodes (a gradient
    differentiated again) is left as it is, as PaddlePaddle 3.3.1's triple grad of matmul
    leaves ``x.grad`` None."""
    tied_leaves = {id(t): t for t, r in zip(targets, results) if r is not None and t._node is None}
    if (len(tied_leaves) < 2 or not state.grad_enabled
            or any(node.prim.name == _GRADIENT_NODE for node in order)):
        return results
    tied_leaves = tuple(tied_leaves.values())

    def zero_for_leaves(g, out, result, *leaf_inputs):
        return (g, *(creation.full(shape=tuple(x._shape), value=0, dtype=x.dtype)
                     for x in leaf_inputs))

    out = []
    for r in results:
        if r is None or r.stop_gradient:
            out.append(r)
        else:
            out.append(record_custom(detached(r), (r, *tied_leaves), _GRADIENT_NODE,
                                     zero_for_leaves))
    return out


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
        grad_outputs: starting gradients, one per output (None: ones of the output's shape,
            as in Paddle; a complex output needs one given, as in PyTorch: which real part
            would ones pick?).
        retain_graph: keep the graph for another backward (defaults to ``create_graph``).
        create_graph: record the backward pass so the result can be differentiated again.
        allow_unused: return None for inputs the outputs do not depend on instead of raising
            a ValueError.
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
    _check_grad_outputs(outputs, grad_outputs)
    blocked = set()
    if no_grad_vars is not None:
        for t in _as_list(no_grad_vars, "no_grad_vars"):
            blocked.add(t._node if t._node is not None else id(t))
    for i, x in enumerate(inputs_list):
        if x.stop_gradient:
            raise RuntimeError(
                f"input {i} (shape {x.shape}) has stop_gradient=True, so no gradient can be "
                f"computed for it; set x.stop_gradient = False (x.requires_grad = True) before "
                f"using it")
    if retain_graph is None:
        retain_graph = create_graph
    seeds = _seed_gradients(outputs, grad_outputs, inputs=inputs_list)
    results = _run_backward(seeds, inputs_list, create_graph, retain_graph, blocked)
    for i, r in enumerate(results):
        if r is None and not allow_unused:
            # ValueError, as Paddle raises for an unused input
            raise ValueError(
                f"input {i} (shape {inputs_list[i].shape}) was not used to compute the outputs; "
                f"pass allow_unused=True to get None for it")
        if create_graph and r is not None and r.stop_gradient:
            # Paddle: with create_graph every gradient has stop_gradient=False, also one
            # that is constant (d x / d x); a new handle, so a seed passed in stays as it was
            results[i] = fresh_leaf(r)
    return results


def detached(x):
    """``x``'s value cut from the graph: a new tensor (under a transform, a second tracer)."""
    if isinstance(x, Tracer):
        handle = copy.copy(x)
        handle._node = None
        handle.stop_gradient = True
        return handle
    return Tensor._wrap(x._value)


def fresh_leaf(x):
    """A new leaf tensor requiring grad on ``x``'s value (under a transform, a second
    tracer on it)."""
    handle = detached(x)
    handle.stop_gradient = False
    return handle


# the nodes of tensors whose gradients ``backward`` accumulated into the leaves (weakly
# held): ``optimizer.minimize(loss)`` after ``loss.backward(retain_graph=True)`` must not
# backpropagate (and accumulate) a second time
backpropagated = weakref.WeakSet()


def backward(tensors, grad_tensors=None, retain_graph=False):
    """Accumulates gradients of ``tensors`` into the ``.grad`` of the leaves they depend on.
    A complex tensor needs ``grad_tensors`` (PyTorch's rule). Safe to call from several
    threads on graphs sharing leaves: each ``.grad`` update is atomic.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> pf.autograd.backward([(x * x).sum()])
        >>> x.grad.numpy()
        array([2., 4.], dtype=float32)
    """
    tensors = _as_list(tensors, "tensors")
    seeds = _seed_gradients(tensors, grad_tensors, skip_constant=True)
    if not seeds:
        # Paddle runs nothing here; say so, since no leaf will receive a gradient
        warnings.warn(
            f"backward() has nothing to do: "
            f"{unrecorded_message('the tensor' if len(tensors) == 1 else 'tensor 0', tensors[0])}",
            stacklevel=3)
        return
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


# Tensor's methods implemented here (core/tensor.py declares them and looks them up here
# on first use)
TENSOR_METHODS = {"backward": _tensor_backward, "register_hook": _tensor_register_hook,
                  "retain_grads": _tensor_retain_grads, "gradient": _tensor_gradient}
