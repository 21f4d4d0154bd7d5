"""``pf.save`` / ``pf.load``: checkpoints of state dicts and nested containers, in a format
that loading can never turn into code execution.

Format: one ``.npz`` archive (a zip of ``.npy`` arrays, written and read by the backend,
never pickled) holding every tensor and array as ``a0, a1, ...`` plus a JSON header that
records the nesting (dict / list / tuple), the plain values (int, float, str, bool, None)
and, for each array, whether it was a tensor, its dtype and its shape. Loading checks the
header against the arrays, so a truncated, corrupt or foreign file fails with an error
that names the file and what is wrong.

Writes are atomic: the archive goes to a temporary file in the same folder
(``.NAME.<pid>-<host>.<random>.tmp``: one per writer, so concurrent saves of one path never
share it), is flushed and fsynced, then renamed over the target with ``os.replace``; a
crash mid-write leaves any previous file intact, and the next save of the same path
deletes the temporary files of writers that are no longer alive.

Loading trusts nothing in the file: the nesting of the header is limited
(``MAX_DEPTH``), and every array's declared size is checked against the bytes the file
holds before anything is allocated, so a small crafted file cannot exhaust the stack or
the memory.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import time
import zlib

from .backends import get_backend
from .backends.npz_check import ObjectArrayError
from .core.trace import Tracer
from .core.tensor import Tensor

__all__ = ["CheckpointError", "load", "save"]

FORMAT = "primflow.checkpoint"
VERSION = 1
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
# how deeply containers may nest (a state dict nests a few levels; a crafted header nested
# thousands deep would otherwise exhaust the stack while decoding)
MAX_DEPTH = 100


class CheckpointError(ValueError):
    """A file is not a readable primflow checkpoint (corrupt, truncated or foreign)."""


# ---- encoding -------------------------------------------------------------------------------

def _is_array(obj):
    backend = get_backend()
    return backend.is_native(obj) or (
        hasattr(obj, "__array__") and hasattr(obj, "dtype") and hasattr(obj, "shape"))


def _encode_key(key, where):
    if isinstance(key, bool) or key is None:
        return [type(key).__name__ if key is not None else "none", key]
    if isinstance(key, str):
        return ["str", key]
    if isinstance(key, int):
        return ["int", key]
    if isinstance(key, float):
        return ["float", key.hex()]
    raise TypeError(f"pf.save: dict key {key!r} at {where} is a {type(key).__name__}; keys "
                    f"must be str, int, float, bool or None")


def _decode_key(enc):
    kind, value = enc
    if kind == "str":
        return str(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        return float.fromhex(value)
    if kind == "bool":
        return bool(value)
    if kind == "none":
        return None
    raise ValueError(f"unknown dict key kind {kind!r}")


class _Encoder:
    def __init__(self):
        self.arrays = {}

    def _store(self, native):
        key = f"a{len(self.arrays)}"
        self.arrays[key] = native
        return key

    def encode(self, obj, where, depth=0):
        if depth > MAX_DEPTH:
            raise ValueError(f"pf.save: {where} is nested more than {MAX_DEPTH} containers deep "
                             f"(a container that holds itself?); checkpoints nest at most "
                             f"{MAX_DEPTH} dicts/lists/tuples")
        if obj is None:
            return {"t": "none"}
        if isinstance(obj, bool):
            return {"t": "bool", "v": obj}
        if isinstance(obj, int):
            return {"t": "int", "v": obj}
        if isinstance(obj, float):
            return {"t": "float", "v": obj.hex()}
        if isinstance(obj, str):
            return {"t": "str", "v": obj}
        if isinstance(obj, Tracer) and not obj.is_dist():
            raise TypeError(f"pf.save: {where} is a traced value inside a transform; save "
                            f"concrete tensors (outside pf.jit / pf.vmap / pf.grad)")
        if isinstance(obj, Tensor):
            # a distributed tensor's _value is its global value, gathered over its mesh
            # (so every rank of the mesh calls pf.save, as for any collective)
            value = obj._value
            node = {"t": "tensor", "k": self._store(value), "dtype": obj.dtype.name,
                    "shape": obj.shape}
            if getattr(obj, "name", None):
                node["name"] = obj.name
            return node
        if isinstance(obj, dict):
            items = [[_encode_key(k, where), self.encode(v, f"{where}[{k!r}]", depth + 1)]
                     for k, v in obj.items()]
            return {"t": "dict", "items": items}
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {"t": kind, "items": [self.encode(v, f"{where}[{i}]", depth + 1)
                                         for i, v in enumerate(obj)]}
        if _is_array(obj):
            dtype = getattr(obj, "dtype", None)
            if getattr(dtype, "hasobject", False):
                raise TypeError(f"pf.save cannot store {where}, an array of dtype {dtype} "
                                f"(Python objects, which only pickle can write, and primflow "
                                f"never pickles): checkpoints hold arrays of bool, integer, "
                                f"float, complex or string dtype; convert it (e.g. "
                                f"np.asarray(value, dtype=float)) or store its items as a list")
            native = get_backend().asarray(obj)
            return {"t": "ndarray", "k": self._store(native), "dtype": str(native.dtype),
                    "shape": list(native.shape)}
        kind = type(obj).__name__
        hint = ""
        if hasattr(obj, "state_dict"):
            hint = f"; save its state instead: pf.save({where}.state_dict(), path)"
        raise TypeError(f"pf.save cannot store {where}, a {kind}: checkpoints hold tensors, "
                        f"arrays, int, float, str, bool, None and dicts/lists/tuples of "
                        f"them{hint}")


class _Decoder:
    def __init__(self, arrays, path, return_numpy):
        self.arrays = arrays
        self.used = set()
        self.path = path
        self.return_numpy = return_numpy

    def fail(self, what):
        raise CheckpointError(f"{self.path!s}: corrupt primflow checkpoint: {what}")

    def _array(self, node, where):
        key = node.get("k")
        if key not in self.arrays:
            self.fail(f"the header refers to array {key!r} for {where}, which the archive "
                      f"does not contain")
        if key in self.used:  # two entries sharing one array would alias each other
            self.fail(f"the header refers to array {key!r} twice (again for {where})")
        value = self.arrays[key]
        self.used.add(key)
        if list(value.shape) != list(node.get("shape", [])):
            self.fail(f"array for {where} has shape {list(value.shape)} but the header says "
                      f"{node.get('shape')}")
        return value

    def decode(self, node, where="obj", depth=0):
        if not isinstance(node, dict) or "t" not in node:
            self.fail(f"malformed header entry at {where}")
        if depth > MAX_DEPTH:
            self.fail(f"the header nests containers more than {MAX_DEPTH} deep (at {where})")
        kind = node["t"]
        try:
            if kind == "none":
                return None
            if kind in ("bool", "int", "str"):
                return {"bool": bool, "int": int, "str": str}[kind](node["v"])
            if kind == "float":
                return float.fromhex(node["v"])
            if kind == "dict":
                out = {}
                for enc_key, child in node["items"]:
                    key = _decode_key(enc_key)
                    if key in out:
                        self.fail(f"the dict at {where} holds the key {key!r} twice")
                    out[key] = self.decode(child, f"{where}[{key!r}]", depth + 1)
                return out
            if kind in ("list", "tuple"):
                items = [self.decode(c, f"{where}[{i}]", depth + 1)
                         for i, c in enumerate(node["items"])]
                return items if kind == "list" else tuple(items)
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, CheckpointError):
                raise
            self.fail(f"malformed header entry at {where}: {type(e).__name__}: {e}")
        if kind == "tensor":
            value = self._array(node, where)
            backend = get_backend()
            try:
                dtype = backend.dtype_of(value).name
            except TypeError:
                dtype = str(value.dtype)
            if dtype != node.get("dtype"):
                self.fail(f"tensor {where} has dtype {dtype} but the header says "
                          f"{node.get('dtype')}")
            if self.return_numpy:
                return backend.to_numpy(value)
            t = Tensor(value)  # stop_gradient=True
            if node.get("name"):
                t.name = node["name"]
            return t
        if kind == "ndarray":
            value = self._array(node, where)
            if str(value.dtype) != node.get("dtype"):
                self.fail(f"array {where} has dtype {value.dtype} but the header says "
                          f"{node.get('dtype')}")
            return get_backend().to_numpy(value)
        self.fail(f"unknown entry type {kind!r} at {where}")


# ---- public API -----------------------------------------------------------------------------

def save(obj, path, protocol=None, **configs):
    """Saves ``obj`` (a state dict or nested dict/list/tuple of tensors, NumPy arrays and
    plain values) to ``path`` atomically, in a safe format (no pickle).

    Args:
        obj: what to save, e.g. ``net.state_dict()`` or
            ``{"model": net.state_dict(), "opt": opt.state_dict(), "epoch": 3}``.
        path: the file to write (str or path-like; used exactly, no suffix is added).
            Missing parent folders are created.
        protocol, configs: accepted for Paddle compatibility; ignored.

    Example:
        >>> import os, tempfile
        >>> import primflow as pf
        >>> net = pf.nn.Linear(2, 3)
        >>> path = os.path.join(tempfile.mkdtemp(), "net.pdparams")
        >>> pf.save(net.state_dict(), path)
        >>> sorted(pf.load(path))
        ['bias', 'weight']
    """
    del protocol, configs
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"pf.save: {path!r} is a directory; give a file path such as "
                                f"{os.path.join(path, 'model.pdparams')!r}")
    encoder = _Encoder()
    root = encoder.encode(obj, "obj")
    header = json.dumps({"format": FORMAT, "version": VERSION, "root": root},
                        separators=(",", ":"))
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(path)
    _remove_stale_temporaries(folder, name)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-{_HOST}.{secrets.token_hex(6)}.tmp")
    # O_EXCL: never clobber another writer's temp file; 0o666 so the umask applies as usual
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            get_backend().save_arrays(f, encoder.arrays, header)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


# the writer of a temporary file: its process id and a tag of its host (a folder on a shared
# file system is written from several machines, whose process ids say nothing here)
_HOST = format(zlib.crc32(socket.gethostname().encode("utf-8", "replace")), "08x")
_TEMPORARY = re.compile(r"(?:(?P<pid>[0-9]+)-(?P<host>[0-9a-f]{8})\.)?[0-9a-f]{12}")
# a temporary file nobody has written to for this long belongs to no live save (used where
# the writer cannot be asked: another host, Windows, names from older primflow versions)
STALE_TEMPORARY_S = 3600


def _remove_stale_temporaries(folder, name):
    """Deletes the temporary files that saves of ``name`` killed mid-write left in ``folder``
    (each as large as the checkpoint): those of dead processes on this host, and those
    untouched for ``STALE_TEMPORARY_S``. A live writer's file is never touched."""
    prefix, suffix = f".{name}.", ".tmp"
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(suffix)):
            continue
        match = _TEMPORARY.fullmatch(entry.name[len(prefix):-len(suffix)])
        if match is None:
            continue
        try:
            if match["pid"] is not None and match["host"] == _HOST and os.name != "nt":
                stale = not _process_alive(int(match["pid"]))
            else:
                stale = now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMPORARY_S
            if stale:
                os.unlink(entry.path)
        except OSError:  # gone meanwhile, or not ours to delete: leave it
            pass


