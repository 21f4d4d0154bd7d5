# Paddle 3's hybrid example: two meshes, a layer on each, reshard between them (4 ranks);
# the losses match one process. Also: ZeRO-1 shard_optimizer and a data-parallel mesh dim.
import sys

import numpy as np

import primflow as paddle
import primflow.distributed as dist

paddle.set_default_dtype("float64")
n = dist.get_world_size()
mesh0 = dist.ProcessMesh([[0, 1]] if n == 4 else [[0]], dim_names=["dp", "mp"])
mesh1 = dist.ProcessMesh([[2, 3]] if n == 4 else [[0]], dim_names=["dp", "mp"])
rng = np.random.default_rng(3)
W0, W1 = rng.standard_normal((3, 8)) * 0.5, rng.standard_normal((8, 2)) * 0.5
X, Y = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))


class PipelineModel(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.w0 = dist.shard_tensor(paddle.nn.Parameter(paddle.to_tensor(W0)), mesh0,
                                    [dist.Replicate(), dist.Shard(1)])
        self.w1 = dist.shard_tensor(paddle.nn.Parameter(paddle.to_tensor(W1)), mesh1,
                                    [dist.Replicate(), dist.Shard(0)])

    def forward(self, x):
        h = paddle.tanh(paddle.matmul(x, self.w0))            # on mesh0, h: Shard(1)
        h = dist.reshard(h, mesh1, [dist.Replicate(), dist.Shard(1)])  # point-to-point
        return paddle.matmul(h, self.w1)                       # on mesh1: Partial


model = PipelineModel()
opt = dist.shard_optimizer(paddle.optimizer.Adam(0.05, parameters=model.parameters()),
                           dist.ShardingStage1("mp"))
x = dist.shard_tensor(paddle.to_tensor(X), mesh0, [dist.Replicate(), dist.Replicate()])
y = dist.shard_tensor(paddle.to_tensor(Y), mesh1, [dist.Replicate(), dist.Replicate()])
losses = []
for step in range(4):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    opt.clear_grad()
    if dist.get_rank() in mesh1.process_ids:
        losses.append(float(loss.numpy()))

# the same on one process, plain tensors
w0, w1 = (paddle.to_tensor(W0, stop_gradient=False), paddle.to_tensor(W1, stop_gradient=False))
ref_opt = paddle.optimizer.Adam(0.05, parameters=[w0, w1])
ref = []
for step in range(4):
    loss = ((paddle.tanh(paddle.to_tensor(X) @ w0) @ w1 - paddle.to_tensor(Y)) ** 2).mean()
    loss.backward()
    ref_opt.step()
    ref_opt.clear_grad()
    ref.append(float(loss.numpy()))
# cross-mesh reshards of other shapes and placements (the general path: replicate on the
# source mesh, send, slice on arrival), values and gradients
Z = rng.standard_normal((5, 4))
flat = dist.ProcessMesh([0, 1, 2, 3] if n == 4 else [0])
last = dist.ProcessMesh([3] if n == 4 else [0])
z0 = dist.shard_tensor(paddle.to_tensor(Z), mesh0, [dist.Shard(1), dist.Shard(0)],
                       stop_gradient=False)
for target, placements in ((mesh1, [dist.Shard(0), dist.Partial()]),
                           (flat, [dist.Shard(1)]), (last, [dist.Replicate()]),
                           (mesh1, [dist.Replicate(), dist.Replicate()])):
    moved = dist.reshard(z0, target, placements)
    if dist.get_rank() in target.process_ids:
        assert np.allclose(moved.numpy(), Z), (target, placements)
    weight = dist.shard_tensor(paddle.to_tensor(np.arange(20.0).reshape(5, 4)), target,
                               [dist.Replicate()] * target.ndim)
    g, = paddle.grad((moved * weight).sum(), z0)
    if dist.get_rank() in mesh0.process_ids:
        assert g.placements == z0.placements
        assert np.allclose(g.numpy(), np.arange(20.0).reshape(5, 4)), (target, g.numpy())
if dist.get_rank() in mesh1.process_ids:
    if not np.allclose(losses, ref, rtol=1e-10):
        print("hybrid losses differ:", losses, ref)
        sys.exit(1)
    print("hybrid ok", losses)
