"""Paddle 3's user-level auto-parallel API: ``shard_layer``, ``shard_optimizer`` (ZeRO
stage 1), ``shard_dataloader`` and ``to_static`` (a ``DistModel`` you call per batch).
"""

from __future__ import annotations

from ..core.state import no_grad
from ..core.tensor import Tensor
from ..ops import astype as cast
from .dtensor import DistTensor, dtensor_from_local, reduce_gradients, reshard, shard_tensor
from .placement import ProcessMesh, Replicate, Shard


# ---- layers -----------------------------------------------------------------------------------
def shard_layer(layer, process_mesh, shard_fn=None, input_fn=None, output_fn=None):
    """Makes ``layer``'s parameters distributed on ``process_mesh``: ``shard_fn(name,
    sublayer, process_mesh)`` is called for every sublayer (it replaces parameters with
    ``dist.shard_tensor(...)``); parameters it leaves alone become Replicate.
    ``input_fn(inputs, mesh)`` / ``output_fn(outputs, mesh)`` transform the forward's
    inputs and outputs. Returns ``layer``.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> mesh = dist.ProcessMesh([0])
        >>> def fn(name, sub, mesh):
        ...     if isinstance(sub, pf.nn.Linear):
        ...         sub.weight = dist.shard_tensor(sub.weight, mesh, [dist.Shard(1)])
        >>> net = dist.shard_layer(pf.nn.Linear(2, 4), mesh, fn)
        >>> net.weight.placements, net.bias.placements
        ([Shard(dim=1)], [Replicate()])
    """
    if not isinstance(process_mesh, ProcessMesh):
        raise TypeError(f"shard_layer: process_mesh must be a dist.ProcessMesh, got "
                        f"{type(process_mesh).__name__}")
    if shard_fn is not None:
        for name, sub in layer.named_sublayers(include_self=True):
            shard_fn(name, sub, process_mesh)
    replicate = [Replicate()] * process_mesh.ndim
    for sub in layer.sublayers(include_self=True):
        params = sub._parameters
        for key, p in list(params.items()):
            if p is not None and not isinstance(p, DistTensor):
                params[key] = shard_tensor(p, process_mesh, replicate)
    if input_fn is not None:
        layer.register_forward_pre_hook(lambda _layer, inputs: input_fn(inputs, process_mesh))
    if output_fn is not None:
        layer.register_forward_post_hook(
            lambda _layer, _inputs, outputs: output_fn(outputs, process_mesh))
    return layer


# ---- optimizer ------------------------------------------------------------------------------
class ShardingStage1:
    """ZeRO stage 1 for ``shard_optimizer``: optimizer states (and the update) of
    Replicate parameters are sharded along their first dim over mesh dim ``mesh_dim``;
    gradients arrive there by reduce_scatter and the new values are all-gathered.

    Example:
        >>> import primflow.distributed as dist
        >>> dist.ShardingStage1("x", dist.ProcessMesh([0], dim_names=["x"])).mesh_dim
        'x'
    """

    def __init__(self, mesh_dim=0, mesh=None):
        self.mesh_dim = mesh_dim
        self.mesh = mesh

    def update_placements(self, p):
        """The placements the update of parameter ``p`` runs in."""
        mesh = p.process_mesh
        k = mesh._dim_index(self.mesh_dim) if self.mesh is None or self.mesh == mesh else None
        placements = p.placements
        if k is None or not placements[k].is_replicated() or not p.shape:
            return placements
        if any(q.is_shard(0) for q in placements):
            return placements
        placements = list(placements)
        placements[k] = Shard(0)
        return placements


