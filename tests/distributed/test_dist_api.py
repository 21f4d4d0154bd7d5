"""One-process checks: errors, io, the launcher's messages."""

import importlib.util

import numpy as np
import pytest

import primflow as pf
import primflow.distributed as dist
from primflow.distributed import launch
from primflow.io import BatchSampler, DataLoader, DistributedBatchSampler, TensorDataset

MESH = dist.ProcessMesh([0], dim_names=["x"])


def test_bad_placements_are_named():
    with pytest.raises(ValueError, match="2 placements .* for a 1-d mesh"):
        dist.shard_tensor(pf.ones([4]), MESH, [dist.Shard(0), dist.Replicate()])
    with pytest.raises(ValueError, match=r"Shard\(1\) on mesh dim 0 is out of range"):
        dist.shard_tensor(pf.ones([4]), MESH, [dist.Shard(1)])
    assert dist.shard_tensor(pf.ones([4, 2]), MESH, [dist.Shard(-1)]).placements == [
        dist.Shard(1)]
    with pytest.raises(TypeError, match="placements must be"):
        dist.shard_tensor(pf.ones([4]), MESH, ["shard"])
    m2 = dist.ProcessMesh([[0]], dim_names=["a", "b"])
    with pytest.raises(ValueError, match="sharded by two mesh dims"):
        dist.shard_tensor(pf.ones([4]), m2, [dist.Shard(0), dist.Shard(0)])


def test_different_meshes_and_inplace_are_refused():
    other = dist.ProcessMesh([0], dim_names=["y"])
    a = dist.shard_tensor(pf.ones([2]), MESH, [dist.Shard(0)])
    b = dist.shard_tensor(pf.ones([2]), dist.ProcessMesh([[0]]), [dist.Replicate()] * 2)
    with pytest.raises(ValueError, match="different meshes .* dist.reshard"):
        a + b
    assert (a + dist.shard_tensor(pf.ones([2]), other, [dist.Replicate()])).shape == [2]
    with pytest.raises(TypeError, match="in-place writes into a distributed tensor"):
        a[0] = 3.0


def test_plain_tensor_mixes_as_replicate_and_values_are_global():
    x = dist.shard_tensor(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]]), MESH, [dist.Shard(0)])
    y = x * pf.to_tensor([10.0, 20.0])
    assert y.placements == [dist.Shard(0)]
    np.testing.assert_allclose(y.numpy(), [[10, 40], [30, 80]])
    assert float(y.sum()) == 160.0
    assert not pf.ones([1]).is_dist() and y.is_dist()
    assert y._local_value().shape == [2, 2]
    z = dist.dtensor_from_local(pf.ones([3, 2]), MESH, [dist.Shard(0)])
    assert z.shape == [3, 2] and z.process_mesh == MESH


def test_io_loader_and_samplers():
    ds = TensorDataset([pf.arange(10).reshape([5, 2]), pf.arange(5)])
    batches = list(DataLoader(ds, batch_size=2, drop_last=True))
    assert len(batches) == 2 and batches[1][1].tolist() == [2, 3]
    pf.seed(0)
    a = [b[1].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True)]
    pf.seed(0)
    b = [b[1].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True)]
    assert a == b and sorted(a[0]) == [0, 1, 2, 3, 4]
    custom = DataLoader(ds, batch_size=3, collate_fn=lambda s: len(s))
    assert list(custom) == [3, 2]
    parts = [list(DistributedBatchSampler(ds, 2, num_replicas=2, rank=r)) for r in (0, 1)]
    assert parts == [[[0, 1], [2]], [[3, 4], [0]]]
    assert list(BatchSampler(range(3), batch_size=2)) == [[0, 1], [2]]


