"""What a compiled program is at run time: ``Executable`` (one generated function and its
per-thread buffers, switching to numba kernels when a background compile finishes),
``BlockedExecutable`` (a program run in blocks of rows, on threads) and ``ByThreads`` (one
executable per thread count). Deciding which one a program gets is ``_pipeline.py``'s job;
writing the code is ``emit.py``'s."""

from __future__ import annotations

import threading
import warnings

from ..backends import get_backend
from ..core import random as _random
from ..ir import IMPURE
from . import numpy_codegen as npc


class Workspace(threading.local):
    """The planned buffers, one set per thread (so threads never share scratch memory),
    allocated at a thread's first call (not where the program was generated: a background
    compile thread must not hold a copy)."""

    def __init__(self, specs, allocate=npc.allocate):
        self.specs = specs
        self.allocate = allocate
        self._buffers = None

    @property
    def buffers(self):
        if self._buffers is None:
            self._buffers = [self.allocate(shape, dtype) for shape, dtype in self.specs]
        return self._buffers


class Executable:
    """A compiled program: ``executable(native_arrays, keys=None) -> list of arrays``.

    ``source`` is the generated code, ``plan`` the memory plan, ``groups`` the fusion groups
    and ``kernels`` the numba kernels used (empty without numba).
    """

    def __init__(self, fn, run, source, plan=None, groups=(), kernels=(), backend="numpy",
                 workspace=None):
        self.fn = fn
        # the program and its planned buffers, swapped together (one attribute, so a call
        # in another thread never pairs one version's code with the other's buffers); the
        # buffers are passed at each call, not kept in the program's globals (a reference
        # cycle), so they are freed as soon as the executable switches to numba kernels
        self._code = (run, workspace)
        self.source = source
        self.plan = plan
        self.groups = list(groups)
        self.kernels = list(kernels)
        self.backend = backend
        self.n_random = sum(op.prim in IMPURE for op in fn.ops)
        self._pending = None  # a numba version being compiled in the background

    @property
    def compiling(self) -> bool:
        """Whether numba kernels for this program are still being compiled in the
        background, or will be after more calls (meanwhile the generated NumPy code runs)."""
        return self._pending is not None and not self._pending.ready.is_set()

    def wait(self, timeout=None) -> bool:
        """Waits for a background numba compile to finish and switches to its kernels.
        Returns whether numba kernels are in use. (A no-op without a background compile.)"""
        if self._pending is not None:
            self._pending.begin()  # a deferred compile starts now
            self._pending.ready.wait(timeout)
            if self._pending.ready.is_set():
                self._upgrade()
        return bool(self.kernels)

    def _upgrade(self):
        pending, self._pending = self._pending, None
        if pending is None:  # another thread switched already
            return
        if pending.error is not None:
            warnings.warn(f"pf.jit: {pending.error}; this program keeps running as generated "
                          f"NumPy code (pf.jit(f, backend='numpy') skips numba)",
                          RuntimeWarning, stacklevel=3)
            return
        new = pending.result
        if new is None:  # generated now, in the calling thread (see Pending.generate)
            owner, generate = pending.generate
            if get_backend() is not owner:  # still another backend: at a later call
                self._pending = pending
                return
            try:
                new = generate()
            except Exception as e:  # noqa: BLE001 - reported like a failed compile
                warnings.warn(f"pf.jit: loading the numba kernels failed: {e!r}; this "
                              f"program keeps running as generated NumPy code",
                              RuntimeWarning, stacklevel=3)
                return
        self.fn = new.fn  # the kernels' program (with recomputed broadcast products)
        self._code = new._code
        self.source, self.plan = new.source, new.plan
        self.groups, self.kernels, self.backend = new.groups, new.kernels, new.backend

    def __call__(self, args, keys=None):
        pending = self._pending
        if pending is not None:
            if pending.ready.is_set():
                self._upgrade()
            elif pending.start is not None:
                pending.count_call()
        if keys is None and self.n_random:
            keys = [_random.next_key() for _ in range(self.n_random)]
        run, workspace = self._code
        if workspace is None:
            return run(args, keys)
        return run(args, keys, workspace)

    def __repr__(self):
        return (f"Executable({self.backend}: {len(self.fn.ops)} ops, {len(self.groups)} fused "
                f"groups, {len(self.kernels)} "
                f"{'cupy' if self.backend == 'cupy' else 'numba'} kernels, {self.plan})")


class Pending:
    """A numba version of a program, compiled in the background (or, for a deferred one,
    once ``start`` is called: after ``calls_left`` more calls, or by ``wait()``)."""

    __slots__ = ("error", "ready", "result", "generate", "start", "calls_left", "_starting")

    def __init__(self, start=None, calls_left=0):
        self.ready = threading.Event()
        self._starting = threading.Lock()  # calls from several threads start it once
        self.error = None
        self.result = None
        self.generate = None  # the generation left to the next call (another backend was
        # installed when the kernels were ready: the generated code uses the active one's)
        self.start = start  # a deferred compile: starts it (then None)
        self.calls_left = calls_left

    def begin(self):
        """Starts a deferred compile (once)."""
        with self._starting:
            start, self.start = self.start, None
        if start is not None:
            start()

    def count_call(self):
        """One more call of the NumPy version; the deferred compile starts at the last."""
        self.calls_left -= 1
        if self.calls_left <= 0:
            self.begin()


