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
import shutil
import stat
import time

from quadrants._lib import _core

ENTRIES_DIR = "kernel_compilation_manager"  # under offline_cache_file_path: the entries (*.qdk)
METADATA = "qdcache.qdb"  # in ENTRIES_DIR: {entry: {"size", "mtime"}} as of the last qd.init's end
_STAGING = ".staging"  # under offline_cache_file_path: one directory per live program

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


def _clear_dead_staging(base):
    root = os.path.join(base, _STAGING)
    for name in os.listdir(root) if os.path.isdir(root) else ():
        try:
            os.kill(int(name.split("-")[0]), 0)
        except ProcessLookupError:  # its process is gone without flushing (killed): drop what it staged
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        except (ValueError, PermissionError):
            pass


def attach(program):
    """Points the program's runtime at the cache directory of its config (or at none).

    The entries live in <offline_cache_file_path>/kernel_compilation_manager. A program reads and
    writes a staging directory holding hard links to them; what it compiled joins the entries when the
    program ends (qd.reset(), the next qd.init(), or the process's exit), and the cleaning policy
    runs then, as Quadrants does it."""
    cfg = program.config
    program.offline_cache_path = program._cache_staging = None
    if not cfg.offline_cache:
        program.runtime.set_offline_cache("", compiler_id())
        return
    base = os.path.abspath(os.path.expanduser(cfg.offline_cache_file_path or default_path()))
    final = os.path.join(base, ENTRIES_DIR)
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
    except OSError:
        pass  # the runtime's own attempt below reports it (caching stays off)
    if not program.runtime.set_offline_cache(final, compiler_id()) or not _safe(base):  # creates it (0700)
        program.runtime.set_offline_cache("", compiler_id())
        return
    _clear_dead_staging(base)
    global _serial
    _serial += 1
    staging = os.path.join(base, _STAGING, f"{os.getpid()}-{_serial}")
    if not program.runtime.set_offline_cache(staging, compiler_id()):
        return
    for name in os.listdir(final):
        if name.endswith(".qdk"):
            try:
                os.link(os.path.join(final, name), os.path.join(staging, name), follow_symlinks=False)
            except OSError:
                pass  # gone meanwhile (another process cleaned it): compiled again if needed
    program.offline_cache_path, program._cache_final, program._cache_staging = base, final, staging


_serial = 0


def flush(program):
    """Ends the program's use of the cache: entries it wrote (new or rewritten) replace those of the
    directory (atomic renames), the cleaning policy runs, and the metadata file is rewritten."""
    staging = getattr(program, "_cache_staging", None)
    if not staging:
        return
    program._cache_staging = None
    final = program._cache_final
    program.runtime.set_offline_cache("", compiler_id())  # the runtime writes no more into staging
    try:
        for name in os.listdir(staging):
            src, dst = os.path.join(staging, name), os.path.join(final, name)
            if not name.endswith(".qdk"):
                continue
            try:
                if not os.path.lexists(dst) or not os.path.samestat(os.lstat(src), os.lstat(dst)):
                    os.replace(src, dst)
            except OSError:
                pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _clean(final, program.config)
    _write_metadata(final)


def _entries(final):
    out = []
    for name in os.listdir(final):
        if name.endswith(".qdk"):
            try:
                st = os.lstat(os.path.join(final, name))
            except OSError:
                continue
            out.append((name, st))
    return out


def _clean(final, cfg):
    """offline_cache_cleaning_policy: "never" and "version" keep everything (entries of another
    compiler are never loaded: their key differs); "fifo" (oldest written first) and "lru" (least
    recently read or written first, as the file system records access times) remove
    int(offline_cache_cleaning_factor * count) entries once their total size passes
    offline_cache_max_size_of_files bytes."""
    if cfg.offline_cache_cleaning_policy not in ("lru", "fifo"):
        return
    entries = _entries(final)
    if sum(st.st_size for _, st in entries) <= cfg.offline_cache_max_size_of_files:
        return
    if cfg.offline_cache_cleaning_policy == "fifo":
        entries.sort(key=lambda e: e[1].st_mtime_ns)
    else:
        entries.sort(key=lambda e: max(e[1].st_mtime_ns, e[1].st_atime_ns))
    for name, _ in entries[:int(cfg.offline_cache_cleaning_factor * len(entries))]:
        try:
            os.unlink(os.path.join(final, name))
        except OSError:
            pass


def _write_metadata(final):
    meta = {name: {"size": st.st_size, "mtime": st.st_mtime} for name, st in _entries(final)}
    tmp = os.path.join(final, f".{METADATA}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump({"written": time.time(), "entries": meta}, f)
        os.chmod(tmp, 0o600)
        os.replace(tmp, os.path.join(final, METADATA))
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
