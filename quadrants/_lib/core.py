"""qd._lib.core: the device-capability and extension enums and small helpers, under the names
Quadrants code uses (qd._lib.core.DeviceCapability.spirv_has_atomic_int64, data_type_size(...))."""
import enum

from quadrants._lib import arch as _arch
from quadrants import types as T
from quadrants.types.exceptions import QuadrantsRuntimeError  # noqa: F401  (qd._lib.core.QuadrantsRuntimeError)


class DeviceCapability(enum.IntEnum):
    """Keys of qd.lang.impl.get_runtime().prog.get_device_caps().get(...). SPIR-V (vulkan) devices
    report them; other arches report 0 for each."""

    spirv_version = 1
    spirv_has_int8 = 2
    spirv_has_int16 = 3
    spirv_has_int64 = 4
    spirv_has_float16 = 5
    spirv_has_float64 = 6
    spirv_has_storage_buffer_8bit_access = 7
    spirv_has_storage_buffer_16bit_access = 8
    spirv_has_atomic_int64 = 9
    spirv_has_atomic_float16 = 10
    spirv_has_atomic_float16_add = 11
    spirv_has_atomic_float16_minmax = 12
    spirv_has_atomic_float = 13
    spirv_has_atomic_float_add = 14
    spirv_has_atomic_float_minmax = 15
    spirv_has_atomic_float64 = 16
    spirv_has_atomic_float64_add = 17
    spirv_has_atomic_float64_minmax = 18
    spirv_has_shared_atomic_float_add = 19
    spirv_has_shared_atomic_float64_add = 20
    spirv_has_shared_atomic_float16_add = 21
    spirv_has_variable_ptr = 22
    spirv_has_physical_storage_buffer = 23
    spirv_has_subgroup_basic = 24
    spirv_has_subgroup_vote = 25
    spirv_has_subgroup_arithmetic = 26
    spirv_has_subgroup_ballot = 27
    spirv_subgroup_size = 28
    spirv_has_non_semantic_info = 29
    spirv_has_no_integer_wrap_decoration = 30
    spirv_has_shader_clock = 31


# DeviceCapability -> the qd.vulkan_caps() entry it reads. Capabilities this implementation neither
# queries nor uses are absent and read 0.
_VULKAN_CAP = {
    "spirv_version": "spirv_version",
    "spirv_has_int8": "shader_int8",
    "spirv_has_int16": "shader_int16",
    "spirv_has_int64": "shader_int64",
    "spirv_has_float16": "shader_float16",
    "spirv_has_float64": "shader_float64",
    "spirv_has_storage_buffer_8bit_access": "int8_storage",
    "spirv_has_storage_buffer_16bit_access": "float16_storage",
    "spirv_has_atomic_int64": "int64_atomics_buffer",
    "spirv_has_shared_atomic_float_add": "float32_atomic_add_shared",
    "spirv_has_shared_atomic_float64_add": "float64_atomic_add_shared",
    "spirv_has_shared_atomic_float16_add": "float16_atomic_add_shared",
    "spirv_has_subgroup_basic": "subgroup_basic",
    "spirv_has_subgroup_vote": "subgroup_vote",
    "spirv_has_subgroup_arithmetic": "subgroup_arithmetic",
    "spirv_has_subgroup_ballot": "subgroup_ballot",
    "spirv_subgroup_size": "subgroup_size",
}
for _bits, _name in (("16", "float16"), ("", "float32"), ("64", "float64")):
    _VULKAN_CAP[f"spirv_has_atomic_float{_bits}"] = f"{_name}_atomics_buffer"
    _VULKAN_CAP[f"spirv_has_atomic_float{_bits}_add"] = f"{_name}_atomic_add_buffer"
    _VULKAN_CAP[f"spirv_has_atomic_float{_bits}_minmax"] = f"{_name}_atomic_minmax_buffer"


class DeviceCaps:
    """The current device's capabilities: .get(DeviceCapability.x) -> int (booleans as 0 / 1)."""

    def __init__(self, values):
        self._values = values

    def get(self, cap):
        return self._values.get(DeviceCapability(cap).name, 0)

    def __repr__(self):
        return f"DeviceCaps({self._values})"


def device_caps(program):
    if program.config.arch is not _arch.vulkan:
        return DeviceCaps({})
    caps = program.runtime.vulkan_caps
    return DeviceCaps({cap: int(caps[name]) for cap, name in _VULKAN_CAP.items() if name in caps})


class Extension(enum.Enum):
    """qd.extension: optional features of Quadrants (test_utils.test(require=qd.extension.x))."""

    sparse = "sparse"
    quant = "quant"
    mesh = "mesh"
    quant_basic = "quant_basic"
    data64 = "data64"
    adstack = "adstack"
    bls = "bls"
    assertion = "assertion"
    extfunc = "extfunc"


# Which arches have which extension. Of these this implementation has only 64-bit data (dense
# fields only, no quantised types, meshes, autodiff, block-local storage, kernel asserts or external
# functions); on vulkan 64-bit types depend on the device (qd.vulkan_caps()["shader_int64"]).
# adstack: reverse-mode autodiff through dynamic loops (every backend: the adjoint replays them).
# assertion: run-time kernel asserts (debug=True), measured on cpu and vulkan.
_EXTENSIONS = {"cpu": {Extension.data64, Extension.adstack, Extension.assertion},
               "cuda": {Extension.data64, Extension.adstack}, "amdgpu": {Extension.data64, Extension.adstack},
               "vulkan": {Extension.adstack, Extension.assertion}, "metal": {Extension.adstack}}


def is_extension_supported(arch, ext):
    return Extension(ext) in _EXTENSIONS.get(arch.name, set())


def data_type_size(dtype):
    """The size of one `dtype` value in bytes (u1: 1)."""
    return T.to_dtype(dtype).np.itemsize


def arch_from_name(name):
    return _arch.arch_from_name(name)


def arch_name(arch):
    return arch.name


def host_arch():
    return _arch.cpu


MAX_NUM_INDICES = 12  # Quadrants' limit; here no limit is enforced, 12 axes are tested


def get_max_num_indices():
    """The number of axes of a field, ndarray or qd.ndrange that Quadrants code may count on (12)."""
    return MAX_NUM_INDICES
