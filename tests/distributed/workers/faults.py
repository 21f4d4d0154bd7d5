# Fault injection, one mode per run (argv[1]); each mode prints "not reached" only if the
# fault went unnoticed:
#   raise / kill        rank 1 raises / SIGKILLs itself
#   mismatch / placements / collective / dtype
#                       ranks pass different shapes, placements or dtypes
#   timeout             rank 1 is stuck elsewhere while rank 0 waits in all_reduce
#   finished            rank 1 ends its program without entering rank 0's all_reduce
#   recv_size / recv_dtype
#                       recv into a buffer of another size / dtype than the one sent
#   mesh_too_big        a ProcessMesh of 4 ranks in a world of 2
import os
import signal
import sys
import time

import primflow as pf
import primflow.distributed as dist

mode = sys.argv[1]
dist.init_parallel_env(timeout=float(os.environ.get("FAULT_TIMEOUT", "1800")))
rank = dist.get_rank()
mesh = dist.ProcessMesh(list(range(dist.get_world_size())))
if mode == "raise":
    if rank == 1:
        raise RuntimeError("rank one failed on purpose")
    dist.barrier()
elif mode == "kill":
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    dist.all_reduce(pf.ones([4]))
elif mode == "mismatch":
    dist.shard_tensor(pf.ones([4 + rank, 2]), mesh, [dist.Shard(0)])
elif mode == "placements":
    dist.shard_tensor(pf.ones([4, 2]), mesh, [dist.Shard(rank % 2)])
elif mode == "collective":
    dist.all_reduce(pf.ones([3 + rank]))
elif mode == "dtype":
    dist.all_reduce(pf.ones([3], dtype="float32" if rank == 0 else "float64"))
elif mode == "timeout":
    if rank == 1:
        time.sleep(60)  # stuck in computation: never reaches the all_reduce
        sys.exit(0)
    dist.all_reduce(pf.ones([4]))
elif mode == "finished":
    if rank == 1:
        print("rank 1 done", flush=True)
        sys.exit(0)
    dist.all_reduce(pf.ones([4]))
elif mode in ("recv_size", "recv_dtype"):
    if rank == 0:
        dist.send(pf.to_tensor([1.0, 2.0, 3.0, 4.0]), dst=1)
        time.sleep(5)  # rank 1's error ends the job
    else:
        buf = pf.full([5], 9.0) if mode == "recv_size" else pf.zeros([4], dtype="float64")
        dist.recv(buf, src=0)
        print("received", buf.numpy().tolist(), flush=True)
elif mode == "mesh_too_big":
    big = dist.ProcessMesh([[0, 1], [2, 3]], dim_names=["x", "y"])
    dist.shard_tensor(pf.ones([4, 4]), big, [dist.Shard(0), dist.Replicate()])
print("not reached")
