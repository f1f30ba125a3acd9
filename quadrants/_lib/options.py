"""qd.init's options: their defaults, the values each accepts, and whether it does anything here.

Options that Quadrants code commonly passes but that have no counterpart in this implementation
(no autodiff, no profiler, GPU memory is allocated on demand) are
accepted, checked and kept in qd.cfg, and change nothing. docs/getting_started.md lists them all.
"""
import difflib
import numbers
import os
import warnings

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
    "deterministic": (False, "bool", True),       # atomics give the same bits on every run (docs/atomics.md)
    "constant_folding": (True, "bool", True),     # pure math on constants computed at compile time (transforms/fold.cpp)
    "interleave_iterations": (True, "bool", True),  # cpu: all-pairs loops run 8 iterations side by side (transforms/interleave.cpp)
    "offline_cache": (True, "bool", True),        # the on-disk kernel cache (cpu), lang/offline_cache.py
    "offline_cache_file_path": ("", "str", True),  # "": $QD_OFFLINE_CACHE_FILE_PATH or ~/.cache/quadrants
    "log_level": ("info", "log_level", True),     # the level of the messages the package logs (_lib/log.py)
    "raise_on_templated_floats": (False, "bool", True),  # a float template argument is a ValueError
    "cuda_stack_limit": (0, "int", True),         # cuda: per-thread stack bytes (recursive qd.real_func); 0: driver default
    "short_circuit_operators": (True, "bool", True),  # `and` / `or` short-circuit; False is rejected (below)
    # Accepted, no effect here.
    "src_ll_cache": (True, "bool", False),
    "advanced_optimization": (True, "bool", False),
    "ad_stack_size": (0, "int", False),
    "ad_stack_experimental_enabled": (False, "bool", False),
    "random_seed": (0, "int", False),
    "print_full_traceback": (False, "bool", False),
    "device_memory_GB": (1.0, "number", False),
    "device_memory_fraction": (0.0, "number", False),
    "kernel_profiler": (False, "bool", False),
    "verbose": (True, "bool", False),
    "debug_dump_path": ("", "str", False),
    "print_kernel_llvm_ir": (False, "bool", False),
    "num_compile_threads": (4, "int", False),
    "real_matrix_scalarize": (True, "bool", False),  # vectors / matrices are always scalarized here
    "print_non_pure": (False, "bool", False),
    "gdb_trigger": (False, "bool", False),
    "unrolling_limit": (32, "int", False),
    # Accepted, no effect here: passes, dumps and tuning knobs of Quadrants' compiler that this
    # compiler does not have (its pipeline is fixed; no results depend on them).
    **{n: (d, k, False) for n, d, k in [
        ("opt_level", 1, "int"), ("external_optimization_level", 3, "int"), ("max_vector_width", 8, "int"),
        ("cfg_optimization", True, "bool"), ("use_llvm", True, "bool"),
        ("print_preprocessed_ir", False, "bool"), ("print_ir_dbg_info", False, "bool"),
        ("print_accessor_ir", False, "bool"), ("print_struct_llvm_ir", False, "bool"),
        ("print_kernel_llvm_ir_optimized", False, "bool"), ("print_kernel_asm", False, "bool"),
        ("print_kernel_amdgcn", False, "bool"), ("simplify_before_lower_access", True, "bool"),
        ("lower_access", True, "bool"), ("simplify_after_lower_access", True, "bool"),
        ("move_loop_invariant_outside_if", False, "bool"), ("cache_loop_invariant_global_vars", True, "bool"),
        ("default_cpu_block_dim", 32, "int"), ("cpu_block_dim_adaptive", True, "bool"),
        ("default_gpu_block_dim", 128, "int"), ("gpu_max_reg", 0, "int"), ("saturating_grid_dim", 0, "int"),
        ("max_block_dim", 0, "int"), ("verbose_kernel_launches", False, "bool"),
        ("demote_dense_struct_fors", True, "bool"), ("timeline", False, "bool"),
        ("ad_stack_sparse_threshold_bytes", 100 * 1024 * 1024, "int"), ("flatten_if", False, "bool"),
        ("make_thread_local", True, "bool"), ("make_block_local", True, "bool"), ("detect_read_only", True, "bool"),
        ("force_scalarize_matrix", False, "bool"), ("half2_vectorization", False, "bool"),
        ("make_cpu_multithreading_loop", True, "bool"), ("quant_opt_store_fusion", True, "bool"),
        ("quant_opt_atomic_demotion", True, "bool"), ("make_mesh_block_local", True, "bool"),
        ("optimize_mesh_reordered_mapping", True, "bool"), ("mesh_localize_to_end_mapping", True, "bool"),
        ("mesh_localize_from_end_mapping", False, "bool"), ("mesh_localize_all_attr_mappings", False, "bool"),
        ("demote_no_access_mesh_fors", True, "bool"), ("experimental_auto_mesh_local", False, "bool"),
        ("auto_mesh_local_default_occupacy", 4, "int"), ("vk_api_version", "", "str"),
        ("external_metal_command_queue", 0, "int"), ("external_metal_command_queue_is_torch_queue", False, "bool"),
    ]},
    # Honoured: when a qd.init ends, the on-disk cache is cleaned (_lib/offline_cache.py).
    "offline_cache_cleaning_policy": ("lru", "cleaning_policy", True),  # never | version | lru | fifo
    "offline_cache_max_size_of_files": (100 * 1024 * 1024, "int", True),  # bytes
    "offline_cache_cleaning_factor": (0.25, "number", True),  # the fraction of entries removed
}.items()}

