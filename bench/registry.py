"""The workloads and the frameworks the harness knows about.

Adding a workload: write ``bench/workloads/wN_name.py`` (see ``bench/workloads/__init__.py``
for what it must expose) and add one line to ``WORKLOADS`` below. Nothing else changes.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

# id -> module implementing it. Order is the order of the printed tables.
WORKLOADS: dict[str, str] = {
    "W1": "bench.workloads.w1_tanh_derivatives",
    "W2": "bench.workloads.w2_biharmonic",
    "W3": "bench.workloads.w3_plate_step",
    "W4": "bench.workloads.w4_hessian_jacobian",
    "W5": "bench.workloads.w5_eager_overhead",
    "W6": "bench.workloads.w6_matmul",
    "W7": "bench.workloads.w7_fused",
    "W8": "bench.workloads.w8_jit",
}


@dataclass(frozen=True)
class Framework:
    name: str  # the key used on the command line and in JSON
    label: str  # column header
    module: str  # what must be importable for its configurations to run
    side: str  # "primflow": runs with the primflow interpreter; "peer": with --python


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    Framework("numpy", "NumPy", "numpy", "primflow"),
    Framework("primflow", "primflow", "primflow", "primflow"),
    Framework("torch", "PyTorch", "torch", "peer"),
    Framework("jax", "JAX eager", "jax", "peer"),
    Framework("jax_jit", "JAX jit", "jax", "peer"),
)}

PEERS = tuple(n for n, f in FRAMEWORKS.items() if f.side == "peer")


@dataclass(frozen=True)
class Config:
    """One measurement, run in its own process: ``python -m bench.run_one ID framework name``."""

    framework: str
    name: str
    description: str = ""
    repeat: bool = True  # False: run once even with --rounds (e.g. a long memory check)
    quick: bool = True  # False: skipped with --quick (e.g. the larger sizes of a sweep)


def normalize_id(workload_id: str) -> str:
    wid = workload_id.strip().upper()
    if wid not in WORKLOADS:
        known = ", ".join(WORKLOADS) or "none"
        raise KeyError(f"unknown workload {workload_id!r} (implemented: {known})")
    return wid


def load(workload_id: str):
    """The module implementing ``workload_id`` (imports no framework)."""
    return importlib.import_module(WORKLOADS[normalize_id(workload_id)])
