"""Checkpoint files under faults and hostile input: saves killed mid-write, concurrent
writers, crafted archives (deep headers, size bombs, duplicate or aliased entries, wrong
dtypes and shapes), and save errors that name the user's key path."""

import io
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

import primflow as pf
from primflow import serialization
from primflow.serialization import CheckpointError

HEADER_KEY = "__primflow_header__.npy"


# ---- crafting archives ---------------------------------------------------------------------

def _npy(array=None, *, shape=None, descr=None, data=None):
    """The bytes of a .npy member: ``array``'s, or a header declaring ``shape``/``descr``
    followed by ``data`` (whatever the header says)."""
    buf = io.BytesIO()
    if array is not None:
        npy_format.write_array(buf, np.asarray(array), allow_pickle=False)
        return buf.getvalue()
    npy_format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                            "shape": shape})
    head = buf.getvalue()
    if descr is not None:  # same length, so the header's padding stays valid
        head = head.replace(b"'<f8'", f"'{descr}'".encode())
    return head + data


def _header(root):
    text = json.dumps({"format": "primflow.checkpoint", "version": 1, "root": root})
    return _npy(np.frombuffer(text.encode(), dtype=np.uint8))


def _archive(path, members, compression=zipfile.ZIP_STORED):
    """Writes a zip of ``(name, bytes)`` members (a name may repeat)."""
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", compression=compression) as zf:
        warnings.simplefilter("ignore")  # "Duplicate name": what the test wants
        for name, data in members:
            zf.writestr(name, data)
    return path


def _tensor_node(key, shape, dtype="float64"):
    return {"t": "tensor", "k": key, "dtype": dtype, "shape": list(shape)}


def _peak_allocation(fn):
    """The peak of traced allocations (NumPy's array data included) while ``fn`` runs."""
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


# ---- hostile headers -------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [150, 2000, 100_000])
def test_a_deeply_nested_header_is_refused_not_a_recursion_error(tmp_path, depth):
    text = ('{"t":"list","items":[' * depth + '{"t":"none"}' + "]}" * depth)
    header = ('{"format":"primflow.checkpoint","version":1,"root":' + text + "}").encode()
    path = _archive(tmp_path / "deep.pdparams",
                    [(HEADER_KEY, _npy(np.frombuffer(header, dtype=np.uint8)))])
    with pytest.raises(CheckpointError, match="nest") as err:
        pf.load(path)
    assert str(path) in str(err.value)


def test_saving_a_container_that_holds_itself_says_so():
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match=r"obj\[0\]\[0\].*nested more than"):
        pf.save(loop, os.devnull + "-never-written")


def test_nesting_up_to_the_limit_round_trips(tmp_path):
    obj = value = []
    for _ in range(serialization.MAX_DEPTH - 1):
        value.append([])
        value = value[0]
    value.append(pf.ones([2]))
    pf.save(obj, tmp_path / "deep")
    back = pf.load(tmp_path / "deep")
    for _ in range(serialization.MAX_DEPTH):
        back = back[0]
    assert back.numpy().tolist() == [1.0, 1.0]


# ---- declared sizes against the file's size --------------------------------------------------

def test_a_small_file_declaring_a_4gb_array_is_refused_before_allocating(tmp_path):
    n = 2 ** 29  # 4 GiB of float64, in a file of 4 MiB
    path = _archive(tmp_path / "bomb.pdparams", [
        (HEADER_KEY, _header(_tensor_node("a0", [n]))),
        ("a0.npy", _npy(shape=(n,), data=bytes(4 << 20)))])
    assert os.path.getsize(path) < 5 << 20

    def load():
        with pytest.raises(CheckpointError, match=r"a0\.npy.*4,294,967,296 bytes"):
            pf.load(path)

    assert _peak_allocation(load) < 64 << 20  # the file itself is 4 MiB


