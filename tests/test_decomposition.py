"""Composites decompose into primitives: the tape they record holds nothing else.

The recorded graph is walked from ``y._node`` along ``node.edges``; every node's ``prim``
must be a registered primitive (composites have no nodes, hence no rules, of their own).
The same walk over the graph of a gradient taken with ``create_graph=True`` shows that
derivatives are built from primitives too. Everything here runs under ``pf.decompose()``:
without it, composites with fused eager kernels record one fused node (tests/test_fused.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import primflow as pf
from primflow.core.primitive import Node, get_primitive

F = pf.nn.functional


@pytest.fixture(autouse=True)
def _decomposed():
    """Composites with fused eager kernels record one fused node instead (see
    tests/test_fused.py); this file is about their decomposition, so force it."""
    with pf.decompose():
        yield


def recorded_prims(*outputs) -> list:
    """Names of the primitives on the tape behind ``outputs`` (one entry per node)."""
    names, seen = [], set()
    stack = [o._node for o in outputs]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        assert isinstance(node, Node), f"the tape holds a {type(node).__name__}, not a Node"
        # the node's primitive is the registered one, not a look-alike
        assert node.prim is get_primitive(node.prim.name), node.prim
        names.append(node.prim.name)
        stack.extend(e for e in node.edges if type(e) is Node)
    return names


def _x(shape=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    return pf.to_tensor(rng.normal(size=shape), dtype="float64", stop_gradient=False)


SOFTMAX_PRIMS = {"reduce_max", "sub", "exp", "reduce_sum", "log", "div", "broadcast_in_dim"}


@pytest.mark.parametrize("fn,required", [
    (F.log_softmax, {"reduce_max", "sub", "exp", "reduce_sum", "log"}),
    (F.softmax, {"reduce_max", "sub", "exp", "reduce_sum", "div"}),
], ids=["log_softmax", "softmax"])
def test_softmax_family_records_only_its_primitives(fn, required):
    x = _x()
    y = fn(x)
    names = recorded_prims(y)
    print(f"{fn.__name__}: {sorted(names)}")
    assert set(names) <= set(pf.primitives())
    assert set(names) <= SOFTMAX_PRIMS, f"unexpected primitives {set(names) - SOFTMAX_PRIMS}"
    assert required <= set(names), f"missing {required - set(names)}"
    assert fn.__name__ not in pf.primitives()  # a composite, not a primitive


@pytest.mark.parametrize("name,fn", [
    ("layer_norm", lambda x: F.layer_norm(x, 3, weight=pf.ones([3], dtype="float64"),
                                          bias=pf.zeros([3], dtype="float64"))),
    ("rms_norm", lambda x: F.rms_norm(x, 3)),
    ("gelu", F.gelu),
    ("gelu_tanh", lambda x: F.gelu(x, approximate=True)),
    ("cross_entropy", lambda x: F.cross_entropy(x, pf.to_tensor([0, 2]))),
    ("cross_entropy_soft", lambda x: F.cross_entropy(
        x, pf.to_tensor(np.full((2, 3), 1 / 3)), soft_label=True)),
    ("logsumexp", lambda x: pf.logsumexp(x, axis=1)),
    ("norm", lambda x: pf.norm(x, p=2)),
    ("var", lambda x: pf.var(x, axis=0)),
    ("matmul", lambda x: pf.matmul(x, pf.transpose(x, [1, 0]))),
    ("getitem", lambda x: x[::-1, np.array([2, 0])]),
    ("mish", F.mish),
], ids=lambda v: v if isinstance(v, str) else "")
def test_composites_record_only_registered_primitives(name, fn):
    x = _x()
    names = recorded_prims(fn(x))
    print(f"{name}: {sorted(set(names))}")
    assert names, "nothing was recorded"
    assert set(names) <= set(pf.primitives())
    assert name not in pf.primitives()


@pytest.mark.parametrize("fn", [F.log_softmax, F.softmax, F.gelu,
                                lambda x: F.layer_norm(x, 3)],
                         ids=["log_softmax", "softmax", "gelu", "layer_norm"])
def test_derivative_graphs_are_primitives_too(fn):
    """With create_graph=True the backward pass records primitives as well, to any order."""
    x = _x()
    y = pf.sum(pf.multiply(fn(x), _x(seed=1).detach()))
    g, = pf.grad(y, x, create_graph=True)
    h, = pf.grad(pf.sum(pf.multiply(g, g)), x, create_graph=True)
    for t in (g, h):
        names = recorded_prims(t)
        assert names and set(names) <= set(pf.primitives())


def test_the_walk_sees_every_node():
    """Sanity check of the walk itself: a hand-built chain gives exactly its primitives."""
    x = _x()
    y = pf.exp(pf.sin(x)) * 2.0
    assert sorted(recorded_prims(y)) == ["exp", "mul", "sin"]  # the constant is no node
    assert recorded_prims(x.detach() * 1.0) == []
