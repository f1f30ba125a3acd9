"""qd.init / qd.reset / qd.sync and the current program (one runtime per init)."""
import os
import threading
import warnings

from quadrants._lib import _core
from quadrants._lib import breadcrumb as _crumb
from quadrants._lib import core
from quadrants._lib import log
from quadrants._version import __version__
from quadrants._lib.arch import ALL_ARCHS, Arch, amdgpu, arch_from_name, cpu, cuda, gpu, metal, vulkan  # noqa: F401
from quadrants._lib import offline_cache
from quadrants._lib import options as options_mod
from quadrants import types as T


class Config:
    """The options of one qd.init(), as qd.cfg shows them: .arch, .debug, .default_fp, ... (every
    name in quadrants/_lib/options.py)."""

    def __init__(self, arch=cpu, _use_env=True, **options):
        self.arch = arch
        for name, value in options_mod.parse(options, _use_env).items():
            setattr(self, name, value)
        self.default_ip = self.default_ip or T.i32
        self.default_fp = self.default_fp or T.f32

    def __call__(self):
        """Quadrants code reads the program's configuration as prog.config() as well as prog.config."""
        return self

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
                                         bool(config.subgroup_aggregation), bool(config.constant_folding),
                                         int(config.cuda_stack_limit or 0), bool(config.interleave_iterations))
        finally:
            if _crumb.on:
                _crumb.end()
        offline_cache.attach(self)  # qd.init(offline_cache=..., offline_cache_file_path=...)
        self.generation = Program.next_generation
        Program.next_generation += 1
        self.compile_count = 0
        self.lock = threading.Lock()
        self.resources = {}  # runtime memory the layers above keep per program (the print buffer, ...)

    next_generation = 0

    def get_device_caps(self):
        """The device's capabilities: .get(qd._lib.core.DeviceCapability.x) -> int."""
        return core.device_caps(self)


_program = None
_default_config = Config(_use_env=False)  # before qd.init: the defaults (a bad $QD_<NAME> fails qd.init, not import)


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


def check_require_version(required):
    """Raises an Exception unless this Quadrants is `required` ("major.minor[.patch]", anything after
    the numbers ignored) or a later patch / minor release of the same major version."""
    numbers = required
    for i, c in enumerate(required):
        if not (c.isdigit() or c == "."):
            numbers = required[:i]
            break
    try:
        want = [int(n) for n in numbers.split(".")]
        major, minor, patch = want[0], want[1], (want[2] if len(want) > 2 else 0)
    except (ValueError, IndexError):
        raise Exception(f"qd.init(require_version={required!r}): give major.minor.patch, e.g. 1.2.0") from None
    have = [int(n) for n in __version__.split(".")[:3]]
    if not (major == have[0] and (minor, patch) <= (have[1], have[2])):
        raise Exception(f"Quadrants version mismatch: required version >= {major}.{minor}.{patch}, "
                        f"installed version = {__version__}")


def init(arch=None, default_fp=None, default_ip=None, enable_fallback=True, require_version=None, _test_mode=False,
         **options):
    """Starts Quadrants on `arch` (default cpu, or $QD_ARCH; a list such as qd.gpu: the first that works).

    An arch that is not available falls back to cpu with a warning, or raises RuntimeError with
    enable_fallback=False. Every option is listed in docs/getting_started.md; an unknown one raises
    KeyError naming it. require_version="1.2.0": an Exception unless this Quadrants is that version
    or a compatible later one. _test_mode=True checks the options and returns the configuration
    without starting a runtime (the current one is dropped).
    """
    if require_version is not None:
        check_require_version(require_version)
    # Checked before anything is torn down: a mistyped option leaves the current program alone.
    options.update(default_fp=default_fp, default_ip=default_ip, enable_fallback=enable_fallback)
    checked = Config(cpu, **options)
    reset()
    log.set_logging_level(checked.log_level)
    if _test_mode:
        return checked
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
            _use(result)
            return
        if (options.get("device") or options.get("vulkan_disable_caps")) and is_arch_available(a):
            raise result  # the arch is there: the options are wrong, which no fallback should hide
        errors.append(f"{a.name}: {result}")
    if enable_fallback:
        warnings.warn("qd.init: no requested arch is available, falling back to cpu (enable_fallback=False makes "
                      "this an error):\n  " + "\n  ".join(errors), RuntimeWarning, stacklevel=2)
        _use(Program(Config(cpu, **dict(options, device="", vulkan_disable_caps=()))))
        return
    raise RuntimeError("no requested arch is available:\n  " + "\n  ".join(errors))


def _use(prog):
    """Makes `prog` (None: no program) the current program; Python's int / float become its dtypes."""
    global _program
    _program = offline_cache._program = prog
    cfg = config()
    T.primitive_types.defaults.update(ip=cfg.default_ip, fp=cfg.default_fp)


def reset():
    """Drops the runtime: fields and ndarrays of this init become invalid, kernels recompile."""
    if _program is not None:
        _program.runtime.sync()
        offline_cache.flush(_program)
    _use(None)


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
