"""What ``pf.jit`` tells its user: the retrace warning, the errors about arguments that
cannot key the cache, ``lower()``'s view of the programs, ``explain()``, and the readable
labels (``argument 0 ('x')['a']``) all of them use. Only error and warning paths (and
``lower``) run this code."""

from __future__ import annotations

import inspect
import os
import sys
import warnings

from ...core.tensor import Tensor
from .cache import ENVIRONMENT, is_array_like


class RetraceWarning(UserWarning):
    """A jitted function was traced ``RETRACE_WARNING_THRESHOLD`` times: its input
    signature keeps changing (a Python number or a shape that differs on every call), so
    every call compiles it again."""


class Lowered:
    """What ``jitted.lower(*args)`` returns: the traced and optimized programs.

    ``as_text()`` prints the optimized program (``stage="traced"`` the program as
    recorded, ``stage="compiled"`` the generated code).
    """

    def __init__(self, entry):
        self._entry = entry
        self.traced = entry.traced
        self.program = entry.program

    def as_text(self, stage="optimized") -> str:
        if stage == "traced":
            return self.traced.as_text()
        if stage == "optimized":
            return self.program.as_text()
        if stage == "compiled":
            source = getattr(self._entry.executable, "source", None)
            return source if source is not None else self.program.as_text()
        raise ValueError(f"stage must be 'traced', 'optimized' or 'compiled', got {stage!r}")

    def __str__(self):
        return self.as_text()

    def compile(self):
        """The executable: ``executable(list of native arrays) -> list of native arrays``."""
        return self._entry.executable


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def caller_level():
    """The ``stacklevel`` of the first frame outside this package (warnings point at the
    user's call, however many jit frames lie between)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _PACKAGE_DIR:
        frame, level = frame.f_back, level + 1
    return level


class _BrokenLowered:
    """``lower()`` of a function with graph breaks: its compiled pieces and breaks."""

    def __init__(self, text):
        self.text = text

    def as_text(self, stage="optimized") -> str:
        del stage
        return self.text

    __str__ = as_text


# ---- labels of arguments and outputs --------------------------------------------------------

def arg_label(jitted, i):
    """``argument 1 ('s')``: the position, and the parameter's name where known."""
    if jitted._param_names is None:
        try:
            params = inspect.signature(jitted.fun).parameters.values()
            jitted._param_names = [p.name for p in params if p.kind in (
                p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            jitted._param_names = []
    if i < len(jitted._param_names):
        return f"argument {i} ({jitted._param_names[i]!r})"
    return f"argument {i}"


def leaf_labels(jitted, treedef):
    """A label per leaf of the flattened ``(dyn_args, dyn_kwargs)``, in leaf order."""
    args_def, kwargs_def = treedef.children
    labels = []
    for i, child in enumerate(args_def.children):
        tree_paths(child, arg_label(jitted, i), labels)
    for k, child in zip(kwargs_def.meta, kwargs_def.children):
        tree_paths(child, f"keyword argument {k!r}", labels)
    return labels


def static_label(jitted, k):
    if isinstance(k, int):
        return f"static {arg_label(jitted, k)}"
    return f"static keyword argument {k!r}"


def tree_paths(td, prefix, out):
    """Appends a readable path (``argument 0 ('d')['a'][1]``) for each leaf of ``td``."""
    if td.kind == "leaf":
        out.append(prefix)
    elif td.kind == "dict":
        for k, child in zip(td.meta, td.children):
            tree_paths(child, f"{prefix}[{k!r}]", out)
    elif td.kind in ("tuple", "list") or (isinstance(td.kind, type) and issubclass(td.kind, tuple)):
        for j, child in enumerate(td.children):
            tree_paths(child, f"{prefix}[{j}]", out)
    elif td.kind != "none":  # a registered class (a Layer: its parameters' names)
        names = getattr(td.meta, "names", None)
        if not isinstance(names, tuple) or len(names) != len(td.children):
            names = [f"<{j}>" for j in range(len(td.children))]
        for name, child in zip(names, td.children):
            tree_paths(child, f"{prefix}.{name}", out)


def type_name(x):
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def short_repr(x, limit=60):
    try:
        text = repr(x)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the message
        text = f"<{type_name(x)} object>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _hash_error(x):
    """Why ``x`` is not hashable, or None when it is."""
    try:
        hash(x)
    except TypeError as e:
        return str(e)
    return None


def _hashable_hint(x, static):
    """How to make an argument hashable, for its type."""
    if isinstance(x, list):
        return "pass a tuple instead of a list: tuple(value)"
    if isinstance(x, dict):
        return ("pass a tuple of its items (tuple(sorted(d.items()))) instead of a dict"
                + ("; or, if it holds tensors, do not mark it static: a dict is a pytree "
                   "whose tensors are traced" if static else ""))
    if isinstance(x, (set, frozenset)):
        return "pass a frozenset or a sorted tuple instead of a set"
    if isinstance(x, bytearray):
        return "pass bytes(value) instead of a bytearray"
    if is_array_like(x):
        return ("pass it as a tensor argument (leave it out of static_argnums / "
                "static_argnames): arrays are traced, not compiled in")
    return (f"make {type(x).__name__} hashable (define __hash__ and __eq__, e.g. a "
            f"frozen dataclass) or pass its data as tensors")


# ---- unhashable arguments and retracing ---------------------------------------------------

def unhashable_message(jitted, leaves, treedef, static, error):
    """Why a call's signature cannot key the cache, naming the argument and the fix."""
    head = f"pf.jit({jitted._display}): "
    for k, v in static:
        if (why := _hash_error(v)) is not None:
            where = "static_argnums" if isinstance(k, int) else "static_argnames"
            return (f"{head}{static_label(jitted, k)} (marked by {where}) is a "
                    f"{type_name(v)}, which is not hashable ({why}): static "
                    f"arguments are compiled into the program and their values key its "
                    f"cache, so they must be hashable: {_hashable_hint(v, static=True)}")
    for label, leaf in zip(leaf_labels(jitted, treedef), leaves):
        if not isinstance(leaf, Tensor) and (why := _hash_error(leaf)) is not None:
            return (f"{head}{label} is a {type_name(leaf)}, which is neither a tensor, a "
                    f"pytree of tensors (tuple, list, dict, Layer) nor a hashable Python "
                    f"value ({why}). Non-tensor arguments are static: their "
                    f"values are compiled into the program and key its cache. Pass data as "
                    f"tensors (pf.to_tensor(...)) and configuration as hashable values "
                    f"({_hashable_hint(leaf, static=False)}), optionally marked with "
                    f"static_argnums / static_argnames")
    return (f"{head}the call's signature is not hashable ({error}); pass tensors for data "
            f"and hashable values for configuration (static_argnums / static_argnames)")


def describe_call(jitted, leaves, treedef, static, key):
    """What a traced signature is made of, readably: compared between the last two traces
    to say what changed when warning about retracing. ``key`` is the call's
    ``program_key``: its arguments' part (treedef, leaves, static values, Layers) first."""
    items = {}
    for label, leaf in zip(leaf_labels(jitted, treedef), leaves):
        if isinstance(leaf, Tensor):
            items[label] = ("tensor", list(leaf._shape), leaf.dtype.name, leaf.stop_gradient)
        else:
            items[label] = ("value", type_name(leaf), short_repr(leaf))
    for k, v in static:
        items[static_label(jitted, k)] = ("static", type_name(v), short_repr(v))
    env = dict(zip(ENVIRONMENT, key[4:]))  # (zip stops before the extra key)
    env["identity or train/eval mode of a Layer argument"] = key[3]
    if jitted._extra_key is not None:
        env["extra cache key"] = key[4 + len(ENVIRONMENT)]
    return {"structure": treedef, "items": items, "env": env}


def check_retraces(jitted, signature):
    """Counts traces (on cache misses only) and warns once when they pile up."""
    # the package's value, read at each trace: users set
    # primflow.transforms.jit.RETRACE_WARNING_THRESHOLD at run time
    threshold = sys.modules[__package__].RETRACE_WARNING_THRESHOLD
    previous, jitted._last_signature = jitted._last_signature, signature
    if jitted._warned_retrace or jitted.traces < threshold:
        return
    jitted._warned_retrace = True
    changed = _signature_changes(previous, signature) if previous else []
    what = ("; ".join(changed) if changed else
            f"the arguments' signature is unchanged, but {jitted._stale_reason} (pass "
            f"values that change as arguments)" if jitted._stale_reason else
            "the arguments' signature is unchanged: a tensor the function closes over "
            "changed shape or dtype")
    warnings.warn(
        f"pf.jit({jitted._display}) has been traced {jitted.traces} times: every call with a "
        f"new signature traces and compiles it again. Between the last two traces: {what}. "
        f"Keep shapes, dtypes and static values the same from call to call: pass numbers "
        f"that change as tensors (pf.to_tensor(value)) instead of Python scalars, and pad "
        f"or bucket inputs to a few fixed shapes. (This warning is shown once per "
        f"function; cache_info() counts the traces.)", RetraceWarning,
        stacklevel=caller_level())


_SCALARS = (bool, int, float, complex)


def _signature_changes(old, new):
    """What differs between two signature descriptions, readably (at most 3 items)."""
    if old["structure"] != new["structure"]:
        return [(f"the pytree structure of the arguments changed: "
                 f"{short_repr(old['structure'], 80)} -> {short_repr(new['structure'], 80)}")]
    changes = []
    for label, now in new["items"].items():
        before = old["items"].get(label)
        if before is None or before == now:
            continue
        if before[0] == "tensor" and now[0] == "tensor":
            _, shape0, dtype0, sg0 = before
            _, shape1, dtype1, sg1 = now
            if shape0 != shape1:
                changes.append(f"{label} shape {shape0} -> {shape1} (every new shape "
                               f"compiles again: pad or bucket to a few fixed shapes)")
            if dtype0 != dtype1:
                changes.append(f"{label} dtype {dtype0} -> {dtype1}")
            if sg0 != sg1:
                changes.append(f"{label} stop_gradient {sg0} -> {sg1}")
        elif before[0] == now[0] == "value" and before[1] == now[1]:
            scalar = now[1] in {t.__name__ for t in _SCALARS}
            changes.append(
                f"{label}: Python {now[1]} {before[2]} -> {now[2]} "
                + ("(Python scalars are static, compiled into the program: pass it as a "
                   "tensor, pf.to_tensor(value), so that it is traced)" if scalar else
                   "(non-tensor arguments are static, compiled into the program: pass the "
                   "data as tensors)"))
        elif before[0] == now[0] == "static":
            changes.append(f"{label}: {before[2]} -> {now[2]} (static arguments are compiled "
                           f"into the program: each new value compiles again)")
        else:
            changes.append(f"{label}: {_describe_item(before)} -> {_describe_item(now)}")
    for name, value in new["env"].items():
        if old["env"].get(name) != value:
            changes.append(f"the {name} changed")
    return changes[:3] + ([f"and {len(changes) - 3} more"] if len(changes) > 3 else [])


def _describe_item(item):
    if item[0] == "tensor":
        return f"tensor {item[2]}{item[1]}"
    return f"Python {item[1]} {item[2]}"


def explain(jitted):
    """``Jitted.explain``'s text, after ``lower()`` traced (or split) the function."""
    converted = (" (Python control flow converted to cond/while/scan)"
                 if jitted._converted_count else "")
    broken = jitted._broken
    if broken is None:
        return "1 graph, no graph break" + converted
    if not hasattr(broken, "pieces"):
        return "0 graphs: the function cannot be compiled or split; it runs eagerly"
    graphs = sum(not p.eager for p in broken.pieces)
    breaks = [p for p in broken.pieces if p.eager]
    lines = [f"{graphs} graph{'s' if graphs != 1 else ''}, {len(breaks)} graph "
             f"break{'s' if len(breaks) != 1 else ''}:"]
    lines += [f"  {p.where}: {p.reason}" for p in breaks]
    return "\n".join(lines)
