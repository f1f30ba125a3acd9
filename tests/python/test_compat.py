"""The host-side surface Quadrants code uses: qd.init's options, qd.cfg and introspection, the
exception names, qd.math constants, and the test harness itself (tests/test_utils.py)."""
import math
import os
import re
import warnings

import numpy as np
import pytest

import quadrants as qd
from quadrants._lib import options as init_options
from tests import test_utils
from tests.test_utils import test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------------------ qd.init options
def test_every_option_is_accepted_and_shown_in_cfg():
    values = {"offline_cache": False, "fast_math": False, "ad_stack_size": 64, "src_ll_cache": False,
              "check_out_of_bound": True, "log_level": "WARN", "random_seed": 7, "print_full_traceback": True,
              "advanced_optimization": False, "cpu_max_num_threads": 2, "default_fp": qd.f64,
              "default_ip": qd.i64, "debug": 1, "device_memory_GB": 0.3, "device_memory_fraction": 0.5,
              "kernel_profiler": True, "cuda_stack_limit": 1024, "verbose": False}
    qd.init(arch=qd.cpu, **values)
    try:
        cfg = qd.cfg
        assert cfg is qd.lang.impl.current_cfg()
        assert cfg.arch is qd.cpu and cfg.debug is True and cfg.log_level == "warn"
        assert cfg.default_fp is qd.f64 and cfg.default_ip is qd.i64 and cfg.device_memory_GB == 0.3
        for name, v in values.items():
            if name not in ("debug", "log_level"):
                assert getattr(cfg, name) == v, name
        # Every option of the table has a value, its default unless given.
        for name, opt in init_options.OPTIONS.items():
            if name not in values and name not in ("default_fp", "default_ip") and not os.environ.get(
                    init_options.env_name(name)):  # $QD_<NAME> (the suite sets QD_OFFLINE_CACHE_FILE_PATH)
                assert getattr(cfg, name) == opt.default or name == "vulkan_disable_caps", name
    finally:
        qd.reset()
    assert qd.cfg is None
    with pytest.raises(qd.QuadrantsRuntimeError, match="call qd.init"):
        qd.lang.impl.current_cfg()
    default = qd.lang.impl.default_cfg()
    assert default.arch is qd.cpu and default.default_fp is qd.f32 and default.offline_cache is True


def test_unknown_or_ill_typed_options_are_clear_errors():
    qd.init(arch=qd.cpu)
    x = qd.field(qd.i32, shape=2)
    with pytest.raises(KeyError, match=r"unknown option\(s\) 'fast_mat' \(did you mean 'fast_math'\?\)"):
        qd.init(arch=qd.cpu, fast_mat=True)
    with pytest.raises(KeyError, match="'no_such_thing'"):
        qd.init(no_such_thing=1)
    for name, value, what in [("offline_cache", "yes", "a bool"), ("debug", 2, "a bool"),
                              ("random_seed", 1.5, "an int"), ("device_memory_GB", "1", "a number"),
                              ("vulkan_disable_caps", "shader_int64", "a list of strings")]:
        with pytest.raises(TypeError, match=rf"qd.init\({name}=...\) expects {what}"):
            qd.init(arch=qd.cpu, **{name: value})
    with pytest.raises(ValueError, match="log_level='loud'.*choose one of trace"):
        qd.init(log_level="loud")
    with pytest.raises(ValueError, match="must not be negative"):
        qd.init(ad_stack_size=-1)
    x[0] = 5  # a rejected qd.init leaves the current one in place
    assert x[0] == 5
    qd.reset()


@test(arch=qd.cpu, check_out_of_bound=True)
def test_check_out_of_bound_checks_indices():
    x = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k(i: qd.i32):
        x[i] = 1

    k(3)
    with pytest.raises(qd.QuadrantsOutOfBoundsError, match="index 4 out of range") as e:
        k(4)
    assert isinstance(e.value, IndexError) and isinstance(e.value, qd.QuadrantsAssertionError)
    assert isinstance(e.value, AssertionError) and isinstance(e.value, qd.QuadrantsRuntimeError)
    assert qd.cfg.debug is False and qd.cfg.check_out_of_bound is True


