"""pytest plugin: every kernel the tests compile (on any arch) is also compiled for cuda and amdgpu.

    PYTHONPATH=tests/python python -m pytest -p gpu_compile_plugin tests/python/test_language.py

After each kernel call that compiled a new specialisation, the plugin compiles the same kernel
with the same arguments through qd.compile for cuda (the PTX assembled by ptxas when present) and
amdgpu. A clear Quadrants compile error (a GPU-only limitation) is recorded, not fatal; anything
else (invalid PTX, an internal error) fails the test that launched the kernel. With
QD_GPU_COMPILE_REPORT set, a JSON summary is written there at the end of the session (under xdist
by the controller, from its workers' counts).
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

import quadrants as qd
from quadrants.kernels.kernel import Kernel

PTXAS = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.access("/usr/local/cuda/bin/ptxas", os.X_OK)
                                  else None)
_report = {"compiled": 0, "ptxas": 0, "rejected": []}


def _ptxas(ptx, name):
    if PTXAS is None:
        return
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([PTXAS, "-arch=sm_75", "-o", os.path.join(d, "k.cubin"), src], capture_output=True,
                           text=True)
    if r.returncode != 0:
        raise AssertionError(f"ptxas rejected the PTX of kernel '{name}':\n{r.stderr}")
    _report["ptxas"] += 1


class _AlsoForGpus(Kernel):
    def __call__(self, *args, **kwargs):
        before = self.num_compilations
        result = super().__call__(*args, **kwargs)  # the test's own launch first: its errors are the test's
        if self.num_compilations > before:
            for arch in (qd.cuda, qd.amdgpu):
                try:
                    art = qd.compile(self, *args, arch=arch, **kwargs)
                except (qd.QuadrantsCompilationError, AssertionError) as e:  # AssertionError: a template
                    # check of the GPU's own sizes (block_dim a multiple of AMDGPU's 64 lanes)
                    _report["rejected"].append(f"{self.__name__} on {arch}: {str(e).splitlines()[-1]}")
                    continue
                _report["compiled"] += 1
                if arch is qd.cuda:
                    _ptxas(art.ptx, self.__name__)
        return result


def pytest_configure(config):
    original = qd.kernel

    def kernel(*args, **kwargs):
        k = original(*args, **kwargs)
        if type(k) is Kernel:
            k.__class__ = _AlsoForGpus  # the same kernel, with the GPU compiles added
        return k

    qd.kernel = kernel


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workeroutput"):  # an xdist worker: its counts go to the controller
        session.config.workeroutput["qd_gpu_compile"] = _report
        return
    path = os.environ.get("QD_GPU_COMPILE_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(_report, f, indent=1)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The xdist controller: adds up what each worker compiled."""
    theirs = getattr(node, "workeroutput", {}).get("qd_gpu_compile")
    if theirs:
        _report["compiled"] += theirs["compiled"]
        _report["ptxas"] += theirs["ptxas"]
        _report["rejected"].extend(theirs["rejected"])
