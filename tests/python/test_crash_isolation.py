"""Crash isolation (pytest.ini's `-n`, tests/qd_pytest_plugin.py): a test whose xdist worker dies of a
signal fails, with a report naming the test, the kernel being compiled or launched and the device,
and the run goes on; the first line of a run names the host. Also the breadcrumb itself
(quadrants/_lib/breadcrumb.py, QD_CRASH_BREADCRUMB)."""
import os
import subprocess
import sys
import textwrap
import time

import quadrants as qd
from quadrants._lib import breadcrumb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests")

# A driver crash, simulated: the runtime with one step (compile or launch) replaced by a SIGSEGV of
# the process, as a driver's shader compiler raises it, at the point the real step would run.
INNER = textwrap.dedent('''
    import os
    import signal

    import numpy as np
    import quadrants as qd

    LAUNCH_ARCH = getattr(qd, os.environ["QD_CRASH_TEST_ARCH"])


    class CrashingRuntime:
        def __init__(self, runtime, step):
            self._runtime, self._step = runtime, step

        def __getattr__(self, name):
            if name == self._step:
                return lambda *args: os.kill(os.getpid(), signal.SIGSEGV)
            return getattr(self._runtime, name)


    def crash_in(step):
        prog = qd._lib.runtime.program()
        prog.runtime = CrashingRuntime(prog.runtime, step)


    def test_crashes_in_the_compile():
        qd.init(arch=qd.cpu, enable_fallback=False)
        crash_in("compile")

        @qd.kernel
        def compiled_kernel(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = i

        compiled_kernel(np.zeros(8, np.int32))


    def test_crashes_in_the_launch():
        qd.init(arch=LAUNCH_ARCH, enable_fallback=False)
        a = np.zeros(8, np.int32)

        @qd.kernel
        def fine(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = i

        fine(a)  # compiled and launched for real first
        assert a.tolist() == list(range(8))
        crash_in("launch")

        @qd.kernel
        def launched_kernel(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = 2 * i

        launched_kernel(a)


    def test_passes():
        qd.init(arch=qd.cpu)
        a = np.zeros(8, np.int32)

        @qd.kernel
        def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = i + 1

        k(a)
        assert a.sum() == 36
''')


def _inner_session(tmp_path, arch, *args):
    """A pytest run of INNER in tmp_path, with the repository's pytest.ini options and plugin."""
    with open(os.path.join(ROOT, "pytest.ini")) as f:
        (tmp_path / "pytest.ini").write_text(f.read())
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and k not in ("QD_CRASH_BREADCRUMB", "QD_ARCH", "CI")}
    env.update(PYTHONPATH=os.pathsep.join([TESTS, ROOT]), QD_CRASH_TEST_ARCH=arch, COLUMNS="400")
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "qd_pytest_plugin", "-p", "no:cacheprovider",
                        "test_inner.py", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    return r, r.stdout + r.stderr


def _device(arch):
    """What the breadcrumb calls the device of `arch`: Vulkan's device name, the CPU's model."""
    if arch == "cpu":
        return breadcrumb.cpu_model()
    qd.init(arch=qd.vulkan, enable_fallback=False)
    try:
        return qd.vulkan_caps()["device_name"]
    finally:
        qd.reset()


