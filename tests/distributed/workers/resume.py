# A training run (a model with sharded and replicated parameters, a plain Adam optimizer
# with its step counts) checkpointed whole with dist.save_state_dict and resumed:
#   "train" FOLDER  trains 3 steps, saves, trains 3 more (prints their losses); also saves
#                   the sharded model with pf.save and checks pf.load's global values
#   "resume" FOLDER a fresh model and optimizer load the checkpoint and train 3 steps
import sys

import numpy as np

import primflow as pf
import primflow.distributed as dist

mode, folder = sys.argv[1], sys.argv[2]
pf.set_default_dtype("float64")
mesh = dist.ProcessMesh([0, 1], dim_names=["x"])
rank = dist.get_rank()
rng = np.random.default_rng(7)
X, Y = rng.standard_normal((8, 4)), rng.standard_normal((8, 2))


class Net(pf.nn.Layer):
    def __init__(self, seed):
        super().__init__()
        pf.seed(seed)
        self.fc1 = pf.nn.Linear(4, 6)
        self.fc2 = pf.nn.Linear(6, 2)
        self.fc1.weight = dist.shard_tensor(self.fc1.weight, mesh, [dist.Shard(1)])
        self.fc2.weight = dist.shard_tensor(self.fc2.weight, mesh, [dist.Shard(0)])

    def forward(self, x):
        return self.fc2(pf.tanh(self.fc1(x)))


def step(model, opt):
    x = dist.shard_tensor(pf.to_tensor(X), mesh, [dist.Replicate()])
    loss = ((model(x) - pf.to_tensor(Y)) ** 2).mean()
    loss.backward()
    opt.step()
    opt.clear_grad()
    return float(loss.numpy())


def build(seed):
    model = Net(seed)
    opt = pf.optimizer.Adam(learning_rate=0.05, parameters=model.parameters())
    return model, opt


if mode == "train":
    model, opt = build(1)
    for _ in range(3):
        step(model, opt)
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}
    dist.save_state_dict(state, folder)
    losses = [step(model, opt) for _ in range(3)]
    # pf.save of a sharded state dict (every rank calls it: the values are gathered)
    path = f"{folder}/model.rank{rank}.pdparams"
    pf.save(model.state_dict(), path)
    loaded = pf.load(path)
    for name, value in model.state_dict().items():
        assert np.array_equal(loaded[name].numpy(), value.numpy()), name
    assert loaded["fc1.weight"].shape == [4, 6]  # the global tensor, not a shard
    if rank == 0:
        print("losses", " ".join(f"{v:.17g}" for v in losses))
else:
    model, opt = build(99)  # other initial values: everything must come from the file
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 0}
    dist.load_state_dict(state, folder)
    assert state["epoch"] == 3
    model.set_state_dict(state["model"])
    opt.set_state_dict(state["opt"])
    losses = [step(model, opt) for _ in range(3)]
    if rank == 0:
        print("losses", " ".join(f"{v:.17g}" for v in losses))
