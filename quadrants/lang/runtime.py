"""qd.init / qd.reset / qd.sync and the current program (one runtime per init)."""
import os
import threading
from dataclasses import dataclass, field as dc_field

from quadrants import _core
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


@dataclass
class Config:
    arch: Arch = cpu
    debug: bool = False
    print_ir: bool = False
    default_ip: T.DataType = T.i32
    default_fp: T.DataType = T.f32
    cpu_max_num_threads: int = 0
    disabled_caps: list = dc_field(default_factory=list)
    device: str = ""
    check_out_of_bound: bool = False  # the index checks alone; debug=True turns them on too

    @property
    def bounds_checks(self):
        return bool(self.debug or self.check_out_of_bound)


class Program:
    def __init__(self, config):
        self.config = config
        self.runtime = _core.Runtime(config.arch.name, config.cpu_max_num_threads or 0,
                                     list(config.disabled_caps), config.device)
        self.generation = Program.next_generation
        Program.next_generation += 1
        self.compile_count = 0
        self.lock = threading.Lock()

    next_generation = 0


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


def init(arch=None, debug=False, print_ir=False, default_ip=T.i32, default_fp=T.f32, cpu_max_num_threads=None,
         fallback_to_cpu=False, vulkan_disable_caps=(), device="", check_out_of_bound=False, **unknown):
    """Starts Quadrants on `arch` (default cpu; a list such as qd.gpu means the first that works).

    Asking for an arch that is not available raises RuntimeError, unless fallback_to_cpu=True.
    """
    global _program
    if unknown:
        raise TypeError(f"qd.init() got unknown option(s): {', '.join(sorted(unknown))}")
    reset()
    env_arch = os.environ.get("QD_ARCH")
    if arch is None:
        arch = arch_from_name(env_arch) if env_arch else cpu
    candidates = list(arch) if isinstance(arch, (list, tuple)) else [arch]
    errors = []
    for a in candidates:
        if isinstance(a, str):
            a = arch_from_name(a)
        cfg = Config(a, debug, print_ir, T.to_dtype(default_ip), T.to_dtype(default_fp), cpu_max_num_threads or 0,
                     list(vulkan_disable_caps), device, bool(check_out_of_bound))
        result = _try_start(cfg)
        if isinstance(result, Program):
            _program = result
            return
        errors.append(f"{a.name}: {result}")
    if fallback_to_cpu:
        _program = Program(Config(cpu, debug, print_ir, T.to_dtype(default_ip), T.to_dtype(default_fp),
                                  cpu_max_num_threads or 0, check_out_of_bound=bool(check_out_of_bound)))
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