def _allocator_and_adder():
    """How blocked programs on the active backend allocate their outputs and add partial
    sums in block order."""
    if get_backend().codegen != "array_api":
        from ..backends.threads import sum_in_order

        return npc.allocate, sum_in_order
    from .array_api_codegen import emitter_for

    def add_in_order(parts):
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        return total

    return emitter_for(get_backend()).allocate, add_in_order


class ByThreads:
    """A program compiled for the thread count it runs with (``pf.get_num_threads()``):
    one executable per count, compiled at the first call with that count. Everything else
    (``source``, ``kernels``, ``wait()``, ...) is the current executable's."""

    def __init__(self, fn, backend, tiered):
        self.fn = fn
        self._backend = backend
        self._tiered = tiered
        self._by_threads = {}
        self.current  # noqa: B018 - compile now (errors and the background numba compile)

    @property
    def current(self):
        """The executable for the current thread count."""
        from ..backends.threads import get_num_threads

        threads = get_num_threads()
        exe = self._by_threads.get(threads)
        if exe is None:
            from ._pipeline import compile_program  # noqa: PLC0415 - the driver imports this

            exe = self._by_threads[threads] = compile_program(
                self.fn, self._backend, blocking=True, threads=threads, tiered=self._tiered)
        return exe

    def __call__(self, args, keys=None):
        return self.current(args, keys)

    def __getattr__(self, name):  # source, plan, groups, kernels, backend, wait, compiling
        if name.startswith("_") or name == "current":
            raise AttributeError(name)  # (copy and pickle probe before __init__ ran)
        return getattr(self.current, name)

    def __repr__(self):
        return repr(self.current)


class BlockedExecutable:
    """Runs ``prologue`` (what does not depend on the rows, NumPy code) once, then ``inner``
    (the program compiled for ``rows`` rows of the batch dimension) on each block of the
    ``n`` rows, on up to ``threads`` threads, and assembles the outputs; a program that sums
    over its rows returns each block's partial sums, which are added in block order (the
    same result whatever thread ran which block), and ``epilogue`` computes what depends
    on them. Everything else (``source``, ``kernels``, ``wait()``, ...) is the inner
    executable's."""

    def __init__(self, fn, prologue, inner, axis_of, n, rows, epilogue=None, row_outputs=None,
                 threads=1, side=None):
        self.fn = fn
        self.prologue, self.inner, self.epilogue = prologue, inner, epilogue
        self.side = side  # what only the epilogue reads: one more task beside the blocks
        self.n, self.rows, self.threads = n, rows, threads
        self.n_random = sum(op.prim in IMPURE for op in fn.ops)
        self.in_axes = [axis_of[v] for v in fn.inputs]
        # the prologue's results the body reads: a block of rows of those that have rows
        body_inputs = inner.fn.inputs[len(fn.inputs):]
        full = prologue.fn.outputs if prologue is not None else []
        self.hoisted_axes = [next((d for d, (a, b) in enumerate(zip(f.aval.shape,
                                                                    v.aval.shape)) if a != b),
                                  None) for f, v in zip(full, body_inputs)]
        if row_outputs is None:
            row_outputs = list(range(len(fn.outputs)))
        self.row_outputs = row_outputs
        self.out_axes = [axis_of[fn.outputs[i]] for i in row_outputs]
        self.out_specs = [(fn.outputs[i].aval.shape, fn.outputs[i].aval.dtype) for i in row_outputs]
        self._allocate, self._add_in_order = _allocator_and_adder()

    def __getattr__(self, name):  # source, plan, groups, kernels, backend, wait, compiling
        return getattr(self.inner, name)

    def __call__(self, args, keys=None):
        from ..backends.threads import parallel_map

        if keys is None and self.n_random:
            keys = [_random.next_key() for _ in range(self.n_random)]
        # random draws do not depend on the rows (else the program is not blocked): they
        # are hoisted into the prologue, in program order
        hoisted = self.prologue(args, keys) if self.prologue is not None else []
        full = list(args) + hoisted
        axes = self.in_axes + self.hoisted_axes
        outs = [self._allocate(shape, dtype) for shape, dtype in self.out_specs]
        n_rows = len(outs)

        def run_block(b):
            rows = slice(b * self.rows, (b + 1) * self.rows)
            block = [a if ax is None else a[(slice(None),) * ax + (rows, ...)]
                     for a, ax in zip(full, axes)]
            results = self.inner(block)
            for out, res, ax in zip(outs, results, self.out_axes):
                out[(slice(None),) * ax + (rows, ...)] = res
            return results[n_rows:]  # partial sums

        blocks = self.n // self.rows
        if self.side is None:
            partials = parallel_map(run_block, blocks, self.threads)
        else:  # the side program is the last task (the blocks start first)
            side = self.side
            partials = parallel_map(lambda b: side(full) if b == blocks else run_block(b),
                                    blocks + 1, self.threads)
            full = full + partials.pop()
        if self.epilogue is None:
            return outs
        sums = [self._add_in_order([p[k] for p in partials]) for k in range(len(partials[0]))]
        rest = iter(self.epilogue(full + sums))
        row = iter(outs)
        rows = set(self.row_outputs)
        return [next(row) if i in rows else next(rest) for i in range(len(self.fn.outputs))]

    def __repr__(self):
        parts = [f"{self.n // self.rows} blocks of {self.rows} rows"]
        if self.threads > 1:
            parts.append(f"on {self.threads} threads")
        if self.prologue is not None:
            parts.append("with a prologue")
        if self.side is not None:
            parts.append("a side program")
        if self.epilogue is not None:
            parts.append("partial sums and an epilogue")
        return f"BlockedExecutable({', '.join(parts)}: {self.inner!r})"
