"""Every primitive on every placement combination of its inputs, on a 1-D mesh of all ranks
and (with 4 ranks) a 2x2 mesh, against the single-process result: values, and the
gradients of a weighted sum of the output (reverse mode through the sharded ops)."""

import itertools
import sys

import numpy as np

import primflow as pf
import primflow.distributed as dist
from primflow import prims
from primflow.core.primitive import get_primitive
from primflow.prims.sharding import SHARDING_RULES

pf.set_default_dtype("float64")
R, S, P = dist.Replicate, dist.Shard, dist.Partial
rng = np.random.default_rng(0)


def u(*shape):
    return rng.uniform(0.5, 2.0, shape)


A, B = u(5, 3), u(5, 3)
IDX = np.array([[4], [0], [2], [0]])
# the elementwise primitives come from the registry (each declares its CUDA form, whose
# placeholders give its arity), so a newly declared one gets a case without editing this file
_ELEMENTWISE = {name: get_primitive(name).lowering.c for name in pf.primitives()
                if get_primitive(name).family.name in ("elementwise", "compare")
                and get_primitive(name).lowering is not None
                and get_primitive(name).lowering.c is not None}
UNARY = tuple(sorted(n for n, c in _ELEMENTWISE.items() if "{1}" not in c))
BINARY = tuple(sorted(n for n, c in _ELEMENTWISE.items() if "{1}" in c))
NONDIFF = {"ceil", "floor", "round", "sign"}
CASES = []
for name in UNARY:
    CASES.append((name, (A > 1.2,) if name == "logical_not" else (A,), {}))
for name in BINARY:
    args = (A > 1.2, B > 1.2) if name.startswith("logical") else (A, B)
    CASES.append((name, args, {}))
CASES += [
    ("integer_pow", (A,), {"y": 3}),
    ("select", (A > B, A, B), {}),
    ("convert_element_type", (A,), {"dtype": pf.float32}),
    ("reduce_sum", (A,), {"axes": (0,)}), ("reduce_sum", (A,), {"axes": (0, 1)}),
    ("reduce_sum", (A,), {"axes": (1,)}),
    ("reduce_max", (A,), {"axes": (0,)}), ("reduce_min", (A,), {"axes": (1,)}),
    ("argmax", (A,), {"axis": 0, "index_dtype": pf.int64}),
    ("argmin", (A,), {"axis": 1, "index_dtype": pf.int64}),
    ("cumsum", (A,), {"axis": 0, "reverse": False}),
    ("cumsum", (A,), {"axis": 1, "reverse": True}),
    ("broadcast_in_dim", (A,), {"shape": (2, 5, 3), "broadcast_dimensions": (1, 2)}),
    ("broadcast_in_dim", (u(5, 1),), {"shape": (5, 3), "broadcast_dimensions": (0, 1)}),
    ("reshape", (A,), {"shape": (15,)}), ("reshape", (u(4, 6),), {"shape": (24,)}),
    ("reshape", (u(4, 6),), {"shape": (2, 2, 6)}), ("reshape", (u(4, 6),), {"shape": (4, 3, 2)}),
    ("reshape", (u(8,),), {"shape": (4, 2)}), ("reshape", (A,), {"shape": (5, 1, 3)}),
    ("transpose", (A,), {"perm": (1, 0)}),
    ("slice", (A,), {"start": (1, 0), "limit": (4, 3), "strides": (1, 1)}),
    ("slice", (A,), {"start": (0, 0), "limit": (5, 2), "strides": (1, 2)}),
    ("pad", (A, np.array(0.5)), {"config": ((1, 0, 0), (0, 2, 1))}),
    ("pad", (A, np.array(0.5)), {"config": ((0, 0, 0), (1, 1, 0))}),
    ("concatenate", (A, u(2, 3)), {"axis": 0}), ("concatenate", (A, u(5, 2)), {"axis": 1}),
    ("gather", (A, IDX), {}),
    ("scatter_add", (A, IDX, u(4, 3)), {}),
    ("dot_general", (A, u(3, 4)), {"contracting": ((1,), (0,)), "batch": ((), ())}),
    ("dot_general", (u(2, 5, 3), u(2, 3, 4)), {"contracting": ((2,), (1,)),
                                               "batch": ((0,), (0,))}),
    ("dot_general", (A, B), {"contracting": ((0,), (0,)), "batch": ((), ())}),
]
# complex parts, FFT and decompositions: batched matrices [2, 3, 3]
Z = A + 1j * B
M = u(2, 3, 3) + 3 * np.eye(3)
SPD = M @ np.swapaxes(M, -1, -2)
CASES += [
    ("complex", (A, B), {}), ("real", (Z,), {}), ("imag", (Z,), {}), ("conj", (Z,), {}),
    ("fft", (A,), {"kind": "rfft", "axes": (1,), "n_last": None, "norm": "backward"}),
    ("fft", (Z,), {"kind": "fft", "axes": (0,), "n_last": None, "norm": "ortho"}),
    ("fft", (Z[:, :2],), {"kind": "irfft", "axes": (1,), "n_last": 3, "norm": "forward"}),
    ("solve", (M, u(2, 3, 2)), {}),
    ("triangular_solve", (M, u(2, 3, 2)), {"lower": True, "transpose": False,
                                           "unit_diagonal": False}),
    ("cholesky", (SPD,), {}), ("slogdet", (M,), {}), ("eigh", (SPD,), {}), ("lu", (M,), {}),
    ("qr", (u(2, 3, 2),), {}), ("svd", (u(2, 3, 2),), {}),
    ("lu_pivots", (np.array([[2, 0, 1], [0, 1, 2]]),), {}),
    ("lu_permutation", (np.array([[3, 3, 3], [1, 2, 3]]),), {}),
]


