"""The Python-scope surface Quadrants code relies on: the module paths it imports, qd.init's options
(and $QD_<NAME>), log levels, and the small names of issue 25 (item 3), each asserted exactly."""
import dataclasses
import warnings

import numpy as np
import pytest

import quadrants as qd
from quadrants._lib import options as init_options
from test_utils import test


def test_module_paths():
    from quadrants.lang import misc, util
    from quadrants.types import primitive_types as pt

    assert misc.get_host_arch_list() == [qd.cpu]
    assert misc.is_extension_supported(qd.cpu, qd.extension.data64) is True
    assert misc.is_extension_supported(qd.cpu, qd.extension.sparse) is False
    assert util.to_numpy_type(qd.f32) is np.float32 and util.to_numpy_type(qd.u8) is np.uint8
    assert isinstance(util.has_pytorch(), bool) and isinstance(util.has_clangpp(), bool)
    assert qd.lang.misc is misc and qd.lang.util is util and qd.lang.ops.logical_not is not None
    assert pt.all_types == pt.real_types | pt.integer_types
    assert {qd.f16, qd.f32, qd.f64, float} == pt.real_types
    assert {int, bool, qd.u1, qd.i8, qd.u64} <= pt.integer_types and qd.f32 not in pt.integer_types
    assert pt.type_ids == {id(t) for t in pt.all_types}
    assert pt.float32 is qd.f32 and pt.uint1 is qd.u1 and pt.int64 is qd.i64
    assert [t.to_string() for t in (qd.f32, qd.u1, qd.i64)] == ["f32", "u1", "i64"] == [str(qd.f32), "u1", "i64"]
    assert qd.arm64 is qd.cpu and qd.x64 is qd.cpu


@test(arch=qd.cpu, default_fp=qd.f64)
def test_runtime_defaults_are_the_dtype_objects():
    from quadrants.types import primitive_types as pt

    rt = qd.lang.impl.get_runtime()
    assert rt.default_fp is qd.f64 and rt.default_ip is qd.i32 and id(rt.default_fp) in pt.type_ids
    assert rt.prog.config() is qd.cfg


@test(arch=qd.cpu)
def test_logical_not_and_loop_unique():
    from quadrants.lang.misc import loop_unique

    v = qd.lang.ops.logical_not(qd.Vector([2, 0, -1]))
    assert v.to_numpy().tolist() == [0, 1, 0]
    assert qd.lang.ops.logical_not(0) == 1 and qd.lang.ops.logical_not(3) == 0
    assert loop_unique(7) == 7
    a = qd.field(qd.i32, 5)

    @qd.kernel
    def k():
        for i in a:
            a[i] = qd.lang.ops.logical_not(i - 2) * 100 + loop_unique(i)

    k()
    assert a.to_numpy().tolist() == [0, 1, 102, 3, 4]


def test_test_tools(tmp_path):
    from quadrants._test_tools import dataclass_test_tools, qd_init_same_arch
    from quadrants._test_tools.load_kernel_string import load_kernel_from_string

    with pytest.raises(RuntimeError, match="call qd.init"):
        qd.reset()
        qd_init_same_arch()
    qd.init(arch=qd.cpu)
    try:
        qd_init_same_arch(debug=True)
        assert qd.cfg.arch is qd.cpu and qd.cfg.debug is True
        text = "import quadrants as qd\n\n@qd.kernel\ndef twice(x: qd.i32) -> qd.i32:\n    return x * 2\n"
        with load_kernel_from_string(text, "twice") as twice:
            assert twice(21) == 42

        @dataclasses.dataclass
        class Inner:
            a: qd.types.ndarray(qd.f32, ndim=2)

        @dataclasses.dataclass
        class Outer:
            inner: Inner
            t: qd.Template

        obj = dataclass_test_tools.build_struct(Outer)
        assert obj.inner.a.shape == (10, 10) and obj.t.shape == (10,)
    finally:
        qd.reset()


