# pf.jit of functions called with distributed tensors compiles one program per rank whose
# collectives are ops (the arguments' local blocks are its inputs, their layouts part of the
# cache signature); results equal the eager call's, float64
import warnings

import numpy as np

import primflow as pf
import primflow.distributed as dist

pf.set_default_dtype("float64")
rank, size = dist.get_rank(), dist.get_world_size()
mesh = dist.ProcessMesh(list(range(size)), dim_names=["x"])
rng = np.random.default_rng(5)
X, W0, W1 = rng.standard_normal((6, 3)), rng.standard_normal((3, 4)), rng.standard_normal((4, 2))


def close(what, got, want):
    assert np.allclose(got, want, rtol=1e-12, atol=1e-13), (rank, what, got, want)


def tensor_parallel(x, weights, scale=1.0):
    # column- then row-sharded weights: the second matmul's result is Partial, the
    # reshard to Replicate an all_reduce
    h = pf.tanh(pf.matmul(x, weights["w0"]))
    y = pf.matmul(h, weights["w1"]) * scale
    return dist.reshard(y, mesh, [dist.Replicate()]), y.sum()


x = dist.shard_tensor(pf.to_tensor(X), mesh, [dist.Replicate()])
weights = {"w0": dist.shard_tensor(pf.to_tensor(W0), mesh, [dist.Shard(1)]),
           "w1": dist.shard_tensor(pf.to_tensor(W1), mesh, [dist.Shard(0)])}
compiled = pf.jit(tensor_parallel)
for _ in range(2):  # the second call runs the cached program
    y, s = compiled(x, weights, scale=2.0)
    y_eager, s_eager = tensor_parallel(x, weights, scale=2.0)
    assert isinstance(y, dist.DistTensor) and y.placements == y_eager.placements
    assert s.placements == s_eager.placements, (s.placements, s_eager.placements)
    close("tensor parallel output", y.numpy(), y_eager.numpy())
    close("tensor parallel output (single process)", y.numpy(), 2 * np.tanh(X @ W0) @ W1)
    close("partial sum", s.numpy(), s_eager.numpy())
text = compiled.lower(x, weights, scale=2.0).as_text()
group = "(" + ",".join(map(str, range(size))) + ("," if size == 1 else "") + ")"
assert "= all_reduce(" in text and f"ranks={group}" in text, text

# the layouts key the cache: the same blocks sharded by rows instead give another program
xs = dist.shard_tensor(pf.to_tensor(X), mesh, [dist.Shard(0)])


@pf.jit
def gram(a):
    return pf.matmul(a.T, a)


g = gram(xs)
g_eager = gram.fun(xs)
assert g.placements == g_eager.placements
close("gram of a row-sharded matrix", g.numpy(), X.T @ X)
full = dist.shard_tensor(pf.to_tensor(X[: 6 // size]), mesh, [dist.Replicate()])
close("gram of a replicated matrix", gram(full).numpy(), X[: 6 // size].T @ X[: 6 // size])
assert gram.fun is not None and "all_gather" not in gram.lower(full).as_text()

# an argument that requires grad with grad enabled runs eagerly (once noted) and keeps the
# tape: the gradient equals the single-process one
w = dist.shard_tensor(pf.to_tensor(W0), mesh, [dist.Replicate()], stop_gradient=False)
loss_fn = pf.jit(lambda a, b: pf.matmul(a, b).pow(2).sum())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loss_fn(xs, w).backward()
    loss_fn(xs, w)
notes = [str(c.message) for c in caught if "runs eagerly" in str(c.message)]
assert len(notes) == 1 and "requires grad" in notes[0], notes
close("gradient through the eager fallback", w.grad.numpy(), 2 * X.T @ (X @ W0))
with pf.no_grad():  # the same function compiles under no_grad
    close("loss under no_grad", float(loss_fn(xs, w).numpy()), ((X @ W0) ** 2).sum())
if rank == 0:
    print("jit on dtensors ok")