def layouts(arr, mesh):
    """Placement lists to try for an input (Partial only for floats)."""
    ndim = arr.ndim
    floating = arr.dtype.kind in "fc"
    one = [R()] + [S(d) for d in range(ndim)] + ([P()] if floating else [])
    if mesh.ndim == 1:
        return [[p] for p in one]
    out = []
    for a, b in itertools.product(one, one):
        if a.is_shard() and b.is_shard() and a.get_dim() == b.get_dim():
            continue
        out.append([a, b])
    return out


def as_tensor(a, diff):
    t = pf.to_tensor(a)
    if diff:
        t.stop_gradient = False
    return t


CURRENT = [""]


def real_loss(out, weights):
    """A real scalar of ``out`` (backward needs one: complex outputs need a chosen seed)."""
    loss = (out * weights).sum()
    return loss.real() if loss.dtype.is_complex else loss


def run(mesh, max_combos):
    failures, checked = [], 0
    for name, args, params in CASES:
        prim = getattr(prims, name)
        diff = [a.dtype.kind in "fc" and name not in NONDIFF for a in args]
        plain = [as_tensor(a, d) for a, d in zip(args, diff)]
        ref = prim(*plain, **params)
        want_grad = ref.dtype.is_floating and any(diff) and not ref.stop_gradient
        weights = pf.to_tensor(rng.uniform(-1, 1, ref.shape)).astype(ref.dtype)
        if want_grad:
            ref_grads = pf.grad(real_loss(ref, weights), [t for t, d in zip(plain, diff) if d])
        combos = list(itertools.product(*[layouts(a, mesh) for a in args]))
        if len(combos) > max_combos:
            picks = rng.choice(len(combos), max_combos, replace=False)
            combos = [combos[i] for i in sorted(picks)]
        for combo in combos:
            what = f"{name}{params} with {combo} on mesh {mesh.shape}"
            CURRENT[0] = what
            if True:  # an exception ends the job (on one rank only it could not be collected)
                dargs = [dist.shard_tensor(as_tensor(a, d), mesh, pl)
                         for a, d, pl in zip(args, diff, combo)]
                out = prim(*dargs, **params)
                got = out.numpy()
                if got.shape != tuple(ref.shape) or not np.allclose(got, ref.numpy(),
                                                                   rtol=1e-6, atol=1e-12):
                    failures.append(f"{what}: value differs")
                    continue
                if want_grad:
                    grads = pf.grad(real_loss(out, weights),
                                    [t for t, d in zip(dargs, diff) if d])
                    for g, rg in zip(grads, ref_grads):
                        if not np.allclose(g.numpy(), rg.numpy(), rtol=1e-10, atol=1e-12):
                            failures.append(f"{what}: gradient differs")
                checked += 1
    return failures, checked


n = dist.get_world_size()
_hook = sys.excepthook
sys.excepthook = lambda *a: (print("while checking", CURRENT[0], file=sys.stderr), _hook(*a))
which = sys.argv[1] if len(sys.argv) > 1 else "1d"
if which == "1d":  # every combination
    meshes = [(dist.ProcessMesh(list(range(n)), dim_names=["x"]), 10_000)]
else:  # a 2 x (n/2) mesh: a sample of the (many more) combinations
    half = max(1, n // 2)
    meshes = [(dist.ProcessMesh([list(range(half)), list(range(half, 2 * half))],
                                dim_names=["a", "b"]), 5)]
all_failures, total = [], 0
for mesh, cap in meshes:
    f, c = run(mesh, cap)
    all_failures += f
    total += c
covered = {name for name, _, _ in CASES}
# creation primitives have no tensor inputs; the collectives act on local tensors only (they
# are what relayouts run: every case above exercises them); control flow (cond, while,
# scan) runs unrolled on distributed tensors, its regions' primitives being the cases above
# (test_dist_api.py runs it)
control_flow = {name for name in pf.primitives() if get_primitive(name).multiple_results}
missing = sorted(set(pf.primitives()) - covered - control_flow - {
    "full", "iota", "random_uniform", "random_normal", "all_reduce", "all_gather",
    "reduce_scatter", "all_to_all"})
if dist.get_rank() == 0:
    print(f"checked {total} combinations; {len(all_failures)} failures")
    for line in all_failures[:40]:
        print("FAIL", line)
    if missing:
        print("primitives without a table case:", missing)
    print("rules:", len(SHARDING_RULES))
sys.exit(1 if all_failures or missing else 0)
