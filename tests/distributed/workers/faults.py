# Fault injection: "raise" (rank 1 raises), "kill" (rank 1 SIGKILLs itself), "mismatch"
# (ranks pass different shapes to shard_tensor), "placements" (different placements)
import os
import signal
import sys
import time

import primflow as pf
import primflow.distributed as dist

mode = sys.argv[1]
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
print("not reached")