def test_log_levels():
    assert [qd.TRACE, qd.DEBUG, qd.INFO, qd.WARN, qd.ERROR, qd.CRITICAL] == \
        ["trace", "debug", "info", "warn", "error", "critical"]
    try:
        qd.set_logging_level(qd.WARN)
        assert qd._logging.is_logging_effective("error") and qd._logging.is_logging_effective(qd.WARN)
        assert not qd._logging.is_logging_effective("info")
        with pytest.raises(ValueError, match="choose one of trace"):
            qd.set_logging_level("loud")
        cfg = qd.init(_test_mode=True, log_level="debug")
        assert cfg.log_level == "debug" and qd._logging.is_logging_effective("debug")
        assert qd.cfg is None  # _test_mode starts no runtime
    finally:
        qd.set_logging_level(qd.INFO)


def test_every_reference_option_is_accepted(monkeypatch):
    reference_only = {"opt_level": 0, "cfg_optimization": False, "print_preprocessed_ir": True, "flatten_if": True,
                      "make_thread_local": False, "demote_dense_struct_fors": False, "gdb_trigger": True,
                      "unrolling_limit": 8, "print_non_pure": True, "offline_cache_cleaning_policy": "never",
                      "offline_cache_max_size_of_files": 1 << 20, "offline_cache_cleaning_factor": 0.5,
                      "vk_api_version": "1.2", "half2_vectorization": True}
    qd.init(arch=qd.cpu, **reference_only)
    try:
        for name, value in reference_only.items():
            assert getattr(qd.cfg, name) == value, name
            assert init_options.OPTIONS[name].honoured is name.startswith("offline_cache_"), name
    finally:
        qd.reset()
    with pytest.raises(ValueError, match="choose one of never, version, lru, fifo"):
        qd.init(arch=qd.cpu, offline_cache_cleaning_policy="sometimes")
    with pytest.raises(ValueError, match="always short-circuit"):
        qd.init(arch=qd.cpu, short_circuit_operators=False)
    with pytest.raises(KeyError, match="default_up"):
        qd.init(arch=qd.cpu, default_up=qd.u32)
    assert init_options.OPTIONS["short_circuit_operators"].default is True


def test_options_from_the_environment(monkeypatch):
    monkeypatch.setenv("QD_DEBUG", "1")
    monkeypatch.setenv("QD_LOG_LEVEL", "warn")
    monkeypatch.setenv("QD_DEFAULT_FP", "64")
    monkeypatch.setenv("QD_CPU_MAX_NUM_THREADS", "2")
    try:
        qd.init(arch=qd.cpu)
        assert qd.cfg.debug is True and qd.cfg.log_level == "warn" and qd.cfg.default_fp is qd.f64
        assert qd.cfg.cpu_max_num_threads == 2
        with pytest.warns(UserWarning, match="QD_DEBUG=1 overridden by qd.init argument 'debug'"):
            qd.init(arch=qd.cpu, debug=False)
        assert qd.cfg.debug is False
        monkeypatch.setenv("QD_DEBUG", "yes")
        with pytest.raises(ValueError, match=r"\$QD_DEBUG='yes' is not a valid value"):
            qd.init(arch=qd.cpu)
    finally:
        qd.reset()
        qd.set_logging_level(qd.INFO)


def test_require_version():
    version = ".".join(str(n) for n in qd.__version__)
    assert qd.init(_test_mode=True, require_version=version).arch is qd.cpu
    major, minor, patch = qd.__version__
    with pytest.raises(Exception, match="version mismatch"):
        qd.init(_test_mode=True, require_version=f"{major}.{minor}.{patch + 1}")
    with pytest.raises(Exception, match="version mismatch"):
        qd.init(_test_mode=True, require_version=f"{major + 1}.0.0")
    with pytest.raises(Exception, match="major.minor.patch"):
        qd.init(_test_mode=True, require_version="latest")
    qd.reset()


@test(arch=qd.cpu, raise_on_templated_floats=True)
def test_raise_on_templated_floats():
    @qd.kernel
    def k(a: qd.template()) -> qd.i32:
        return 1

    assert k(3) == 1
    with pytest.raises(ValueError, match="a float"):
        k(1.5)

    @qd.data_oriented
    class WithFloat:
        def __init__(self):
            self.n, self.scale = 3, 0.5

    with pytest.raises(ValueError, match="a float"):
        k(WithFloat())
    d = 1.25

    @qd.kernel
    def reads_global() -> qd.f32:
        return d

    with pytest.raises(qd.QuadrantsCompilationError, match="global 'd' is the float 1.25"):
        reads_global()


