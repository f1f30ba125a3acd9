"""Test helpers: @test(...) runs a kernel test once per arch, with qd.init before and qd.reset after.

The helpers have the names and arguments of Quadrants' own tests/test_utils.py, so test files
written for Quadrants run unchanged with this file as their harness (docs/getting_started.md).
QD_WANTED_ARCHS=cpu,vulkan limits the arches ("^cuda" excludes, "gpu" means every GPU arch).
QD_GPU_TESTS_ON_CPU=1 also runs tests written for several GPU arches on the cpu, which has blocks, shared
memory and 32-lane subgroups too (docs/backends.md): how the reference's SIMT tests run there.
"""
import functools
import inspect
import os
import platform
import tempfile

import pytest

import quadrants as qd
from quadrants._lib import core as _core_lib

_ARCH_NAMES = ["cpu", "cuda", "amdgpu", "vulkan", "metal"]
_available = {}


def _is_available(arch):
    if arch.name not in _available:
        _available[arch.name] = qd.is_arch_available(arch)
    return _available[arch.name]


def _wanted():
    """The arch names QD_WANTED_ARCHS asks for (all when unset)."""
    env = os.environ.get("QD_WANTED_ARCHS", "")
    exclude = env.startswith("^")
    names = set()
    for n in (n.strip() for n in env.lstrip("^").split(",")):
        if not n:
            continue
        if n == "gpu":
            names.update(a.name for a in qd.gpu)
        elif n in _ARCH_NAMES:
            names.add(n)
        else:
            raise ValueError(f"QD_WANTED_ARCHS: unknown arch '{n}'; choose from {_ARCH_NAMES} or 'gpu'")
    if not names:
        return list(_ARCH_NAMES)
    return [n for n in _ARCH_NAMES if (n in names) != exclude]


def expected_archs():
    """The arches tests run on here: those QD_WANTED_ARCHS asks for that this machine has."""
    return [getattr(qd, n) for n in _wanted() if _is_available(getattr(qd, n))]


def _as_list(x):
    """x as a flat list: None is [], a list may hold lists (arch=[qd.cpu, qd.gpu])."""
    if x is None:
        return []
    if not isinstance(x, (list, tuple)):
        return [x]
    return [e for item in x for e in (_as_list(item) if isinstance(item, list) else [item])]


def _excluded(arch, exclude):
    """exclude: arches, (arch,) or (arch, platform.system()) pairs; None in a pair matches any."""
    system = platform.system()
    for item in _as_list(exclude):
        if isinstance(item, (list, tuple)):
            ex_arch, ex_system = (tuple(item) + (None,))[:2]
        else:
            ex_arch, ex_system = item, None
        if (ex_arch is None or ex_arch is arch) and (ex_system is None or ex_system == system):
            return True
    return False


