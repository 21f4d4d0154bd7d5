"""The numba kernel cache runs nothing primflow did not write: planted pickles and .pyc files
never execute, damaged entries are deleted and rebuilt with one warning naming the file,
and a folder others could write (or another user owns) is refused with the fix."""

import importlib.util
import os
import pickle
import py_compile
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import primflow as pf
from primflow.compiler import compile_program, kernel_cache, numba_codegen
from primflow.ir import evaluate, parse

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                reason="numba is not installed")

PROGRAM = """def f(%0: float64[256,256], %1: float64[256,256]):
    %2: float64[256,256] = mul(%0, %1)
    %3: float64[256,256] = add(%2, %0)
    %4: float64[256,256] = mul(%3, %1)
    return %4
"""


def _args():
    rng = np.random.default_rng(7)
    return [rng.standard_normal((256, 256)), rng.standard_normal((256, 256))]


def _forget_loaded_kernels(monkeypatch):
    """As in a new process: no kernel compiled or module built in this one. (Under the
    kernel lock: an earlier test's background thread may be loading a kernel, and numba
    reads its module back from sys.modules while it loads.)"""
    with numba_codegen._lock:
        monkeypatch.setattr(numba_codegen, "_kernels", {})
        for name in [n for n in sys.modules if n.startswith("primflow_numba_")]:
            monkeypatch.delitem(sys.modules, name)


def _run(backend="numba", tiered=False):
    fn, args = parse(PROGRAM), _args()
    exe = compile_program(fn, backend=backend, tiered=tiered)
    if tiered:
        assert exe.wait(300)
    assert len(exe.kernels) == 1
    got, want = exe(args)[0], evaluate(fn, args)[0]
    assert np.abs(got - want).max() <= 1e-13 * np.abs(want).max()  # (FMA contractions)


def _cache_files(cache, suffix):
    folder = cache / "numba" / "__pycache__"
    return sorted(p for p in folder.iterdir() if p.name.endswith(suffix))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setattr(pf.config, "cache_dir", str(root))
    _forget_loaded_kernels(monkeypatch)
    return root


# ---- the folder: private, or refused ---------------------------------------------------------

def test_the_cache_folder_and_key_are_created_private_whatever_the_umask(cache):
    old = os.umask(0)
    try:
        _run()
    finally:
        os.umask(old)
    for folder in (cache, cache / "numba", cache / "numba" / "__pycache__"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    key = cache / "numba" / kernel_cache.KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    # every file that holds code or pickles is signed
    signed = [p for p in (cache / "numba").rglob("*")
              if p.suffix in (".py", ".nbi", ".nbc", ".pyc")]
    assert {p.suffix for p in signed} == {".py", ".nbi", ".nbc"}
    for p in signed:
        assert (p.parent / (p.name + ".sig")).exists(), p


@pytest.mark.parametrize("which", ["root", "numba", "__pycache__"])
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o757])
def test_a_folder_others_can_write_is_refused_with_the_fix(cache, monkeypatch, which, mode):
    _run()  # creates the folders
    folder = {"root": cache, "numba": cache / "numba",
              "__pycache__": cache / "numba" / "__pycache__"}[which]
    folder.chmod(mode)
    _forget_loaded_kernels(monkeypatch)
    with pytest.raises(kernel_cache.UnsafeCacheError) as err:
        compile_program(parse(PROGRAM), backend="numba")
    message = str(err.value)
    assert str(folder) in message and f"chmod 700 {folder}" in message
    assert "pf.config.cache_dir" in message
    # the automatic choice runs NumPy code instead, saying why
    with pytest.warns(RuntimeWarning, match="can be written by"):
        exe = compile_program(parse(PROGRAM), backend="auto")
    assert not exe.kernels and not exe.compiling
    folder.chmod(0o700)
    _run()


def test_a_folder_owned_by_another_user_is_refused(cache, monkeypatch):
    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("only root can give a folder to another user (os.chown)")
    _run()
    other = 54321
    os.chown(cache / "numba", other, -1)
    _forget_loaded_kernels(monkeypatch)
    with pytest.raises(kernel_cache.UnsafeCacheError, match=f"uid {other}") as err:
        compile_program(parse(PROGRAM), backend="numba")
    assert str(cache / "numba") in str(err.value) and "not to you" in str(err.value)
    with pytest.warns(RuntimeWarning, match="not to you"):
        assert not compile_program(parse(PROGRAM), backend="auto").kernels


@pytest.mark.parametrize("value, error, message", [
    ("", ValueError, "empty path"),
    ("   ", ValueError, "empty path"),
    ("relative/cache", ValueError, "absolute path"),
    (".", ValueError, "absolute path"),
    (b"/tmp/x", TypeError, "must be a path"),
])
def test_an_empty_or_relative_cache_dir_is_refused(value, error, message):
    before = pf.config.cache_dir
    with pytest.raises(error, match=message):
        pf.config.cache_dir = value
    assert pf.config.cache_dir == before


def test_a_cache_dir_under_home_is_expanded(monkeypatch):
    monkeypatch.setattr(pf.config, "cache_dir", "~/some-primflow-cache")
    assert pf.config.cache_dir == os.path.join(os.path.expanduser("~"), "some-primflow-cache")


# ---- nothing planted runs --------------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import primflow as pf
    from primflow.compiler import compile_program
    from primflow.ir import evaluate, parse

    pf.config.cache_dir = sys.argv[1]
    program, backend, tiered = sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((256, 256)), rng.standard_normal((256, 256))]
    fn = parse(program)
    exe = compile_program(fn, backend=backend, tiered=tiered)
    if tiered:
        exe.wait(300)
    err = np.abs(exe(args)[0] - evaluate(fn, args)[0]).max()
    print(len(exe.kernels), err)
