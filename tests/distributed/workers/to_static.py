# dist.to_static compiles the step: the same losses as the eager step, and the program shows
# the collectives as ops. A tensor-parallel model (column- then row-sharded weights, softmax
# between) and a data-parallel one (replicated MLP, batch sharded), float64.
import numpy as np

import primflow as pf
import primflow.distributed as dist

pf.set_default_dtype("float64")
rank, size = dist.get_rank(), dist.get_world_size()
mesh = dist.ProcessMesh(list(range(size)), dim_names=["x"])


class TensorParallel(pf.nn.Layer):
    def __init__(self):
        super().__init__()
        self.w0 = dist.shard_tensor(self.create_parameter(shape=[3, 6]), mesh, [dist.Shard(1)])
        self.w1 = dist.shard_tensor(self.create_parameter(shape=[6, 2]), mesh, [dist.Shard(0)])

    def forward(self, x):
        return pf.matmul(pf.nn.functional.softmax(pf.matmul(x, self.w0)), self.w1)


def data_parallel():
    return dist.shard_layer(pf.nn.Sequential(pf.nn.Linear(3, 5), pf.nn.Tanh(),
                                             pf.nn.Linear(5, 2)), mesh)


group = "(" + ",".join(map(str, range(size))) + ("," if size == 1 else "") + ")"  # IR text
rng = np.random.default_rng(0)
batches = [(rng.standard_normal((6, 3)), rng.standard_normal((6, 2)))] * 4  # one batch, fitted


def sharded(batch):
    return [dist.shard_tensor(pf.to_tensor(v), mesh, [dist.Shard(0)]) for v in batch]


def frozen_first_weight():
    net = data_parallel()
    net[0].weight.stop_gradient = True
    return net


def train(make, compiled):
    pf.seed(7)
    net = make()
    opt = dist.shard_optimizer(pf.optimizer.Adam(0.05, parameters=net.parameters()))
    loss_fn = pf.nn.MSELoss(reduction="sum")
    model = dist.to_static(net, None, loss_fn, opt)
    losses = []
    for batch in batches:
        x, y = sharded(batch)
        if compiled:
            loss = model(x, y)
        else:  # the eager step
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            opt.clear_grad()
        losses.append(float(loss.numpy()))
    return model, net, losses


for name, make, wanted in (("tensor parallel", TensorParallel,
                            ("all_gather", "all_reduce", "reduce_scatter")),
                           ("data parallel", data_parallel, ("all_reduce",))):
    model, net, compiled = train(make, True)
    _, _, eager = train(make, False)
    assert np.allclose(compiled, eager, rtol=1e-12, atol=0), (name, compiled, eager)
    assert compiled[-1] < compiled[0], (name, compiled)
    text = model.lower().as_text()
    assert model.dist_main_program().as_text() == text
    for op in wanted:
        assert f"= {op}(" in text and f"ranks={group}" in text, (name, op, text)
    if name == "data parallel":  # the loss, and every gradient in one bucket
        assert text.count("= all_reduce(") == 2, text
    # eval and predict compile too and agree with the eager layer
    x, y = sharded(batches[0])
    model.eval()
    eval_loss = float(model(x, y).numpy())
    with pf.no_grad():
        want = float(pf.nn.MSELoss(reduction="sum")(net(x), y).numpy())
    assert abs(eval_loss - want) <= 1e-12 * abs(want), (name, eval_loss, want)
    model.predict()
    out = model(x)
    with pf.no_grad():
        assert np.allclose(out.numpy(), net(x).numpy(), rtol=1e-12, atol=1e-14), name
    assert "= all_reduce(" in model.lower(mode="eval").as_text()
    if rank == 0:
        print(f"{name}: losses {compiled[0]:.6f} -> {compiled[-1]:.6f}, equal to eager")
# a frozen parameter gets no gradient and keeps its value, as in the eager step
(_, net_c, compiled), (_, net_e, eager) = (train(frozen_first_weight, c) for c in (True, False))
assert np.allclose(compiled, eager, rtol=1e-12, atol=0), (compiled, eager)
pf.seed(7)
initial = frozen_first_weight()[0].weight.numpy()
assert np.array_equal(net_c[0].weight.numpy(), initial)
assert np.array_equal(net_e[0].weight.numpy(), initial)
assert net_c[0].weight.grad is None
if rank == 0:
    print("to_static ok")