def test_unavailable_arch_falls_back_to_cpu_unless_disabled():
    arch = next((a for a in (qd.metal, qd.cuda, qd.amdgpu) if not qd.is_arch_available(a)), None)
    if arch is None:
        pytest.skip("every arch is available here")
    with pytest.warns(RuntimeWarning, match=f"(?s)falling back to cpu.*{arch.name}: "):
        qd.init(arch=arch)
    assert qd.cfg.arch is qd.cpu
    with pytest.raises(RuntimeError, match=f"{arch.name}: "):
        qd.init(arch=arch, enable_fallback=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qd.init(arch=[arch, qd.cpu])  # a list falls through quietly
    assert qd.cfg.arch is qd.cpu
    qd.reset()


# ------------------------------------------------------------------------------ introspection
@test(arch=[qd.cpu, qd.vulkan])
def test_device_caps():
    DC = qd._lib.core.DeviceCapability
    caps = qd.lang.impl.get_runtime().prog.get_device_caps()
    if qd.cfg.arch is qd.cpu:
        assert all(caps.get(c) == 0 for c in DC)
        assert qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=True) == 64 * 1024  # a block's arrays on a worker's stack
        with pytest.raises(RuntimeError, match="not known on arch cpu"):
            qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=False)
        return
    vk = qd.vulkan_caps()
    assert caps.get(DC.spirv_has_atomic_int64) == int(vk["int64_atomics_buffer"])
    assert caps.get(DC.spirv_has_float64) == int(vk["shader_float64"])
    assert caps.get(DC.spirv_has_atomic_float_add) == int(vk["float32_atomic_add_buffer"])
    assert caps.get(DC.spirv_has_atomic_float16) == int(vk["float16_atomics_buffer"])
    assert caps.get(DC.spirv_subgroup_size) == vk["subgroup_size"] > 0
    assert caps.get(DC.spirv_has_shader_clock) == 0  # not queried here
    for lower in (True, False):
        assert qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=lower) == vk["max_shared_memory_bytes"]


def test_device_caps_need_init():
    qd.reset()
    with pytest.raises(qd.QuadrantsRuntimeError, match="qd.init"):
        qd.lang.impl.get_runtime().prog
    assert qd.lang.impl.get_runtime()._prog is None


def test_cuda_compute_capability():
    if not qd.is_arch_available(qd.cuda):
        with pytest.raises(RuntimeError, match="CUDA unavailable"):
            qd.lang.impl.get_cuda_compute_capability()
        return
    cc = qd.lang.impl.get_cuda_compute_capability()
    assert isinstance(cc, int) and 30 <= cc < 200
    qd.init(arch=qd.cuda)
    assert qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=False) >= 48 * 1024
    qd.reset()


def test_core_helpers_version_and_aliases():
    sizes = {qd.i8: 1, qd.u8: 1, qd.i16: 2, qd.u16: 2, qd.f16: 2, qd.i32: 4, qd.u32: 4, qd.f32: 4,
             qd.i64: 8, qd.u64: 8, qd.f64: 8, qd.u1: 1}
    assert {t: qd._lib.core.data_type_size(t) for t in sizes} == sizes
    assert qd._lib.core.arch_from_name("vulkan") is qd.vulkan and qd._lib.core.host_arch() is qd.cpu
    assert qd.x64 is qd.cpu and qd.x86_64 is qd.cpu
    assert qd._lib.core.is_extension_supported(qd.cpu, qd.extension.data64)
    assert not qd._lib.core.is_extension_supported(qd.vulkan, qd.extension.data64)
    assert not any(qd._lib.core.is_extension_supported(qd.cuda, e) for e in qd.extension if e.name not in ("data64", "adstack"))
    written = open(os.path.join(ROOT, "quadrants", "_version.py")).read()
    assert re.search(r'^__version__ = "(.*)"', written, re.M).group(1) == qd.__version_str__
    assert qd.__version__ == tuple(int(p) for p in qd.__version_str__.split("."))


