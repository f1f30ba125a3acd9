"""qd.math.popcnt / clz / ffs (spec simt.md section 6) as the IR's PopCount / Clz / Ctz: exact values
for every integer width on the arches this machine runs (cpu, vulkan), and the native instruction
in the emitted code: llvm.ctpop / ctlz / cttz, PTX popc / clz (ptxas sm_75 / sm_90), AMDGPU
v_bcnt / v_ffbh / v_ffbl, SPIR-V OpBitCount / FindUMsb / FindILsb on 32-bit words (legalization
widens narrower integers and splits 64-bit ones there)."""
import re

import numpy as np
import pytest

import quadrants as qd
from tests import test_utils
from tests.python.test_gpu_codegen import has, ptxas

WIDTHS = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")


def _np(dtype):
    return np.dtype(dtype.replace("i", "int").replace("u", "uint"))


def _values(dtype):
    """Edge values (0, 1, all ones, the sign bit alone, single high / low bits) and random ones."""
    t = _np(dtype)
    bits = t.itemsize * 8
    edges = [0, 1, 2, 3, (1 << bits) - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, 1 << (bits // 2),
             (1 << (bits // 2)) - 1, 0b1011_0000]
    rng = np.random.default_rng(bits)
    rand = [int(v) for v in rng.integers(0, 1 << 63, 22, dtype=np.uint64)]
    rand += [v >> int(s) for v, s in zip(rand, rng.integers(0, 64, 22))]  # some with leading zeros
    u = np.array([v & ((1 << bits) - 1) for v in edges + rand], np.uint64)
    return u.astype(t)  # unsigned bits -> the dtype (negative for signed types with the top bit)


def _reference(values):
    bits = values.dtype.itemsize * 8
    out = []
    for v in values.tolist():
        v &= (1 << bits) - 1
        out.append([bin(v).count("1"), bits - v.bit_length(), (v & -v).bit_length()])
    return out


@pytest.mark.parametrize("dtype", WIDTHS)
@test_utils.test()
def test_bit_counts_exact_in_every_width(dtype):
    d = getattr(qd, dtype)
    if qd.lang.impl.current_cfg().arch == qd.vulkan and dtype[1:] in ("8", "16", "64"):
        caps = qd.lang.impl.get_runtime().prog.runtime.vulkan_caps
        need = {"8": "shader_int8", "16": "shader_int16", "64": "shader_int64"}[dtype[1:]]
        if not caps.get(need, False):
            pytest.skip(f"the device has no {need}")

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=d, ndim=1), o: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for i in range(a.shape[0]):
            o[i, 0] = qd.math.popcnt(a[i])
            o[i, 1] = qd.math.clz(a[i])
            o[i, 2] = qd.math.ffs(a[i])

    a = _values(dtype)
    o = np.full((len(a), 3), -7, np.int32)
    k(a, o)
    assert o.tolist() == _reference(a), dtype


@test_utils.test()
def test_bit_counts_of_vectors_and_of_constants():
    @qd.kernel
    def k(o: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(1):
            v = qd.math.popcnt(qd.Vector([7, -1, 0], dt=qd.i32))
            o[0], o[1], o[2] = v[0], v[1], v[2]
            o[3] = qd.math.clz(qd.u64(1))
            o[4] = qd.math.ffs(qd.i16(-32768))

    o = np.zeros(5, np.int32)
    k(o)
    assert o.tolist() == [3, 32, 0, 63, 16]


@test_utils.test(arch=qd.cpu)
def test_bit_counts_reject_floats():
    @qd.kernel
    def k(o: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(1):
            o[i] = qd.math.popcnt(1.5)

    with pytest.raises(qd.QuadrantsCompilationError, match="popcnt takes integral inputs only"):
        k(np.zeros(1, np.int32))


# ------------------------------------------------------------------------------- emitted code
@pytest.fixture
def cpu_program():
    qd.init(arch=qd.cpu)  # qd.compile needs a program; nothing below launches on a GPU
    yield
    qd.reset()


def _kernel(dtype):
    d = getattr(qd, dtype)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=d, ndim=1), o: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for i in range(a.shape[0]):  # per-thread (divergent) operands: vector, not scalar, ALU
            o[i, 0] = qd.math.popcnt(a[i])
            o[i, 1] = qd.math.clz(a[i])
            o[i, 2] = qd.math.ffs(a[i])

    return k, (np.zeros(4, _np(dtype)), np.zeros((4, 3), np.int32))


@pytest.mark.parametrize("dtype", ("u32", "i64"))
def test_bit_counts_native_in_llvm_ptx_and_amdgcn(cpu_program, dtype):
    k, args = _kernel(dtype)
    w = dtype[1:]
    cpu_ir = qd.compile(k, *args, arch="cpu").llvm_ir
    for f in ("ctpop", "ctlz", "cttz"):
        assert f"@llvm.{f}.i{w}(" in cpu_ir, f
    ptx = qd.compile(k, *args, arch="cuda").ptx
    assert has(ptx, f"popc.b{w}") and has(ptx, f"clz.b{w}"), ptx
    for sm in ("sm_75", "sm_90"):
        ptxas(ptx, sm)
    amdgcn = qd.compile(k, *args, arch="amdgpu").amdgcn
    for instr in ("v_bcnt_u32_b32", "v_ffbh_u32", "v_ffbl_b32"):  # 64-bit: on each half
        assert re.search(rf"\b{instr}(?:_e32|_e64)?\b", amdgcn), instr


@pytest.mark.parametrize("dtype", ("u32", "i64", "u8"))
def test_bit_counts_in_spirv_on_32_bit_words(cpu_program, dtype):
    k, args = _kernel(dtype)
    asm = qd.compile(k, *args, arch="vulkan").spirv_asm
    ids = {m.group(1): m.group(2) for m in re.finditer(r"(%\w+) = OpTypeInt (\d+) 0", asm)}
    counted = re.findall(r"= OpBitCount (%\w+)", asm) + re.findall(r"= OpExtInst (%\w+) %\w+ Find(?:UMsb|ILsb)", asm)
    assert len(counted) == (6 if dtype == "i64" else 3), asm  # 64-bit: two words each
    assert all(ids.get(t) == "32" for t in counted), (counted, ids)
    assert re.search(r"OpExtInst %\w+ %\w+ FindUMsb", asm) and re.search(r"OpExtInst %\w+ %\w+ FindILsb", asm)


def test_bit_counts_in_metal_msl(cpu_program):
    k, args = _kernel("u32")
    msl = qd.compile(k, *args, arch="metal").msl
    assert "popcount(" in msl and "clz(" in msl and "ctz(" in msl


def test_fns_is_ptx_fns_on_cuda_and_a_loop_elsewhere(cpu_program):
    @qd.kernel
    def k(m: qd.types.ndarray(dtype=qd.u32, ndim=1), o: qd.types.ndarray(dtype=qd.u32, ndim=1)):
        for i in range(m.shape[0]):
            o[i] = qd.math.fns(m[i], qd.u32(i), i - 3)

    args = (np.zeros(4, np.uint32), np.zeros(4, np.uint32))
    ptx = qd.compile(k, *args, arch="cuda").ptx
    assert has(ptx, "fns.b32"), ptx
    for sm in ("sm_75", "sm_90"):
        ptxas(ptx, sm)
    assert "fns" not in qd.compile(k, *args, arch="amdgpu").llvm_ir  # the 32-step loop
    assert "fns" not in qd.compile(k, *args, arch="vulkan").spirv_asm


def test_fns_in_python_scope():
    assert qd.math.fns(0b1011_0110, 3, 2) == 5 and qd.math.fns(0b1011_0110, 40, -1) == 7
    assert qd.math.fns(0xFFFFFFFF, 40, 1) == 0xFFFFFFFF and qd.math.fns(0, 0, 0) == 0xFFFFFFFF
