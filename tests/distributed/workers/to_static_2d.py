# dist.to_static on a 2x2 mesh (data parallel over "dp", tensor parallel over "mp"): the
# compiled step equals the eager one, and its collectives run in the mesh's sub-groups
import numpy as np

import primflow as pf
import primflow.distributed as dist

pf.set_default_dtype("float64")
rank = dist.get_rank()
mesh = dist.ProcessMesh([[0, 1], [2, 3]], dim_names=["dp", "mp"])


class Net(pf.nn.Layer):
    def __init__(self):
        super().__init__()
        self.w0 = dist.shard_tensor(self.create_parameter(shape=[3, 6]), mesh,
                                    [dist.Replicate(), dist.Shard(1)])
        self.w1 = dist.shard_tensor(self.create_parameter(shape=[6, 2]), mesh,
                                    [dist.Replicate(), dist.Shard(0)])

    def forward(self, x):
        return pf.matmul(pf.tanh(pf.matmul(x, self.w0)), self.w1)


rng = np.random.default_rng(0)
X, Y = rng.standard_normal((8, 3)), rng.standard_normal((8, 2))


def run(compiled):
    pf.seed(3)
    net = Net()
    opt = dist.shard_optimizer(pf.optimizer.Adam(0.05, parameters=net.parameters()))
    loss_fn = pf.nn.MSELoss(reduction="sum")
    model = dist.to_static(net, None, loss_fn, opt)
    losses = []
    for _ in range(3):
        x, y = (dist.shard_tensor(pf.to_tensor(v), mesh, [dist.Shard(0), dist.Replicate()])
                for v in (X, Y))
        if compiled:
            loss = model(x, y)
        else:
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            opt.clear_grad()
        losses.append(float(loss.numpy()))
    return model, losses


model, compiled = run(True)
_, eager = run(False)
assert np.allclose(compiled, eager, rtol=1e-12, atol=0), (compiled, eager)
text = model.lower().as_text()
mp_group = (rank // 2 * 2, rank // 2 * 2 + 1)
dp_group = (rank % 2, rank % 2 + 2)
for group in (mp_group, dp_group):
    assert f"ranks=({group[0]},{group[1]})" in text, (rank, group, text)
if rank == 0:
    print("to_static 2d ok")
