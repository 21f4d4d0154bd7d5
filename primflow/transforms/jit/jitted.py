"""``pf.jit``'s compiled function, ``Jitted``: splitting a call into the signature it is
cached under and the tensors the program reads, finding (or tracing, ``tracer.py``) the
cache entry (``cache.py``), running the compiled program, attaching a backward node when
inputs require grad, and recovering from Python control flow on traced values (AST
conversion, graph breaks). Messages and warnings: ``diagnostics.py``."""

from __future__ import annotations

import functools

from ...core import random as _random
from ...core.primitive import record_custom
from ...core.pytree import replace_at, tree_flatten, tree_unflatten
from ...core.state import state
from ...core.tensor import Tensor
from ...core.trace import Tracer, TracerConversionError
from ...ir import evaluate_bound
from . import diagnostics
from .cache import captures_fit, is_array_like, layer_key, program_key, stale
from .diagnostics import Lowered, _BrokenLowered
from .tracer import trace_entry


def _stager(args, kwargs):
    """The class of an argument that stages its own program (an ambient tracer whose class
    has ``_jit_call`` / ``_jit_lower``: distributed tensors), else None."""
    for leaf in tree_flatten((args, kwargs))[0]:
        if isinstance(leaf, Tracer) and hasattr(type(leaf), "_jit_call"):
            return type(leaf)
    return None


