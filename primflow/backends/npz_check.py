"""Checks an ``.npz`` archive's structure before NumPy reads it, so that a small crafted file
cannot make loading allocate more than the file holds.

NumPy's ``np.load`` trusts each member's ``.npy`` header: a 4 MB file whose header declares
a 4 GB array makes it allocate 4 GB before it finds the data missing, and a deflated member
can expand a thousandfold. ``check_archive`` reads only the zip directory and each member's
``.npy`` header (a few hundred bytes) and raises ``ValueError`` naming the member and the
problem unless every member's declared size is exactly the data it holds, the members
together hold no more than the file, no name repeats and no dtype holds Python objects.
"""

from __future__ import annotations

import math
import os
import zipfile

from numpy.lib import format as npy_format

__all__ = ["ObjectArrayError", "check_archive"]


class ObjectArrayError(ValueError):
    """A member holds pickled Python objects (dtype object), which are never loaded."""

_READ_HEADER = {(1, 0): npy_format.read_array_header_1_0,
                (2, 0): npy_format.read_array_header_2_0,
                # 3.0 differs from 2.0 only by a UTF-8 (not latin-1) header: same layout
                (3, 0): npy_format.read_array_header_2_0}


def check_archive(file):
    """Raises ``ValueError`` unless ``file`` (an open binary file or a path) is a zip of ``.npy`` members
    whose declared sizes fit the file (see the module docstring); leaves ``file`` at 0.

    Example:
        >>> import io
        >>> import numpy as np
        >>> buf = io.BytesIO()
        >>> np.savez(buf, a=np.arange(3.0))
        >>> check_archive(buf)
    """
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as f:
            check_archive(f)
        return
    file.seek(0, 2)
    size = file.tell()
    file.seek(0)
    with zipfile.ZipFile(file) as archive:
        infos = archive.infolist()
        seen = set()
        for info in infos:
            if info.filename in seen:
                raise ValueError(f"the archive holds the member {info.filename!r} twice")
            seen.add(info.filename)
        declared = sum(info.file_size for info in infos)
        if declared > size:
            raise ValueError(f"its members declare {declared:,} bytes of data, more than the "
                             f"whole file holds ({size:,} bytes)")
        for info in infos:
            _check_member(archive, info)
    file.seek(0)


def _check_member(archive, info):
    name = info.filename
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ValueError(f"member {name!r} uses zip compression method {info.compress_type}; "
                         f"checkpoints are stored uncompressed")
    if not name.endswith(".npy"):
        raise ValueError(f"member {name!r} is not a .npy array")
    with archive.open(info) as member:
        version = npy_format.read_magic(member)
        if version not in _READ_HEADER:
            raise ValueError(f"member {name!r} has .npy format version {version}")
        shape, _, dtype = _READ_HEADER[version](member)
        offset = member.tell()
    if dtype.hasobject:
        raise ObjectArrayError(f"member {name!r} holds Python objects (dtype {dtype}), which only "
                         f"pickle can read; primflow never unpickles")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ValueError(f"member {name!r} declares the invalid shape {shape}")
    declared = math.prod(shape) * dtype.itemsize
    if declared != info.file_size - offset:
        raise ValueError(f"member {name!r} declares a {dtype} array of shape {list(shape)} "
                         f"({declared:,} bytes) but holds {info.file_size - offset:,} bytes "
                         f"of data")
