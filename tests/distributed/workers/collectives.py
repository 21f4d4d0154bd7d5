# Paddle's collectives on each rank's tensors, on the world and on a sub-group
import sys

import numpy as np

import primflow as pf
import primflow.distributed as dist

pf.set_default_dtype("float64")
dist.init_parallel_env()
r, n = dist.get_rank(), dist.get_world_size()
mine = np.array([1.0 + r, 10.0 * r])
every = [np.array([1.0 + q, 10.0 * q]) for q in range(n)]


def same(what, got, want):
    if not np.allclose(np.asarray(got), np.asarray(want)):
        print(f"rank {r}: {what}: {got} != {want}")
        sys.exit(1)


for op, f in ((dist.ReduceOp.SUM, np.sum), (dist.ReduceOp.MAX, np.max),
              (dist.ReduceOp.MIN, np.min), (dist.ReduceOp.PROD, np.prod),
              (dist.ReduceOp.AVG, np.mean)):
    x = pf.to_tensor(mine)
    dist.all_reduce(x, op=op)
    same(f"all_reduce {op}", x.numpy(), f(every, axis=0))
# all_reduce reuses a buffer only its tensor holds: tensors sharing it keep their values
x = pf.to_tensor(mine)
kept = x.detach()
dist.all_reduce(x)
same("all_reduce of a shared buffer", x.numpy(), np.sum(every, axis=0))
same("a tensor sharing the buffer is unchanged", kept.numpy(), mine)
x = pf.to_tensor(mine) * 1.0
version = x._version
dist.all_reduce(x, op=dist.ReduceOp.AVG)
same("all_reduce in place", x.numpy(), np.mean(every, axis=0))
assert x._version == version + 1
# ranks passing different shapes of one size: caught before the reduction the first time a
# shape is seen, after it (the check overlaps the reduction) once both shapes have passed;
# either way every rank is left ready for the next collective
for seen in (False, True):
    if seen:
        dist.all_reduce(pf.ones([2, 3]))
        dist.all_reduce(pf.ones([3, 2]))
    for owned in (True, False):
        x = pf.ones([2, 3] if r == 0 else [3, 2])
        keep = None if owned else x.detach()  # a second holder: reduced out of place
        try:
            dist.all_reduce(x)
            raise AssertionError("a shape mismatch must raise")
        except ValueError as e:
            assert "ranks disagree" in str(e) and "rank 0: shape [2, 3]" in str(e), e
dist.barrier()
# under pf.jit the collectives are ops of the program; gradients go through them
def doubled_sum(t):
    y = t * 2.0
    dist.all_reduce(y)
    return y


jitted = pf.jit(doubled_sum)
same("all_reduce under pf.jit", jitted(pf.to_tensor(mine)).numpy(), 2 * np.sum(every, axis=0))
assert "= all_reduce(" in jitted.lower(pf.to_tensor(mine)).as_text()
S = 2 * np.sum(every, axis=0)
# each rank's loss sum(S^2) depends on every rank's input: the gradient sums n copies
gx = pf.grad(lambda t: (jitted(t) ** 2).sum())(pf.to_tensor(mine))
same("gradient through a jitted all_reduce", gx.numpy(), n * 2 * S * 2)


def gathered(t):
    parts = []
    dist.all_gather(parts, t * 1.0)
    return pf.stack(parts)


jitted_gather = pf.jit(gathered)
same("all_gather under pf.jit", jitted_gather(pf.to_tensor(mine)).numpy(), np.stack(every))
assert "= all_gather(" in jitted_gather.lower(pf.to_tensor(mine)).as_text()
out = []
dist.all_gather(out, pf.to_tensor(mine))
same("all_gather", np.stack([t.numpy() for t in out]), np.stack(every))
y = pf.zeros([2])
dist.reduce_scatter(y, [pf.to_tensor(mine * (j + 1)) for j in range(n)])
same("reduce_scatter", y.numpy(), sum(every) * (r + 1))
got = []
dist.alltoall([pf.to_tensor([100.0 * r + j]) for j in range(n)], got)
same("alltoall", [t.item() for t in got], [100.0 * q + r for q in range(n)])
b = pf.to_tensor(mine)
dist.broadcast(b, src=n - 1)
same("broadcast", b.numpy(), every[-1])
if r == 0:
    dist.send(pf.to_tensor([7.0, 8.0]), dst=1)
elif r == 1:
    z = pf.zeros([2])
    dist.recv(z, src=0)
    same("send/recv", z.numpy(), [7.0, 8.0])
g = dist.new_group([0, 1])
if g.is_member():
    s = pf.to_tensor(mine)
    dist.all_reduce(s, group=g)
    same("group all_reduce", s.numpy(), every[0] + every[1])
    assert dist.get_rank(g) == r and dist.get_world_size(g) == 2
else:
    assert g.rank == -1
dist.barrier()
# gradient of broadcast: the sum of all ranks' cotangents arrives at the source
v = pf.to_tensor(mine, stop_gradient=False)
w = v * 1.0
dist.broadcast(w, src=0)
gv, = pf.grad((w * (r + 1)).sum(), v)
same("broadcast adjoint", gv.numpy(), np.full(2, n * (n + 1) / 2 if r == 0 else 0.0))
# reduce_scatter / alltoall adjoints
parts = [pf.to_tensor(mine * (j + 1), stop_gradient=False) for j in range(n)]
y = pf.zeros([2])
dist.reduce_scatter(y, [p * 1.0 for p in parts])
grads = pf.grad((y * (r + 1)).sum(), parts)
same("reduce_scatter adjoint", [gr.numpy() for gr in grads],
     [np.full(2, j + 1.0) for j in range(n)])
# Taylor series through all_reduce (pf.jet, derivative form): the product's series is the
# product of the members' polynomials, the sum's the sum of their coefficients
from math import factorial  # noqa: E402
from primflow.prims import all_reduce as all_reduce_prim  # noqa: E402

world = tuple(range(n))
derivs = [np.array([0.5 + r, 1.0]), np.array([0.1 * r, -0.3]), np.array([0.2, 0.05 * r])]


def normalised(q):  # rank q's coefficients x(t) = sum_k c_k t^k
    return [np.array([1.0 + q, 10.0 * q])] + [
        np.array([0.5 + q, 1.0]) / 1, np.array([0.1 * q, -0.3]) / 2,
        np.array([0.2, 0.05 * q]) / 6]


for op in ("prod", "sum"):
    out, series = pf.jet(lambda t, op=op: all_reduce_prim(t, op=op, ranks=world),
                         (pf.to_tensor(mine),), ([pf.to_tensor(d) for d in derivs],))
    want = normalised(0)
    for q in range(1, n):
        other = normalised(q)
        want = ([sum(want[j] * other[k - j] for j in range(k + 1)) for k in range(4)]
                if op == "prod" else [a + b for a, b in zip(want, other)])
    same(f"jet of all_reduce {op}", [out.numpy()] + [s.numpy() for s in series],
         [want[0]] + [want[k] * factorial(k) for k in range(1, 4)])
print("collectives ok")