class Jitted:
    """A function compiled per input signature. See ``jit``."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), optimize=True,
                 backend=None, extra_key=None, name=None, full_graph=False,
                 tiered=None, blocking=None):
        if not callable(fun):
            raise TypeError(f"pf.jit needs a callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.static_argnums = ((static_argnums,) if isinstance(static_argnums, int)
                               else tuple(static_argnums))
        self.static_argnames = ((static_argnames,) if isinstance(static_argnames, str)
                                else tuple(static_argnames))
        self.optimize, self.backend = optimize, backend
        self.tiered, self.blocking = tiered, blocking  # None: pf.config's, when compiling
        self._extra_key = extra_key
        self._name = name or getattr(fun, "__name__", "f")
        if not self._name.isidentifier():
            self._name = "f"
        self._display = (getattr(fun, "__qualname__", None) or self._name).rpartition(
            "<locals>.")[2]
        self._cache = {}
        self._fast = {}  # native-type signature of positional tensors -> entry
        self.traces = 0  # how many times f was traced (cache misses)
        self.hits = 0
        self._last_signature = None  # description of the last traced call (retrace warning)
        self._stale_reason = None  # what made the last cached program stale (retrace warning)
        self._warned_retrace = False
        self._param_names = None
        # Python control flow on traced values: the AST-converted function replaces fun after
        # a TracerConversionError; what still cannot be traced breaks the graph unless full_graph
        self.full_graph = full_graph
        self._converted = False
        self._converted_count = 0  # statements and calls the AST conversion rewrote
        self._no_convert = False  # a piece of a broken function: its owner splits it
        self._broken = None

    def __get__(self, obj, objtype=None):  # decorating a method binds self as usual
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"<pf.jit of {self._name}: {len(self._cache)} cached signatures>"

    # ---- signature -------------------------------------------------------------------------
    def _split(self, args, kwargs):
        n = len(args)
        static_pos = set()
        for i in self.static_argnums:
            if not -n <= i < n:
                raise ValueError(f"pf.jit: static_argnums {self.static_argnums} is out of "
                                 f"range for a call with {n} positional arguments")
            static_pos.add(i % n)
        dyn_args = tuple(None if i in static_pos else a for i, a in enumerate(args))
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        static = tuple((i, args[i]) for i in sorted(static_pos)) + tuple(
            sorted(((k, v) for k, v in kwargs.items() if k in self.static_argnames),
                   key=lambda kv: kv[0]))
        return dyn_args, dyn_kwargs, static, static_pos

    def _signature(self, leaves, treedef, static):
        parts = []
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                parts.append((leaf._shape, leaf.dtype, leaf.stop_gradient))
            else:
                parts.append((type(leaf), leaf))
        key = program_key((treedef, tuple(parts), static, layer_key(treedef)), self._extra_key)
        try:
            hash(key)
        except TypeError as e:
            raise TypeError(diagnostics.unhashable_message(self, leaves, treedef, static, e)) \
                from None
        return key

    # ---- calling ---------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if state.trace_stack:  # inside a transform (or another jit's trace): be traced by it
            try:
                return self.fun(*args, **kwargs)
            except TracerConversionError:
                if not self._convert():
                    raise
                return self.fun(*args, **kwargs)
        if self._broken is not None:
            return self._broken(args, kwargs)
        try:
            return self._call_compiled(args, kwargs)
        except TracerConversionError as e:
            return self._recover(e, args, kwargs)

    def _convert(self) -> bool:
        """Replaces ``fun`` by its AST-converted version (once); whether it did."""
        if self._converted or self._no_convert:
            return False
        self._converted = True
        from ..ast_convert import Unconvertible, convert

        source = getattr(self.fun, "__pf_source__", self.fun)
        try:
            converted, count = convert(source)
        except Unconvertible:
            return False
        if not count:
            return False
        self.fun = converted
        self._converted_count = count
        self.clear_cache()
        return True

    def _recover(self, error, args, kwargs, run=True):
        """After a ``TracerConversionError`` while tracing: convert the function's control
        flow and trace again; if that fails too, break the graph (or raise under
        ``full_graph``). Runs the function on the arguments, unless ``run`` is False
        (``lower``: trace only)."""
        if self._convert():
            try:
                if not run:
                    self._lookup(args, kwargs)
                    return None
                return self._call_compiled(args, kwargs)
            except TracerConversionError as e:
                error = e
        if self._no_convert:
            raise error
        if self.full_graph:
            raise TracerConversionError(
                f"pf.jit({self._display}, full_graph=True): the function cannot be compiled "
                f"as one program (without full_graph it would break the graph here and run "
                f"this part eagerly): {error}") from error
        from ..ast_convert import Unconvertible
        from ..graph_break import BrokenFunction

        source = getattr(self.fun, "__pf_source__", self.fun)
        source = getattr(source, "__wrapped_original__", source)
        try:
            self._broken = BrokenFunction(source, self._display, backend=self.backend)
        except Unconvertible as e:  # no source: the whole function runs eagerly
            import warnings

            from ..graph_break import GraphBreakWarning

            warnings.warn(f"pf.jit({self._display}): cannot compile the function and cannot "
                          f"split it ({e}): it runs eagerly. Reason: {error}",
                          GraphBreakWarning, stacklevel=3)
            self._broken = lambda a, kw: source(*a, **kw)
        return self._broken(args, kwargs) if run else None

    def _call_compiled(self, args, kwargs):
        if not kwargs and not self.static_argnums:
            # fast path: positional tensors only (the common case), keyed on native types
            sig = []
            for a in args:
                if not isinstance(a, Tensor) or isinstance(a, Tracer):
                    break
                v = a._value
                sig.append((v.shape, v.dtype, a.stop_gradient))
            else:
                key = program_key((tuple(sig),), self._extra_key)
                entry = self._fast.get(key)
                if entry is not None and captures_fit(entry) and not stale(entry):
                    self.hits += 1
                    return self._run(entry, list(args))
                entry = self._lookup(args, kwargs)
                if entry is not None:
                    self._fast[key] = entry
                    return self._run(entry, list(args))
        entry = self._lookup(args, kwargs)
        if entry is None:  # inside another transform: let it trace f
            stager = _stager(args, kwargs)
            if stager is not None:  # distributed tensors: they stage their own program
                return stager._jit_call(self, args, kwargs)
            return self.fun(*args, **kwargs)
        leaves = tree_flatten(self._split(args, kwargs)[:2])[0]
        return self._run(entry, [x if isinstance(x, Tensor) else Tensor(x) for x in leaves
                                 if isinstance(x, Tensor) or is_array_like(x)])

    def _lookup(self, args, kwargs):
        """The cache entry for these arguments (tracing on a miss), or None when an
        argument is another transform's tracer."""
        dyn_args, dyn_kwargs, static, static_pos = self._split(args, kwargs)
        leaves, treedef = tree_flatten((dyn_args, dyn_kwargs))
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tracer):
                return None
            if not isinstance(leaf, Tensor) and is_array_like(leaf):
                leaves[i] = Tensor(leaf)
        key = self._signature(leaves, treedef, static)
        entry = self._cache.get(key)
        outdated = None if entry is None else stale(entry)
        if entry is None or not captures_fit(entry) or outdated:
            self._stale_reason = outdated
            entry = self._trace(args, kwargs, static_pos, leaves, treedef)
            self._cache[key] = entry
            diagnostics.check_retraces(self, diagnostics.describe_call(self, leaves, treedef,
                                                                    static, key))
        else:
            self.hits += 1
        return entry

    def lower(self, *args, **kwargs) -> Lowered:
        """Traces (or finds in the cache) the program for these arguments without running
        it. ``jitted.lower(x).as_text()`` prints it. A function with graph breaks is run
        once (its eager pieces decide what the compiled ones get); one that can be neither
        compiled nor split is described, not run. Tracing stops with a
        ``TraceTooLongError`` after ``pf.config.jit_max_trace_ops`` operations (a Python
        loop that never ends, unrolled while tracing)."""
        if not state.trace_stack:
            stager = _stager(args, kwargs)
            if stager is not None:  # distributed tensors: they stage their own program
                return stager._jit_lower(self, args, kwargs)
        if self._broken is None and not state.trace_stack:
            try:
                self._lookup(args, kwargs)
            except TracerConversionError as e:
                self._recover(e, args, kwargs, run=False)
        if self._broken is not None:
            if not hasattr(self._broken, "describe"):
                return _BrokenLowered("# the function can be neither compiled nor split: it "
                                      "runs eagerly")
            return _BrokenLowered(self._broken.describe(args, kwargs))
        hits = self.hits
        entry = self._lookup(args, kwargs)
        self.hits = hits
        if entry is None:
            raise TypeError("lower() needs concrete arguments, not another transform's tracers")
        return Lowered(entry)

    def explain(self, *args, **kwargs) -> str:
        """How this function compiles for these arguments: how many graphs (compiled
        programs), each graph break with its file:line and reason, and whether its Python
        control flow was converted.

        Example:
            >>> import primflow as pf
            >>> def f(x):
            ...     if x.sum() > 0:
            ...         x = x * 2
            ...     return x
            >>> print(pf.jit(f).explain(pf.ones([2])))
            1 graph, no graph break (Python control flow converted to cond/while/scan)
        """
        self.lower(*args, **kwargs)
        self.lower(*args, **kwargs)
        return diagnostics.explain(self)

    def cache_info(self) -> dict:
        """``{"traces": ..., "hits": ..., "entries": ...}``."""
        return {"traces": self.traces, "hits": self.hits, "entries": len(self._cache)}

    def wait_compiled(self, timeout=None) -> bool:
        """Waits until the numba kernels of every traced signature, compiled in the
        background (see ``pf.jit``), are in use; returns whether none is still compiling.
        Useful before timing a jitted function, or to run bitwise like later calls.

        Example:
            >>> import primflow as pf
            >>> f = pf.jit(lambda x: x * 2.0 + 1.0)
            >>> _ = f(pf.ones([3]))
            >>> f.wait_compiled()
            True
        """
        done = True
        for entry in list(self._cache.values()):
            executable = entry.executable
            if hasattr(executable, "wait"):
                executable.wait(timeout)
                done = done and not executable.compiling
        return done

    def clear_cache(self):
        self._cache.clear()
        self._fast.clear()

    # ---- tracing ---------------------------------------------------------------------------
    def _trace(self, args, kwargs, static_pos, leaves, treedef):
        self.traces += 1
        return trace_entry(self, args, kwargs, static_pos, leaves, treedef)

    # ---- running ---------------------------------------------------------------------------
    def _run(self, entry, tensors):
        inputs = tensors + entry.captures if entry.captures else tensors
        natives = [t._value for t in inputs]
        keys = _fresh_keys(entry) if entry.random else None
        outs = entry.executable(natives, keys)
        results = [Tensor._wrap(o) for o in outs]
        if entry.any_requires_grad and state.grad_enabled:
            diff = [i for i, t in enumerate(inputs) if not t.stop_gradient and t.dtype.is_floating]
            if diff:
                results = _attach_backward(entry, inputs, diff, results, keys)
        if entry.single:
            return results[0]
        return tree_unflatten(entry.out_tree, [results[s] if isinstance(s, int) else s[1]
                                               for s in entry.out_slots])


