# Writes FOLDER/rank<R>.pid ("<pid> <world size>") and then sleeps: the launcher's signal
# forwarding must end it.
import os
import sys
import time

import primflow.distributed as dist

folder = sys.argv[1]
dist.barrier()
path = os.path.join(folder, f"rank{dist.get_rank()}.pid")
with open(path + ".tmp", "w", encoding="utf-8") as fh:
    fh.write(f"{os.getpid()} {dist.get_world_size()}")
os.replace(path + ".tmp", path)
time.sleep(120)
print("not reached", flush=True)