def test_a_crashing_test_fails_naming_the_kernel_and_device_and_the_run_goes_on(tmp_path):
    arch = "vulkan" if qd.is_arch_available(qd.vulkan) else "cpu"
    r, out = _inner_session(tmp_path, arch, "-n", "2")
    assert "2 failed, 1 passed" in out.splitlines()[-1], out
    assert r.returncode == 1, out
    lines = out.splitlines()
    header = lines[0]
    assert header.startswith("quadrants test host: CPU ") and breadcrumb.cpu_model() in header, out
    assert "LLVM host CPU " in header and "; vulkan: " in header, header
    assert sum(ln.startswith("quadrants test host:") for ln in lines) == 1, out  # the controller's only
    compile_line = next(ln for ln in lines if "'test_inner.py::test_crashes_in_the_compile'" in ln and "SIGSEGV" in ln)
    assert "while quadrants was compiling kernel compiled_kernel (test_inner.py:" in compile_line, compile_line
    assert compile_line.endswith(f"for cpu device {breadcrumb.cpu_model()}"), compile_line
    launch_line = next(ln for ln in lines if "'test_inner.py::test_crashes_in_the_launch'" in ln and "SIGSEGV" in ln)
    assert "crashed while running" in launch_line and "SIGSEGV (Segmentation fault)" in launch_line
    assert "while quadrants was launching kernel launched_kernel (test_inner.py:" in launch_line, launch_line
    assert launch_line.endswith(f"for {arch} device {_device(arch)}"), launch_line
    # faulthandler's dump went to the worker's file, and its Python stack into the report.
    assert "Fatal Python error" not in out and "Extension modules" not in out, out
    assert "Python stack (most recent call first):" in out and "in test_crashes_in_the_launch" in out, out
    assert "test_inner.py::test_passes" not in "\n".join(ln for ln in lines if ln.startswith("FAILED")), out


def test_a_serial_run_without_xdist_still_works_and_starts_with_the_host(tmp_path):
    for opts in (["-p", "no:xdist"], ["-n", "0"]):
        r, out = _inner_session(tmp_path, "cpu", *opts, "-k", "passes")
        assert r.returncode == 0 and "1 passed" in out.splitlines()[-1], out
        header = out.splitlines()[0]
        assert header.startswith("quadrants test host: CPU ") and breadcrumb.cpu_model() in header, out
        assert "workers" not in out, out


def test_the_host_line_is_cheap():
    import host_probe

    t = time.perf_counter()
    line = host_probe.host_line()
    assert line.startswith("quadrants test host: CPU ") and "LLVM host CPU" in line
    assert time.perf_counter() - t < 10  # ~0.5 s on an idle machine; generous under a loaded suite


BREADCRUMB_SCRIPT = textwrap.dedent('''
    import os, sys
    import numpy as np
    import quadrants as qd
    from quadrants._lib import breadcrumb

    path = sys.argv[1]
    assert "QD_CRASH_BREADCRUMB" not in os.environ  # read once; children do not inherit it
    assert breadcrumb.on and breadcrumb.read(path) == (False, "idle (no kernel compiled or launched yet)")
    qd.init(arch=qd.cpu)
    assert breadcrumb.read(path) == (False, "starting the cpu runtime (qd.init)")

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = i

    a = np.zeros(4, np.int32)
    k(a)
    running, text = breadcrumb.read(path)
    assert not running and text.startswith("launching kernel k (") and text.endswith(
        f" for cpu device {breadcrumb.cpu_model()}"), text

    class Failing:
        def __init__(self, rt):
            self.rt = rt
        def __getattr__(self, name):
            return getattr(self.rt, name)
        def launch(self, *args):
            assert breadcrumb.read(path)[0], "the launch is marked under way"
            raise RuntimeError("boom")

    prog = qd._lib.runtime.program()
    prog.runtime = Failing(prog.runtime)
    try:
        k(a)
    except RuntimeError:
        pass
    assert breadcrumb.read(path)[0] is False  # returned (raised): not under way any more
    qd.compile(k, a)
    assert breadcrumb.read(path) == (False, f"compiling kernel k ({breadcrumb.where(k.func)}) for cpu "
                                            f"(qd.compile: code only, no device)")
    print("ok")
''')


def test_the_breadcrumb_records_each_step_and_whether_it_returned(tmp_path):
    script = tmp_path / "crumb.py"
    script.write_text(BREADCRUMB_SCRIPT)
    path = tmp_path / "crumb"
    env = dict(os.environ, QD_CRASH_BREADCRUMB=str(path), PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, str(script), str(path)], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
    assert path.stat().st_size == breadcrumb.SIZE


def test_without_the_variable_nothing_is_recorded():
    env = {k: v for k, v in os.environ.items() if k != "QD_CRASH_BREADCRUMB"}
    r = subprocess.run([sys.executable, "-c", "from quadrants._lib import breadcrumb; print(breadcrumb.on, breadcrumb._map)"],
                       env=dict(env, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "False None", r.stdout + r.stderr