def test_a_deflated_member_expanding_past_the_file_is_refused_before_allocating(tmp_path):
    n = 64 << 20  # 512 MiB of zeros deflate to about 0.5 MiB
    path = tmp_path / "deflate.pdparams"
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(HEADER_KEY, _header(_tensor_node("a0", [n])))
        info = zipfile.ZipInfo("a0.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as member:
            member.write(_npy(shape=(n,), data=b""))
            for _ in range(n * 8 // len(chunk)):
                member.write(chunk)
    assert os.path.getsize(path) < 4 << 20

    def load():
        with pytest.raises(CheckpointError, match="more than the whole file"):
            pf.load(path)

    assert _peak_allocation(load) < 64 << 20


@pytest.mark.parametrize("shape, descr, data, message", [
    ((-1,), None, b"", "invalid shape"),
    ((3,), "<f9", bytes(24), "not a valid dtype"),
    ((3,), "xyz", bytes(24), "not a valid dtype"),
    ((3,), None, bytes(16), "holds 16 bytes"),  # truncated data
    ((2,), None, bytes(24), "holds 24 bytes"),  # trailing data
])
def test_npy_members_with_wrong_shapes_dtypes_or_sizes_are_refused(tmp_path, shape, descr,
                                                                   data, message):
    path = _archive(tmp_path / "bad.pdparams", [
        (HEADER_KEY, _header(_tensor_node("a0", [3]))),
        ("a0.npy", _npy(shape=shape, descr=descr, data=data))])
    with pytest.raises(CheckpointError, match=message):
        pf.load(path)


def test_object_arrays_are_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    data = pickle.dumps(np.array([Payload()], dtype=object), protocol=2)
    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": "|O", "fortran_order": False,
                                            "shape": (1,)})
    path = _archive(tmp_path / "obj.pdparams", [
        (HEADER_KEY, _header({"t": "ndarray", "k": "a0", "dtype": "object", "shape": [1]})),
        ("a0.npy", buf.getvalue() + data)])
    with pytest.raises(CheckpointError, match="never"):
        pf.load(path)
    assert not marker.exists()


# ---- duplicate and overlapping entries -------------------------------------------------------

def test_duplicate_zip_members_are_refused(tmp_path):
    path = _archive(tmp_path / "dup.pdparams", [
        (HEADER_KEY, _header(_tensor_node("a0", [2]))),
        ("a0.npy", _npy(np.zeros(2))), ("a0.npy", _npy(np.ones(2)))])
    with pytest.raises(CheckpointError, match="'a0.npy' twice"):
        pf.load(path)


def test_overlapping_zip_members_are_refused(tmp_path):
    """Two directory entries pointing at the same data: together they declare more bytes
    than the file holds (the trick of zip bombs that reuse one compressed stream)."""
    data = _npy(np.zeros(1 << 17))  # 1 MiB
    path = _archive(tmp_path / "overlap.pdparams", [
        (HEADER_KEY, _header({"t": "list", "items": [_tensor_node("a0", [1 << 17]),
                                                     _tensor_node("a1", [1 << 17])]})),
        ("a0.npy", data)])
    raw = bytearray(path.read_bytes())
    # a second central-directory entry named a1.npy with a0.npy's local header offset
    eocd = raw.rindex(b"PK\x05\x06")
    cd_start = struct.unpack_from("<I", raw, eocd + 16)[0]
    entries, pos = [], cd_start
    while raw[pos:pos + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", raw, pos + 28)
        end = pos + 46 + name_len + extra_len + comment_len
        entries.append(bytes(raw[pos:end]))
        pos = end
    a0 = next(e for e in entries if b"a0.npy" in e)
    a1 = a0.replace(b"a0.npy", b"a1.npy")
    new_cd = b"".join(entries) + a1
    eocd_record = bytearray(raw[eocd:eocd + 22])
    count = struct.unpack_from("<H", eocd_record, 10)[0] + 1
    struct.pack_into("<HHII", eocd_record, 8, count, count, len(new_cd), cd_start)
    path.write_bytes(bytes(raw[:cd_start]) + new_cd + bytes(eocd_record))
    with pytest.raises(CheckpointError, match="more than the whole file"):
        pf.load(path)


def test_a_header_using_one_array_twice_is_refused(tmp_path):
    path = _archive(tmp_path / "alias.pdparams", [
        (HEADER_KEY, _header({"t": "list", "items": [_tensor_node("a0", [2]),
                                                     _tensor_node("a0", [2])]})),
        ("a0.npy", _npy(np.zeros(2)))])
    with pytest.raises(CheckpointError, match="'a0' twice"):
        pf.load(path)


def test_a_header_with_a_duplicate_dict_key_is_refused(tmp_path):
    path = _archive(tmp_path / "dupkey.pdparams", [
        (HEADER_KEY, _header({"t": "dict", "items": [[["str", "w"], {"t": "int", "v": 1}],
                                                     [["str", "w"], {"t": "int", "v": 2}]]}))])
    with pytest.raises(CheckpointError, match="key 'w' twice"):
        pf.load(path)


def test_a_header_dtype_that_does_not_match_the_array_is_refused(tmp_path):
    path = _archive(tmp_path / "dtype.pdparams", [
        (HEADER_KEY, _header(_tensor_node("a0", [2], dtype="float99"))),
        ("a0.npy", _npy(np.zeros(2)))])
    with pytest.raises(CheckpointError, match="float99"):
        pf.load(path)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.9, 0.99])