@test(arch=qd.cpu)
def test_template_and_bare_ndarray_annotations():
    x = qd.field(qd.i32, shape=3)

    @qd.kernel
    def k(f: qd.Template, a: qd.types.NDArray, n: qd.template()):
        for i in range(n):
            f[i] = a[i] * 2

    a = np.array([1, 2, 3], dtype=np.int32)
    k(x, a, 3)
    assert x.to_numpy().tolist() == [2, 4, 6]
    k(x, np.array([5, 6, 7], dtype=np.int64), 2)  # bare NDArray: any dtype
    assert x.to_numpy().tolist() == [10, 12, 6]


# ------------------------------------------------------------------------------ exceptions
def test_exception_hierarchy():
    E = qd.lang.exception
    assert issubclass(E.QuadrantsSyntaxError, (qd.QuadrantsCompilationError, SyntaxError))
    assert issubclass(E.QuadrantsIndexError, qd.QuadrantsSyntaxError) and issubclass(E.QuadrantsIndexError, IndexError)
    assert issubclass(E.QuadrantsRuntimeTypeError, qd.QuadrantsTypeError)
    assert issubclass(E.QuadrantsRuntimeTypeError, qd.QuadrantsRuntimeError)
    assert issubclass(E.QuadrantsAssertionError, RuntimeError) and issubclass(E.QuadrantsAssertionError, AssertionError)
    assert issubclass(E.QuadrantsOutOfBoundsError, IndexError)
    for name in ("QuadrantsAssertionError", "QuadrantsNameError", "QuadrantsRuntimeTypeError", "QuadrantsIndexError",
                 "QuadrantsRuntimeError", "QuadrantsCompilationError", "QuadrantsSyntaxError", "QuadrantsTypeError"):
        assert getattr(qd, name) is getattr(E, name)


@test(arch=qd.cpu)
def test_exceptions_raised():
    @qd.kernel
    def constant_index() -> qd.i32:
        v = qd.Vector([1, 2, 3])
        return v[3]

    @qd.kernel
    def scalar_arg(a: qd.i32):
        pass

    with pytest.raises(qd.QuadrantsIndexError, match="index 3 out of range for a vector") as e:
        constant_index()
    assert "return v[3]" in str(e.value)
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match="argument 'a' expects a number"):
        scalar_arg("one")


@test(arch=[qd.cpu, qd.vulkan])
def test_atomic_target_errors_and_host_matrices():
    @qd.kernel
    def bad():
        y = qd.Vector([1, 2, 3])
        qd.atomic_max([3, 2, 1], y)

    with pytest.raises(qd.QuadrantsSyntaxError,
                       match="cannot use a non-writable target as the first operand of qd.atomic_max"):
        bad()

    # A qd.Matrix built outside the kernel is a numpy array; kernels use it as a matrix constant.
    m = qd.Matrix.field(2, 2, qd.i32, shape=())
    contrib = qd.Matrix([[1, 2], [3, 4]])

    @qd.kernel
    def add():
        for _ in range(10):
            qd.atomic_add(m[None], contrib)

    add()
    assert m[None].tolist() == [[10, 20], [30, 40]]


@test(arch=[qd.cpu, qd.vulkan])
def test_math_constants():
    out = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k():
        out[0] = qd.cast(qd.math.nan, qd.f32)
        out[1] = -qd.math.inf
        out[2] = qd.math.pi
        out[3] = qd.math.e

    k()
    r = out.to_numpy()
    assert math.isnan(r[0]) and r[1] == -math.inf
    assert r[2] == np.float32(math.pi) and r[3] == np.float32(math.e)
    assert (qd.math.pi, qd.math.e) == (math.pi, math.e) and math.isinf(qd.math.inf)