class _ShardOptimizer:
    """An optimizer whose updates of distributed parameters run sharded (see
    ``shard_optimizer``); everything else is delegated to the wrapped optimizer."""

    def __init__(self, optimizer, shard_fn, gradient_accumulation_steps):
        self.__dict__["_inner"] = optimizer
        self.__dict__["_shard_fn"] = shard_fn
        self.__dict__["_accumulation"] = int(gradient_accumulation_steps)
        self.__dict__["_calls"] = 0
        # write updates straight into the shards (no gather of the global value)
        optimizer._assign = _assign_sharded

    def __getattr__(self, name):
        return getattr(self.__dict__["_inner"], name)

    def __setattr__(self, name, value):
        setattr(self._inner, name, value)

    def step(self):
        """One update; with gradient accumulation, every ``gradient_accumulation_steps``
        calls."""
        self.__dict__["_calls"] += 1
        if self._calls % self._accumulation:
            return
        inner = self._inner
        reduce_gradients(inner._parameter_list)  # one bucketed collective
        if self._shard_fn is None:
            return inner.step()
        with no_grad():
            views = []
            for p in inner._parameter_list:
                if isinstance(p, DistTensor) and p.grad is not None and not p.stop_gradient:
                    placements = self._shard_fn.update_placements(p)
                    if placements != p.placements:
                        view = reshard(p.detach(), p.process_mesh, placements)
                        view.__dict__.update(p.__dict__)
                        view.stop_gradient = False
                        view.grad = reshard(p.grad, p.process_mesh, placements)
                        views.append((p, view))
            originals = list(inner._parameter_list)
            swap = {id(p): v for p, v in views}
            # run the wrapped optimizer's step on the sharded views (its states follow them)
            inner._parameter_list = [swap.get(id(p), p) for p in originals]
            for p, v in views:
                inner._index_of[id(v)] = inner._index_of[id(p)]
                inner._group_of[id(v)] = inner._group_of[id(p)]
            try:
                inner.step()
            finally:
                inner._parameter_list = originals
                for p, v in views:
                    inner._index_of.pop(id(v), None)
                    inner._group_of.pop(id(v), None)
            for p, v in views:
                p.set_value(v)  # all_gather of the updated shards

    def clear_grad(self, set_to_zero=False):
        return self._inner.clear_grad(set_to_zero)


def _assign_sharded(p, new):
    if isinstance(p, DistTensor):
        p.set_value(cast(new, p.dtype))
    else:
        p._set_value(cast(new, p.dtype)._value)


def shard_optimizer(optimizer, shard_fn=None, gradient_accumulation_steps=1):
    """``optimizer`` made aware of distributed parameters (Paddle's ``shard_optimizer``).

    By default its states take the parameters' placements. With ``shard_fn =
    dist.ShardingStage1(mesh_dim, mesh)`` (ZeRO stage 1) the states of Replicate
    parameters are sharded along the parameters' first dim.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> w = dist.shard_tensor(pf.ones([4]), dist.ProcessMesh([0]), [dist.Replicate()],
        ...                       stop_gradient=False)
        >>> opt = dist.shard_optimizer(pf.optimizer.SGD(0.5, parameters=[w]))
        >>> (w * w).sum().backward(); opt.step()
        >>> w.numpy()
        array([0., 0., 0., 0.], dtype=float32)
    """
    if gradient_accumulation_steps < 1:
        raise ValueError(f"gradient_accumulation_steps must be >= 1, got "
                         f"{gradient_accumulation_steps}")
    return _ShardOptimizer(optimizer, shard_fn, gradient_accumulation_steps)


# ---- data -----------------------------------------------------------------------------------
class ShardDataloader:
    """Batches of a loader as distributed tensors (see ``shard_dataloader``)."""

    def __init__(self, dataloader, meshes, input_keys=None, shard_dims=None,
                 is_dataset_splitted=False):
        self.dataloader = dataloader
        self.meshes = list(meshes) if isinstance(meshes, (list, tuple)) else [meshes]
        self.input_keys = input_keys
        self.shard_dims = shard_dims
        self.is_dataset_splitted = is_dataset_splitted

    def _placements(self, mesh):
        dims = self.shard_dims
        if isinstance(dims, (list, tuple)):
            dims = dims[self.meshes.index(mesh)] if len(dims) == len(self.meshes) else dims[0]
        placements = [Replicate()] * mesh.ndim
        if dims is not None:
            placements[mesh._dim_index(dims)] = Shard(0)
        return placements

    def _convert(self, value, mesh):
        if isinstance(value, Tensor) and not isinstance(value, DistTensor):
            placements = self._placements(mesh)
            if self.is_dataset_splitted:
                return dtensor_from_local(value, mesh, placements)
            return shard_tensor(value, mesh, placements)
        return value

    def __iter__(self):
        for batch in self.dataloader:
            if isinstance(batch, dict):
                yield {k: self._convert(v, self.meshes[0]) for k, v in batch.items()}
            elif isinstance(batch, (list, tuple)):
                n = len(batch)
                # inputs on the first mesh, the last field (the label) on the last mesh
                yield [self._convert(v, self.meshes[-1] if i == n - 1 else self.meshes[0])
                       for i, v in enumerate(batch)]
            else:
                yield self._convert(batch, self.meshes[0])

    def __call__(self):
        return iter(self)

    def __len__(self):
        return len(self.dataloader)


