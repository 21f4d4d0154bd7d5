"""The collective primitives in a world of one process, where each is the identity
(their multi-process values and adjoints are tested under mpiexec: tests/distributed)."""

from __future__ import annotations

from primflow import prims

from .base import OpInfo, with_params


def _collective(prim, **fixed_params):
    def op(x, **kw):
        return getattr(prims, prim)(x, ranks=(0,), **fixed_params, **kw)

    return op


ENTRIES = [
    OpInfo("all_reduce_sum", _collective("all_reduce", op="sum"), lambda x: x,
           with_params([((2, 3), {}), ((4,), {})]), prims=("all_reduce",)),
    OpInfo("all_reduce_avg", _collective("all_reduce", op="avg"), lambda x: x,
           with_params([((3,), {})]), prims=("all_reduce",)),
    OpInfo("all_reduce_max", _collective("all_reduce", op="max"), lambda x: x,
           with_params([((2, 3), {})]), prims=("all_reduce",)),
    # (its rules divide by x: out / x is 1 only to rounding, which the differences of the
    # third and fourth derivatives amplify; away from 0)
    OpInfo("all_reduce_prod", _collective("all_reduce", op="prod"), lambda x: x,
           with_params([((2, 3), {})]), prims=("all_reduce",), domain=(0.5, 2.0),
           tol={"order3": (1e-9, 1e-5), "order4": (1e-7, 1e-5)}),
    OpInfo("all_gather", _collective("all_gather"), lambda x, axis, sizes: x,
           with_params([((2, 3), {"axis": 1, "sizes": (3,)}),
                        ((4,), {"axis": 0, "sizes": (4,)})]), prims=("all_gather",)),
    OpInfo("reduce_scatter", _collective("reduce_scatter", op="sum"),
           lambda x, axis, sizes: x,
           with_params([((2, 3), {"axis": 0, "sizes": (2,)})]), prims=("reduce_scatter",)),
    OpInfo("all_to_all", _collective("all_to_all"),
           lambda x, split_axis, concat_axis, split_sizes, concat_sizes: x,
           with_params([((2, 3), {"split_axis": 0, "concat_axis": 1, "split_sizes": (2,),
                                  "concat_sizes": (3,)})]), prims=("all_to_all",)),
]
