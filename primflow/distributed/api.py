"""Paddle 3's user-level auto-parallel API: ``shard_layer``, ``shard_optimizer`` (ZeRO
stage 1), ``shard_dataloader`` and ``to_static`` (a ``DistModel`` you call per batch).
"""

from __future__ import annotations

import contextlib

from ..autodiff import grad as autodiff_grad
from ..core.state import enable_grad, no_grad
from ..core.tensor import Tensor
from ..backends import communicator as comms
from ..ops import astype as cast
from ..transforms.jit import Jitted
from .dtensor import DistTensor, dtensor_from_local, from_local_like, reshard, shard_tensor, staging
from .grad_sync import reduce_gradients, reduced_gradients
from .layout import is_member
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
    """Settings of ``to_static`` (accepted for compatibility; there is nothing to tune yet).

    Example:
        >>> import primflow.distributed as dist
        >>> dist.Strategy({"sharding": {"enable": False}}).config["sharding"]
        {'enable': False}
    """

    def __init__(self, config=None):
        self.config = dict(config or {})


class DistModel:
    """The distributed training step of ``to_static``: call it with a batch.

    In ``train()`` mode ``model(*inputs, label)`` runs forward, loss, backward and one
    optimizer step and returns the loss; ``eval()`` returns the loss only; ``predict()``
    returns the layer's outputs.

    The step is compiled (``pf.jit``) per batch layout when every parameter is a
    distributed tensor on one mesh that includes this rank: forward, loss and gradients
    become one program per rank in which the communication is explicit, as collective
    primitives (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``);
    ``lower()`` shows it. The optimizer update then runs eagerly on the distributed
    parameters: primflow's optimizers update parameters in place with a Python step count
    and learning rate, which have no traced (functional) form yet. Other models (plain
    parameters, pipelines over several meshes) run the same step eagerly. ``pf.jit`` of any
    function called with distributed tensors compiles the same way (``staged_jit.py``).
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
        self._programs = {}  # mode -> the jitted step
        # the call being traced: its signature's layouts (global shapes, placements, which
        # parameters train) and the layouts of its arguments (None: not distributed)
        self._layouts = None
        self._templates = None
        self._last = {}  # mode -> what lower() needs to find the last call's program

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
        if self._mode != "predict" and len(args) < 2:
            raise TypeError("DistModel in train/eval mode is called as model(*inputs, label)")
        mesh = self._compiled_mesh(args)
        if mesh is not None:
            return self._run_compiled(mesh, args)
        return self._run_eager(args)

    # ---- eager ------------------------------------------------------------------------------
    def _run_eager(self, args):
        if self._mode == "predict":
            with no_grad():
                return self.network(*args)
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

    # ---- compiled ------------------------------------------------------------------------
    def _compiled_mesh(self, args):
        """The mesh of a model whose step compiles (see the class docstring), else None."""
        params = self.network.parameters()
        if not params or not all(isinstance(p, DistTensor) for p in params):
            return None
        mesh = params[0].process_mesh
        if any(p.process_mesh != mesh for p in params) or not is_member(mesh):
            return None
        for a in args:
            if isinstance(a, DistTensor):
                if a.process_mesh != mesh:
                    return None
            elif not isinstance(a, Tensor):
                return None
        return mesh

    def _program(self, mode):
        program = self._programs.get(mode)
        if program is None:
            def step(param_blocks, arg_blocks):
                return self._step(mode, param_blocks, arg_blocks)

            step.__name__ = step.__qualname__ = f"dist_{mode}_step"
            # the layouts (global shapes, placements) are part of the signature: equal
            # blocks can belong to different global tensors
            program = self._programs[mode] = Jitted(step, extra_key=lambda: self._layouts,
                                                    name=f"dist_{mode}_step")
        return program

    def _step(self, mode, param_blocks, arg_blocks):
        """The traced step on this rank's blocks: forward, loss and (train) the gradients
        reduced to the parameters' placements; returns the blocks of the results."""
        params = self.network.parameters()
        with staging(), enable_grad():
            dparams = [from_local_like(b, p) for b, p in zip(param_blocks, params)]
            dargs = [b if t is None else from_local_like(b, t)
                     for b, t in zip(arg_blocks, self._templates)]
            if mode == "train":
                for dp, p in zip(dparams, params):
                    dp.stop_gradient = p.stop_gradient  # frozen parameters get no gradient
            if mode == "predict":
                with _parameters_replaced(self.network, dparams):
                    out = self.network(*dargs)
                return [_block_of(_replicated(o)) for o in _as_list(out)]
            with _parameters_replaced(self.network, dparams):
                loss = self._loss_fn(self.network(*dargs[:-1]), dargs[-1])
            loss = _replicated(loss)
            if mode == "eval":
                return [_block_of(loss)]
            trainable = [p for p in dparams if not p.stop_gradient]
            grads = iter(reduced_gradients(  # bucketed, as reduce_gradients
                autodiff_grad(loss, trainable, allow_unused=True), trainable)
                if trainable else ())
            return [_block_of(loss)] + [None if p.stop_gradient else _block_of(next(grads))
                                        for p in dparams]

    def _prepare(self, mode, args):
        """This rank's blocks of the parameters and ``args``, with the signature's layouts
        set for tracing."""
        params = self.network.parameters()
        param_blocks = [p._local.detach() for p in params]
        arg_blocks = [a._local.detach() if isinstance(a, DistTensor) else a for a in args]
        self._templates = [_Template.of(a) for a in args]
        self._layouts = (mode, tuple((_Template.of(p).key, p.stop_gradient) for p in params),
                         tuple(None if t is None else t.key for t in self._templates))
        return param_blocks, arg_blocks

    def _run_compiled(self, mesh, args):
        mode = self._mode
        params = self.network.parameters()
        param_blocks, arg_blocks = self._prepare(mode, args)
        program = self._program(mode)
        with no_grad():
            blocks = program(param_blocks, arg_blocks)
        # what lower() needs to find this program again (not the arrays: they would pin
        # the old parameter values in memory)
        self._last[mode] = (self._templates, self._layouts,
                            [(b._shape, b.dtype, b.stop_gradient) for b in arg_blocks])
        if mode == "predict":
            outs = [_global_from(b, mesh) for b in blocks]
            return outs[0] if len(outs) == 1 else outs
        loss = _global_from(blocks[0], mesh)
        if mode == "train":
            for p, g in zip(params, blocks[1:]):
                if g is not None and not p.stop_gradient:
                    p.grad = from_local_like(g, p)
            self._optimizer.step()
            self._optimizer.clear_grad()
        return loss

    def lower(self, *args, mode=None):
        """The compiled program of the step (``lower().as_text()`` prints it, collectives
        included) for the batch ``args``, or for the last batch the model ran.

        Example:
            >>> import primflow as pf
            >>> import primflow.distributed as dist
            >>> mesh = dist.ProcessMesh([0], dim_names=["x"])
            >>> net = dist.shard_layer(pf.nn.Linear(2, 1), mesh)
            >>> model = dist.to_static(net, None, pf.nn.MSELoss(),
            ...                        pf.optimizer.SGD(0.1, parameters=net.parameters()))
            >>> x = dist.shard_tensor(pf.ones([4, 2]), mesh, [dist.Shard(0)])
            >>> _ = model(x, pf.zeros([4, 1]))
            >>> "all_reduce" in model.lower().as_text()
            True
        """
        mode = mode or self._mode
        if args:
            if self._compiled_mesh(args) is None:
                raise ValueError("DistModel.lower: this model's step runs eagerly (its "
                                 "parameters are not all distributed tensors on one mesh "
                                 "with this rank), so it has no program")
            param_blocks, arg_blocks = self._prepare(mode, args)
        elif mode in self._last:
            self._templates, self._layouts, arg_avals = self._last[mode]
            param_blocks = [p._local.detach() for p in self.network.parameters()]
            arg_blocks = []
            for shape, dtype, stop in arg_avals:  # stand-ins of the same signature
                block = Tensor._wrap(comms.empty(shape, dtype))
                block.stop_gradient = stop
                arg_blocks.append(block)
        else:
            raise ValueError(f"DistModel.lower: no {mode} step has run yet; pass a batch: "
                             f"model.lower(*inputs, label)")
        with no_grad():
            return self._program(mode).lower(param_blocks, arg_blocks)

    def dist_main_program(self, mode=None):
        """The optimized program of the last compiled step of ``mode`` (Paddle's name; the
        IR program ``lower().program``: ``.as_text()`` prints it)."""
        return self.lower(mode=mode).program

    def state_dict(self, mode="all"):
        return self.network.state_dict()


