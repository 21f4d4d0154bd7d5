"""Distributed primflow over MPI (``import primflow.distributed as dist``), Paddle's API.

* Processes and collectives: ``init_parallel_env``, ``get_rank``, ``get_world_size``,
  ``barrier``, ``new_group``, ``all_reduce`` (``ReduceOp.SUM/MAX/MIN/AVG/PROD``),
  ``all_gather``, ``reduce_scatter``, ``alltoall``, ``broadcast``, ``send``/``recv`` on each
  rank's tensors, differentiable (``collective.py``).
* Start N processes with ``primflow launch -n N script.py`` (or ``python -m
  primflow.distributed.launch``); without a launcher a process is a world of one.

Example:
    >>> import primflow.distributed as dist
    >>> dist.get_rank(), dist.get_world_size()
    (0, 1)
"""

from ..backends.communicator import CommunicationError
from .collective import (ReduceOp, all_gather, all_reduce, alltoall, broadcast, recv,
                         reduce_scatter, send)
from .env import (Group, barrier, get_rank, get_world_size, init_parallel_env, is_initialized,
                  new_group)
from .dtensor import (DistTensor, dtensor_from_local, dtensor_to_local, is_dist_tensor,
                      reshard, shard_tensor, unshard_dtensor)
from .placement import Partial, Placement, ProcessMesh, ReduceType, Replicate, Shard
from ..core.tensor import Tensor as _Tensor


def _tensor_is_dist(self) -> bool:
    """Whether the tensor is laid out over a process mesh (``dist.shard_tensor``).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed  # noqa: F401
        >>> pf.ones([2]).is_dist()
        False
    """
    return False


_Tensor.is_dist = _tensor_is_dist
from .api import (DistModel, ShardDataloader, ShardingStage1, Strategy, shard_dataloader,
                  shard_layer, shard_optimizer, to_static)
from .checkpoint import load_state_dict, save_state_dict
