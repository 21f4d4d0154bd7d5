"""Distributed benchmarks, ratios from one run:

1. ``all_reduce`` of 1e6 and 1e7 float64 on 2 ranks: ``primflow.distributed.all_reduce``
   against raw mpi4py ``Allreduce`` on the same buffers (best of several calls), out of
   place into a preallocated buffer and ``MPI.IN_PLACE`` on a fresh copy (what the tensor
   holds); the ratio is against the faster of the two. A tensor that alone holds its buffer (a gradient, a fresh result) is reduced
   in place; one recorded for autodiff needs a new buffer (timed too).
2. W3's plate training step data parallel (W3's MLP 2-64-64-64-1 tanh float64 and weights,
   biharmonic residual, Adam(lr=1e-3)) at N = 8,192 interior + 256 boundary points, 1 vs
   2 ranks of one thread each: speedup and parallel efficiency.

   * primflow: each rank takes its block of the interior points and its share of the
     boundary term (the loss is the sum of the ranks' losses); ``pf.jit`` of
     ``pf.value_and_grad`` (``pf.autograd.biharmonic(method="collapsed")``) returns the loss
     and the gradients as one flat buffer, summed over ranks by one ``dist.all_reduce`` (a
     single bucket, as DDP does), then ``pf.optimizer.Adam``.
   * PyTorch (when ``--python`` / ``$PRIMFLOW_BENCH_PYTHON`` names an interpreter with
     torch): ``torch.nn.parallel.DistributedDataParallel`` over gloo (ranks started as
     processes on localhost, a FileStore rendezvous), W3's nested ``torch.autograd.grad``
     biharmonic on the rank's block, ``torch.optim.Adam``; DDP averages the ranks'
     gradients of their local means (the same gradient for equal blocks).

Run from the repository root: ``python -m bench.distributed [--python /work/benchenv/bin/
python]`` (needs the mpi extra). The machine's load is printed with the results; 2 cores
shared with other jobs skew them (both ranks of a 2-rank job need a core each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

N_POINTS = 8192
STEPS = 10
WARMUP = 3
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _allreduce_bench(rank, out):
    import numpy as np
    from mpi4py import MPI

    import primflow as pf
    import primflow.distributed as dist

    comm = MPI.COMM_WORLD
    for n in (10 ** 6, 10 ** 7):
        a = np.random.default_rng(rank).standard_normal(n)
        recv = np.empty_like(a)
        raw, raw_inplace, ours, ours_grad = [], [], [], []

        def timed(times, fn):
            comm.Barrier()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)

        for _ in range(30 if n == 10 ** 6 else 6):
            timed(raw, lambda: comm.Allreduce(a, recv))
            inplace = a.copy()  # a fresh buffer, as the tensor below gets
            timed(raw_inplace, lambda: comm.Allreduce(MPI.IN_PLACE, inplace))
            t = pf.to_tensor(a)  # a gradient-like tensor: it alone holds its buffer
            timed(ours, lambda: dist.all_reduce(t))
            g = pf.to_tensor(a, stop_gradient=False) * 1.0  # recorded for autodiff
            timed(ours_grad, lambda: dist.all_reduce(g))
            del t, g, inplace
        out[f"allreduce_{n:.0e}"] = {
            "mpi4py_ms": min(raw) * 1e3, "mpi4py_inplace_ms": min(raw_inplace) * 1e3,
            "primflow_ms": min(ours) * 1e3, "primflow_recorded_ms": min(ours_grad) * 1e3}


def _plate_data(rank, size, n_points):
    """W3's weights, this rank's block of the interior points (and f there), the boundary."""
    from bench.workloads import w3_plate_step as w3

    params, xi, xb, f = w3._data(n_points)
    c = -(-n_points // size)
    return params, xi[rank * c:(rank + 1) * c], xb, f[rank * c:(rank + 1) * c]


def _worker(n_points, steps):
    import numpy as np

    import primflow as pf
    import primflow.distributed as dist
    from bench.workloads import w2_biharmonic as w2, w3_plate_step as w3

    pf.set_default_dtype("float64")
    rank, size = dist.get_rank(), dist.get_world_size()
    out = {"ranks": size}
    if size > 1:
        _allreduce_bench(rank, out)
    params, xi, xb, f = _plate_data(rank, size, n_points)
    Xi, Xb, F = pf.to_tensor(xi), pf.to_tensor(xb), pf.to_tensor(f[:, None])
    share = xi.shape[0] / n_points  # this rank's part of the interior mean
    net = pf.nn.MLP(list(w2.DIMS), activation="tanh")
    for p, a in zip(net.parameters(), params):
        p.set_value(a)
    ps = net.parameters()
    opt = pf.optimizer.Adam(learning_rate=w3.LR, beta1=w3.BETA1, beta2=w3.BETA2,
                            epsilon=w3.EPS, parameters=ps)

    def loss_fn():
        res = pf.autograd.biharmonic(net, Xi, method="collapsed") - F
        return share * (res ** 2).mean() + (net(Xb) ** 2).mean() / size

    def flat_loss_and_grads():
        loss, grads = pf.value_and_grad(loss_fn, None, ps)()
        return pf.concat([loss.reshape([1])] + [g.reshape([-1]) for g in grads])

    flat_step = pf.jit(flat_loss_and_grads)
    sizes = [int(np.prod(p.shape)) for p in ps]

    def step():
        with pf.no_grad():
            flat = flat_step()
            dist.all_reduce(flat)  # one bucket: the loss and every gradient
            start = 1
            for p, n in zip(ps, sizes):
                p.grad = flat[start:start + n].reshape(p.shape)
                start += n
        opt.step()
        opt.clear_grad()
        return float(flat[0])

    for _ in range(WARMUP):
        step()  # compile and warm up
    flat_step.wait_compiled()
    times, losses = [], []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
    out["step_ms"] = sorted(times)[len(times) // 2] * 1e3
    out["losses"] = losses
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def _torch_worker(rank, size, store_path, n_points, steps):
    import torch
    import torch.distributed as tdist

    from bench.timing import torch_single_thread
    from bench.workloads import w2_biharmonic as w2, w3_plate_step as w3

    torch_single_thread(torch)
    tdist.init_process_group("gloo", store=tdist.FileStore(store_path, size), rank=rank,
                             world_size=size)
    params, xi, xb, f = _plate_data(rank, size, n_points)
    Xi = torch.from_numpy(xi).requires_grad_(True)
    Xb, F = torch.from_numpy(xb), torch.from_numpy(f)
    model = torch.nn.parallel.DistributedDataParallel(w3.torch_mlp(torch, params))
    opt = torch.optim.Adam(model.parameters(), lr=w3.LR, betas=(w3.BETA1, w3.BETA2),
                           eps=w3.EPS)

    def step():
        opt.zero_grad()
        res = w2.torch_biharmonic(model, Xi)
        loss = ((res - F) ** 2).mean() + (model(Xb) ** 2).mean()
        loss.backward()  # DDP averages the gradients over the ranks (gloo allreduce)
        opt.step()
        return float(loss.detach())

    for _ in range(WARMUP):
        step()
    times, losses = [], []
    for _ in range(steps):
        tdist.barrier()
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
    if rank == 0:
        print("RESULT " + json.dumps({"ranks": size, "losses": losses,
                                      "step_ms": sorted(times)[len(times) // 2] * 1e3}),
              flush=True)
    tdist.destroy_process_group()


def _result(stdout, what):
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        sys.exit(f"{what}: no result\n{stdout}")
    return json.loads(line[7:])


def _run_torch(python, n, env):
    """Starts ``n`` torch ranks as processes (a FileStore rendezvous in a fresh temporary
    directory); rank 0's result."""
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen([python, "-m", "bench.distributed", "--torch-worker",
                                   str(r), str(n), store], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
                 for r in range(n)]
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=900))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for p, (o, e) in zip(procs, outs):
            if p.returncode:
                sys.exit(f"torch on {n} ranks failed:\n{o}\n{e}")
        return _result(outs[0][0], f"torch on {n} ranks")