def _fresh_keys(entry):
    """One key per random operation: a fresh draw where the traced call drew one from the
    generator, the traced key where the key was given explicitly."""
    if entry.reseed is not None:
        _random.set_state(entry.reseed)
        return [key for key, _ in entry.impure] or None
    if not entry.impure:
        return None
    return [_random.next_key() if drawn else key for key, drawn in entry.impure]


def _attach_backward(entry, inputs, diff, results, keys):
    """Tape nodes for the outputs: their backward re-runs the program with the tape on."""
    from ...autodiff.custom import recomputing_pullback

    diff_inputs = [inputs[i] for i in diff]
    name = f"jit({entry.name})"

    def run(handles):
        return evaluate_bound(entry.program, replace_at(inputs, diff, handles), keys=keys)

    pullback = recomputing_pullback(name, run, diff_inputs)
    return record_outputs(results, diff_inputs, name, pullback, entry.out_requires_grad)


def record_outputs(results, inputs, name, pullback, wanted):
    """Tape nodes on the results ``wanted`` marks, with ``pullback(cotangents, one per result,
    None where none) -> cotangents of inputs`` as their backward."""
    out, n = [], len(results)
    for k, r in enumerate(results):
        if not wanted[k]:
            out.append(r)
            continue

        # (the rule holds no output: an output -> node -> rule -> output cycle would keep
        # every call's result alive until the garbage collector runs)
        def vjp(g, _out, *_inputs, k=k):
            cts = [None] * n
            cts[k] = g
            return tuple(pullback(cts))

        out.append(record_custom(r, inputs, name, vjp))
    return out


