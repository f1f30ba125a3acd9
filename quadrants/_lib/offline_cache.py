"""qd.init(offline_cache=True, offline_cache_file_path=...): the on-disk kernel cache.

Compiled kernels are stored under the directory (default: $QD_OFFLINE_CACHE_FILE_PATH, else
$XDG_CACHE_HOME/quadrants or ~/.cache/quadrants), keyed by a SHA-256 of everything the code is a
function of: the kernel as generated (its source, the funcs it calls, template arguments, dtypes,
fields and options all shape it), the target (arch, host CPU and features, LLVM version) and the
compiler itself (a hash of the C++ core). The C++ side (csrc/cache/disk_cache.h) loads an entry only
when its recorded content hash matches, writes entries with an atomic rename, and keeps the
directory private to the user. docs/getting_started.md describes the behaviour.
"""
import hashlib
import os

from quadrants._lib import _core

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


def attach(program):
    """Points the program's runtime at the cache directory of its config (or at none)."""
    cfg = program.config
    path = ""
    if cfg.offline_cache:
        path = os.path.abspath(os.path.expanduser(cfg.offline_cache_file_path or default_path()))
    program.offline_cache_path = path if path and program.runtime.set_offline_cache(path, compiler_id()) else None


_program = None  # the current program (quadrants._lib.runtime sets it)


def stats():
    """{"hits", "misses", "writes"} of the current program's on-disk cache ({} when it has none or
    before qd.init())."""
    return dict(_program.runtime.offline_cache_stats()) if _program is not None else {}