def shard_dataloader(dataloader, meshes, input_keys=None, shard_dims=None,
                     is_dataset_splitted=False):
    """A loader whose batches are distributed tensors on ``meshes``, split along the batch
    dim over mesh dim ``shard_dims`` (a name or index; None: replicated). Every process
    iterates the same global batches (unless ``is_dataset_splitted``: then each yields
    its own part). With several meshes (pipelines) the inputs go to the first and the
    label (the last field) to the last.

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> from primflow.io import DataLoader
        >>> mesh = dist.ProcessMesh([0], dim_names=["x"])
        >>> loader = dist.shard_dataloader(DataLoader([(1.0, 2.0)] * 4, batch_size=2),
        ...                                [mesh], shard_dims="x")
        >>> next(iter(loader))[0].placements
        [Shard(dim=0)]
    """
    return ShardDataloader(dataloader, meshes, input_keys, shard_dims, is_dataset_splitted)


# ---- to_static --------------------------------------------------------------------------------
class Strategy:
    """Settings of ``to_static`` (accepted for compatibility; primflow runs the step
    eagerly over MPI, so there is nothing to tune yet)."""

    def __init__(self, config=None):
        self.config = dict(config or {})


class DistModel:
    """The distributed training step of ``to_static``: call it with a batch.

    In ``train()`` mode ``model(*inputs, label)`` runs forward, loss, backward and one
    optimizer step and returns the loss; ``eval()`` returns the loss only; ``predict()``
    returns the layer's outputs.
    """

    def __init__(self, layer, loader, loss, optimizer, strategy=None):
        self.network = layer
        self.loader = loader
        self._loss_fn = loss
        self._optimizer = optimizer
        self._strategy = strategy
        if loss is not None and optimizer is not None:
            self._mode = "train"
        elif loss is not None:
            self._mode = "eval"
        else:
            self._mode = "predict"

    def train(self):
        if self._loss_fn is None or self._optimizer is None:
            raise RuntimeError("DistModel.train() needs the loss and the optimizer passed to "
                               "dist.to_static")
        self._mode = "train"
        self.network.train()

    def eval(self):
        if self._loss_fn is None:
            raise RuntimeError("DistModel.eval() needs the loss passed to dist.to_static")
        self._mode = "eval"
        self.network.eval()

    def predict(self):
        self._mode = "predict"
        self.network.eval()

    def __call__(self, *args):
        if self._mode == "predict":
            with no_grad():
                return self.network(*args)
        if len(args) < 2:
            raise TypeError("DistModel in train/eval mode is called as model(*inputs, label)")
        *inputs, label = args
        if self._mode == "eval":
            with no_grad():
                return self._loss_fn(self.network(*inputs), label)
        loss = self._loss_fn(self.network(*inputs), label)
        loss.backward()
        reduce_gradients(self.network.parameters())
        self._optimizer.step()
        self._optimizer.clear_grad()
        return loss

    def state_dict(self, mode="all"):
        return self.network.state_dict()


def to_static(layer, loader=None, loss=None, optimizer=None, strategy=None, input_spec=None):
    """A ``DistModel``: the distributed training step of ``layer`` with ``loss`` and
    ``optimizer`` (Paddle's ``dist.to_static``; mode train if both are given, eval with a
    loss only, predict with neither).

    Example:
        >>> import primflow as pf
        >>> import primflow.distributed as dist
        >>> net = pf.nn.Linear(2, 1)
        >>> model = dist.to_static(net, None, pf.nn.MSELoss(),
        ...                        pf.optimizer.SGD(0.1, parameters=net.parameters()))
        >>> model.train()
        >>> loss = model(pf.ones([4, 2]), pf.zeros([4, 1]))
        >>> loss.shape
        []
    """
    return DistModel(layer, loader, loss, optimizer, strategy)