CLEANING_POLICIES = ("never", "version", "lru", "fifo")


def _check(name, kind, value):
    """The value to store for option `name`, or a TypeError / ValueError naming it."""

    def bad(what):
        return TypeError(f"qd.init({name}=...) expects {what}, got {type(value).__name__} {value!r}")

    if kind == "bool":
        if isinstance(value, (bool, numbers.Integral)) and value in (0, 1):
            if name == "short_circuit_operators" and not value:
                raise ValueError("qd.init(short_circuit_operators=False): `and` / `or` always short-circuit here "
                                 "(evaluating both operands is not implemented)")
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
    if kind == "cleaning_policy":
        if value in CLEANING_POLICIES:
            return value
        raise ValueError(f"qd.init({name}={value!r}): choose one of {', '.join(CLEANING_POLICIES)}")
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


def _from_env(name, kind, text):
    """The value $QD_<NAME> gives option `name` (booleans as 0 / 1, dtypes as 32 / 64)."""
    try:
        if kind == "bool":
            return bool(int(text))
        if kind == "int":
            return int(text)
        if kind == "number":
            return float(text)
        if kind == "strings":
            return [t for t in text.split(",") if t]
        if kind == "dtype":
            return {"32": {"default_ip": T.i32, "default_fp": T.f32}, "64": {"default_ip": T.i64, "default_fp": T.f64}
                    }[text][name]
    except (ValueError, KeyError):
        raise ValueError(f"${env_name(name)}={text!r} is not a valid value for qd.init({name}=...)") from None
    return text


def env_name(name):
    return "QD_" + name.upper()


def parse(options, use_env=True):
    """qd.init's keyword options -> {name: checked value} for every option, defaults filled in.

    An option not passed is read from $QD_<NAME> when that is set (QD_DEBUG=1, QD_LOG_LEVEL=warn,
    QD_DEFAULT_FP=64); a passed one wins, with a warning when the variable is set too.
    An unknown name raises KeyError (as Quadrants does) naming it, with the closest known names.
    """
    if "default_up" in options:
        raise KeyError("qd.init: 'default_up' is always the unsigned type of 'default_ip'; set 'default_ip' instead")
    unknown = [n for n in options if n not in OPTIONS]
    if unknown:
        hints = []
        for n in unknown:
            close = difflib.get_close_matches(n, OPTIONS, n=2)
            hints.append(f"'{n}'" + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""))
        raise KeyError(f"qd.init: unknown option(s) {', '.join(hints)}; the options are listed in "
                       f"docs/getting_started.md")
    values = {n: opt.default for n, opt in OPTIONS.items()}
    for n, opt in OPTIONS.items():
        text = os.environ.get(env_name(n), "") if use_env else ""
        if n in options and options[n] is not None:
            if text:
                warnings.warn(f"environment variable {env_name(n)}={text} overridden by qd.init argument {n!r}",
                              stacklevel=4)
            values[n] = _check(n, opt.kind, options[n])
        elif text:
            values[n] = _check(n, opt.kind, _from_env(n, opt.kind, text))
        elif n in options:
            values[n] = _check(n, opt.kind, options[n])
    return values
