"""Distributed benchmarks (issue 15), ratios from one run:

1. ``all_reduce`` of 1e6 and 1e7 float64 on 2 ranks: ``primflow.distributed.all_reduce``
   against raw mpi4py ``Allreduce`` on the same buffers (best of several calls), out of
   place into a preallocated buffer and ``MPI.IN_PLACE``; the ratio is against the faster
   of the two. A tensor that alone holds its buffer (a gradient, a fresh result) is reduced
   in place; one recorded for autodiff needs a new buffer (timed too).
2. W3's plate training step (MLP 2-64-64-64-1 tanh float64, biharmonic residual by
   ``pf.autograd.biharmonic(method="collapsed")``, N = 8,192 interior + 256 boundary
   points, ``pf.jit(pf.value_and_grad(...))`` + Adam), data parallel: each rank takes its
   block of the interior points, its share of the boundary term, and the gradients are
   summed with ``dist.all_reduce`` (the loss is the sum of the ranks' losses). 1 rank vs 2
   ranks of one thread each: speedup and parallel efficiency.

Run from the repository root: ``python -m bench.distributed`` (needs the mpi extra). The
machine's load is printed with the results; 2 cores shared with other jobs skew them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def _worker(n_points, steps):
    import numpy as np

    import primflow as pf
    import primflow.distributed as dist

    pf.set_default_dtype("float64")
    rank, size = dist.get_rank(), dist.get_world_size()
    out = {"ranks": size}
    if size > 1:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        for n in (10 ** 6, 10 ** 7):
            a = np.random.default_rng(rank).standard_normal(n)
            recv = np.empty_like(a)
            inplace = a.copy()
            raw, raw_inplace, ours, ours_grad = [], [], [], []

            def timed(times, fn):
                comm.Barrier()
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)

            for _ in range(15 if n == 10 ** 6 else 5):
                timed(raw, lambda: comm.Allreduce(a, recv))
                timed(raw_inplace, lambda: comm.Allreduce(MPI.IN_PLACE, inplace))
                t = pf.to_tensor(a)  # a gradient-like tensor: it alone holds its buffer
                timed(ours, lambda: dist.all_reduce(t))
                g = pf.to_tensor(a, stop_gradient=False) * 1.0  # recorded for autodiff
                timed(ours_grad, lambda: dist.all_reduce(g))
                del t, g
            out[f"allreduce_{n:.0e}"] = {
                "mpi4py_ms": min(raw) * 1e3, "mpi4py_inplace_ms": min(raw_inplace) * 1e3,
                "primflow_ms": min(ours) * 1e3, "primflow_recorded_ms": min(ours_grad) * 1e3}
    # the data-parallel plate step
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (n_points, 2))
    edge = np.linspace(0, 1, 64)
    B = np.concatenate([np.stack([edge, 0 * edge], 1), np.stack([edge, 0 * edge + 1], 1),
                        np.stack([0 * edge, edge], 1), np.stack([0 * edge + 1, edge], 1)])
    c = -(-n_points // size)
    Xi = pf.to_tensor(X[rank * c:(rank + 1) * c])
    Xb = pf.to_tensor(B)
    share = Xi.shape[0] / n_points  # this rank's part of the interior mean
    pf.seed(0)
    net = pf.nn.MLP([2, 64, 64, 64, 1], activation="tanh")
    params = net.parameters()
    opt = pf.optimizer.Adam(learning_rate=1e-3, parameters=params)
    f = 4 * np.pi ** 4 * pf.sin(np.pi * Xi[:, 0:1]) * pf.sin(np.pi * Xi[:, 1:2])

    def loss_fn():
        res = pf.autograd.biharmonic(net, Xi, method="collapsed") - f
        return share * (res ** 2).mean() + (net(Xb) ** 2).mean() / size

    vg = pf.jit(pf.value_and_grad(loss_fn, None, params))

    def step():
        with pf.no_grad():
            loss, grads = vg()
        for p, g in zip(params, grads):
            if size > 1:
                dist.all_reduce(g)
            p.grad = g
        opt.step()
        opt.clear_grad()
        if size > 1:
            dist.all_reduce(loss)
        return float(loss)

    for _ in range(3):
        step()  # compile and warm up
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


def main():
    from primflow.distributed.launch import launch_command, launch_env

    env = {**launch_env(), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "PYTHONPATH": os.getcwd()}
    results = {}
    for n in (1, 2):
        cmd = launch_command(n, ["-m", "bench.distributed", "--worker"])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode:
            sys.exit(f"{n} ranks failed:\n{proc.stdout}\n{proc.stderr}")
        line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
        results[n] = json.loads(line[7:])
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
    print(f"plate step N=8192: 1 rank {t1:.1f} ms, 2 ranks {t2:.1f} ms, speedup "
          f"{t1 / t2:.2f}x, parallel efficiency {t1 / t2 / 2:.0%}")
    diff = max(abs(a - b) / abs(a) for a, b in zip(results[1]["losses"], two["losses"]))
    print(f"loss curves 1 vs 2 ranks: max relative difference {diff:.1e}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        _worker(8192, 10)
    else:
        main()
