"""Test helpers: @test(...) parametrises a kernel test over the available arches."""
import functools
import inspect
import os

import pytest

import quadrants as qd

_ARCH_NAMES = ["cpu", "cuda", "amdgpu", "vulkan", "metal"]
_available = {}


def _is_available(arch):
    if arch.name not in _available:
        _available[arch.name] = qd.is_arch_available(arch)
    return _available[arch.name]


def _wanted():
    env = os.environ.get("QD_WANTED_ARCHS")
    if not env:
        return list(_ARCH_NAMES)
    names = [n.strip() for n in env.split(",") if n.strip()]
    for n in names:
        if n not in _ARCH_NAMES:
            raise ValueError(f"QD_WANTED_ARCHS: unknown arch '{n}'")
    return names


def expected_archs(arch=None, exclude=None, require=None):
    """The arches a test runs on: those asked (default all), wanted by QD_WANTED_ARCHS, and available."""
    asked = arch if arch is not None else [getattr(qd, n) for n in _ARCH_NAMES]
    asked = asked if isinstance(asked, (list, tuple)) else [asked]
    exclude = exclude if isinstance(exclude, (list, tuple)) else [exclude] if exclude else []
    wanted = _wanted()
    return [a for a in asked if a.name in wanted and a not in exclude]


def test(arch=None, exclude=None, require=None, xfail=None, **init_options):
    """Runs the decorated test once per arch: qd.init(arch=..., **init_options) before, qd.reset() after.

    An arch that is asked for but not available on this machine is skipped with the reason.
    `require` names a capability (or a list) the device must report, e.g. "int64_atomics_buffer".
    `xfail` maps an arch name to why the test cannot pass there: a reason, or (reason, False) for a
    test that must not even run there (it could hang).
    """
    archs = expected_archs(arch, exclude)
    params = [_with_xfail(a, (xfail or {}).get(a.name)) for a in archs]

    def decorator(fn):
        @functools.wraps(fn)
        def wrapped(*args, qd_arch, **kwargs):
            if not _is_available(qd_arch):
                pytest.skip(f"{qd_arch.name} is not available on this machine")
            qd.init(arch=qd_arch, **init_options)
            try:
                if require:
                    from quadrants.lang import runtime
                    have = set(runtime.program().runtime.features)
                    missing = [r for r in ([require] if isinstance(require, str) else require) if r not in have]
                    if missing:
                        pytest.skip(f"{qd_arch.name} lacks {missing}")
                return fn(*args, **kwargs)
            finally:
                qd.reset()

        # pytest reads the signature: the test's own parameters plus qd_arch.
        del wrapped.__wrapped__
        sig = inspect.signature(fn)
        extra = inspect.Parameter("qd_arch", inspect.Parameter.KEYWORD_ONLY)
        wrapped.__signature__ = sig.replace(parameters=list(sig.parameters.values()) + [extra])
        return pytest.mark.parametrize("qd_arch", params, ids=[a.name for a in archs])(wrapped)

    return decorator


def _with_xfail(arch, why):
    if why is None:
        return arch
    reason, run = (why, True) if isinstance(why, str) else why
    return pytest.param(arch, marks=pytest.mark.xfail(reason=reason, run=run))


def approx(expected, rel=1e-6, abs=1e-6, **kwargs):
    return pytest.approx(expected, rel=rel, abs=abs, **kwargs)


def current_arch():
    from quadrants.lang import runtime
    return runtime.program().config.arch
test.__test__ = False  # the decorator, not a test
