"""Every alias of primflow's public surface, in one table.

An alias is a second name for the same object, kept so that code written for another
framework reads naturally. The canonical name is the one primflow's code, error messages
and OpInfo table use; ``primflow.ops`` and ``primflow`` create the aliases from this table
(``create``), and docs/architecture.md shows it (``as_markdown``; a test keeps the two
equal).
"""

from __future__ import annotations

# (alias, canonical name, whose spelling the alias follows)
ALIASES = (
    ("cat", "concat", "PyTorch"),
    ("clamp", "clip", "PyTorch"),
    ("swish", "silu", "Paddle"),
    ("mod", "remainder", "Paddle"),
    ("negative", "neg", "NumPy"),
    ("tensor", "to_tensor", "PyTorch"),
    ("view", "reshape", "PyTorch"),
    ("bmm", "mm", "PyTorch"),
    ("amax", "max", "NumPy, PyTorch"),
    ("amin", "min", "NumPy, PyTorch"),
    ("recompute", "checkpoint", "Paddle"),
    ("bool", "bool_", "Paddle, PyTorch"),
)


def create(namespace: dict) -> list:
    """Adds to ``namespace`` each alias whose canonical name it holds; returns their names.

    Example:
        >>> from primflow.ops.aliases import create
        >>> names = {"clip": min}
        >>> create(names), names["clamp"] is min
        (['clamp'], True)
    """
    made = []
    for alias, canonical, _ in ALIASES:
        if canonical in namespace:
            namespace[alias] = namespace[canonical]
            made.append(alias)
    return made


def as_markdown() -> str:
    """The table as Markdown (what docs/architecture.md shows).

    Example:
        >>> from primflow.ops.aliases import as_markdown
        >>> as_markdown().splitlines()[2]
        '| `cat` | `concat` | PyTorch |'
    """
    rows = ["| alias | canonical name | follows |", "|---|---|---|"]
    rows += [f"| `{alias}` | `{canonical}` | {follows} |"
             for alias, canonical, follows in ALIASES]
    return "\n".join(rows)
