"""The on-disk kernel cache across processes: hits, invalidation, corrupt entries, concurrency, safety."""
import json
import os
import pathlib
import stat
import subprocess
import sys
import textwrap

import pytest

import quadrants as qd
from quadrants._lib import offline_cache
from test_utils import test

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A program with three kernels (a func, a template argument, an ndarray); FUNC_BODY is substituted.
PROGRAM = textwrap.dedent('''
    import json, sys
    import numpy as np
    import quadrants as qd
    from quadrants._lib import offline_cache

    qd.init(arch=qd.cpu, offline_cache_file_path=sys.argv[1])
    hist = qd.field(qd.i32, shape=16)

    @qd.func
    def weight(v):
        return FUNC_BODY

    @qd.kernel
    def histogram(data: qd.types.ndarray(dtype=qd.u8, ndim=1)):
        for i in range(data.shape[0]):
            qd.atomic_add(hist[data[i] % 16], weight(1))

    @qd.kernel
    def scaled_sum(a: qd.types.ndarray(dtype=qd.f32, ndim=1), k: qd.template()) -> qd.f32:
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i] * k
        return s

    data = np.arange(1000, dtype=np.uint8)
    histogram(data)
    a = np.arange(100, dtype=np.float32)
    out = {"hist": hist.to_numpy().tolist(), "sum2": scaled_sum(a, 2), "sum3": scaled_sum(a, 3),
           "path": qd._lib.runtime.program().offline_cache_path, "stats": offline_cache.stats()}
    print(json.dumps(out))
''')


def run(tmp_path, cache, func_body="v * 2", name="prog.py"):
    script = tmp_path / name
    script.write_text(PROGRAM.replace("FUNC_BODY", func_body))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("QD_OFFLINE_CACHE_FILE_PATH", None)
    p = subprocess.run([sys.executable, str(script), str(cache)], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def expected(weight):
    counts = [0] * 16
    for v in range(1000):
        counts[(v % 256) % 16] += weight
    return counts


def entries(cache):
    return sorted((cache / offline_cache.ENTRIES_DIR).glob("*.qdc"))


def test_second_process_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, cache)
    assert first["hist"] == expected(2) and first["sum2"] == 9900.0 and first["sum3"] == 14850.0
    assert first["stats"] == {"hits": 0, "misses": 3, "writes": 3}
    assert first["path"] == str(cache)
    assert len(entries(cache)) == 3
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(e.stat().st_mode) == 0o600 for e in entries(cache))
    second = run(tmp_path, cache)
    assert second["stats"] == {"hits": 3, "misses": 0, "writes": 0}
    assert {k: second[k] for k in ("hist", "sum2", "sum3")} == {k: first[k] for k in ("hist", "sum2", "sum3")}


def test_a_changed_func_invalidates_its_kernel(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path, cache, "v * 2")
    changed = run(tmp_path, cache, "v * 5")
    assert changed["hist"] == expected(5)                                 # not the stale cached code
    assert changed["stats"] == {"hits": 2, "misses": 1, "writes": 1}      # only histogram recompiled
    assert len(entries(cache)) == 4


