"""Static graphs: ``pf.jit(f)`` and ``pf.to_static(f_or_layer)``.

The first call with a new input signature (shapes, dtypes and grad flags of the tensor
leaves, the values of static arguments and Python scalars, the pytree structure) runs ``f``
once on ``JitTracer`` values. Each primitive applied to them is recorded, with the type
that ``Primitive.abstract_eval`` gives, into an SSA program (``primflow.ir``); nothing is
computed. The program is optimized (``primflow.ir.passes``) and compiled
(``primflow.compiler``), and cached under the signature; later calls with that signature
run the compiled program.

* Tensors ``f`` closes over (a layer's parameters, data) become extra program inputs read
  at every call, so updates to them are seen; constants created inside ``f`` are recorded
  as ``full``/``iota`` operations and folded. What ``f`` computes from other values while
  tracing is baked into the program, so each call first checks it still holds (guards,
  a few identity checks): if a closure variable or a module global that ``f``'s own code
  reads was rebound (a new tensor, another number), or a tensor whose value was read while
  tracing (an op on constants only, ``float(w)``) was changed in place, ``f`` is traced
  again. Results always match eager code; values that change on every call retrace on
  every call (``RetraceWarning`` says which): pass those as arguments. Values reached
  otherwise (attributes of objects, a helper's globals) are not checked: pass them as
  arguments too if they change.
* ``pf.grad``, ``backward``, ``pf.vmap``, ``pf.jvp`` inside ``f`` work as in eager code:
  their traces nest inside the jit trace and what they compute is recorded too.
* Differentiating *through* a jitted function (its inputs or the parameters it reads
  require grad) works: the outputs get a tape node whose backward re-runs the program
  with the tape on (as ``pf.checkpoint`` does), so every order of derivative is available.
* Called inside another transform (vmap, jvp, Taylor mode, or another jit's trace), ``f``
  is simply traced by that transform (inlined).
* Called with distributed tensors (``primflow.distributed``), ``f`` compiles to one program
  per rank on the local blocks, the collectives its layouts need recorded as ops, the
  arguments' placements part of the signature (``distributed/staged_jit.py``).
* Python control flow on traced values: ``bool()``, ``float()``, ``.item()``,
  ``.numpy()`` or ``print`` of a traced value raise ``TracerConversionError`` while
  tracing. ``pf.jit`` then converts the function's ``if``/``while``/``for i in range(n)``
  statements to ``pf.cond``/``pf.while_loop``/``pf.fori_loop`` (``ast_convert.py``) and
  traces again; what still needs concrete values breaks the graph (``graph_break.py``:
  that statement runs eagerly between compiled pieces, with a ``GraphBreakWarning``), or
  raises with ``full_graph=True``. ``pf.cond``/``pf.scan``/... are staged as operations
  with regions (``control/``).

What a jitted function may take and return (bad input gives an error naming the argument
or output and the fix):

* Arguments: tensors and NumPy arrays (traced), pytrees of them (tuples, lists, dicts,
  Layers), and hashable Python values, which are *static*: compiled into the program by
  value, so each new value traces again. Python scalars are static too; pass a number that
  changes from call to call as a tensor (``pf.to_tensor(v)``). Unhashable values (a list
  marked static, a set, a bytearray) raise a ``TypeError`` naming the argument.
* Retracing: every new signature (shape, dtype, grad flag, static value, pytree structure)
  traces and compiles again. After ``RETRACE_WARNING_THRESHOLD`` (8) traces of one function
  a single ``RetraceWarning`` names what changed between the last two signatures.
* Results: tensors and pytrees of them; NumPy arrays become constant tensors; ``None`` and
  immutable Python constants (bool, int, float, str, dtypes, other value-hashable objects)
  are returned as they were while tracing. Anything else (a generator, a mutable custom
  object) raises a ``TypeError`` naming its position in the output.
* In-place updates: inputs are immutable (as in JAX). ``x.add_(...)``, ``x[i] = v`` or
  ``x.set_value(...)`` on an argument raise a ``TypeError`` (eager code would change the
  caller's tensor, the compiled program cannot): return the new value instead. In-place
  updates of tensors created inside the function work as in eager code. Updating a tensor
  the function closes over, with a traced value or after reading it, raises; Python side
  effects that involve no traced value (printing, appending to a list) run once, while
  tracing, not on every call.

The package, one concern a module: ``tracer.py`` (recording a function into a program),
``cache.py`` (the cache key and the validity of cached programs), ``jitted.py`` (``Jitted``
and ``jit``: calling, looking up, running), ``diagnostics.py`` (the retrace warning,
``lower()``, ``explain()``, argument labels in errors), ``to_static.py``.
"""

from __future__ import annotations

from .diagnostics import Lowered, RetraceWarning
from .jitted import Jitted, jit
from .to_static import to_static
from .tracer import JitTrace, JitTracer, TraceTooLongError, TracerConversionError

# after this many traces of one jitted function, warn (once) that its signature keeps
# changing; read at each trace (``diagnostics.check_retraces``), so it can be changed at
# run time
RETRACE_WARNING_THRESHOLD = 8

__all__ = ["RETRACE_WARNING_THRESHOLD", "JitTrace", "JitTracer", "Jitted", "Lowered",
           "RetraceWarning", "TraceTooLongError", "TracerConversionError", "jit", "to_static"]
