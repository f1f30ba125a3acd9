"""pytest plugin of the test suite (tests/conftest.py loads it; `-p qd_pytest_plugin` with tests/ on
the path loads it elsewhere): the host line, and crash reports that name the kernel and the device.

- The first line of a run names the host: the CPU model, LLVM's name for the host CPU and each
  Vulkan device with its driver (`quadrants test host: ...`), printed by the controller only.
- pytest.ini runs the tests in pytest-xdist workers (`-n auto`: one per core, at most 4). A worker
  killed by a signal (a SIGSEGV in a driver's shader compiler) fails the test it was running, and a
  new worker goes on with the rest. Each worker maps a breadcrumb file (QD_CRASH_BREADCRUMB,
  quadrants/_lib/breadcrumb.py) where the front end notes the runtime it starts and the kernel it
  compiles or launches, and sends its faulthandler output to a file instead of the terminal; the
  controller adds both, and the signal, to the crashed test's report.
- `-p no:xdist` (or no pytest-xdist installed) keeps pytest.ini's xdist options parseable, and
  the run is serial; so is `-n 0`.
"""
import faulthandler
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import time

import pytest

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # host_probe, next to this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MAX_AUTO_WORKERS = 4  # each worker holds its own LLVM JIT, Vulkan device and thread pool

_crash_dir = None     # controller: where the workers' breadcrumb and faulthandler files are
_fault_file = None    # worker: faulthandler's output file (kept open)


def _is_worker(config):
    return hasattr(config, "workerinput")


def _xdist_active(config):
    return config.pluginmanager.has_plugin("xdist") and getattr(config.option, "dist", "no") != "no"


# ------------------------------------------------------------------ options without xdist
def _xdist_loads(pluginmanager):
    """Whether pytest-xdist is (or, loaded by its entry point after a `-p` plugin, will be) there."""
    if pluginmanager.has_plugin("xdist"):
        return True
    if pluginmanager.is_blocked("xdist") or os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return importlib.util.find_spec("xdist") is not None


def pytest_addoption(parser, pluginmanager):
    if _xdist_loads(pluginmanager):
        return
    # pytest.ini's addopts name xdist's options: without xdist they are accepted and ignored.
    group = parser.getgroup("xdist", "pytest-xdist is not loaded: these options are ignored (the run is serial)")
    group._addoption("-n", "--numprocesses", dest="numprocesses", default=None)  # xdist's own spelling
    group.addoption("--dist", dest="dist", default="no")
    group.addoption("--max-worker-restart", dest="maxworkerrestart", default=None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core this process may use, at most MAX_AUTO_WORKERS
    (PYTEST_XDIST_AUTO_NUM_WORKERS overrides)."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if env and env.strip().isdigit():
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_AUTO_WORKERS))


# ------------------------------------------------------------------ crash isolation
def pytest_configure(config):
    global _crash_dir
    if _is_worker(config):
        crash_dir = config.workerinput.get("qd_crash_dir")
        if crash_dir:
            _enable_breadcrumb(os.path.join(crash_dir, config.workerinput["workerid"] + ".crumb"))
    elif _xdist_active(config):
        _crash_dir = tempfile.mkdtemp(prefix="qd-test-crash-")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """Controller: the host line, before pytest's own header (or the first dot with -q).
    Worker: faulthandler's report of a fatal signal goes to this worker's file, which the
    controller quotes, instead of the terminal (_pytest/faulthandler.py enabled it at configure)."""
    global _fault_file
    config = session.config
    if not _is_worker(config):
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            import host_probe

            t = time.perf_counter()
            line = host_probe.host_line(vulkan=_vulkan_wanted())
            reporter.write_line(line + (f" [{time.perf_counter() - t:.1f} s]" if config.option.verbose > 0 else ""))
    elif config.workerinput.get("qd_crash_dir"):
        path = os.path.join(config.workerinput["qd_crash_dir"], config.workerinput["workerid"] + ".fault")
        _fault_file = open(path, "w")
        faulthandler.enable(file=_fault_file, all_threads=True)


def _enable_breadcrumb(path):
    if "quadrants" not in sys.modules:  # the usual case: quadrants is imported later, by the test modules
        os.environ["QD_CRASH_BREADCRUMB"] = path
    else:  # a plugin imported it already (gpu_compile_plugin)
        from quadrants._lib import breadcrumb

        breadcrumb.enable(path)


