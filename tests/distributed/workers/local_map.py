# dist.local_map and the cotangent layouts of local blocks (grad_placements, from_local of a
# Partial), against single-process values and closed forms, float64
import numpy as np

import primflow as pf
import primflow.distributed as dist

pf.set_default_dtype("float64")
rank, size = dist.get_rank(), dist.get_world_size()
mesh = dist.ProcessMesh(list(range(size)), dim_names=["x"])
rng = np.random.default_rng(3)
X, W = rng.standard_normal((7, 3)), rng.standard_normal((3, 2))  # 7 rows: uneven shards


def close(what, got, want):
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (rank, what, got, want)


# 1. a row-local matmul: Shard(0) data, Replicate weight -> Shard(0) result; the weight's
#    gradient (a sum over rows, i.e. over ranks) equals the single-process one
x = dist.shard_tensor(pf.to_tensor(X), mesh, [dist.Shard(0)])
w = dist.shard_tensor(pf.to_tensor(W), mesh, [dist.Replicate()], stop_gradient=False)
matmul = dist.local_map(lambda xl, wl: pf.matmul(xl, wl), out_placements=[dist.Shard(0)],
                        in_placements=([dist.Shard(0)], [dist.Replicate()]))
y = matmul(x, w)
assert y.placements == [dist.Shard(0)] and y.shape == [7, 2]
close("local_map forward", y.numpy(), X @ W)
(y * y).sum().backward()
close("gradient through local_map", w.grad.numpy(), 2 * X.T @ (X @ W))

# 2. a Partial result: each rank's block sum, reduced on read
local_sum = dist.local_map(lambda t: t.sum(), out_placements=[dist.Partial()])
s = local_sum(x)
assert s.placements[0].is_partial()
close("partial result", s.numpy(), X.sum())

# 3. in_placements are checked, or resharded on request
replicated = dist.shard_tensor(pf.to_tensor(X), mesh, [dist.Replicate()])
try:
    matmul(replicated, w)
    raise AssertionError("a placement mismatch must raise")
except ValueError as e:
    assert "in_placements[0]" in str(e) and "reshard_inputs=True" in str(e), e
resharding = dist.local_map(lambda xl: xl * 2.0, out_placements=[dist.Shard(0)],
                            in_placements=([dist.Shard(0)],), reshard_inputs=True)
close("reshard_inputs", resharding(replicated).numpy(), 2 * X)

# 4. grad_placements: the same loss on every rank from a Replicate tensor's block. By
#    default each rank's cotangent is a contribution (Partial sum: size times the one-rank
#    gradient); Replicate declares it is already the whole one
for grad_placements, factor in ((None, size), ([dist.Replicate()], 1)):
    v = dist.shard_tensor(pf.to_tensor(W), mesh, [dist.Replicate()], stop_gradient=False)
    block = dist.dtensor_to_local(v, grad_placements=grad_placements)
    (block ** 3).sum().backward()
    close(f"grad_placements={grad_placements}", v.grad.numpy(), factor * 3 * W ** 2)
try:
    dist.dtensor_to_local(x, grad_placements=[dist.Replicate()])
    raise AssertionError("a sharded tensor's block cotangent must stay sharded")
except ValueError as e:
    assert "grad_placements" in str(e) and "Shard(dim=0)" in str(e), e

# 5. from_local of Partial blocks: every rank's block gets the whole cotangent
mine = pf.to_tensor(W * (rank + 1), stop_gradient=False)
total = dist.dtensor_from_local(mine, mesh, [dist.Partial()])
(total * total).sum().backward()
S = W * sum(r + 1 for r in range(size))
close("from_local of a Partial: cotangent of each block", mine.grad.numpy(), 2 * S)
if rank == 0:
    print("local_map ok")
