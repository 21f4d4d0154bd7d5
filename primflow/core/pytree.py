"""Pytrees: nested tuples, lists and dicts of leaves, flattened and rebuilt by transforms.

Functional transforms accept and return arbitrary nestings of tensors (JAX semantics):
they flatten the structure to a list of leaves, work on the leaves, and rebuild the same
structure. ``None`` is an empty subtree; every other non-container object is a leaf.
Classes can join by defining ``_tree_flatten(self) -> (children, aux)`` and a classmethod
``_tree_unflatten(aux, children)`` (the nn issue uses this for layers).
"""

from __future__ import annotations


class TreeDef:
    """The structure of a pytree without its leaves."""

    __slots__ = ("kind", "meta", "children", "num_leaves")

    def __init__(self, kind, meta, children):
        self.kind = kind  # "leaf", "none", "tuple", "list", "dict", or a registered class
        self.meta = meta  # dict keys, namedtuple type, or class aux data
        self.children = children
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in children)

    def __eq__(self, other):
        return (isinstance(other, TreeDef) and self.kind == other.kind
                and self.meta == other.meta and self.children == other.children)

    def __hash__(self):
        return hash((str(self.kind), self.num_leaves))

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.meta, self.children))
            return "{" + inner + "}"
        if self.kind == "list":
            return "[" + inner + "]"
        if self.kind == "tuple":
            return "(" + inner + ("," if len(self.children) == 1 else "") + ")"
        return f"{getattr(self.kind, '__name__', self.kind)}({inner})"


_LEAF = TreeDef("leaf", None, ())


def tree_flatten(tree, is_leaf=None):
    """``(leaves, treedef)`` of a nested structure.

    Example:
        >>> from primflow.core.pytree import tree_flatten
        >>> tree_flatten({"b": 2, "a": (1, None)})[0]
        [1, 2]
    """
    leaves = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def _flatten(tree, leaves, is_leaf):
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return _LEAF
    if tree is None:
        return TreeDef("none", None, ())
    if isinstance(tree, tuple):
        kind = "tuple" if type(tree) is tuple else type(tree)  # namedtuples keep their type
        return TreeDef(kind, None, tuple(_flatten(c, leaves, is_leaf) for c in tree))
    if isinstance(tree, list):
        return TreeDef("list", None, tuple(_flatten(c, leaves, is_leaf) for c in tree))
    if isinstance(tree, dict):
        keys = tuple(sorted(tree, key=repr))
        return TreeDef("dict", keys, tuple(_flatten(tree[k], leaves, is_leaf) for k in keys))
    flatten_method = getattr(type(tree), "_tree_flatten", None)
    if flatten_method is not None:
        children, aux = tree._tree_flatten()
        return TreeDef(type(tree), aux, tuple(_flatten(c, leaves, is_leaf) for c in children))
    leaves.append(tree)
    return _LEAF


def tree_unflatten(treedef: TreeDef, leaves):
    """Rebuilds the structure ``treedef`` from ``leaves`` (the inverse of tree_flatten).

    Example:
        >>> import primflow as pf
        >>> leaves, treedef = pf.tree_flatten({'a': 1.0, 'b': (2.0, 3.0)})
        >>> pf.tree_unflatten(treedef, [x * 10 for x in leaves])
        {'a': 10.0, 'b': (20.0, 30.0)}
    """
    it = iter(leaves)
    out = _unflatten(treedef, it)
    rest = list(it)
    if rest:
        raise ValueError(f"tree_unflatten: {len(rest)} leaves left over for structure {treedef!r}")
    return out


def _unflatten(td, it):
    if td.kind == "leaf":
        try:
            return next(it)
        except StopIteration:
            raise ValueError("tree_unflatten: too few leaves for the structure") from None
    if td.kind == "none":
        return None
    children = [_unflatten(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(children)
    if td.kind == "list":
        return children
    if td.kind == "dict":
        return dict(zip(td.meta, children))
    if isinstance(td.kind, type) and issubclass(td.kind, tuple):
        return td.kind(*children)
    return td.kind._tree_unflatten(td.meta, children)


def tree_map(fn, tree, *rest, is_leaf=None):
    """Applies ``fn`` to every leaf (and the matching leaves of ``rest``).

    Example:
        >>> from primflow.core.pytree import tree_map
        >>> tree_map(lambda a: a * 2, {"x": 1, "y": [2, 3]})
        {'x': 2, 'y': [4, 6]}
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r, is_leaf)
        if r_def != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef!r} vs {r_def!r}")
        others.append(r_leaves)
    return tree_unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])


def replace_at(values, positions, new) -> list:
    """A list of ``values`` with ``new[k]`` at ``positions[k]``: the arguments of a
    function with the differentiated ones substituted, results put back in place.

    Example:
        >>> replace_at([1, 2, 3], (0, 2), ("a", "c"))
        ['a', 2, 'c']
    """
    out = list(values)
    for i, v in zip(positions, new):
        out[i] = v
    return out