def jit(fun=None, *, static_argnums=(), static_argnames=(), optimize=True, backend=None,
        full_graph=False, tiered=None, blocking=None):
    """Compiles ``fun`` into a static program per input signature (JAX's ``jax.jit``).

    Args:
        fun: a function of tensors (pytrees of tensors, Layers, Python scalars). It returns
            tensors, pytrees of them, NumPy arrays (made constant tensors) or immutable
            Python constants (returned as traced); other results raise a ``TypeError``.
            It must not update its tensor arguments in place (``x.add_``, ``x[i] = v``):
            inputs are immutable, return new values instead. Tensors it closes over are
            read at every call; closure variables and module globals its code reads are
            checked at every call, and rebinding one (``scale = 3.0``, ``w = new_tensor``)
            traces it again, so results match eager code (JAX would keep the old value).
        static_argnums: positions of arguments whose *values* are part of the signature
            (configuration: ints, strings, tuples...; they must be hashable). Python
            scalars are always static: pass a number that changes on every call as a
            tensor, or every call traces again.
        static_argnames: the same for keyword arguments.
        optimize: run the IR passes (simplify, fold, CSE, DCE) before compiling.
        backend: ``"numpy"`` (generated NumPy code), ``"numba"`` (NumPy code plus numba
            kernels for arithmetic groups, compiled in the first call; needs numba),
            ``"interpret"`` (the reference interpreter), ``"auto"`` (numpy, with numba for
            large arithmetic groups when numba is importable) or None:
            ``pf.config.jit_backend`` (default ``"auto"``).
        tiered: with ``"auto"``, compile numba kernels not yet in the disk cache in a
            background process while the first calls run the NumPy code (True, see
            ``Jitted.wait_compiled``) or in the first call (False). None:
            ``pf.config.jit_tiered`` (default True).
        blocking: run programs whose rows are independent in cache-sized row blocks. None:
            ``pf.config.jit_blocking`` (default True).
        full_graph: make a graph break an error. By default, Python control flow on
            traced values (``if``/``while``/``for i in range(n)`` with a tensor condition
            or bound, with ``break``/``continue``/early ``return``) is converted to
            ``pf.cond``/``pf.while_loop``/``pf.fori_loop`` by a source transform
            (``transforms/ast_convert.py``), and what still needs concrete values (a NumPy
            call, ``print`` of a value, ``float(x)``) breaks the graph: that statement runs
            eagerly, the code around it is compiled, and a ``GraphBreakWarning`` names the
            line (``transforms/graph_break.py``). With ``full_graph=True`` that raises
            ``TracerConversionError`` instead.

    Returns:
        A ``Jitted`` callable; ``f.lower(*args).as_text()`` prints the program.

    Warns:
        RetraceWarning: once, when the function has been traced
        ``RETRACE_WARNING_THRESHOLD`` (8) times, naming what changed between the last two
        signatures (a Python scalar's value, a shape...) or what made the last program
        stale (a rebound closure variable or global, see the module docstring).

    Example:
        >>> import primflow as pf
        >>> @pf.jit
        ... def f(x):
        ...     return pf.tanh(x) * 2.0 + 1.0
        >>> f(pf.zeros([3])).numpy()
        array([1., 1., 1.], dtype=float32)
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, optimize=optimize,
                                 backend=backend, full_graph=full_graph, tiered=tiered,
                                 blocking=blocking)
    return Jitted(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                  optimize=optimize, backend=backend, full_graph=full_graph, tiered=tiered,
                  blocking=blocking)