def test_corrupt_and_truncated_entries_are_ignored_and_rewritten(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, cache)
    a, b, c = entries(cache)
    data = bytearray(a.read_bytes())
    data[-1] ^= 0xFF                                       # payload no longer matches its hash
    a.write_bytes(bytes(data))
    b.write_bytes(b.read_bytes()[: len(b.read_bytes()) // 2])  # truncated
    c.write_bytes(b"\0" * 7)                               # garbage
    second = run(tmp_path, cache)
    assert second["stats"] == {"hits": 0, "misses": 3, "writes": 3}
    assert {k: second[k] for k in ("hist", "sum2", "sum3")} == {k: first[k] for k in ("hist", "sum2", "sum3")}
    third = run(tmp_path, cache)
    assert third["stats"] == {"hits": 3, "misses": 0, "writes": 0}   # rewritten whole


def test_entries_that_are_not_ours_are_never_loaded(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path, cache)
    a, b, _ = entries(cache)
    # A valid entry under another key's name: its recorded key does not match.
    b.write_bytes(a.read_bytes())
    # A symlink in place of an entry is not followed.
    target = tmp_path / "elsewhere.qdc"
    target.write_bytes(a.read_bytes())
    a.unlink()
    a.symlink_to(target)
    second = run(tmp_path, cache)
    assert second["stats"]["misses"] == 2 and second["stats"]["hits"] == 1
    assert second["hist"] == expected(2)
    # A directory others can write to is not used at all.
    cache.chmod(0o777)
    third = run(tmp_path, cache)
    assert third["path"] is None and third["stats"] == {"hits": 0, "misses": 0, "writes": 0}
    assert third["hist"] == expected(2)


def test_processes_share_the_directory_safely(tmp_path):
    cache = tmp_path / "cache"
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.replace("FUNC_BODY", "v * 2"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, str(script), str(cache)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        assert r["hist"] == expected(2) and r["sum2"] == 9900.0 and r["sum3"] == 14850.0
        assert r["stats"]["hits"] + r["stats"]["misses"] == 3
    assert len(entries(cache)) == 3 and not list((cache / offline_cache.ENTRIES_DIR).glob(".*tmp*"))  # whole entries
    after = run(tmp_path, cache)
    assert after["stats"] == {"hits": 3, "misses": 0, "writes": 0}


@test(arch=qd.cpu)
def test_options_and_defaults(tmp_path, monkeypatch):
    qd.init(arch=qd.cpu, offline_cache=False)
    assert qd._lib.runtime.program().offline_cache_path is None
    assert offline_cache.stats() == {"hits": 0, "misses": 0, "writes": 0}
    qd.init(arch=qd.cpu, offline_cache_file_path=str(tmp_path / "a" / "b"))
    assert qd._lib.runtime.program().offline_cache_path == str(tmp_path / "a" / "b")
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    monkeypatch.delenv("QD_OFFLINE_CACHE_FILE_PATH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert offline_cache.default_path() == str(tmp_path / "xdg" / "quadrants")
    monkeypatch.setenv("QD_OFFLINE_CACHE_FILE_PATH", str(tmp_path / "env"))
    assert offline_cache.default_path() == str(tmp_path / "env")
    qd.init(arch=qd.cpu)
    assert qd._lib.runtime.program().offline_cache_path == str(tmp_path / "env")
    assert qd.cfg.offline_cache is True


def _files(cache):
    d = cache / offline_cache.ENTRIES_DIR
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


@test(arch=qd.cpu)
def test_layout_and_metadata(tmp_path):
    """As Quadrants lays it out: <path>/kernel_compilation_manager holds one file per kernel and a
    metadata file, all written when a qd.init that compiled something ends."""
    qd.init(arch=qd.cpu, offline_cache_file_path=str(tmp_path))

    @qd.kernel
    def one() -> qd.i32:
        return 1

    assert one() == 1
    assert _files(tmp_path) == []  # kept in memory until the qd.init ends
    qd.init(arch=qd.cpu, offline_cache_file_path=str(tmp_path))
    names = _files(tmp_path)
    assert [n for n in names if n.endswith(".qdc")] and len(names) == 2
    assert len(names) == 2 and offline_cache.METADATA in names
    meta = json.loads((tmp_path / offline_cache.ENTRIES_DIR / offline_cache.METADATA).read_text())
    assert meta == {"entries": 1, "bytes": entries(tmp_path)[0].stat().st_size}
    assert one() == 1 and offline_cache.stats() == {"hits": 1, "misses": 0, "writes": 0}
    qd.reset()
    assert _files(tmp_path) == names


@pytest.mark.parametrize("policy,factor,kept", [("never", 1.0, 4), ("version", 1.0, 4), ("fifo", 0.0, 4),
                                                ("fifo", 0.25, 3), ("fifo", 0.85, 1), ("fifo", 1.0, 0),
                                                ("lru", 0.5, 2)])
@test(arch=qd.cpu)
def test_cleaning_policy(tmp_path, policy, factor, kept):
    def init(max_size):
        qd.init(arch=qd.cpu, offline_cache_file_path=str(tmp_path), offline_cache_cleaning_policy=policy,
                offline_cache_max_size_of_files=max_size, offline_cache_cleaning_factor=factor)

    init(1 << 30)
    kernels = []
    for c in range(4):
        @qd.kernel
        def k(x: qd.i32) -> qd.i32:
            return x + qd.static(c)
        kernels.append(k)
    for c, k in enumerate(kernels):
        assert k(1) == 1 + c
    qd.reset()
    first = entries(tmp_path)
    assert len(first) == 4
    by_age = [p.name for p in sorted(first, key=lambda p: p.stat().st_mtime_ns)]
    init(1 << 30)
    qd.reset()
    assert len(entries(tmp_path)) == 4                   # under the limit: nothing removed
    init(1)
    qd.reset()
    left = entries(tmp_path)
    assert len(left) == kept
    assert (tmp_path / offline_cache.ENTRIES_DIR / offline_cache.METADATA).exists() == (kept > 0)
    if policy == "fifo":                                 # the oldest written go first
        assert sorted(p.name for p in left) == sorted(by_age[len(by_age) - kept:])
