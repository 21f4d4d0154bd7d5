# save_state_dict on some ranks and placements, load_state_dict on others
import sys

import numpy as np

import primflow as pf
import primflow.distributed as dist

pf.set_default_dtype("float64")
R, S, P = dist.Replicate, dist.Shard, dist.Partial
mode, folder = sys.argv[1], sys.argv[2]
n = dist.get_world_size()
rng = np.random.default_rng(5)
A, B, C, D = (rng.standard_normal((5, 3)), rng.standard_normal(4), rng.standard_normal((3, 2)),
              rng.standard_normal(2))
if mode == "save":
    mesh = dist.ProcessMesh([[0, 1], [2, 3]] if n == 4 else [[0]], dim_names=["a", "b"])
    state = {"a": dist.shard_tensor(pf.to_tensor(A), mesh, [S(0), S(1)]),
             "nested": {"b": dist.shard_tensor(pf.to_tensor(B), mesh, [R(), S(0)])},
             "c": dist.shard_tensor(pf.to_tensor(C), mesh, [P(), R()]),
             "d": pf.to_tensor(D)}
    dist.save_state_dict(state, folder)
    print("saved")
else:
    mesh = dist.ProcessMesh(list(range(n)), dim_names=["x"])
    state = {"a": dist.shard_tensor(pf.zeros([5, 3]), mesh, [S(1)]),
             "nested": {"b": dist.shard_tensor(pf.zeros([4]), mesh, [R()])},
             "c": dist.shard_tensor(pf.zeros([3, 2]), mesh, [S(0)]),
             "d": pf.zeros([2])}
    dist.load_state_dict(state, folder)
    for got, want in ((state["a"], A), (state["nested"]["b"], B), (state["c"], C),
                      (state["d"], D)):
        assert np.array_equal(got.numpy(), want), (got.numpy(), want)
    try:
        dist.load_state_dict({"a": pf.zeros([2, 2])}, folder)
    except ValueError as e:
        assert "saved with shape [5, 3]" in str(e)
    else:
        raise AssertionError("a wrong shape was loaded")
    print("loaded")
