"""Distributed checkpoints (Paddle's ``dist.save_state_dict`` / ``dist.load_state_dict``).

``save_state_dict`` writes, into the folder ``path``, one archive per rank with that rank's
blocks (``<rank>_<save id>.distcp``: raw arrays, never pickled) and, last, ``metadata.json``:
the commit marker. It names the save's id and every archive with its size and SHA-256, and
holds the state dict's plain values (ints, floats, strings, lists of them: an optimizer's
``step`` and learning rate). Each save writes archives under a new id, so a save that is
killed half-way leaves the previous checkpoint whole (its metadata still names its own
archives, which nothing overwrote); the commit removes the previous save's archives. On
load every archive is checked against the metadata (size, hash, save id) before it is
read: an archive from another save, a truncated or altered one is refused with a
``CheckpointError`` naming the file, never silently mixed in. Replicated blocks are stored
once (by the ranks at coordinate 0 of those mesh dims); partial tensors are reduced first.

``load_state_dict`` fills the tensors of a state dict in place from such a folder, each
rank reading the stored blocks that overlap the block it holds: a checkpoint saved on N
ranks with some placements loads onto M ranks with others (resharding on load), and onto
plain tensors. Plain values are put into the dict; the checkpoint's entries under a
sub-dict that is empty in the dict (a fresh optimizer's ``state``) are added, as plain
tensors and values, so ``opt.set_state_dict`` can restore them.

Checkpoints of the first format (``<rank>.distcp``, no hashes) still load, unchecked.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re

from ..backends import communicator as comms
from ..backends import get_backend
from ..core import dtypes
from ..core.tensor import Tensor
from ..core.trace import Tracer
from ..prims.sharding import is_shard, local_extent
from .dtensor import DistTensor, reshard
from .layout import coords, effective_shape, is_member, relayout
from .env import world
from .placement import from_spec

class CheckpointError(ValueError):
    """A distributed checkpoint that is partial or mixed (an archive missing, altered or
    from another save): ``dist.load_state_dict`` refuses it. A ValueError, as
    ``primflow.serialization.CheckpointError`` (``pf.load``'s) is."""


_FORMAT = "primflow-distcp-2"
_FORMAT_1 = "primflow-distcp-1"  # <rank>.distcp, no hashes: loads unchecked
_ARCHIVE = re.compile(r"^\d+(_[0-9a-f]+)?\.distcp$")
_PLAIN = (bool, int, float, str, type(None))


def _box(shape, specs, mesh):
    """The global [start, stop) per dim of this rank's block."""
    sizes, where = effective_shape(mesh), coords(mesh)
    box = [[0, n] for n in shape]
    for k, s in enumerate(specs):
        if is_shard(s):
            n = shape[s]
            c = -(-n // sizes[k])
            start = min(n, where[k] * c)
            box[s] = [start, start + local_extent(n, sizes[k], where[k])]
    return box


def _writes_block(specs, mesh):
    """Whether this rank stores its block (one copy of each replicated block)."""
    return all(c == 0 for c, s in zip(coords(mesh), specs) if not is_shard(s))


def _sha256(file):
    digest = hashlib.sha256()
    with open(file, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _atomic_write_arrays(file, arrays, header):
    tmp = f"{file}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        get_backend().save_arrays(fh, arrays, header)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, file)


def _plain_value(value, name):
    """``value`` if JSON holds it exactly (ints, floats, strings, None, lists of them)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)) and not any(isinstance(v, Tensor) for v in value):
        return [_plain_value(v, f"{name}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"save_state_dict: {name!r} is a {type(value).__name__}; a state dict "
                    f"holds tensors, dicts of them and plain values (int, float, str, bool, "
                    f"None and lists of these)")


def _save_id(comm, coordinator_rank):
    """A fresh id for this save, the same on every rank (the coordinator draws it)."""
    mine = random.SystemRandom().getrandbits(62) if comm.rank == coordinator_rank else 0
    return f"{int(comm.bcast(comms.int_buffer([mine]), coordinator_rank)[0]):016x}"


def _digest_ints(hexdigest, size):
    """A file's SHA-256 and size as 5 int64s (so ranks can gather them in one collective)."""
    raw = bytes.fromhex(hexdigest)
    return [int.from_bytes(raw[i:i + 8], "big", signed=True) for i in range(0, 32, 8)] + [size]


def _digest_hex(ints):
    return b"".join(int(v).to_bytes(8, "big", signed=True) for v in ints[:4]).hex()


def save_state_dict(state_dict, path, process_group=None, coordinator_rank=0):
    """Saves ``state_dict`` (name -> tensor, distributed or not, nested dicts, and plain
    values such as an optimizer's ``step``) into the folder ``path``; every rank calls it.

    Example:
        >>> import tempfile, primflow as pf
        >>> import primflow.distributed as dist
        >>> w = dist.shard_tensor(pf.arange(4.0), dist.ProcessMesh([0]), [dist.Shard(0)])
        >>> folder = tempfile.mkdtemp()
        >>> dist.save_state_dict({"w": w, "step": 3}, folder)
        >>> v = dist.shard_tensor(pf.zeros([4]), dist.ProcessMesh([0]), [dist.Replicate()])
        >>> state = {"w": v, "step": 0}
        >>> dist.load_state_dict(state, folder); v.numpy(), state["step"]
        (array([0., 1., 2., 3.], dtype=float32), 3)
    """
    comm = world()
    rank = comm.rank
    os.makedirs(path, exist_ok=True)
    arrays, blocks, values = {}, {}, {}
    for keys, t in _flatten(state_dict):
        name = ".".join(keys)
        if isinstance(t, DistTensor):
            if any(isinstance(s, str) for s in t._specs):  # partial: store the reduced value
                t = reshard(t, t._mesh, [from_spec(None if isinstance(s, str) else s)
                                         for s in t._specs])
            entry = {"shape": list(t._shape), "dtype": t.dtype.name,
                     "placements": [repr(p) for p in t.placements]}
            if is_member(t._mesh) and _writes_block(t._specs, t._mesh):
                arrays[name] = comms.to_numpy_copy(t._local._value)
                entry["box"] = _box(t._shape, t._specs, t._mesh)
        elif isinstance(t, Tensor) and not isinstance(t, Tracer):
            entry = {"shape": list(t._shape), "dtype": t.dtype.name,
                     "placements": ["global"]}
            if rank == coordinator_rank:
                arrays[name] = comms.to_numpy_copy(t._value)
                entry["box"] = [[0, n] for n in t._shape]
        elif isinstance(t, Tensor):
            raise TypeError(f"save_state_dict: {name!r} is a traced value inside a transform; "
                            f"save concrete tensors (outside pf.jit / pf.vmap / pf.grad)")
        else:
            values[name] = {"path": keys, "value": _plain_value(t, name)}
            continue
        entry["path"] = keys
        blocks[name] = entry
    save_id = _save_id(comm, coordinator_rank)
    header = json.dumps({"format": _FORMAT, "rank": rank, "save_id": save_id,
                         "blocks": blocks})
    archive = os.path.join(path, f"{rank}_{save_id}.distcp")
    _atomic_write_arrays(archive, arrays, header)
    # every archive is in place (and hashed) before the commit marker names them
    digests = comm.allgather_ints(_digest_ints(_sha256(archive), os.path.getsize(archive)))
    if rank == coordinator_rank:
        files = [{"name": f"{r}_{save_id}.distcp", "sha256": _digest_hex(d), "bytes": d[4]}
                 for r, d in enumerate(digests)]
        meta = {"format": _FORMAT, "save_id": save_id, "world_size": comm.size,
                "files": files, "values": values}
        tmp = os.path.join(path, f"metadata.json.tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(path, "metadata.json"))
        _remove_stale(path, {f["name"] for f in files})
    comm.barrier()


def _remove_stale(path, keep):
    """Deletes the archives of earlier (or interrupted) saves once a new one committed."""
    for name in os.listdir(path):
        stale = (_ARCHIVE.match(name) or ".distcp.tmp" in name or "metadata.json.tmp" in name)
        if stale and name not in keep:
            try:
                os.remove(os.path.join(path, name))
            except OSError:
                pass  # another process removed it first, or it is in use: harmless


def _flatten(state_dict, prefix=()):
    """(key path, leaf) pairs of a nested dict, keys as strings."""
    out = []
    for k, v in state_dict.items():
        keys = prefix + (str(k),)
        if isinstance(v, dict):
            out.extend(_flatten(v, keys))
        else:
            out.append((list(keys), v))
    return out


def _refuse(path, why):
    raise CheckpointError(f"load_state_dict: {path} is not a complete, consistent "
                          f"distributed checkpoint: {why}. Load an earlier checkpoint or "
                          f"save again")


def _read(path):
    meta_file = os.path.join(path, "metadata.json")
    if not os.path.exists(meta_file):
        raise FileNotFoundError(f"load_state_dict: {path} has no metadata.json: not a "
                                f"complete distributed checkpoint (was save_state_dict "
                                f"interrupted?)")
    try:
        with open(meta_file, encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, ValueError) as e:
        _refuse(path, f"its metadata.json cannot be read ({e})")
    if not isinstance(meta, dict) or meta.get("format") not in (_FORMAT, _FORMAT_1):
        raise ValueError(f"load_state_dict: {meta_file} is not a primflow distributed "
                         f"checkpoint (format {meta.get('format') if isinstance(meta, dict) else None!r})")
    checked = meta["format"] == _FORMAT
    pieces, values = {}, {}
    for f in meta["files"]:
        name = f["name"] if checked else f
        file = os.path.join(path, name)
        if checked:
            if not os.path.exists(file):
                _refuse(path, f"the archive {name} that metadata.json names is missing")
            size = os.path.getsize(file)
            if size != f["bytes"] or _sha256(file) != f["sha256"]:
                _refuse(path, f"the archive {name} is not the one this save wrote (its "
                              f"{'size' if size != f['bytes'] else 'SHA-256'} differs from "
                              f"metadata.json's: truncated, altered or from another save)")
        header, arrays = get_backend().load_arrays(file)
        info = json.loads(header)
        if checked and info.get("save_id") != meta["save_id"]:
            _refuse(path, f"the archive {name} belongs to save {info.get('save_id')!r}, "
                          f"metadata.json to save {meta['save_id']!r}")
        for key, entry in info["blocks"].items():
            pieces.setdefault(key, {"entry": entry, "blocks": []})
            if "box" in entry:
                pieces[key]["blocks"].append((entry["box"], arrays[key]))
    if checked:
        values = meta.get("values", {})
    return pieces, values


def load_state_dict(state_dict, path, process_group=None, coordinator_rank=0):
    """Fills the tensors of ``state_dict`` in place from the checkpoint folder ``path``,
    whatever the number of ranks and placements it was saved with, and puts its plain
    values into the dict (see the module docstring). Every rank calls it. Raises
    ``CheckpointError`` for an archive that does not belong to the save (a partial or
    mixed checkpoint). Example: see ``save_state_dict``."""
    pieces, values = _read(path)
    leaves = _flatten(state_dict)
    names = {".".join(keys) for keys, _ in leaves}
    for keys, t in leaves:
        name = ".".join(keys)
        if name in values:
            _put(state_dict, keys, values[name]["value"])
            continue
        if name not in pieces:
            raise KeyError(f"load_state_dict: {path} has no tensor {name!r} (it has "
                           f"{sorted(pieces) + sorted(values)})")
        if not isinstance(t, Tensor):  # a plain value saved as a tensor: take it whole
            _put(state_dict, keys, _whole(pieces[name], name))
            continue
        _fill(t, pieces[name], name)
    # the saved entries under a sub-dict that is empty here (a fresh optimizer's state)
    empty = _empty_dicts(state_dict)

    def below_empty(keys):
        return any(tuple(keys[:len(e)]) == e and len(keys) > len(e) for e in empty)

    for name, piece in pieces.items():
        keys = piece["entry"].get("path")
        if keys and below_empty(keys):
            _put(state_dict, keys, _whole(piece, name))
    for name, item in values.items():
        if below_empty(item["path"]):
            _put(state_dict, item["path"], item["value"])


def _fill(t, piece, name):
    entry = piece["entry"]
    if list(t._shape) != entry["shape"]:
        raise ValueError(f"load_state_dict: {name!r} was saved with shape "
                         f"{entry['shape']}, the tensor to fill has {list(t._shape)}")
    if isinstance(t, DistTensor):
        if not is_member(t._mesh):
            return
        specs = tuple(None if isinstance(s, str) else s for s in t._specs)
        box = _box(t._shape, specs, t._mesh)
    else:
        box = [[0, n] for n in t._shape]
    value = comms.assemble(box, piece["blocks"],
                           get_backend().native_dtype(dtypes.as_dtype(t.dtype)))
    if value is None:
        raise ValueError(f"load_state_dict: the stored blocks of {name!r} do not cover "
                         f"the part this rank needs")
    if isinstance(t, DistTensor):
        # a partial tensor gets the value on one rank and zeros on the others
        t._local = Tensor._wrap(value)
        if specs != t._specs:
            t._local = relayout(Tensor._wrap(value), t._shape, t._mesh, specs, t._specs)
        t._version += 1
    else:
        t._set_value(value)


def _whole(piece, name):
    """A stored tensor's global value as a new plain tensor."""
    entry = piece["entry"]
    value = comms.assemble([[0, n] for n in entry["shape"]], piece["blocks"],
                           get_backend().native_dtype(dtypes.as_dtype(entry["dtype"])))
    if value is None:
        raise ValueError(f"load_state_dict: the stored blocks of {name!r} do not cover it")
    return Tensor._wrap(value)


def _empty_dicts(state_dict, prefix=()):
    """The key paths of the empty sub-dicts of ``state_dict`` (where a fresh optimizer's
    ``state`` is), as tuples of strings."""
    out = []
    for k, v in state_dict.items():
        if isinstance(v, dict):
            keys = prefix + (str(k),)
            out.extend(_empty_dicts(v, keys) if v else [keys])
    return out


def _put(state_dict, keys, value):
    """Sets the entry at ``keys`` (strings; the dict's own key where one matches, so an int
    key stays an int), creating the innermost missing dicts."""
    node = state_dict
    for k in keys[:-1]:
        match = [key for key in node if str(key) == k]
        node = node[match[0]] if match else node.setdefault(k, {})
    match = [key for key in node if str(key) == keys[-1]]
    node[match[0] if match else keys[-1]] = value
