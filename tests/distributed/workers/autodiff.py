"""Autodiff through distributed tensors against one process: a Replicate parameter on
Shard(0) data (Partial gradient, reduced once), a column- then row-parallel MLP trained
with SGD (same losses), a Laplacian residual on sharded points (pf.grad with
create_graph=True, then its gradient), forward mode (pf.jvp), and the collectives'
adjoints."""

import sys

import numpy as np

import primflow as pf
import primflow.distributed as dist

pf.set_default_dtype("float64")
R, S, P = dist.Replicate, dist.Shard, dist.Partial
n, rank = dist.get_world_size(), dist.get_rank()
mesh = dist.ProcessMesh(list(range(n)), dim_names=["x"])
rng = np.random.default_rng(1)
fail = []


def close(what, a, b, rtol=1e-10):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=1e-12):
        fail.append(f"{what}: {a} vs {b}")


# 1. Replicate parameter, Shard(0) data: the gradient comes out reduced, Replicate
X = rng.standard_normal((7, 3))
W = rng.standard_normal((3, 2))
w0 = pf.to_tensor(W, stop_gradient=False)
ref = pf.tanh(pf.to_tensor(X) @ w0).square().mean()
ref.backward()
w = dist.shard_tensor(pf.to_tensor(W), mesh, [R()], stop_gradient=False)
x = dist.shard_tensor(pf.to_tensor(X), mesh, [S(0)])
loss = pf.tanh(x @ w).square().mean()
loss.backward()
assert w.grad.placements == [P()], w.grad.placements  # Partial: reduced when needed
close("replicated weight gradient", w.grad.numpy(), w0.grad.numpy())
dist.reduce_gradients([w])
assert w.grad.placements == [R()], w.grad.placements
close("replicated weight gradient, reduced", w.grad.numpy(), w0.grad.numpy())

# 2. column-parallel then row-parallel MLP, SGD: the same losses as one process
H = 6
W1, B1, W2 = (rng.standard_normal((3, H)) * 0.5, rng.standard_normal(H) * 0.1,
              rng.standard_normal((H, 2)) * 0.5)
Y = rng.standard_normal((7, 2))


def train(params, data, target, steps=5, lr=0.1):
    losses = []
    for _ in range(steps):
        w1, b1, w2 = params
        h = pf.tanh(data @ w1 + b1)
        loss = ((h @ w2 - target) ** 2).mean()
        grads = pf.grad(loss, params)
        losses.append(float(loss.numpy()))
        with pf.no_grad():
            for p, g in zip(params, grads):
                p.set_value(p - lr * g)
    return losses


plain = [pf.to_tensor(a, stop_gradient=False) for a in (W1, B1, W2)]
ref_losses = train(plain, pf.to_tensor(X), pf.to_tensor(Y))
sharded = [dist.shard_tensor(pf.to_tensor(W1), mesh, [S(1)], stop_gradient=False),
           dist.shard_tensor(pf.to_tensor(B1), mesh, [S(0)], stop_gradient=False),
           dist.shard_tensor(pf.to_tensor(W2), mesh, [S(0)], stop_gradient=False)]
xr = dist.shard_tensor(pf.to_tensor(X), mesh, [R()])
losses = train(sharded, xr, pf.to_tensor(Y))
close("tensor-parallel MLP losses", losses, ref_losses)
assert sharded[0].placements == [S(1)] and sharded[2].placements == [S(0)]

# 3. a Laplacian residual on sharded collocation points, differentiated again
PTS = rng.uniform(-1, 1, (9, 2))
V1, V2 = rng.standard_normal((2, 8)) * 0.7, rng.standard_normal((8, 1)) * 0.7


def residual_loss(pts, v1, v2):
    u = pf.tanh(pts @ v1) @ v2
    du, = pf.grad(u.sum(), pts, create_graph=True)
    lap = 0
    for i in range(2):
        d2, = pf.grad(du[:, i].sum(), pts, create_graph=True)
        lap = lap + d2[:, i]
    return (lap ** 2).mean()