""")


def _child(cache, backend="numba", tiered=False):
    """Compiles and runs PROGRAM in a new process; returns its stderr."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(cache), PROGRAM, backend,
                           "1" if tiered else "0"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    kernels, err = proc.stdout.split()
    assert kernels == "1" and float(err) < 1e-12, proc.stdout
    return proc.stderr


class _Marker:
    """Unpickling this creates ``path`` (what a planted pickle would do, only harmless)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("backend, tiered", [("numba", False), ("auto", False), ("auto", True)])
def test_a_pickle_planted_in_the_numba_cache_never_runs(tmp_path, backend, tiered):
    cache = tmp_path / "cache"
    _child(cache, backend, tiered)
    (index,) = _cache_files(cache, ".nbi")
    marker = tmp_path / "planted-pickle-ran"
    index.write_bytes(pickle.dumps(_Marker(marker)))  # numba unpickles an index first
    for data in _cache_files(cache, ".nbc"):
        data.write_bytes(pickle.dumps(_Marker(marker)))
    if tiered:  # the background worker compiles (and would read the cache) too
        for ready in (cache / "numba").glob("*.ready-*"):
            ready.unlink()
    err = _child(cache, backend, tiered)
    assert not marker.exists()
    assert str(index) in err and "not written by primflow" in err
    assert "UnpicklingError" not in err
    assert _child(cache, backend, tiered) == ""  # rebuilt and signed: quiet from now on


def test_a_planted_unchecked_hash_pyc_never_runs(tmp_path):
    cache = tmp_path / "cache"
    _child(cache)
    (source,) = (cache / "numba").glob("k_*.py")
    marker = tmp_path / "planted-pyc-ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n" + source.read_text())
    pyc = importlib.util.cache_from_source(str(source))
    py_compile.compile(str(evil), cfile=pyc, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    err = _child(cache)
    assert not marker.exists()
    assert not os.path.exists(pyc)  # not signed: deleted
    assert os.path.basename(pyc) in err


def test_a_changed_kernel_source_is_rewritten_before_it_runs(cache, monkeypatch):
    _run()
    (source,) = (cache / "numba").glob("k_*.py")
    good = source.read_text()
    source.write_text("raise SystemExit('tampered kernel source ran')\n")
    _forget_loaded_kernels(monkeypatch)
    _run()
    assert source.read_text() == good


def test_the_worker_refuses_an_unsigned_source(cache):
    _run()
    (source,) = (cache / "numba").glob("k_*.py")
    (source.parent / (source.name + ".sig")).unlink()
    key = kernel_cache.secret_key(str(source.parent))
    with pytest.raises(kernel_cache.KernelCacheError, match="not signed"):
        kernel_cache.read_source(str(source), key)


# ---- damaged entries: one warning naming the file, then rebuilt -------------------------------

@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
@pytest.mark.parametrize("backend, tiered", [("numba", False), ("auto", False), ("auto", True)])
def test_a_truncated_cache_file_is_deleted_and_rebuilt_with_one_warning(cache, monkeypatch,
                                                                        suffix, backend, tiered):
    _run()
    (damaged,) = _cache_files(cache, suffix)
    damaged.write_bytes(damaged.read_bytes()[:40])
    _forget_loaded_kernels(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run(backend, tiered)
    about = [w for w in caught if str(damaged) in str(w.message)]
    assert len(about) == 1, [str(w.message) for w in caught]
    assert issubclass(about[0].category, RuntimeWarning)
    assert "compiled again" in str(about[0].message)
    assert not [w for w in caught if "Unpickling" in str(w.message)]
    assert len(damaged.read_bytes()) > 40  # rebuilt
    _forget_loaded_kernels(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the next process is quiet
        _run(backend, tiered)


def test_a_damaged_file_found_by_the_background_worker_is_reported(cache, monkeypatch):
    _run()
    (damaged,) = _cache_files(cache, ".nbi")
    damaged.write_bytes(b"\x80\x04garbage")
    for ready in (cache / "numba").glob("*.ready-*"):
        ready.unlink()  # so the worker process compiles it
    _forget_loaded_kernels(monkeypatch)
    with pytest.warns(RuntimeWarning, match=f"deleted {damaged}"):
        _run("auto", tiered=True)


def test_a_signature_of_another_file_does_not_verify(cache, monkeypatch):
    """Signatures cover the file name: another kernel's signed data under this name is
    not accepted."""
    _run()
    (data,) = _cache_files(cache, ".nbc")
    other = data.with_name(data.name.replace(".1.nbc", ".2.nbc"))
    other.write_bytes(data.read_bytes())
    (data.parent / (other.name + ".sig")).write_bytes(
        (data.parent / (data.name + ".sig")).read_bytes())
    key = kernel_cache.secret_key(str(cache / "numba"))
    stem = data.name.split(".")[0]
    assert kernel_cache.remove_unsigned(str(data.parent), stem, key) == [str(other)]
    assert data.exists() and not other.exists()


def test_processes_compiling_one_kernel_at_once_share_the_cache_quietly(tmp_path):
    """As MPI ranks do: each waits for the one compiling (a lock per kernel) instead of
    taking its fresh, not yet signed files for planted ones."""
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(cache), PROGRAM, "numba", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        assert err == "" and out.split()[0] == "1", (out, err)
    assert len(_cache_files(cache, ".nbc")) == 1
