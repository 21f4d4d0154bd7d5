"""Distributed checkpoints (Paddle's ``dist.save_state_dict`` / ``dist.load_state_dict``).

``save_state_dict`` writes, into the folder ``path``, one archive per rank with that rank's
blocks (``<rank>.distcp``: raw arrays, never pickled) and, last, ``metadata.json`` naming
every block's global position. Each file is written to a temporary name and renamed, and
the metadata (the commit marker) only after every rank's archive is in place, so a crash
leaves the previous checkpoint or none, never a mix. Replicated blocks are stored once
(by the ranks at coordinate 0 of those mesh dims); partial tensors are reduced first.

``load_state_dict`` fills the tensors of a state dict in place from such a folder, each
rank reading the stored blocks that overlap the block it holds: a checkpoint saved on N
ranks with some placements loads onto M ranks with others (resharding on load), and onto
plain tensors.
"""

from __future__ import annotations

import json
import os

from ..backends import communicator as comms
from ..backends import get_backend
from ..core import dtypes
from ..core.tensor import Tensor
from ..core.trace import Tracer
from ..prims.sharding import local_extent
from .dtensor import DistTensor, _coords, _effective_shape, _is_member, reshard
from .env import world
from .placement import from_spec

_FORMAT = "primflow-distcp-1"


def _box(shape, specs, mesh):
    """The global [start, stop) per dim of this rank's block."""
    sizes, coords = _effective_shape(mesh), _coords(mesh)
    box = [[0, n] for n in shape]
    for k, s in enumerate(specs):
        if isinstance(s, int) and not isinstance(s, bool):
            n = shape[s]
            c = -(-n // sizes[k])
            start = min(n, coords[k] * c)
            box[s] = [start, start + local_extent(n, sizes[k], coords[k])]
    return box


def _writes_block(specs, mesh):
    """Whether this rank stores its block (one copy of each replicated block)."""
    coords = _coords(mesh)
    return all(c == 0 for c, s in zip(coords, specs) if not isinstance(s, int) or
               isinstance(s, bool))


def _atomic_write_arrays(file, arrays, header):
    tmp = f"{file}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        get_backend().save_arrays(fh, arrays, header)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, file)


def save_state_dict(state_dict, path, process_group=None, coordinator_rank=0):
    """Saves ``state_dict`` (name -> tensor, distributed or not) into the folder ``path``;
    every rank calls it.

    Example:
        >>> import tempfile, primflow as pf
        >>> import primflow.distributed as dist
        >>> w = dist.shard_tensor(pf.arange(4.0), dist.ProcessMesh([0]), [dist.Shard(0)])
        >>> folder = tempfile.mkdtemp()
        >>> dist.save_state_dict({"w": w}, folder)
        >>> v = dist.shard_tensor(pf.zeros([4]), dist.ProcessMesh([0]), [dist.Replicate()])
        >>> dist.load_state_dict({"w": v}, folder); v.numpy()
        array([0., 1., 2., 3.], dtype=float32)
    """
    comm = world()
    rank = comm.rank
    os.makedirs(path, exist_ok=True)
    arrays, blocks = {}, {}
    for name, t in _flatten(state_dict).items():
        if isinstance(t, DistTensor):
            if any(isinstance(s, str) for s in t._specs):  # partial: store the reduced value
                t = reshard(t, t._mesh, [from_spec(None if isinstance(s, str) else s)
                                         for s in t._specs])
            entry = {"shape": list(t._shape), "dtype": t.dtype.name,
                     "placements": [repr(p) for p in t.placements]}
            if _is_member(t._mesh) and _writes_block(t._specs, t._mesh):
                arrays[name] = comms.to_numpy_copy(t._local._value)
                entry["box"] = _box(t._shape, t._specs, t._mesh)
        elif isinstance(t, Tensor) and not isinstance(t, Tracer):
            entry = {"shape": list(t._shape), "dtype": t.dtype.name,
                     "placements": ["global"]}
            if rank == coordinator_rank:
                arrays[name] = comms.to_numpy_copy(t._value)
                entry["box"] = [[0, n] for n in t._shape]
        else:
            raise TypeError(f"save_state_dict: {name!r} is a {type(t).__name__}; only tensors "
                            f"can be saved")
        blocks[name] = entry
    header = json.dumps({"format": _FORMAT, "rank": rank, "blocks": blocks})
    _atomic_write_arrays(os.path.join(path, f"{rank}.distcp"), arrays, header)
    comm.barrier()  # every archive is in place before the commit marker
    if rank == coordinator_rank:
        meta = {"format": _FORMAT, "world_size": comm.size,
                "files": [f"{r}.distcp" for r in range(comm.size)]}
        tmp = os.path.join(path, f"metadata.json.tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(path, "metadata.json"))
    comm.barrier()


def _flatten(state_dict, prefix=""):
    out = {}
    for k, v in state_dict.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _read(path):
    meta_file = os.path.join(path, "metadata.json")
    if not os.path.exists(meta_file):
        raise FileNotFoundError(f"load_state_dict: {path} has no metadata.json: not a "
                                f"complete distributed checkpoint (was save_state_dict "
                                f"interrupted?)")
    with open(meta_file, encoding="utf-8") as fh:
        meta = json.load(fh)
    if meta.get("format") != _FORMAT:
        raise ValueError(f"load_state_dict: {meta_file} is not a primflow distributed "
                         f"checkpoint (format {meta.get('format')!r})")
    pieces = {}
    for f in meta["files"]:
        header, arrays = get_backend().load_arrays(os.path.join(path, f))
        info = json.loads(header)
        for name, entry in info["blocks"].items():
            pieces.setdefault(name, {"entry": entry, "blocks": []})
            if "box" in entry:
                pieces[name]["blocks"].append((entry["box"], arrays[name]))
    return pieces


def load_state_dict(state_dict, path, process_group=None, coordinator_rank=0):
    """Fills the tensors of ``state_dict`` in place from the checkpoint folder ``path``,
    whatever the number of ranks and placements it was saved with (see the module
    docstring). Every rank calls it. Example: see ``save_state_dict``."""
    pieces = _read(path)
    for name, t in _flatten(state_dict).items():
        if name not in pieces:
            raise KeyError(f"load_state_dict: {path} has no tensor {name!r} (it has "
                           f"{sorted(pieces)})")
        entry = pieces[name]["entry"]
        if list(t._shape) != entry["shape"]:
            raise ValueError(f"load_state_dict: {name!r} was saved with shape "
                             f"{entry['shape']}, the tensor to fill has {list(t._shape)}")
        if isinstance(t, DistTensor):
            if not _is_member(t._mesh):
                continue
            specs = tuple(None if isinstance(s, str) else s for s in t._specs)
            box = _box(t._shape, specs, t._mesh)
        else:
            box = [[0, n] for n in t._shape]
        value = comms.assemble(box, pieces[name]["blocks"],
                               get_backend().native_dtype(dtypes.as_dtype(t.dtype)))
        if value is None:
            raise ValueError(f"load_state_dict: the stored blocks of {name!r} do not cover "
                             f"the part this rank needs")
        if isinstance(t, DistTensor):
            # a partial tensor gets the value on one rank and zeros on the others
            t._local = Tensor._wrap(value)
            if specs != t._specs:
                from .dtensor import relayout  # noqa: PLC0415

                t._local = relayout(Tensor._wrap(value), t._shape, t._mesh, specs, t._specs)
            t._version += 1
        else:
            t._set_value(value)
