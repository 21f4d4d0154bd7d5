"""Distributed primflow over MPI (``import primflow.distributed as dist``), Paddle's API.

* Processes and collectives: ``init_parallel_env``, ``get_rank``, ``get_world_size``,
  ``barrier``, ``new_group``, ``all_reduce`` (``ReduceOp.SUM/MAX/MIN/AVG/PROD``),
  ``all_gather``, ``reduce_scatter``, ``alltoall``, ``broadcast``, ``send``/``recv`` on each
  rank's tensors, differentiable (``collective.py``).
* Distributed tensors: ``ProcessMesh``, ``Replicate``/``Shard``/``Partial``,
  ``shard_tensor``, ``reshard``, ``dtensor_from_local``, ``unshard_dtensor``,
  ``local_map`` (a function of each rank's blocks on distributed tensors); every op and
  derivative runs on them (``dtensor.py`` explains the design, ``prims/sharding.py`` has
  the rules).
* Paddle 3's user API: ``shard_layer``, ``shard_optimizer`` (``ShardingStage1``),
  ``shard_dataloader``, ``to_static``; checkpoints ``save_state_dict``/``load_state_dict``.
* Start N processes with ``primflow launch -n N script.py`` (or ``python -m
  primflow.distributed.launch``); without a launcher a process is a world of one.

Example:
    >>> import primflow.distributed as dist
    >>> dist.get_rank(), dist.get_world_size()
    (0, 1)
"""

from ..backends.communicator import CommunicationError
from .api import (DistModel, ShardDataloader, ShardingStage1, Strategy, shard_dataloader,
                  shard_layer, shard_optimizer, to_static)
from .checkpoint import CheckpointError, load_state_dict, save_state_dict
from .collective import (ReduceOp, all_gather, all_reduce, alltoall, broadcast, recv,
                         reduce_scatter, send)
from .dtensor import (DistTensor, dtensor_from_fn, dtensor_from_local, dtensor_to_local,
                      is_dist_tensor, reshard, shard_tensor, unshard_dtensor)
from .grad_sync import reduce_gradients
from .env import (Group, barrier, get_rank, get_world_size, init_parallel_env, is_initialized,
                  new_group)
from .placement import Partial, Placement, ProcessMesh, ReduceType, Replicate, Shard
from .local_map import local_map


def _tensor_is_dist(self) -> bool:
    """Whether the tensor is laid out over a process mesh (``dist.shard_tensor``).

    Example:
        >>> import primflow as pf
        >>> pf.ones([2]).is_dist()
        False
    """
    return False


# Tensor.is_dist (core/tensor.py declares it and looks it up here on first use; DistTensor
# overrides it)
TENSOR_METHODS = {"is_dist": _tensor_is_dist}

__all__ = [
    "CheckpointError", "CommunicationError", "DistModel", "DistTensor", "Group", "Partial",
    "Placement",
    "ProcessMesh", "ReduceOp", "ReduceType", "Replicate", "Shard", "ShardDataloader",
    "ShardingStage1", "Strategy", "all_gather", "all_reduce", "alltoall", "barrier",
    "broadcast", "dtensor_from_fn", "dtensor_from_local", "dtensor_to_local", "get_rank",
    "get_world_size", "init_parallel_env", "is_dist_tensor", "is_initialized",
    "load_state_dict", "local_map", "new_group", "recv", "reduce_gradients", "reduce_scatter",
    "reshard", "save_state_dict", "send", "shard_dataloader", "shard_layer", "shard_optimizer",
    "shard_tensor", "to_static", "unshard_dtensor",
]
