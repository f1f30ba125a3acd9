"""Crash breadcrumbs: what the front end last began (starting a runtime, compiling or launching a
kernel), still readable after a driver has crashed the process.

Off unless $QD_CRASH_BREADCRUMB names a file when quadrants is imported (or `enable(path)` is
called). Off, the cost is one `if breadcrumb.on:` per compile and per launch. On, the file is
mapped MAP_SHARED: each record is copied into the mapping (its pages are the file's page cache, so
they survive the process being killed by a signal), never written with a system call. The test
suite's workers set it, one file per worker, and the pytest controller quotes the file in the report
of a test whose worker crashed (tests/qd_pytest_plugin.py).

The variable is read once at import and removed from the environment: a child process (a script a
test runs) crashes on its own and must not overwrite this process's record.

The file is SIZE bytes: byte 0 is '>' while the step is under way and '.' once it has returned (or
raised); then the record's UTF-8 text, NUL-padded. For example
">compiling kernel fill (tests/python/test_x.py:12) for vulkan device llvmpipe (LLVM 15.0.6, 256 bits)".
"""
import mmap
import os
import platform

SIZE = 1024
on = False  # tested before anything else is done: the whole cost when off
_map = None


def enable(path):
    """Records breadcrumbs into `path` (created or truncated to SIZE bytes) from now on."""
    global _map, on
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.ftruncate(fd, SIZE)
        m = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    m[:] = record("idle (no kernel compiled or launched yet)", running=False)
    _map, on = m, True


def disable():
    global _map, on
    on = False
    if _map is not None:
        _map.close()
        _map = None


def record(text, running=True):
    """A whole SIZE-byte record (precomputed once per kernel for its launches)."""
    data = (b">" if running else b".") + text.encode("utf-8", "replace")[:SIZE - 2]
    return data.ljust(SIZE, b"\0")


def begin(rec):
    """Marks the step `rec` (a record()) as under way: one copy into the mapping."""
    m = _map
    if m is not None:
        m[:] = rec


def end():
    """Marks the current step as returned: one byte."""
    m = _map
    if m is not None:
        m[0] = 0x2E  # '.'


def read(path):
    """(running, text) of a breadcrumb file, or None when it is missing or empty."""
    try:
        with open(path, "rb") as f:
            data = f.read(SIZE)
    except OSError:
        return None
    if not data or data[0] not in b">.":
        return None
    return data[0] == 0x3E, data[1:].split(b"\0", 1)[0].decode("utf-8", "replace")


_cpu_model = None


def cpu_model():
    """The host CPU's model name (/proc/cpuinfo), e.g. 'AMD EPYC 9654 96-Core Processor'."""
    global _cpu_model
    if _cpu_model is None:
        name = ""
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key.strip() in ("model name", "Model", "cpu model", "Processor") and value.strip():
                        name = value.strip()
                        break
        except OSError:
            pass
        _cpu_model = name or platform.processor() or platform.machine() or "unknown CPU"
    return _cpu_model


def device_of(program):
    """'ARCH device NAME' of a program (kept on it: computed once, only with breadcrumbs on)."""
    described = getattr(program, "_crumb_device", None)
    if described is None:
        arch = program.config.arch.name
        name = None
        try:
            if arch == "vulkan":
                name = program.runtime.vulkan_caps.get("device_name")
            elif arch == "cpu":
                name = cpu_model()
        except Exception:  # a description must never fail a compile
            name = None
        if not name:
            name = program.config.device or "0"
        described = f"{arch} device {name}"
        program._crumb_device = described
    return described


def where(func):
    """'FILE:LINE' of a Python function, relative to the working directory when under it."""
    code = func.__code__
    path = code.co_filename
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return f"{path}:{code.co_firstlineno}"


_path = os.environ.pop("QD_CRASH_BREADCRUMB", "")
if _path:
    try:
        enable(_path)
    except OSError as e:
        import warnings

        warnings.warn(f"QD_CRASH_BREADCRUMB={_path!r}: cannot map the file ({e}); no crash breadcrumbs",
                      RuntimeWarning, stacklevel=2)
