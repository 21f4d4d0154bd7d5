# save_state_dict on some ranks and placements, load_state_dict on others; "killed": a
# second save into the folder in which rank 1 is SIGKILLed while writing its archive,
# after rank 0 has written its own; "check_first": the folder holds the first save whole
import os
import signal
import sys
import time

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
if mode == "killed":
    from primflow.distributed import checkpoint

    mesh = dist.ProcessMesh([0, 1], dim_names=["x"])

    def state(scale):
        return {"a": dist.shard_tensor(pf.to_tensor(A * scale), mesh, [S(0)]),
                "d": pf.to_tensor(D * scale), "step": int(scale)}

    dist.save_state_dict(state(1), folder)
    if dist.get_rank() == 1:
        write = checkpoint._atomic_write_arrays
        start = time.time()

        def killed_while_writing(file, arrays, header):
            # rank 0's archive of this save (named like this one, or the same name before
            # per-save names) is written first; then this rank dies mid-write
            name = os.path.basename(file)
            other = os.path.join(os.path.dirname(file), "0" + name[1:])
            while not (os.path.exists(other) and os.path.getmtime(other) >= start):
                time.sleep(0.01)
            with open(file + ".tmp-partial", "wb") as fh:
                fh.write(b"PK")  # a few bytes of a half-written archive
            os.kill(os.getpid(), signal.SIGKILL)

        checkpoint._atomic_write_arrays = killed_while_writing
    dist.save_state_dict(state(2), folder)
    print("not reached")
elif mode == "check_first":
    mesh = dist.ProcessMesh(list(range(n)), dim_names=["x"])
    state = {"a": dist.shard_tensor(pf.zeros([5, 3]), mesh, [R()]), "d": pf.zeros([2]),
             "step": 0}
    dist.load_state_dict(state, folder)
    assert np.array_equal(state["a"].numpy(), A), state["a"].numpy()  # never a mix
    assert np.array_equal(state["d"].numpy(), D) and state["step"] == 1
    print("first save whole")
elif mode == "save":
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
