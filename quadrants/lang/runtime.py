"""qd.init / qd.reset / qd.sync and the current program (one runtime per init)."""
import os
import threading
import warnings

from quadrants import _core
from quadrants.lang import breadcrumb as _crumb
from quadrants.lang import offline_cache
from quadrants.lang import options as options_mod
from quadrants.lang import types as T


class Arch:
    """A backend: qd.cpu, qd.cuda, qd.amdgpu, qd.vulkan, qd.metal."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


cpu, cuda, amdgpu, vulkan, metal = (Arch(n) for n in ("cpu", "cuda", "amdgpu", "vulkan", "metal"))
gpu = [cuda, amdgpu, vulkan, metal]
ALL_ARCHS = [cpu, cuda, amdgpu, vulkan, metal]


def arch_from_name(name):
    for a in ALL_ARCHS:
        if a.name == name:
            return a
    raise ValueError(f"unknown arch '{name}'; choose one of {[a.name for a in ALL_ARCHS]}")


class Config:
    """The options of one qd.init(), as qd.cfg shows them: .arch, .debug, .default_fp, ... (every
    name in quadrants/lang/options.py)."""

    def __init__(self, arch=cpu, **options):
        self.arch = arch
        for name, value in options_mod.parse(options).items():
            setattr(self, name, value)
        self.default_ip = self.default_ip or T.i32
        self.default_fp = self.default_fp or T.f32

    @property
    def bounds_checks(self):
        return bool(self.debug or self.check_out_of_bound)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"qd.cfg({fields})"


class Program:
    def __init__(self, config):
        self.config = config
        if _crumb.on:
            _crumb.begin(_crumb.record(f"starting the {config.arch.name} runtime (qd.init"
                                       f"{', device=' + repr(config.device) if config.device else ''})"))
        try:
            self.runtime = _core.Runtime(config.arch.name, config.cpu_max_num_threads or 0,
                                         list(config.vulkan_disable_caps), config.device, bool(config.fast_math),
                                         bool(config.subgroup_aggregation), bool(config.constant_folding))
        finally:
            if _crumb.on:
                _crumb.end()
        offline_cache.attach(self)  # qd.init(offline_cache=..., offline_cache_file_path=...)
        self.generation = Program.next_generation
        Program.next_generation += 1
        self.compile_count = 0
        self.lock = threading.Lock()
        self._assert_word = None
        self._print_buffer = None

    def print_buffer(self):
        """(words, cursor): the i32 fields kernel print() records go to (quadrants/lang/printing.py)."""
        if self._print_buffer is None:
            from quadrants.lang import context
            from quadrants.lang.field import Field
            from quadrants.lang.printing import PRINT_WORDS

            prev, context._current = context._current, None
            try:
                self._print_buffer = (Field(T.i32, (PRINT_WORDS,), name="__qd_print"),
                                      Field(T.i32, (1,), name="__qd_print_cursor"))
            finally:
                context._current = prev
        return self._print_buffer

    def assert_word(self):
        """A one-element i32 field where a failing kernel assert (debug=True) writes its number."""
        if self._assert_word is None:
            from quadrants.lang import context
            from quadrants.lang.field import Field

            prev, context._current = context._current, None  # a runtime resource, made while compiling
            try:
                self._assert_word = Field(T.i32, (1,), name="__qd_assert")
            finally:
                context._current = prev
        return self._assert_word

    next_generation = 0

    def get_device_caps(self):
        """The device's capabilities: .get(qd._lib.core.DeviceCapability.x) -> int."""
        from quadrants._lib import core

        return core.device_caps(self)


_program = None
_default_config = Config()


def config():
    return _program.config if _program else _default_config


def program():
    if _program is None:
        init()
    return _program


def _try_start(config):
    try:
        return Program(config)
    except RuntimeError as e:
        return e


def init(arch=None, default_fp=None, default_ip=None, enable_fallback=True, **options):
    """Starts Quadrants on `arch` (default cpu, or $QD_ARCH; a list such as qd.gpu: the first that works).

    An arch that is not available falls back to cpu with a warning, or raises RuntimeError with
    enable_fallback=False. Every option is listed in docs/getting_started.md; an unknown one raises
    KeyError naming it.
    """
    global _program
    # Checked before anything is torn down: a mistyped option leaves the current program alone.
    options.update(default_fp=default_fp, default_ip=default_ip, enable_fallback=enable_fallback)
    Config(cpu, **options)
    reset()
    env_arch = os.environ.get("QD_ARCH")
    if arch is None:
        arch = arch_from_name(env_arch) if env_arch else cpu
    candidates = list(arch) if isinstance(arch, (list, tuple)) else [arch]
    errors = []
    for a in candidates:
        if isinstance(a, str):
            a = arch_from_name(a)
        elif not isinstance(a, Arch):
            raise TypeError(f"qd.init: arch must be qd.cpu, qd.vulkan, ... (or a list of them), got {a!r}")
        result = _try_start(Config(a, **options))
        if isinstance(result, Program):
            _program = result
            return
        if (options.get("device") or options.get("vulkan_disable_caps")) and is_arch_available(a):
            raise result  # the arch is there: the options are wrong, which no fallback should hide
        errors.append(f"{a.name}: {result}")
    if enable_fallback:
        warnings.warn("qd.init: no requested arch is available, falling back to cpu (enable_fallback=False makes "
                      "this an error):\n  " + "\n  ".join(errors), RuntimeWarning, stacklevel=2)
        _program = Program(Config(cpu, **dict(options, device="", vulkan_disable_caps=())))
        return
    raise RuntimeError("no requested arch is available:\n  " + "\n  ".join(errors))


def reset():
    """Drops the runtime: fields and ndarrays of this init become invalid, kernels recompile."""
    global _program
    if _program is not None:
        _program.runtime.sync()
    _program = None


def sync():
    if _program is not None:
        _program.runtime.sync()


def vulkan_caps():
    """The Vulkan device's capabilities, name -> value, as kernels are compiled against them.

    Among them: float atomics per memory ("float32_atomic_add_buffer", ...), "int64_atomics_buffer",
    shader types ("shader_float64", ...), subgroup size and operations, the memory model and limits.
    Capabilities masked with qd.init(vulkan_disable_caps=[...]) read False. Needs qd.init(arch=qd.vulkan).
    """
    prog = program()
    if prog.config.arch is not vulkan:
        raise RuntimeError(f"qd.vulkan_caps() needs qd.init(arch=qd.vulkan); the current arch is {prog.config.arch}")
    return prog.runtime.vulkan_caps


def is_arch_available(arch):
    try:
        Program(Config(arch))
        return True
    except RuntimeError:
        return False