# ------------------------------------------------------------------------------ the harness
def test_harness_arch_selection(monkeypatch):
    monkeypatch.setenv("QD_WANTED_ARCHS", "^cuda,metal")
    assert test_utils._wanted() == ["cpu", "amdgpu", "vulkan"]
    monkeypatch.setenv("QD_WANTED_ARCHS", "gpu")
    assert test_utils._wanted() == ["cuda", "amdgpu", "vulkan", "metal"]
    monkeypatch.setenv("QD_WANTED_ARCHS", "cpu,tpu")
    with pytest.raises(ValueError, match="unknown arch 'tpu'"):
        test_utils._wanted()
    monkeypatch.setenv("QD_WANTED_ARCHS", "cpu")
    assert test_utils.expected_archs() == [qd.cpu]
    system = __import__("platform").system()
    assert test_utils._excluded(qd.vulkan, [qd.vulkan]) and test_utils._excluded(qd.vulkan, qd.vulkan)
    assert test_utils._excluded(qd.vulkan, [(qd.vulkan,)]) and test_utils._excluded(qd.vulkan, [(qd.vulkan, system)])
    assert not test_utils._excluded(qd.vulkan, [(qd.vulkan, "NoSuchOS")]) and not test_utils._excluded(qd.cpu, qd.vulkan)
    assert test_utils._excluded(qd.cpu, [(None, system)])

    def body():
        pass

    def params(**kw):
        mark = test_utils.test(**kw)(body).pytestmark[0]
        return [getattr(p, "values", (p,))[0] for p in mark.args[1]]

    monkeypatch.setenv("QD_WANTED_ARCHS", "cpu,vulkan,cuda")
    assert params() == [qd.cpu, qd.cuda, qd.vulkan]
    assert params(arch=qd.gpu) == [qd.cuda, qd.vulkan]
    assert params(exclude=[(qd.cuda, system), qd.vulkan]) == [qd.cpu]
    assert params(require=qd.extension.data64) == [qd.cpu, qd.cuda]
    assert params(require=[qd.extension.sparse]) == []


def test_harness_helpers():
    assert 1.0 + 1e-7 == test_utils.approx(1.0) and 1.0 + 1e-5 != test_utils.approx(1.0)
    assert 1.0 + 1e-5 == test_utils.approx(1.0, rel=1e-4)
    assert 2 == test_utils.approx(True) and 0 != test_utils.approx(True) and 0 == test_utils.approx(False)
    assert test_utils.allclose([1.0, 2.0], [1.0, 2.0 + 1e-7]) and not test_utils.allclose(1.0, 1.1)
    assert test_utils.get_rel_eps() == 1e-6
    name = test_utils.make_temp_file(suffix=".txt")
    try:
        assert name.endswith(".txt") and os.path.getsize(name) == 0
    finally:
        os.remove(name)


@test(arch=[qd.cpu, qd.vulkan], debug=True)
def test_harness_passes_init_options():
    assert qd.cfg.debug is True and qd.cfg.enable_fallback is False
    test_utils.skip_if_f64_unsupported(qd.f32)  # never skips
    test_utils.skip_if_f64_unsupported(qd.f64)  # skips only where the device has no f64
    x = qd.field(qd.f64, shape=())
    x[None] = 1 / 3
    assert x[None] == 1 / 3


@test(arch=qd.vulkan, vulkan_disable_caps=["shader_float64"])
def test_harness_skips_f64_without_shader_float64():
    with pytest.raises(pytest.skip.Exception, match="no shaderFloat64"):
        test_utils.skip_if_f64_unsupported(qd.f64)


@test_utils.test(arch=qd.cpu, offline_cache=False)
def test_harness_gives_req_arch_and_req_options(req_arch, req_options):
    """Reference tests take the arch and init options as fixtures (its conftest's names)."""
    assert req_arch == qd.cpu
    assert req_options["offline_cache"] is False and req_options["enable_fallback"] is False