def test_truncated_archives_are_refused(tmp_path, keep):
    path = tmp_path / "ckpt"
    pf.save({"w": pf.ones([64, 64]), "step": 3}, path)
    raw = path.read_bytes()
    path.write_bytes(raw[:int(len(raw) * keep)])
    with pytest.raises(CheckpointError, match=str(path)):
        pf.load(path)


# ---- save errors name the user's key path ---------------------------------------------------

def test_saving_an_object_array_names_the_users_key_path_and_the_allowed_types(tmp_path):
    state = {"state": {"layer.weight": np.array([1, "a", None], dtype=object)}}
    with pytest.raises(TypeError) as err:
        pf.save(state, tmp_path / "x")
    message = str(err.value)
    assert "obj['state']['layer.weight']" in message
    assert "dtype object" in message and "float" in message and "a0" not in message
    assert not os.listdir(tmp_path)  # nothing half-written


# ---- saves killed mid-write and concurrent writers -------------------------------------------

_SAVE_FOREVER = textwrap.dedent("""
    import sys
    import numpy as np
    import primflow as pf
    big = {"w": np.full(12_500_000, 7.0)}  # 100 MB
    print("ready", flush=True)
    while True:
        pf.save(big, sys.argv[1])
""")


def _temporaries(folder, name):
    return sorted(p for p in os.listdir(folder) if p.startswith(f".{name}.") and
                  p.endswith(".tmp"))


