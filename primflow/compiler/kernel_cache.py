"""The numba kernel cache on disk, trusted only as far as primflow wrote it.

Loading a kernel runs code from the cache folder: the generated ``k_<sha>.py`` /
``L_<sha>.py`` source, and numba's index (``.nbi``) and compiled code (``.nbc``), which
numba *unpickles*. So what holds here:

* the folder (``pf.config.cache_dir`` and its ``numba/`` and ``numba/__pycache__/``) is
  created mode 0700, and a folder that another user owns or that others can write is
  refused with a message naming it and the fix (``UnsafeCacheError``), as ssh refuses
  its own folder;
* every file primflow writes or lets numba write there is signed: a ``NAME.sig`` beside it
  holds an HMAC-SHA256 of its name and bytes under a per-user secret key
  (``.primflow-cache-key``, 32 random bytes, mode 0600, in the 0700 folder). Before numba
  may read a kernel's files they are verified; any that is not signed, or whose bytes
  changed since (a planted pickle, a foreign ``.pyc``, a truncated ``.nbi``), is deleted and
  the kernel compiled again, and the caller gets one notice naming the files;
* the source is never imported through Python's import system (which would prefer a
  planted ``.pyc`` in ``__pycache__``): it is read, verified and compiled from its text;
* a kernel's verify-load-sign runs under an exclusive lock per kernel (``k_<sha>.lock``),
  so processes sharing the cache (MPI ranks) never take each other's fresh, still
  unsigned files for planted ones; the operating system drops the lock of a process
  that dies.

This module uses only the standard library: the compile worker (``numba_worker.py``, run
as a script without importing primflow) loads kernels through it too.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import time

__all__ = ["KEY_NAME", "LOCK_TIMEOUT_S", "SIGNATURE_SUFFIX", "KernelCacheError",
           "UnsafeCacheError", "locked", "prepare_folder", "read_source", "remove_unsigned",
           "secret_key", "sign", "sign_entry", "try_lock_file", "write_source"]

KEY_NAME = ".primflow-cache-key"
SIGNATURE_SUFFIX = ".sig"
LOCK_TIMEOUT_S = 600  # another process compiling one kernel for longer than this is stuck
_KEY_BYTES = 32
_DOMAIN = b"primflow kernel cache v1\0"  # signatures of nothing else verify here


class KernelCacheError(OSError):
    """A kernel cache file cannot be trusted or used."""


class UnsafeCacheError(KernelCacheError, PermissionError):
    """The kernel cache folder could be written by someone else."""


# ---- the folder ---------------------------------------------------------------------------

def prepare_folder(folder):
    """Creates ``folder``, its parent (the cache root) and its ``__pycache__`` (where numba
    writes) with mode 0700 where missing, and checks all three (``check_folder``).

    Example:
        >>> import os, tempfile
        >>> root = tempfile.mkdtemp()
        >>> prepare_folder(os.path.join(root, "cache", "numba"))
        >>> oct(os.stat(os.path.join(root, "cache", "numba", "__pycache__")).st_mode & 0o777)
        '0o700'
    """
    root = os.path.dirname(folder)
    for path in (root, folder, os.path.join(folder, "__pycache__")):
        _make_private_folder(path)
        check_folder(path)


def _make_private_folder(path):
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)  # above the cache: the user's own folders
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    os.chmod(path, 0o700)  # whatever the umask


def check_folder(path):
    """Raises ``UnsafeCacheError`` unless ``path`` is a folder owned by the current user
    that neither its group nor others can write (no check on Windows, whose folders carry
    no POSIX modes)."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{path} is not a folder")
    if not hasattr(os, "getuid"):
        return
    uid = os.getuid()
    if st.st_uid != uid:
        raise UnsafeCacheError(
            f"the kernel cache folder {path} belongs to {_user(st.st_uid)}, not to you "
            f"({_user(uid)}); pf.jit runs the code kept there, so it does not use a folder "
            f"someone else controls. Fix: delete it (primflow then creates its own, mode "
            f"700) or set pf.config.cache_dir to a folder of your own")
    if st.st_mode & 0o022:
        raise UnsafeCacheError(
            f"the kernel cache folder {path} can be written by "
            f"{'other users' if st.st_mode & 0o002 else 'its group'} (mode "
            f"{stat.S_IMODE(st.st_mode):o}); pf.jit runs the code kept there, so it refuses "
            f"such a folder. Fix: chmod 700 {path}, or set pf.config.cache_dir to a folder "
            f"only you can write")


def _user(uid):
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


# ---- the key and signatures -------------------------------------------------------------------

