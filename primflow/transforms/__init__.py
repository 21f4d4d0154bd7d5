"""Function transforms that are traces: vmap (jit comes with the compiler issue)."""

from .vmap import BatchTrace, BatchTracer, vmap