@test(arch=qd.cpu)
def test_small_names():
    assert qd.is_extension_enabled(qd.extension.data64) is True
    assert qd.is_extension_enabled(qd.extension.adstack) is True  # autodiff reverses dynamic loops on every arch
    with pytest.raises(NotImplementedError, match="clock_freq_hz not implemented for arch cpu"):
        qd.clock_freq_hz()

    @qd.kernel(fastcache=True)
    def f(x: qd.i32) -> qd.i32:
        return x + 1

    assert f(1) == 2


@test(arch=qd.cpu)
def test_data_oriented_template_primitives():
    @qd.data_oriented(template_primitives=False)
    class Sim:
        def __init__(self):
            self.n, self.scale = 3, 2.0
            self.x = qd.field(qd.f32, shape=6)

    assert Sim._qd_data_oriented and Sim._qd_template_primitives is False
    sim = Sim()

    @qd.kernel
    def step(s: qd.template()):
        for i in range(s.n):
            s.x[i] += s.scale

    step(sim)
    sim.n, sim.scale = 5, 10.0
    step(sim)  # changed members take effect
    assert sim.x.to_numpy().tolist() == [12, 12, 12, 10, 10, 0]


@test(arch=qd.cpu)
def test_fields_builder():
    fb = qd.FieldsBuilder()
    a, b = qd.field(qd.i32), qd.field(qd.f32)
    fb.dense(qd.ij, 3).place(a)  # one size for every axis
    fb.dense(qd.i, 4).place(b)
    tree = fb.finalize()
    assert a.shape == (3, 3) and b.shape == (4,) and fb.finalized
    with pytest.raises(qd.QuadrantsRuntimeError, match="finalized"):
        fb.dense(qd.i, 2)
    a[1, 2] = 5
    assert a[1, 2] == 5
    tree.destroy()
    with pytest.raises(qd.QuadrantsRuntimeError, match="freed with its SNodeTree"):
        a[1, 2]
    with pytest.raises(qd.QuadrantsRuntimeError, match="already destroyed"):
        tree.destroy()
    fb2 = qd.FieldsBuilder()
    c = qd.field(qd.i32)
    fb2.dense(qd.i, 1).place(c)
    fb2.finalize()
    assert c[0] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del tree


@test(arch=qd.cpu)
def test_layout_reflection():
    val = qd.field(qd.i32)
    blk1 = qd.root.dense(qd.k, 3)
    blk2 = blk1.dense(qd.i, 7)
    blk3 = blk2.dense(qd.j, 11)
    blk3.place(val)
    assert val.shape == (7, 11, 3)  # axis order i, j, k, whatever the order of the dense() calls
    assert [val.snode.parent(n) for n in range(6)] == [val.snode, blk3, blk2, blk1, qd.root, None]
    assert val.snode._path_from_root() == [qd.root, blk1, blk2, blk3, val.snode]
    assert blk1 in qd.root._get_children() and blk2 in blk1._get_children() and val.snode in blk3._get_children()
    assert str(val.snode) == "qd.root => dense [3] => dense [7, 3] => dense [7, 11, 3] => place [7, 11, 3]"
    assert qd.FieldsBuilder._finalized_roots()[0] is qd.root and qd.root.parent() is None
    qd.init(arch=qd.cpu)
    assert qd.root._get_children() == []  # a new qd.init starts a new tree


def test_ast_resolver():
    import ast

    from quadrants.lang.ast.symbol_resolver import ASTResolver

    scope = {"qd": qd, "other": object()}
    assert ASTResolver.resolve_to(ast.parse("qd.lang.ops.atomic_add", mode="eval").body, qd.atomic_add, scope)
    assert not ASTResolver.resolve_to(ast.parse("other.kernel", mode="eval").body, qd.kernel, scope)
    assert not ASTResolver.resolve_to(ast.parse("missing", mode="eval").body, qd.kernel, scope)


@test(arch=qd.cpu)
def test_a_field_with_the_most_axes():
    d = qd._lib.core.get_max_num_indices()
    x = qd.field(qd.i32, shape=(2,) * d)

    @qd.kernel
    def fill():
        for I in qd.grouped(x):
            x[I] = I.sum()

    fill()
    a = x.to_numpy()
    assert d == 12 and a.shape == (2,) * 12 and a[(1,) * 12] == 12 and a.sum() == 12 * 2 ** 11