def _process_alive(pid):
    """Whether process ``pid`` exists on this (POSIX) host."""
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except (ProcessLookupError, OverflowError):  # (no process has an id that large)
        return False
    except OSError:  # exists but belongs to another user, or cannot tell: assume alive
        return True
    return True


def _fsync_folder(folder):
    """Makes the rename durable (POSIX); best effort elsewhere."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load(path, return_numpy=False, **configs):
    """Loads what ``pf.save`` wrote. Tensors come back as tensors with
    ``stop_gradient=True`` (NumPy arrays with ``return_numpy=True``), NumPy arrays as NumPy
    arrays, containers and plain values as they were (OrderedDicts as dicts).

    Raises:
        FileNotFoundError: no such file.
        CheckpointError (a ValueError): the file is not a primflow checkpoint (a pickle, a
            plain .npy/.npz, random bytes) or is truncated or corrupt; the message names the
            file and the problem. Nothing is ever unpickled.

    Example:
        >>> import os, tempfile
        >>> import primflow as pf
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
        >>> pf.save({"w": pf.ones([2]), "step": 7, "tags": ("a", None)}, path)
        >>> ckpt = pf.load(path)
        >>> ckpt["w"].numpy(), ckpt["step"], ckpt["tags"]
        (array([1., 1.], dtype=float32), 7, ('a', None))
    """
    del configs
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"pf.load: no such file: {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"pf.load: {path!r} is a directory, not a checkpoint file")
    with open(path, "rb") as f:
        magic = f.read(8)
        what = _sniff(magic)
        if what is not None:
            raise CheckpointError(f"{path}: not a primflow checkpoint: {what}")
        f.seek(0)
        try:
            header, arrays = get_backend().load_arrays(f)
        except Exception as e:  # noqa: BLE001 - every failure here means a damaged file
            if isinstance(e, ObjectArrayError) or "allow_pickle" in str(e):
                raise CheckpointError(f"{path}: not a primflow checkpoint: the archive holds "
                                      f"pickled object arrays, which primflow never loads "
                                      f"(unpickling can run arbitrary code)") from e
            raise CheckpointError(f"{path}: corrupt or truncated primflow checkpoint (the .npz "
                                  f"archive cannot be read: {type(e).__name__}: {e})") from e
    if header is None:
        raise CheckpointError(f"{path}: not a primflow checkpoint: it is an .npz archive "
                              f"without a primflow header (written by numpy.savez, not "
                              f"pf.save?); read it with numpy.load(path, allow_pickle=False)")
    try:
        meta = json.loads(header)
    except RecursionError as e:
        raise CheckpointError(f"{path}: corrupt primflow checkpoint: the header nests "
                              f"containers deeper than JSON can be read") from e
    except ValueError as e:
        raise CheckpointError(f"{path}: corrupt primflow checkpoint: the header is not valid "
                              f"JSON ({e})") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or "root" not in meta:
        raise CheckpointError(f"{path}: not a primflow checkpoint: unrecognised header")
    version = meta.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {version!r} is newer than "
                              f"this primflow reads ({VERSION}); upgrade primflow")
    decoder = _Decoder(arrays, path, return_numpy)
    obj = decoder.decode(meta["root"])
    extra = set(arrays) - decoder.used
    if extra:
        decoder.fail(f"the archive holds arrays the header does not describe: "
                     f"{sorted(extra)[:5]}")
    return obj


def _sniff(magic):
    """Why the first bytes rule the file out, or None if they look like a zip archive."""
    if magic.startswith(_ZIP_MAGIC):
        return None
    if not magic:
        return "the file is empty"
    if magic[:1] == b"\x80" or magic[:1] in (b"(", b"]", b"}"):
        return ("it looks like a pickle file; primflow never loads pickles because unpickling "
                "can run arbitrary code. Convert it with the library that wrote it and re-save "
                "with pf.save")
    if magic.startswith(_NPY_MAGIC):
        return "it is a single .npy array (numpy.save); read it with numpy.load"
    return f"unrecognised file format (first bytes {magic!r}; expected a zip/.npz archive)"