v1p, v2p = pf.to_tensor(V1, stop_gradient=False), pf.to_tensor(V2, stop_gradient=False)
ref_l = residual_loss(pf.to_tensor(PTS, stop_gradient=False), v1p, v2p)
ref_g = pf.grad(ref_l, [v1p, v2p])
v1d = dist.shard_tensor(pf.to_tensor(V1), mesh, [R()], stop_gradient=False)
v2d = dist.shard_tensor(pf.to_tensor(V2), mesh, [R()], stop_gradient=False)
pts = dist.shard_tensor(pf.to_tensor(PTS), mesh, [S(0)], stop_gradient=False)
lap_l = residual_loss(pts, v1d, v2d)
close("Laplacian residual loss", lap_l.numpy(), ref_l.numpy())
for g, rg in zip(pf.grad(lap_l, [v1d, v2d]), ref_g):
    close("Laplacian residual parameter gradient", g.numpy(), rg.numpy())

# 4. forward mode over sharded inputs
tang = rng.standard_normal((7, 3))
_, ref_t = pf.jvp(lambda a: pf.sin(a @ pf.to_tensor(W)).sum(0), (pf.to_tensor(X),),
                  (pf.to_tensor(tang),))
_, t = pf.jvp(lambda a: pf.sin(a @ pf.to_tensor(W)).sum(0), (x,),
              (dist.shard_tensor(pf.to_tensor(tang), mesh, [S(0)]),))
close("jvp through sharded ops", t.numpy(), ref_t.numpy())

# 4b. functional transforms over sharded inputs: grad of grad, hessian (vmap of jvp of
# grad), Taylor-mode Laplacian
A2 = rng.uniform(0.1, 1, (5, 2))
xs = dist.shard_tensor(pf.to_tensor(A2), mesh, [S(0)])
f = lambda a: (pf.sin(a) ** 2).sum()  # noqa: E731
close("pf.grad(f)", pf.grad(f)(xs).numpy(), 2 * np.sin(A2) * np.cos(A2))
close("grad of grad", pf.grad(lambda a: pf.grad(f)(a).sum())(xs).numpy(), 2 * np.cos(2 * A2))
h = pf.hessian(lambda a: (a ** 3).sum())(dist.shard_tensor(pf.to_tensor(A2[0]), mesh, [S(0)]))
close("hessian", h.numpy(), np.diag(6 * A2[0]))
lap = pf.autograd.laplacian(lambda p: (p ** 3).sum(-1, keepdim=True), xs)
close("Taylor-mode Laplacian", lap.numpy().ravel(), (6 * A2).sum(1))

# 5. the collectives' adjoints (objective = sum over ranks), checked by finite differences
v = pf.to_tensor([1.0 + rank, 2.0 - rank], stop_gradient=False)
y = v * 1.0
dist.all_reduce(y)
g, = pf.grad((y ** 3).sum(), v, create_graph=True)
total = sum(np.array([1.0 + r, 2.0 - r]) for r in range(n))
close("all_reduce adjoint", g.numpy(), n * 3 * total ** 2)
g2, = pf.grad(g.sum(), v)  # second order through the adjoint collective
close("all_reduce second order", g2.numpy(), n * n * 6 * total)
out = []
dist.all_gather(out, v * 2.0)
gg, = pf.grad(sum((t * (i + 1)).sum() for i, t in enumerate(out)), v)
close("all_gather adjoint", gg.numpy(), np.full(2, 2.0 * n * (rank + 1)))
mx = v * 1.0
dist.all_reduce(mx, op=dist.ReduceOp.MAX)
gm, = pf.grad(mx.sum(), v)
top = np.array([1.0 + n - 1, 2.0])
mine = np.array([1.0 + rank, 2.0 - rank])
close("all_reduce MAX adjoint", gm.numpy(), np.where(mine == top, n, 0.0))

if fail:
    print(f"rank {rank}:", *fail, sep="\n  ")
    sys.exit(1)
if rank == 0:
    print("autodiff ok")
