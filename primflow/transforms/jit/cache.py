"""The cache of traced programs: what a ``pf.jit`` call is looked up by, what each entry
holds, and whether an entry is still valid.

A call is keyed by ``program_key``: a description of its arguments (the native types of
positional tensors on the fast path; the pytree structure, each leaf's shape, dtype and
grad flag, the static values and the Layers' train/eval flags otherwise) followed by the
state that tracing read (grad mode, ``pf.decompose``, the default float dtype, the
backend, ``pf.amp``) and the function's extra key. An entry found under its key is used
only while the variables its trace read still hold (``stale``) and the tensors it
captured keep their types (``captures_fit``).
"""

from __future__ import annotations

import enum
import types

from ...backends import get_backend
from ...core import dtypes
from ...core.state import state
from ...core.trace import TRANSFORM_ATTR

# what follows a call's arguments in its key, in order (the retrace warning names them)
ENVIRONMENT = ("grad mode (pf.no_grad / pf.enable_grad)", "pf.decompose mode",
               "default float dtype", "backend", "pf.amp.auto_cast")

# immutable Python values: a jitted function may return them (returned as they were
# traced), and a variable rebound to an equal one of the same type leaves programs valid
IMMUTABLE_CONSTANTS = (bool, int, float, complex, str, bytes, range, slice, type(Ellipsis),
                       type, dtypes.DType, enum.Enum)


def program_key(arguments, extra_key=None):
    """The cache key of a call: ``arguments`` (a tuple describing the call's arguments)
    followed by the state tracing depends on (see ``ENVIRONMENT``) and ``extra_key()``.
    (A program is compiled for one backend, and ``pf.amp``'s casts are traced in.)"""
    key = (*arguments, state.grad_enabled, state.decompose, dtypes.default_float(),
           get_backend(), state.amp)
    if extra_key is not None:
        key += (extra_key(),)
    return key


def layer_key(treedef):
    """Layers in the arguments: their identity and train/eval flags (read while tracing but
    not part of their pytree structure)."""
    found = []
    stack = [treedef]
    while stack:
        td = stack.pop()
        template = getattr(td.meta, "template", None)
        if template is not None and hasattr(template, "sublayers"):
            found.append((id(template), tuple(getattr(layer, "training", None) for layer
                                              in template.sublayers(include_self=True))))
        stack.extend(td.children)
    return tuple(found)


def is_array_like(x):
    """A NumPy (or other) array argument: traced as a tensor, like one."""
    return hasattr(x, "__array__") and hasattr(x, "shape") and hasattr(x, "dtype")


class Entry:
    """One cached trace: the programs, the executable and how to map values in and out."""

    __slots__ = ("any_requires_grad", "capture_avals", "captures", "executable", "guards",
                 "impure", "n_args", "name", "out_requires_grad", "out_slots", "out_tree",
                 "program", "random", "reads", "reseed", "single", "traced")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def variable_guards(fn):
    """What a program traced from ``fn`` assumed about the variables ``fn`` reads:
    ``(holder, name, value, description)`` for each closure cell (name None) and each
    module global named in the user's own code (holder: the globals dict), following the
    functions a transform wrapper calls (pf.grad(f): f's too) and a converted function's
    original. Modules are left out (rebinding one is not something programs do)."""
    from ..ast_convert import RUNTIME, _user_code  # noqa: PLC0415 - ast_convert imports jit

    guards, seen, stack = [], set(), [fn]
    while stack:
        f = stack.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        spec = getattr(f, TRANSFORM_ATTR, None)
        if spec is not None:
            stack.extend(spec[0])
        stack.append(getattr(f, "__wrapped_original__", None))
        stack.append(getattr(f, "__pf_source__", None))
        code = getattr(f, "__code__", None)
        if code is None:
            continue
        owner = (getattr(f, "__qualname__", None) or code.co_name).rpartition("<locals>.")[2]
        for name, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # not assigned yet: nothing was read
                continue
            if name != RUNTIME and not isinstance(value, types.ModuleType):
                guards.append((cell, None, value, f"the variable {name!r} that {owner} closes "
                                                  f"over was rebound"))
        if _user_code(code.co_filename):
            names = f.__globals__
            for name in code.co_names:
                value = names.get(name, _MISSING)
                if value is not _MISSING and not isinstance(value, types.ModuleType):
                    guards.append((names, name, value, f"the global {name!r} was rebound"))
    return guards


_MISSING = object()


def stale(entry):
    """What changed since ``entry`` was traced (a description), or None: a variable it
    read was rebound to another object (a Python number to another value), or a tensor
    read eagerly while tracing was changed in place."""
    for holder, name, value, what in entry.guards:
        try:
            now = holder.cell_contents if name is None else holder[name]
        except (ValueError, KeyError):
            return what
        if now is not value and not (type(now) is type(value) and type(now) in IMMUTABLE_CONSTANTS
                                     and (now == value or now != now and value != value)):
            return what
    for ref, version in entry.reads:
        t = ref()
        if t is not None and t._version != version:
            return (f"a tensor ({t.dtype.name}{list(t._shape)}) whose value the trace read was "
                    f"changed in place")
    return None


def captures_fit(entry):
    """Whether every captured tensor still has the type it was traced with."""
    return all(t._shape == shape and t.dtype is dtype
               for t, (shape, dtype) in zip(entry.captures, entry.capture_avals))