@contextlib.contextmanager
def _parameters_replaced(layer, values):
    """``layer`` with its parameters (in ``parameters()`` order) replaced by ``values``
    while the block runs (``pf.nn.functional_call``, which this layer may not import)."""
    replace = {id(p): v for p, v in zip(layer.parameters(), values)}
    swapped = []
    try:
        for sub in layer.sublayers(include_self=True):
            for key, old in sub._parameters.items():
                if old is not None and id(old) in replace:
                    swapped.append((sub._parameters, key, old))
                    sub._parameters[key] = replace[id(old)]
        yield
    finally:
        for table, key, old in reversed(swapped):
            table[key] = old


class _Template:
    """The layout of a distributed tensor (mesh, placements, global shape): what
    ``from_local_like`` needs to rebuild it from a block."""

    def __init__(self, mesh, specs, shape):
        self._mesh, self._specs, self._shape = mesh, tuple(specs), tuple(shape)
        self.key = (mesh, self._specs, self._shape)

    @classmethod
    def of(cls, x):
        if not isinstance(x, DistTensor):
            return None
        return cls(x.process_mesh, x._specs, x._shape)


def _replicated(x):
    if not isinstance(x, DistTensor):
        return x
    return reshard(x, x.process_mesh, [Replicate()] * x.process_mesh.ndim)


def _block_of(x):
    return x._local if isinstance(x, DistTensor) else x


def _as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _global_from(block, mesh):
    """A replicated distributed tensor on ``mesh`` from this rank's (whole) block."""
    return from_local_like(block, _Template(mesh, (None,) * mesh.ndim, block._shape))


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