@test(arch=qd.cpu)
def test_func_method_of_self_is_guarded_by_what_it_reads():
    """A kernel method calling a @qd.func method of the same object: the specialisation is keyed by
    the attributes the func reads (a change recompiles), not by all of the object."""
    @qd.data_oriented
    class Sim:
        def __init__(self):
            self.scale, self.unused = 2.0, [1, 2, 3]
            self.x = qd.field(qd.f32, shape=4)

        @qd.func
        def scaled(self, i: qd.i32):
            return self.x[i] * self.scale

        @qd.kernel
        def step(self):
            for i in self.x:
                self.x[i] = self.scaled(i) + 1

    s = Sim()
    s.step()
    assert s.x.to_numpy().tolist() == [1, 1, 1, 1]
    s.unused.append(4)  # not read: the same compilation
    s.step()
    assert Sim.step.num_compilations == 1 and s.x.to_numpy().tolist() == [3, 3, 3, 3]
    s.scale = 10.0  # read by the func: a new one
    s.step()
    assert Sim.step.num_compilations == 2 and s.x.to_numpy().tolist() == [31, 31, 31, 31]


@test(arch=qd.cpu)
def test_field_and_ndarray_classes_by_element_shape():
    """qd.field / qd.ndarray make the reference's classes: ScalarField / MatrixField (vectors too),
    ScalarNdarray / VectorNdarray / MatrixNdarray, all Field / Ndarray; pickling keeps the class."""
    import pickle
    s, v, m = qd.field(qd.f32, 4), qd.Vector.field(3, qd.f32, 4), qd.Matrix.field(2, 2, qd.f32, 4)
    assert [type(x) for x in (s, v, m)] == [qd.ScalarField, qd.MatrixField, qd.MatrixField]
    assert all(isinstance(x, qd.Field) for x in (s, v, m)) and not isinstance(s, qd.MatrixField)
    a, b, c = qd.ndarray(qd.i32, 4), qd.Vector.ndarray(3, qd.f32, 4), qd.ndarray(qd.types.matrix(2, 3, qd.f32), 4)
    assert [type(x) for x in (a, b, c)] == [qd.ScalarNdarray, qd.VectorNdarray, qd.MatrixNdarray]
    assert all(isinstance(x, qd.Ndarray) for x in (a, b, c))
    b.fill(2.5)
    b2 = pickle.loads(pickle.dumps(b))
    assert type(b2) is qd.VectorNdarray and (b2.to_numpy() == 2.5).all()
    assert isinstance(qd.root, qd.SNode)


@test(arch=qd.cpu)
def test_interop_sparse_and_swizzle_names():
    assert qd.interop.get_mps_command_queue() == 0  # no Metal device runs here
    with pytest.raises(NotImplementedError, match="sparse SNodes"):
        qd.sparse.grid()
    names = qd.lang.matrix._generate_swizzle_patterns("xy", required_length=2)
    assert sorted(names) == ["x", "xx", "xy", "y", "yx", "yy"]
    v = qd.Vector([1.0, 2.0])
    assert all(hasattr(v, n) for n in names)


@test(arch=qd.cpu)
def test_runtime_set_default_fp_and_ip():
    """impl.get_runtime().set_default_fp / set_default_ip change what float / int stand for from
    then on, as qd.init(default_fp=...) would: kernels compile anew for it."""
    from quadrants.lang import impl
    x = qd.field(qd.f64, 2)

    @qd.kernel
    def k():
        a = 0.1
        x[0] = a * 3
        x[1] = 2**40 if qd.static(impl.get_runtime().default_ip == qd.i64) else 7

    k()
    assert x.to_numpy()[0] == np.float64(np.float32(0.1) * np.float32(3))
    impl.get_runtime().set_default_fp(qd.f64)
    impl.get_runtime().set_default_ip(qd.i64)
    k()
    assert x.to_numpy().tolist() == [0.1 * 3, 2.0**40]
    assert impl.get_runtime().default_fp is qd.f64 and qd.cfg.default_ip is qd.i64
    with pytest.raises(qd.QuadrantsTypeError, match="takes a float type"):
        impl.get_runtime().set_default_fp(qd.i32)