def test_launcher_errors_name_the_extra(monkeypatch):
    with pytest.raises(launch.LaunchError, match="script"):
        launch.launch_command(2, [])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mpi4py" else real(name, *a))
    with pytest.raises(launch.LaunchError, match=r"primflow\[mpi\]"):
        launch.launch_command(2, ["x.py"])
    monkeypatch.setattr(importlib.util, "find_spec", real)
    monkeypatch.setattr(launch, "find_mpiexec", lambda: None)
    if real("mpi4py") is not None:
        with pytest.raises(launch.LaunchError, match="no mpiexec was found"):
            launch.launch_command(2, ["x.py"])


def test_zero1_and_tensor_parallel_layer_one_process():
    pf.seed(1)
    net = pf.nn.Linear(3, 4)
    ref = pf.nn.Linear(3, 4)
    ref.set_state_dict(net.state_dict())

    def fn(name, sub, mesh):
        if isinstance(sub, pf.nn.Linear):
            sub.weight = dist.shard_tensor(sub.weight, mesh, [dist.Shard(1)])

    dist.shard_layer(net, MESH, fn)
    assert [p.is_dist() for p in net.parameters()] == [True, True]
    opt = dist.shard_optimizer(pf.optimizer.Adam(0.1, parameters=net.parameters()),
                               dist.ShardingStage1("x"))
    ref_opt = pf.optimizer.Adam(0.1, parameters=ref.parameters())
    x = pf.randn([5, 3])
    for _ in range(3):
        for model, o in ((net, opt), (ref, ref_opt)):
            model(x).square().sum().backward()
            o.step()
            o.clear_grad()
    np.testing.assert_allclose(net.weight.numpy(), ref.weight.numpy(), rtol=1e-6)


def test_collectives_on_2_and_4_ranks():
    from mpi_helpers import check, run_mpi

    for n in (2, 4):
        assert "collectives ok" in check(run_mpi(n, "collectives.py"))


def test_jit_on_dtensors_compiles_on_one_process():
    # the staged program (local blocks as inputs) agrees with the eager call; a new
    # placement is a new signature; the row-sharded sum's result stays Partial
    x = dist.shard_tensor(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]]), MESH, [dist.Shard(0)])
    f = pf.jit(lambda a, b: (pf.matmul(a, b).sum(), a * 2.0))
    s, y = f(x, x)
    s_eager, y_eager = f.fun(x, x)
    assert isinstance(s, dist.DistTensor) and s.placements == s_eager.placements
    assert y.placements == [dist.Shard(0)]
    np.testing.assert_allclose(s.numpy(), s_eager.numpy())
    np.testing.assert_allclose(y.numpy(), [[2.0, 4.0], [6.0, 8.0]])
    assert "dot_general" in f.lower(x, x).as_text()
    r = dist.reshard(x, MESH, [dist.Replicate()])
    assert f(r, r)[1].placements == [dist.Replicate()]


def test_collective_timeout_option_and_init_parallel_env_timeout():
    import datetime

    import primflow as pf
    import primflow.distributed as dist

    assert pf.config.dist_timeout == 1800.0  # torch.distributed's default, 30 minutes
    try:
        dist.init_parallel_env(timeout=datetime.timedelta(minutes=2))
        assert pf.config.dist_timeout == 120.0
        dist.init_parallel_env(timeout=5)
        assert pf.config.dist_timeout == 5.0
        for bad in (0, -1, "10", True):
            with pytest.raises(ValueError, match="dist_timeout must be a positive number"):
                pf.config.dist_timeout = bad
    finally:
        pf.config.dist_timeout = 1800.0