def test(arch=None, exclude=None, require=None, xfail=None, **init_options):
    """Runs the decorated test once per arch: qd.init(arch=..., **init_options) before, qd.reset() after.

    arch: an arch or a list (qd.gpu); default every arch. exclude: arches or (arch, platform.system())
    pairs to leave out. require: qd.extension members the arch must have, or device capability names
    (e.g. "int64_atomics_buffer", see qd.vulkan_caps()) the device must report; the test is skipped
    where they are missing. An arch asked for but not available on this machine is skipped with the
    reason. `xfail` maps an arch name to why the test cannot pass there: a reason, or (reason, False)
    for a test that must not even run there (it could hang). A test taking `req_arch` / `req_options`
    (as the reference's conftest provides them) gets the arch and the init options it ran with.
    """
    wanted = _wanted()
    extensions = [r for r in _as_list(require) if isinstance(r, _core_lib.Extension)]
    capabilities = [r for r in _as_list(require) if not isinstance(r, _core_lib.Extension)]
    asked = _as_list(arch)
    # portable GPU tests (two GPU arches or more; not the cuda-only or amdgpu-only ones)
    if os.environ.get("QD_GPU_TESTS_ON_CPU") == "1" and sum(a in qd.gpu for a in asked) >= 2 and qd.cpu not in asked:
        asked = asked + [qd.cpu]
    archs = [a for a in (asked or [getattr(qd, n) for n in _ARCH_NAMES])
             if a.name in wanted and not _excluded(a, exclude)
             and all(_core_lib.is_extension_supported(a, e) for e in extensions)]
    params = [_with_xfail(a, (xfail or {}).get(a.name)) for a in archs]
    init_options.setdefault("enable_fallback", False)

    def decorator(fn):
        sig = inspect.signature(fn)
        provided = [n for n in ("req_arch", "req_options") if n in sig.parameters]

        @functools.wraps(fn)
        def wrapped(*args, qd_arch, **kwargs):
            if "req_arch" in provided:
                kwargs["req_arch"] = qd_arch
            if "req_options" in provided:
                kwargs["req_options"] = dict(init_options)
            if not _is_available(qd_arch):
                pytest.skip(f"{qd_arch.name} is not available on this machine")
            qd.init(arch=qd_arch, **init_options)
            try:
                if capabilities:
                    from quadrants._lib import runtime
                    have = set(runtime.program().runtime.features)
                    missing = [r for r in capabilities if r not in have]
                    if missing:
                        pytest.skip(f"{qd_arch.name} lacks {missing}")
                return fn(*args, **kwargs)
            finally:
                qd.reset()

        # pytest reads the signature: the test's own parameters plus qd_arch.
        del wrapped.__wrapped__
        extra = inspect.Parameter("qd_arch", inspect.Parameter.KEYWORD_ONLY)
        own = [p for p in sig.parameters.values() if p.name not in provided]
        wrapped.__signature__ = sig.replace(parameters=own + [extra])
        return pytest.mark.parametrize("qd_arch", params, ids=[a.name for a in archs])(wrapped)

    return decorator


test.__test__ = False  # the decorator, not a test


def _with_xfail(arch, why):
    if why is None:
        return arch
    reason, run = (why, True) if isinstance(why, str) else why
    return pytest.param(arch, marks=pytest.mark.xfail(reason=reason, run=run))


def host_has_avx512f():
    """Whether the host CPU has AVX-512F (Linux: /proc/cpuinfo), as LLVM's host features say (the
    cpu backend's vector width: TargetFeatures::vector_bits)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def current_arch():
    return qd.lang.impl.current_cfg().arch


def get_rel_eps():
    """The relative tolerance float results are compared with on the current arch."""
    cfg = qd.cfg
    return 1e-4 if cfg is not None and cfg.arch is qd.metal else 1e-6


class _BoolApprox:
    def __init__(self, value):
        self.value = bool(value)

    def __eq__(self, other):
        return self.value == bool(other)

    def __ne__(self, other):
        return self.value != bool(other)

    def __repr__(self):
        return f"approx({self.value})"


def approx(expected, **kwargs):
    """pytest.approx with a relative tolerance of at least get_rel_eps(); a bool compares as truthiness."""
    if isinstance(expected, bool):
        return _BoolApprox(expected)
    kwargs["rel"] = max(kwargs.get("rel", 1e-6), get_rel_eps())
    return pytest.approx(expected, **kwargs)


def allclose(x, y, **kwargs):
    """x == approx(y, **kwargs)."""
    return x == approx(y, **kwargs)


def skip_if_f64_unsupported(dtype):
    """Skips the running test when `dtype` is qd.f64 and the current device has no 64-bit floats."""
    if dtype is not qd.f64:
        return
    arch = current_arch()
    if arch is qd.metal:
        pytest.skip("Metal has no f64")
    if arch is qd.vulkan and not qd.vulkan_caps()["shader_float64"]:
        pytest.skip("this Vulkan device has no shaderFloat64")


def make_temp_file(*args, **kwargs):
    """A new empty temporary file (tempfile.mkstemp's arguments); returns its path."""
    fd, name = tempfile.mkstemp(*args, **kwargs)
    os.close(fd)
    return name


def mkdir_p(path):
    os.makedirs(path, exist_ok=True)
