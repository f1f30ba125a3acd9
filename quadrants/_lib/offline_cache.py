"""qd.init(offline_cache=True, offline_cache_file_path=...): the on-disk kernel cache.

Compiled kernels are stored under the directory (default: $QD_OFFLINE_CACHE_FILE_PATH, else
$XDG_CACHE_HOME/quadrants or ~/.cache/quadrants), keyed by a SHA-256 of everything the code is a
function of: the kernel as generated (its source, the funcs it calls, template arguments, dtypes,
fields and options all shape it), the target (arch, host CPU and features, LLVM version) and the
compiler itself (a hash of the C++ core). The C++ side (csrc/cache/disk_cache.h) loads an entry only
when its recorded content hash matches, writes entries with an atomic rename, and keeps the
directory private to the user. docs/getting_started.md describes the behaviour.
"""
import atexit
import hashlib
import json
import os
import stat

from quadrants._lib import _core

ENTRIES_DIR = "kernel_compilation_manager"  # under offline_cache_file_path: the entries (*.qdc)
METADATA = "qdcache.qdb"  # in ENTRIES_DIR: {"entries": count, "bytes": total} as of the last cleaning pass

_compiler_id = None


def default_path():
    env = os.environ.get("QD_OFFLINE_CACHE_FILE_PATH")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "quadrants")


def compiler_id():
    """A hash of the C++ core: a rebuilt or upgraded compiler never reuses another's entries."""
    global _compiler_id
    if _compiler_id is None:
        h = hashlib.sha256()
        with open(_core.__file__, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _compiler_id = "quadrants core " + h.hexdigest()
    return _compiler_id


def _safe(path):
    """A directory of ours that no one else can write to."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def attach(program):
    """Points the program's runtime at <offline_cache_file_path>/kernel_compilation_manager (Quadrants'
    layout), or at none. The entries of the kernels a program compiles are written when it ends
    (flush), as is the metadata file, after the cleaning policy."""
    cfg = program.config
    program.offline_cache_path = program._cache_entries = None
    path = ""
    if cfg.offline_cache:
        base = os.path.abspath(os.path.expanduser(cfg.offline_cache_file_path or default_path()))
        try:
            os.makedirs(base, mode=0o700, exist_ok=True)
        except OSError:
            pass  # the runtime's own attempt reports it (caching stays off)
        if _safe(base):
            path = os.path.join(base, ENTRIES_DIR)
    if path and program.runtime.set_offline_cache(path, compiler_id()):  # creates it (0700)
        program.offline_cache_path, program._cache_entries = base, path
    else:
        program.runtime.set_offline_cache("", compiler_id())


def flush(program):
    """At the end of a program (qd.reset(), the next qd.init(), exit): the cleaning policy, and the
    metadata file. Costs one small read when nothing was written and the cache is under its limit."""
    entries_dir = getattr(program, "_cache_entries", None)
    if not entries_dir:
        return
    program._cache_entries = None
    program.runtime.flush_offline_cache()  # the entries compiled in this program are written now
    cfg = program.config
    wrote = program.runtime.offline_cache_stats()["writes"] > 0
    meta = _read_metadata(entries_dir)
    if not wrote and meta is not None and meta.get("bytes", 0) <= cfg.offline_cache_max_size_of_files:
        return
    entries = _entries(entries_dir)
    entries = _clean(entries_dir, entries, cfg)
    _write_metadata(entries_dir, entries)


def _entries(entries_dir):
    out = []
    with os.scandir(entries_dir) as it:
        for e in it:
            if e.name.endswith(".qdc"):
                try:
                    out.append((e.name, e.stat(follow_symlinks=False)))
                except OSError:
                    pass
    return out


def _clean(entries_dir, entries, cfg):
    """offline_cache_cleaning_policy: "never" and "version" keep everything (entries of another
    compiler are never loaded: their key differs); "fifo" (oldest written first) and "lru" (least
    recently read or written first, as the file system records access times) remove
    int(offline_cache_cleaning_factor * count) entries once their total size passes
    offline_cache_max_size_of_files bytes. Returns the entries left."""
    if cfg.offline_cache_cleaning_policy not in ("lru", "fifo"):
        return entries
    if sum(st.st_size for _, st in entries) <= cfg.offline_cache_max_size_of_files:
        return entries
    if cfg.offline_cache_cleaning_policy == "fifo":
        entries = sorted(entries, key=lambda e: (e[1].st_mtime_ns, e[0]))  # ties (written together): by name
    else:
        entries = sorted(entries, key=lambda e: (max(e[1].st_mtime_ns, e[1].st_atime_ns), e[0]))
    n = int(cfg.offline_cache_cleaning_factor * len(entries))
    for name, _ in entries[:n]:
        try:
            os.unlink(os.path.join(entries_dir, name))
        except OSError:
            pass
    return entries[n:]


def _read_metadata(entries_dir):
    try:
        with open(os.path.join(entries_dir, METADATA)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_metadata(entries_dir, entries):
    if not entries:  # nothing left (all cleaned away): no metadata either, as in Quadrants
        try:
            os.unlink(os.path.join(entries_dir, METADATA))
        except OSError:
            pass
        return
    tmp = os.path.join(entries_dir, f".{METADATA}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump({"entries": len(entries), "bytes": sum(st.st_size for _, st in entries)}, f)
        os.chmod(tmp, 0o600)
        os.replace(tmp, os.path.join(entries_dir, METADATA))
    except OSError:
        pass


@atexit.register
def _flush_at_exit():
    if _program is not None:
        flush(_program)


_program = None  # the current program (quadrants._lib.runtime sets it)


def stats():
    """{"hits", "misses", "writes"} of the current program's on-disk cache ({} when it has none or
    before qd.init())."""
    return dict(_program.runtime.offline_cache_stats()) if _program is not None else {}
