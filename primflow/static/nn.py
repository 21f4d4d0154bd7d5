"""Paddle's control-flow spellings, over ``primflow.transforms.control``.

``cond(pred, true_fn, false_fn)``, ``while_loop(cond, body, loop_vars)`` and
``switch_case(branch_index, branch_fns, default=None)`` behave as in
``paddle.static.nn`` and work eagerly, on the tape, under every transform and in
``pf.jit`` (where they become ``cond``/``while`` operations with regions).
"""

from __future__ import annotations

from ..transforms import control as _control


def cond(pred, true_fn=None, false_fn=None, name=None, return_names=None):
    """Paddle's ``static.nn.cond``: ``true_fn()`` if ``pred`` else ``false_fn()`` (both take
    no arguments; a missing function returns None).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor(3.0)
        >>> float(pf.static.nn.cond(x > 1, lambda: x * 2, lambda: x - 1))
        6.0
    """
    del name, return_names
    true_fn = true_fn or (lambda: None)
    false_fn = false_fn or (lambda: None)
    return _control.cond(pred, lambda: true_fn(), lambda: false_fn())


def while_loop(cond, body, loop_vars, is_test=False, name=None):
    """Paddle's ``static.nn.while_loop``: ``loop_vars = body(*loop_vars)`` while
    ``cond(*loop_vars)``; returns the final list of loop variables.

    Example:
        >>> import primflow as pf
        >>> i, s = pf.static.nn.while_loop(lambda i, s: i < 4, lambda i, s: [i + 1, s + i],
        ...                                [pf.to_tensor(0), pf.to_tensor(0)])
        >>> int(s)
        6
    """
    del is_test, name
    if not isinstance(loop_vars, (list, tuple)) or not loop_vars:
        raise TypeError("static.nn.while_loop: loop_vars must be a non-empty list or tuple")

    def body_fn(vs):
        out = body(*vs)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(out) != len(vs):
            raise TypeError(f"static.nn.while_loop: body returned {len(out)} values for "
                            f"{len(vs)} loop_vars; return one value per loop variable")
        return out

    return list(_control.while_loop(lambda vs: cond(*vs), body_fn, list(loop_vars)))


def switch_case(branch_index, branch_fns, default=None, name=None):
    """Paddle's ``static.nn.switch_case``: runs the branch ``branch_index`` names.

    ``branch_fns`` is a dict ``{index: fn}``, or a list of ``(index, fn)`` pairs or of
    functions (indexed 0, 1, ...). An index with no branch runs ``default`` (the branch
    with the largest index when no default is given, as Paddle does).

    Example:
        >>> import primflow as pf
        >>> out = pf.static.nn.switch_case(pf.to_tensor(2), {1: lambda: pf.to_tensor(1.0),
        ...                                2: lambda: pf.to_tensor(2.0)})
        >>> float(out)
        2.0
    """
    del name
    if isinstance(branch_fns, dict):
        pairs = sorted(branch_fns.items())
    else:
        pairs = [p if isinstance(p, (tuple, list)) else (i, p)
                 for i, p in enumerate(branch_fns)]
        pairs = sorted((int(k), f) for k, f in pairs)
    if not pairs:
        raise ValueError("static.nn.switch_case: branch_fns is empty")
    if default is None:
        default = pairs[-1][1]
    keys = [k for k, _ in pairs]
    fns = [f for _, f in pairs] + [default]
    from ..ops.math import equal, where
    from ..ops.helpers import as_tensor

    index = as_tensor(branch_index)
    if index.dtype.is_floating:
        raise TypeError(f"static.nn.switch_case: branch_index must be an integer tensor, got "
                        f"{index.dtype.name}")
    index = index.reshape([]) if index._shape else index
    position = as_tensor(len(keys), dtype=index.dtype)  # the default's position
    for j in range(len(keys) - 1, -1, -1):
        position = where(equal(index, as_tensor(keys[j], dtype=index.dtype)),
                         as_tensor(j, dtype=index.dtype), position)
    return _control.switch(position, [lambda f=f: f() for f in fns])