def test_checkpoint_commit_marker_names_every_archive_one_process(tmp_path):
    """A second save replaces the first (its archives removed after the commit); an
    archive that is missing, truncated or from another save is refused, naming it;
    plain values (an optimizer's step, its learning rate) round-trip."""
    import json

    folder, other = tmp_path / "a", tmp_path / "b"
    w = pf.to_tensor([1.0, 2.0, 3.0])
    dist.save_state_dict({"w": w, "opt": {"step": 1}}, str(folder))
    dist.save_state_dict({"w": w * 2, "opt": {"step": 2, "lr": 0.5}}, str(folder))
    dist.save_state_dict({"w": w * 3, "opt": {"step": 3}}, str(other))
    archives = sorted(p.name for p in folder.glob("*.distcp"))
    assert len(archives) == 1  # the first save's archive is gone
    meta = json.loads((folder / "metadata.json").read_text())
    assert [f["name"] for f in meta["files"]] == archives and len(meta["files"][0]["sha256"]) == 64
    state = {"w": pf.zeros([3]), "opt": {"step": 0, "lr": 0.0}}
    dist.load_state_dict(state, str(folder))
    assert state["w"].numpy().tolist() == [2.0, 4.0, 6.0]
    assert state["opt"] == {"step": 2, "lr": 0.5}
    fresh = {"w": pf.zeros([3]), "opt": {}}  # an empty sub-dict gets the saved entries
    dist.load_state_dict(fresh, str(folder))
    assert fresh["opt"] == {"step": 2, "lr": 0.5}

    archive = folder / archives[0]
    good = archive.read_bytes()
    archive.write_bytes(next(other.glob("*.distcp")).read_bytes())  # another save's
    with pytest.raises(dist.CheckpointError, match=f"{archives[0]} is not the one this save"):
        dist.load_state_dict({"w": pf.zeros([3])}, str(folder))
    archive.write_bytes(good[: len(good) // 2])  # truncated
    with pytest.raises(dist.CheckpointError, match="size differs"):
        dist.load_state_dict({"w": pf.zeros([3])}, str(folder))
    archive.unlink()
    with pytest.raises(dist.CheckpointError, match="is missing"):
        dist.load_state_dict({"w": pf.zeros([3])}, str(folder))


def test_optimizer_state_and_sharded_state_dicts_save_one_process(tmp_path):
    """An optimizer's state_dict (int step counts, float learning rate) goes through
    dist.save_state_dict, and pf.save takes a state dict of distributed tensors."""
    net = pf.nn.Linear(3, 2)
    opt = pf.optimizer.Adam(learning_rate=0.1, parameters=net.parameters())
    ((net(pf.ones([4, 3])) ** 2).sum()).backward()
    opt.step()
    dist.save_state_dict({"model": net.state_dict(), "opt": opt.state_dict()},
                         str(tmp_path / "ck"))
    fresh = pf.optimizer.Adam(learning_rate=0.1, parameters=net.parameters())
    state = {"opt": fresh.state_dict()}
    dist.load_state_dict(state, str(tmp_path / "ck"))
    fresh.set_state_dict(state["opt"])
    assert fresh.state_dict()["state"]["0"]["step"] == 1
    np.testing.assert_array_equal(fresh.state_dict()["state"]["0"]["moment1"].numpy(),
                                  opt.state_dict()["state"]["0"]["moment1"].numpy())
    sharded = {"w": dist.shard_tensor(pf.arange(6.0).reshape([2, 3]), MESH, [dist.Shard(0)])}
    pf.save(sharded, str(tmp_path / "s.pdparams"))
    assert pf.load(str(tmp_path / "s.pdparams"))["w"].numpy().tolist() == \
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_control_flow_runs_on_distributed_tensors():
    """A predicate on a distributed tensor is concrete (its global value): pf.cond took
    it for a staged value and recursed without end in its per-lane check."""
    x = dist.shard_tensor(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]]), MESH, [dist.Shard(0)])
    y = pf.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
    assert y.is_dist()
    np.testing.assert_allclose(y.numpy(), [[2, 4], [6, 8]])
    carry, ys = pf.scan(lambda c, r: (c + r, c * 1.0), pf.zeros([2]), x)
    np.testing.assert_allclose(carry.numpy(), [4, 6])
    np.testing.assert_allclose(ys.numpy(), [[0, 0], [1, 2]])
    out = pf.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 2.0, x)
    np.testing.assert_allclose(out.numpy(), [[16, 32], [48, 64]])