def test_a_save_killed_mid_write_leaves_a_temporary_the_next_save_removes(tmp_path):
    path = tmp_path / "ckpt.pdparams"
    pf.save({"w": pf.ones([3]), "step": 1}, path)
    leftover = []
    for _ in range(10):  # until the kill lands while a temporary is being written
        proc = subprocess.Popen([sys.executable, "-c", _SAVE_FOREVER, str(path)],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            deadline = time.monotonic() + 60
            while not _temporaries(tmp_path, path.name) and time.monotonic() < deadline:
                time.sleep(0.002)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        leftover = _temporaries(tmp_path, path.name)
        if leftover:
            break
    assert leftover, "the writer was never killed mid-write"
    # the checkpoint is whole (the old one or a complete new one)
    assert pf.load(path)["w"].shape in ([3], [12_500_000])
    # a live writer's temporary (this process) and a fresh one of unknown origin stay
    live = tmp_path / f".{path.name}.{os.getpid()}-{serialization._HOST}.0123456789ab.tmp"
    live.write_bytes(b"being written")
    fresh_legacy = tmp_path / f".{path.name}.abcdefabcdef.tmp"
    fresh_legacy.write_bytes(b"x")
    old_legacy = tmp_path / f".{path.name}.0123456789ab.tmp"  # older primflow's name
    old_legacy.write_bytes(b"x")
    old = time.time() - serialization.STALE_TEMPORARY_S - 60
    os.utime(old_legacy, (old, old))
    other_target = tmp_path / f".other.{proc.pid}-{serialization._HOST}.0123456789ab.tmp"
    other_target.write_bytes(b"x")

    pf.save({"w": pf.full([4], 2.0), "step": 2}, path)
    remaining = _temporaries(tmp_path, path.name)
    assert remaining == sorted([live.name, fresh_legacy.name]), remaining
    assert other_target.exists()  # another file's temporaries are not this save's business
    back = pf.load(path)
    assert back["step"] == 2 and back["w"].numpy().tolist() == [2.0] * 4


_SAVE_MANY = textwrap.dedent("""
    import sys
    import numpy as np
    import primflow as pf
    value = float(sys.argv[2])
    for step in range(60):
        pf.save({"w": np.full(20_000, value), "step": step}, sys.argv[1])
    print("done")
""")


def _concurrently(script, *argvs, timeout=600):
    """Runs ``script`` in one process per argument list, all at once; returns their
    stdouts (each must succeed)."""
    procs = [subprocess.Popen([sys.executable, "-c", script, *map(str, argv)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in argvs]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        outs.append(out)
    return outs


def test_two_processes_saving_one_path_never_crash_and_leave_a_whole_file(tmp_path):
    path = tmp_path / "shared.pdparams"
    assert _concurrently(_SAVE_MANY, (path, 1.0), (path, 2.0)) == ["done\n"] * 2
    back = pf.load(path)
    assert back["step"] == 59
    values = np.unique(back["w"])
    assert values.tolist() in ([1.0], [2.0])  # one writer's file, never a mix
    assert _temporaries(tmp_path, path.name) == []


_TRAIN = textwrap.dedent("""
    import sys
    import primflow as pf
    from primflow import science
    pf.set_default_dtype("float64")
    problem = science.make_problem("beam")
    settings = problem.settings(quick=True).replace(adam_steps=600, lbfgs_steps=0,
                                                    n_interior=16, n_boundary=2)
    trainer = science.Trainer(problem, settings, seed=int(sys.argv[2]), checkpoint=sys.argv[1],
                              checkpoint_every=1, progress=False)
    trainer.fit()
""")


def test_two_trainers_checkpointing_to_one_path_do_not_crash(tmp_path):
    """A fixed temporary name made the second writer's rename fail (FileNotFoundError)."""
    path = tmp_path / "checkpoint.pdparams"
    _concurrently(_TRAIN, (path, 1), (path, 2))
    state = pf.load(path)
    assert state["seed"] in (1, 2) and state["step"] == 600
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []


def test_two_writers_generating_one_cached_data_set_do_not_collide(tmp_path):
    """Both write the cache file at once (a fixed temporary name made one fail)."""
    import threading

    from primflow.science.neural_operators import data

    meta = {"problem": "race", "n": 3}
    shapes = {"x": (2_000_000,)}
    barrier = threading.Barrier(2)
    errors = []

    def generate():
        barrier.wait(timeout=60)  # both save at the same moment
        return {"x": np.arange(2_000_000, dtype=np.float64)}

    def run():
        try:
            data.load_or_generate(meta, generate, shapes, tmp_path, log=lambda line: None)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    again = data.load_or_generate(meta, lambda: pytest.fail("regenerated"), shapes, tmp_path,
                                  log=lambda line: None)
    assert np.array_equal(again["x"], np.arange(2_000_000, dtype=np.float64))
    assert [p for p in os.listdir(tmp_path) if "tmp" in p] == []


def test_load_never_calls_the_unpickler(tmp_path, monkeypatch):
    good = tmp_path / "good"
    pf.save({"w": pf.ones([3]), "meta": {"step": 1, "name": "x"}, "a": np.arange(4)}, good)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, w=np.array([{"x": 1}], dtype=object))

    def refuse(*args, **kwargs):
        raise AssertionError("pf.load unpickled")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    assert pf.load(good)["meta"] == {"step": 1, "name": "x"}
    with pytest.raises(CheckpointError, match="never"):
        pf.load(pickled)
