"""Loading numba kernels, and the background compile worker.

``load_kernel`` builds a generated kernel module from its verified source text and compiles
(or loads from numba's disk cache) its ``kernel`` for one signature; the cache files are
checked against primflow's signatures first (``kernel_cache``). Run as a script, this file
is the worker process that ``numba_codegen.compile_in_background`` starts: it reads a JSON
list of jobs ``{"path": ..., "sig": [[dtype, ndim, layout, readonly], ...]}`` from stdin,
compiles each kernel into the disk cache and leaves a ``.ready-<numba version>`` marker next
to its source (a ``.failed-<numba version>`` one holding the error when numba rejects it;
the others still compile); it prints the notices about deleted cache files as a JSON list.
It imports only numba and ``kernel_cache`` (not primflow), so it starts quickly.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
import zlib

if __package__:
    from . import kernel_cache
else:  # run as a script (the compile worker): this folder is on sys.path
    import kernel_cache


def numba_types(spec):
    """numba argument types for a signature spec (see ``numba_codegen.kernel_signature``)."""
    from numba import types

    return tuple(types.Array(types.boolean if name == "bool" else getattr(types, name), ndim,
                             layout, readonly=readonly)
                 for name, ndim, layout, readonly in spec)


def load_kernel(path, spec, report=None):
    """Builds the kernel module at ``path`` from its verified source, compiles (or loads
    from numba's cache) its ``kernel`` for the signature ``spec`` and returns the compiled
    entry point, which is called directly (no per-call type dispatch).

    Nothing in the cache folder runs unless primflow wrote it: the folder must be private
    (``kernel_cache.check_folder``), the source is compiled from its signed text (never
    from a ``.pyc``), and numba's files of this kernel that are not signed are deleted
    before numba reads them (the kernel is then compiled again); ``report(message)`` (by
    default a RuntimeWarning) is told which."""
    folder = os.path.dirname(path)
    kernel_cache.prepare_folder(folder)
    key = kernel_cache.secret_key(folder)
    # (one module per file: the same kernel in another cache folder is another module)
    name = f"primflow_numba_{os.path.basename(path)[:-3]}_{zlib.crc32(path.encode()):08x}"
    with kernel_cache.locked(path):
        module = sys.modules.get(name)
        if module is None:
            module = _module_from_source(name, path, kernel_cache.read_source(path, key))
            sys.modules[name] = module
        cache_path = _numba_cache_path(module.kernel, folder)
        stem = os.path.basename(path)[:-3]
        deleted = kernel_cache.remove_unsigned(cache_path, stem, key)
        if deleted:
            (report or _warn)(
                f"pf.jit: deleted {', '.join(deleted)} from the kernel cache: not written by "
                f"primflow, or damaged since (its signature does not match); the kernel is "
                f"compiled again")
        sig = numba_types(spec)
        module.kernel.compile(sig)
        kernel_cache.sign_entry(cache_path, stem, key)
    return module.kernel.overloads[sig].entry_point


def _module_from_source(name, path, source):
    """A module executed from ``source`` (compiled with ``path`` as its file name, which
    numba's cache needs), not imported: Python's import would run a ``.pyc`` from
    ``__pycache__`` in place of the source when one is there."""
    import types

    module = types.ModuleType(name)
    module.__file__ = path
    exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    return module


def _numba_cache_path(dispatcher, folder):
    """Where numba keeps ``dispatcher``'s cache: ``__pycache__`` beside the source, or the
    folder numba's own settings choose (then checked like primflow's)."""
    path = getattr(getattr(dispatcher, "_cache", None), "cache_path", None)
    if path is None or os.path.abspath(path) == os.path.join(folder, "__pycache__"):
        return os.path.join(folder, "__pycache__")
    os.makedirs(path, mode=0o700, exist_ok=True)
    kernel_cache.check_folder(path)
    return path


def _warn(message):
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def ready_marker(path):
    """The file that says the kernel at ``path`` is in numba's disk cache (per numba
    version: another version does not read that cache)."""
    import numba

    return f"{path[:-3]}.ready-{numba.__version__}"


def mark_ready(path):
    """Records that the kernel at ``path`` is in numba's disk cache."""
    marker = ready_marker(path)
    if not os.path.exists(marker):
        with open(marker, "w", encoding="utf-8"):
            pass


def failed_marker(path):
    """The file that says numba could not compile the kernel at ``path`` (it holds the
    error; the kernel is not tried again with this numba version)."""
    import numba

    return f"{path[:-3]}.failed-{numba.__version__}"


def main():
    if len(sys.argv) > 1 and hasattr(os, "nice"):
        # a low priority (see numba_codegen.WORKER_NICENESS): the program runs first
        try:
            os.nice(int(sys.argv[1]))
        except OSError:  # not permitted here: compile at normal priority
            pass
    jobs = json.loads(sys.stdin.read())
    failed, notices = [], []
    for job in jobs:  # one kernel that numba rejects does not keep the others from compiling
        try:
            load_kernel(job["path"], [tuple(a) for a in job["sig"]], notices.append)
        except kernel_cache.KernelCacheError as e:  # the cache, not the kernel: no marker
            failed.append(str(e)[:1000])
            continue
        except Exception as e:  # noqa: BLE001 - reported through stderr and the marker
            with open(failed_marker(job["path"]), "w", encoding="utf-8") as f:
                f.write(repr(e))
            failed.append(f"{os.path.basename(job['path'])}: {e!r}"[:1000])
            continue
        mark_ready(job["path"])
    sys.stdout.write(json.dumps(notices))
    if failed:
        sys.stderr.write("\n".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