def pytest_unconfigure(config):
    global _crash_dir, _fault_file
    if _fault_file is not None:  # worker: faulthandler back to stderr, its file closed
        faulthandler.enable()
        _fault_file.close()
        _fault_file = None
    if _crash_dir is not None and not _is_worker(config):
        shutil.rmtree(_crash_dir, ignore_errors=True)
        _crash_dir = None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Controller: tells each worker (new ones after a crash too) where its files go."""
    if _crash_dir is not None:
        node.workerinput["qd_crash_dir"] = _crash_dir


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    """Controller: the report of the test whose worker died gets the signal, the breadcrumb (the
    kernel being compiled or launched, and the device) and faulthandler's Python stack. Its first
    line, the one `FAILED id - ...` shows, reads e.g. "worker 'gw0' crashed while running 'ID':
    SIGSEGV (Segmentation fault) while quadrants was compiling kernel K (FILE:LINE) for vulkan device D"."""
    worker = getattr(report, "node", None)
    wid = getattr(getattr(worker, "gateway", None), "id", None)
    if wid is None or _crash_dir is None:
        return None
    sig = _signal_of(worker)
    crumb = _read_breadcrumb(os.path.join(_crash_dir, wid + ".crumb"))
    first, more = str(report.longrepr), []
    cause = [sig] if sig else []
    if crumb is None:
        more.append("quadrants: no breadcrumb (the worker had not imported quadrants, or crashed before)")
    elif crumb[0]:
        cause.append(f"while quadrants was {crumb[1]}")
    else:
        more.append(f"quadrants was not compiling or launching a kernel: its last step had returned ({crumb[1]})")
    fault = _fault_summary(os.path.join(_crash_dir, wid + ".fault"), with_error_line=not sig)
    if fault:
        more.append(fault)
    report.longrepr = "\n".join([first + (": " + " ".join(cause) if cause else "")] + more)
    return None


def _signal_of(worker):
    """'SIGSEGV (Segmentation fault)' from the worker process's exit status, when it can be had."""
    popen = getattr(getattr(getattr(worker, "gateway", None), "_io", None), "popen", None)
    if popen is None:
        return None
    try:
        code = popen.wait(timeout=5)
    except Exception:
        return None
    if code is None or code >= 0:
        return f"exit status {code}" if code else None
    try:
        sig = signal.Signals(-code)
        return f"{sig.name} ({signal.strsignal(sig) or ''})".replace(" ()", "")
    except ValueError:
        return f"signal {-code}"


def _read_breadcrumb(path):
    try:
        with open(path, "rb") as f:
            data = f.read(1024)  # quadrants/_lib/breadcrumb.py SIZE
    except OSError:
        return None
    if not data or data[:1] not in (b">", b"."):
        return None
    return data[:1] == b">", data[1:].split(b"\0", 1)[0].decode("utf-8", "replace")


def _fault_summary(path, max_frames=8, with_error_line=True):
    """faulthandler's first line and the crashing thread's innermost frames, without pytest's own."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(200_000)
    except OSError:
        return None
    if not text.strip():
        return None
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.startswith("Fatal Python error")), None)
    frames, in_current = [], False
    for ln in lines:
        if ln.startswith(("Current thread", "Thread 0x")) and "most recent call first" in ln:
            in_current = ln.startswith("Current thread")
            continue
        if in_current and ln.startswith("  File "):
            if "/_pytest/" in ln or "/pluggy/" in ln or "/execnet/" in ln or "/xdist/" in ln:
                break  # the test runner's frames below the test
            frames.append("  " + ln.strip())
        elif in_current and not ln.strip():
            in_current = False
    out = [first] if first and with_error_line else []
    if frames:
        out.append("Python stack (most recent call first):")
        out.extend(frames[:max_frames])
        if len(frames) > max_frames:
            out.append(f"  ... {len(frames) - max_frames} more")
    return "\n".join(out) or None


# ------------------------------------------------------------------ the host line
def _vulkan_wanted():
    """Whether QD_WANTED_ARCHS (tests/test_utils.py) lets the kernel tests run on vulkan."""
    env = os.environ.get("QD_WANTED_ARCHS", "").strip()
    names = {n.strip() for n in env.lstrip("^").split(",") if n.strip()}
    if not names:
        return True
    return bool(names & {"vulkan", "gpu"}) != env.startswith("^")
