"""Loading numba kernels, and the background compile worker.

``load_kernel`` imports a generated kernel module and compiles (or loads from numba's disk
cache) its ``kernel`` for one signature. Run as a script, this file is the worker process
that ``numba_codegen.compile_in_background`` starts: it reads a JSON list of jobs
``{"path": ..., "sig": [[dtype, ndim, layout, readonly], ...]}`` from stdin, compiles each
kernel into the disk cache and leaves a ``.ready-<numba version>`` marker next to its source
(a ``.failed-<numba version>`` one holding the error when numba rejects it; the others
still compile). It imports only numba (not primflow), so it starts quickly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys


def numba_types(spec):
    """numba argument types for a signature spec (see ``numba_codegen.kernel_signature``)."""
    from numba import types

    return tuple(types.Array(types.boolean if name == "bool" else getattr(types, name), ndim,
                             layout, readonly=readonly)
                 for name, ndim, layout, readonly in spec)


def load_kernel(path, spec):
    """Imports the kernel module at ``path``, compiles (or loads from numba's cache) its
    ``kernel`` for the signature ``spec`` and returns the compiled entry point, which is
    called directly (no per-call type dispatch)."""
    name = "primflow_numba_" + os.path.basename(path)[:-3]
    module = sys.modules.get(name)
    if module is None:
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    sig = numba_types(spec)
    module.kernel.compile(sig)
    return module.kernel.overloads[sig].entry_point


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
    jobs = json.loads(sys.stdin.read())
    failed = []
    for job in jobs:  # one kernel that numba rejects does not keep the others from compiling
        try:
            load_kernel(job["path"], [tuple(a) for a in job["sig"]])
        except Exception as e:  # noqa: BLE001 - reported through stderr and the marker
            with open(failed_marker(job["path"]), "w", encoding="utf-8") as f:
                f.write(repr(e))
            failed.append(f"{os.path.basename(job['path'])}: {e!r}"[:1000])
            continue
        mark_ready(job["path"])
    if failed:
        sys.stderr.write("\n".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
