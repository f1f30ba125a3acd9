"""qd.init's options: their defaults, the values each accepts, and whether it does anything here.

Options that Quadrants code commonly passes but that have no counterpart in this implementation
(no autodiff, no profiler, GPU memory is allocated on demand) are
accepted, checked and kept in qd.cfg, and change nothing. docs/getting_started.md lists them all.
"""
import difflib
import numbers

from quadrants import types as T

LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "critical")


class Option:
    def __init__(self, default, kind, honoured):
        self.default, self.kind, self.honoured = default, kind, honoured


# name: (default, kind, honoured). Kinds: bool, int, number, str, dtype, strings, log_level.
OPTIONS = {name: Option(*spec) for name, spec in {
    # Honoured.
    "debug": (False, "bool", True),               # bounds checks on every field / ndarray access
    "check_out_of_bound": (False, "bool", True),  # the same bounds checks, without the rest of debug
    "print_ir": (False, "bool", True),
    "default_ip": (None, "dtype", True),          # None: qd.i32
    "default_fp": (None, "dtype", True),          # None: qd.f32
    "cpu_max_num_threads": (0, "int", True),      # 0: one thread per core
    "enable_fallback": (True, "bool", True),      # an unavailable arch falls back to cpu, with a warning
    "vulkan_disable_caps": ((), "strings", True),
    "device": ("", "str", True),
    "fast_math": (False, "bool", True),           # vulkan/metal: the driver may contract and reassociate
    "subgroup_aggregation": (True, "bool", True),  # gpu: uniform-address atomics combined per subgroup; batched compaction
    "constant_folding": (True, "bool", True),     # pure math on constants computed at compile time (transforms/fold.cpp)
    "offline_cache": (True, "bool", True),        # the on-disk kernel cache (cpu), lang/offline_cache.py
    "offline_cache_file_path": ("", "str", True),  # "": $QD_OFFLINE_CACHE_FILE_PATH or ~/.cache/quadrants
    # Accepted, no effect here.
    "src_ll_cache": (True, "bool", False),
    "advanced_optimization": (True, "bool", False),
    "ad_stack_size": (0, "int", False),
    "ad_stack_experimental_enabled": (False, "bool", False),
    "random_seed": (0, "int", False),
    "print_full_traceback": (False, "bool", False),
    "log_level": ("info", "log_level", False),
    "device_memory_GB": (1.0, "number", False),
    "device_memory_fraction": (0.0, "number", False),
    "kernel_profiler": (False, "bool", False),
    "cuda_stack_limit": (0, "int", False),
    "verbose": (True, "bool", False),
    "debug_dump_path": ("", "str", False),
    "print_kernel_llvm_ir": (False, "bool", False),
    "num_compile_threads": (4, "int", False),
    "short_circuit_operators": (False, "bool", False),  # `and` / `or` always short-circuit here
    "real_matrix_scalarize": (True, "bool", False),  # vectors / matrices are always scalarized here
}.items()}


def _check(name, kind, value):
    """The value to store for option `name`, or a TypeError / ValueError naming it."""

    def bad(what):
        return TypeError(f"qd.init({name}=...) expects {what}, got {type(value).__name__} {value!r}")

    if kind == "bool":
        if isinstance(value, (bool, numbers.Integral)) and value in (0, 1):
            return bool(value)
        raise bad("a bool")
    if kind == "int":
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            if value < 0:
                raise ValueError(f"qd.init({name}={value}) must not be negative")
            return int(value)
        raise bad("an int")
    if kind == "number":
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            if value < 0:
                raise ValueError(f"qd.init({name}={value}) must not be negative")
            return value
        raise bad("a number")
    if kind == "str":
        if isinstance(value, str):
            return value
        raise bad("a string")
    if kind == "strings":
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        raise bad("a list of strings")
    if kind == "log_level":
        if isinstance(value, str) and value.lower() in LOG_LEVELS:
            return value.lower()
        raise ValueError(f"qd.init({name}={value!r}): choose one of {', '.join(LOG_LEVELS)}")
    if kind == "dtype":
        if value is None:
            return None
        t = T.to_dtype(value)
        allowed = {"default_ip": (T.i32, T.i64), "default_fp": (T.f32, T.f64)}[name]  # literals take them
        if t not in allowed:
            raise ValueError(f"qd.init({name}={value!r}) must be one of {', '.join('qd.' + a.name for a in allowed)}")
        return t
    raise AssertionError(kind)


def parse(options):
    """qd.init's keyword options -> {name: checked value} for every option, defaults filled in.

    An unknown name raises KeyError (as Quadrants does) naming it, with the closest known names.
    """
    unknown = [n for n in options if n not in OPTIONS]
    if unknown:
        hints = []
        for n in unknown:
            close = difflib.get_close_matches(n, OPTIONS, n=2)
            hints.append(f"'{n}'" + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""))
        raise KeyError(f"qd.init: unknown option(s) {', '.join(hints)}; the options are listed in "
                       f"docs/getting_started.md")
    values = {n: opt.default for n, opt in OPTIONS.items()}
    for n, v in options.items():
        values[n] = _check(n, OPTIONS[n].kind, v)
    return values