def secret_key(folder):
    """This user's signing key, kept in ``folder`` (created on first use, mode 0600). A key
    file that is not a private 32-byte file of this user is replaced, which invalidates
    every signature (the kernels are compiled again)."""
    path = os.path.join(folder, KEY_NAME)
    for _ in range(5):
        key = _read_key(path)
        if key is not None:
            return key
        tmp = os.path.join(folder, f".key.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(_KEY_BYTES))
            try:
                os.link(tmp, path)  # atomic, and never replaces another process's key
            except FileExistsError:
                if _read_key(path) is None:  # a damaged key file: replace it
                    os.replace(tmp, path)
            except OSError:  # no hard links on this file system
                os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    raise KernelCacheError(f"cannot create the kernel cache key {path}")


def _read_key(path):
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError:  # a link or something unreadable: replace it
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        key = f.read(_KEY_BYTES + 1)
    private = not hasattr(os, "getuid") or (st.st_uid == os.getuid() and not st.st_mode & 0o077)
    if stat.S_ISREG(st.st_mode) and private and len(key) == _KEY_BYTES:
        return key
    with contextlib.suppress(OSError):
        os.unlink(path)
    return None


def _digest(key, path, data):
    name = os.path.basename(path).encode("utf-8", "surrogateescape")
    return hmac.new(key, _DOMAIN + name + b"\0" + data, hashlib.sha256).hexdigest()


def sign(path, key, data=None):
    """Writes the signature of the file at ``path`` (of ``data``, its bytes, if given)."""
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    _write_atomically(path + SIGNATURE_SUFFIX, _digest(key, path, data).encode("ascii"))


def _signed_bytes(path, key):
    """The bytes of the file at ``path`` if its signature verifies, else None."""
    try:
        with open(path + SIGNATURE_SUFFIX, "rb") as f:
            signature = f.read(128).decode("ascii", "replace")
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if hmac.compare_digest(signature, _digest(key, path, data)) else None


def _write_atomically(path, data):
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ---- kernel sources ---------------------------------------------------------------------------

def write_source(path, source):
    """Makes the file at ``path`` hold exactly ``source``, signed: rewritten when it holds
    anything else (a changed file is written again rather than run), left alone (so
    numba's cache of it stays fresh) and only signed when it already holds ``source``."""
    folder = os.path.dirname(path)
    prepare_folder(folder)
    key = secret_key(folder)
    data = source.encode("utf-8")
    try:
        with open(path, "rb") as f:
            same = f.read() == data
    except OSError:
        same = False
    if not same:
        _write_atomically(path, data)
    if not same or _signed_bytes(path, key) is None:
        sign(path, key, data)


def read_source(path, key):
    """The verified text of the kernel source at ``path``; ``KernelCacheError`` if it is
    not what primflow wrote."""
    data = _signed_bytes(path, key)
    if data is None:
        raise KernelCacheError(f"the kernel source {path} is not signed by primflow (changed "
                               f"or planted since it was written); it is not run")
    return data.decode("utf-8")


# ---- numba's files ---------------------------------------------------------------------------

def _entry_files(cache_path, stem):
    """The names of kernel ``stem``'s files in ``cache_path``, and of their signatures."""
    try:
        names = sorted(os.listdir(cache_path))
    except FileNotFoundError:
        return [], []
    mine = [n for n in names if n.startswith(stem + ".")]
    return ([n for n in mine if not n.endswith(SIGNATURE_SUFFIX)],
            [n for n in mine if n.endswith(SIGNATURE_SUFFIX)])


def remove_unsigned(cache_path, stem, key):
    """Deletes every file of kernel ``stem`` in ``cache_path`` (numba's ``.nbi``/``.nbc``,
    a ``.pyc``, leftovers of interrupted writes) whose signature does not verify; returns
    the deleted paths. Call it holding ``locked`` and before numba reads the cache."""
    files, signatures = _entry_files(cache_path, stem)
    deleted = []
    for name in files:
        path = os.path.join(cache_path, name)
        if _signed_bytes(path, key) is None:
            for gone in (path, path + SIGNATURE_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(gone)
            deleted.append(path)
    for name in signatures:  # signatures whose file is gone
        if name[:-len(SIGNATURE_SUFFIX)] not in files:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(cache_path, name))
    return deleted


def sign_entry(cache_path, stem, key):
    """Signs numba's files of kernel ``stem`` (what it just wrote or loaded)."""
    for name in _entry_files(cache_path, stem)[0]:
        path = os.path.join(cache_path, name)
        if name.endswith((".nbi", ".nbc")) and _signed_bytes(path, key) is None:
            sign(path, key)


@contextlib.contextmanager
def locked(source_path, timeout=None):
    """Holds the exclusive lock of the kernel at ``source_path`` (``k_<sha>.lock`` beside
    it) for the block, waiting up to ``timeout`` seconds (``LOCK_TIMEOUT_S``) for another
    process to release it."""
    timeout = LOCK_TIMEOUT_S if timeout is None else timeout
    path = source_path[:-3] + ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while not try_lock_file(fd):
            if time.monotonic() > deadline:
                raise KernelCacheError(f"the kernel {source_path} has been locked by another "
                                       f"process for over {timeout:g} s ({path}); if no "
                                       f"primflow process is compiling, delete that file")
            time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def try_lock_file(fd):
    """Takes an exclusive lock on the open file ``fd`` without waiting; False when another
    process holds it. The lock goes with the process (closing ``fd`` releases it).

    Example:
        >>> import os, tempfile
        >>> fd, _ = tempfile.mkstemp()
        >>> try_lock_file(fd)
        True
        >>> os.close(fd)
    """
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