def _peer_python(argv):
    if "--python" in argv:
        return argv[argv.index("--python") + 1]
    return os.environ.get("PRIMFLOW_BENCH_PYTHON")


def main(argv):
    from primflow.distributed.launch import launch_command, launch_env

    env = {**launch_env(), **THREAD_ENV, "PYTHONPATH": os.getcwd()}
    results = {}
    for n in (1, 2):
        cmd = launch_command(n, ["-m", "bench.distributed", "--worker"])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                              stdin=subprocess.DEVNULL)
        if proc.returncode:
            sys.exit(f"{n} ranks failed:\n{proc.stdout}\n{proc.stderr}")
        results[n] = _result(proc.stdout, f"primflow on {n} ranks")
    python = _peer_python(argv)
    torch_results = {}
    if python:
        check = subprocess.run([python, "-c", "import torch.distributed as d; "
                                "assert d.is_gloo_available()"], capture_output=True)
        if check.returncode == 0:
            for n in (1, 2):
                torch_results[n] = _run_torch(python, n, env)
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    two = results[2]
    for key in ("allreduce_1e+06", "allreduce_1e+07"):
        r = two[key]
        best_raw = min(r["mpi4py_ms"], r["mpi4py_inplace_ms"])
        print(f"{key:16s} 2 ranks: primflow {r['primflow_ms']:.2f} ms (recorded for "
              f"autodiff: {r['primflow_recorded_ms']:.2f} ms), mpi4py Allreduce "
              f"{r['mpi4py_ms']:.2f} ms (in place {r['mpi4py_inplace_ms']:.2f} ms); ratio "
              f"{r['primflow_ms'] / best_raw:.2f} vs the faster mpi4py call, recorded "
              f"{r['primflow_recorded_ms'] / r['mpi4py_ms']:.2f} vs out-of-place")
    t1, t2 = results[1]["step_ms"], two["step_ms"]
    print(f"plate step N={N_POINTS}, primflow: 1 rank {t1:.1f} ms, 2 ranks {t2:.1f} ms, "
          f"speedup {t1 / t2:.2f}x, parallel efficiency {t1 / t2 / 2:.0%}")
    diff = max(abs(a - b) / abs(a) for a, b in zip(results[1]["losses"], two["losses"]))
    print(f"primflow loss curves 1 vs 2 ranks: max relative difference {diff:.1e}")
    if torch_results:
        s1, s2 = torch_results[1]["step_ms"], torch_results[2]["step_ms"]
        print(f"plate step N={N_POINTS}, torch DDP (gloo): 1 rank {s1:.1f} ms, 2 ranks "
              f"{s2:.1f} ms, speedup {s1 / s2:.2f}x, parallel efficiency {s1 / s2 / 2:.0%}")
        print(f"primflow / torch DDP step time: 1 rank {t1 / s1:.2f}, 2 ranks {t2 / s2:.2f} "
              f"(below 1: primflow faster)")
        # the same weights, data and Adam updates: the 1-rank loss curves agree (on 2 ranks
        # torch reports rank 0's local mean, primflow the global loss)
        d0 = max(abs(a - b) / abs(b) for a, b in zip(torch_results[1]["losses"],
                                                      results[1]["losses"]))
        print(f"loss curves torch vs primflow on 1 rank: max relative difference {d0:.1e}")
    else:
        print("torch DDP: n/a (pass --python PATH of an interpreter with torch)")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        _worker(N_POINTS, STEPS)
    elif "--torch-worker" in sys.argv:
        i = sys.argv.index("--torch-worker")
        _torch_worker(int(sys.argv[i + 1]), int(sys.argv[i + 2]), sys.argv[i + 3], N_POINTS,
                      STEPS)
    else:
        main(sys.argv[1:])
