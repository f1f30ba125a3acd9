"""CUDA and AMDGPU code generation, checked without a GPU (qd.compile on any machine).

Each (atomic op, dtype) of the spec's table (docs/atomics.md: "Native instruction vs CAS fallback",
footnote 2, "Atomic visibility scope") is compiled for cuda and amdgpu and the instruction chosen
is checked in the PTX and the AMDGCN assembly; the PTX is assembled by ptxas for sm_75 and sm_90
(only that part is skipped where ptxas is missing). Also: volatile loads, the task ABI, block_dim,
math functions, the arch options, and a clear error where there is no driver.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import quadrants as qd
from quadrants import _core

PTXAS = shutil.which("ptxas") or next((p for p in ("/usr/local/cuda/bin/ptxas",) if os.access(p, os.X_OK)), None)
SMS = ("sm_75", "sm_90")
INTS = ("i32", "u32", "i64", "u64")
DTYPES = INTS + ("f16", "f32", "f64")
OPS = ("add", "sub", "mul", "min", "max", "and", "or", "xor", "exchange", "cas")
CASES = [(op, t) for op in OPS for t in DTYPES if not (op in ("and", "or", "xor", "cas") and t not in INTS)]
REJECTED = [(op, t) for op in ("and", "or", "xor", "cas") for t in ("f16", "f32", "f64")]
HERE = os.path.dirname(os.path.abspath(__file__))
NP = {"i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f16": np.float16,
      "f32": np.float32, "f64": np.float64}


@pytest.fixture(autouse=True)
def cpu_program():
    qd.init(arch=qd.cpu)  # qd.compile needs a program; nothing here launches on a GPU
    yield
    qd.reset()


# ------------------------------------------------------------------------------------------ helpers
def ptxas(ptx, sm):
    """Assembles `ptx` for `sm`; a failure fails the test with ptxas' message."""
    if PTXAS is None:
        return  # only the assembling is skipped: the PTX checks still ran
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([PTXAS, f"-arch={sm}", "-o", os.path.join(d, "k.cubin"), src],
                           capture_output=True, text=True)
    assert r.returncode == 0, f"ptxas -arch={sm} rejected the PTX:\n{r.stderr}\n{ptx}"


def has(text, instr):
    """`instr` as a whole instruction name (global_atomic_add is not global_atomic_add_f32)."""
    return re.search(re.escape(instr) + r"(?![\w.])", text) is not None


def in_loop(text, instr):
    """Whether some `instr` lies between a label and a later branch back to that label."""
    lines = text.splitlines()
    labels = {}
    for i, line in enumerate(lines):
        m = re.match(r"\s*(\$?[.\w]+):", line)
        if m:
            labels[m.group(1)] = i
    branch = re.compile(r"\b(?:bra(?:\.uni)?|s_branch|s_cbranch_\w+)\s+(\$?[.\w]+)")
    for i, line in enumerate(lines):
        if not has(line, instr):
            continue
        for line2 in lines[i + 1:]:
            m = branch.search(line2)
            if m and labels.get(m.group(1), len(lines)) <= i:
                return True
    return False


def atomic_kernel(op, dtype):
    d = getattr(qd, dtype)
    fn = getattr(qd, f"atomic_{op}")

    # Serial code, so the only loop in the output is a CAS loop; the old value is used, so the
    # instruction is an atom (not a red).
    @qd.kernel
    def k(x: qd.types.ndarray(dtype=d, ndim=1), y: qd.types.ndarray(dtype=d, ndim=1), v: d):
        if qd.static(op == "cas"):
            y[0] = fn(x[0], v, v + 1)
        else:
            y[0] = fn(x[0], v)

    return k


def compile_atomic(op, dtype, arch, **options):
    a = np.zeros(4, NP[dtype])
    return qd.compile(atomic_kernel(op, dtype), a, a, 1, arch=arch, **options)


# ------------------------------------------------------------------------ expected instructions
def _width(dtype):
    return "64" if dtype in ("i64", "u64", "f64") else "32"  # f16 CAS works on the 32-bit word


def ptx_expected(op, dtype):
    """(instruction, is a CAS loop) per the spec's CUDA column."""
    w, cas = _width(dtype), f"atom.global.cas.b{_width(dtype)}"
    if op in ("add", "sub"):
        if dtype in INTS:
            return f"atom.global.add.u{w}", False  # sub is add of the negation
        return (f"atom.global.add.{dtype}", False) if dtype != "f16" else (cas, True)
    if op in ("min", "max"):
        return (f"atom.global.{op}.{dtype[0].replace('i', 's')}{w}", False) if dtype in INTS else (cas, True)
    if op in ("and", "or", "xor"):
        return f"atom.global.{op}.b{w}", False
    if op == "exchange":
        return (f"atom.global.exch.b{w}", False) if dtype != "f16" else (cas, True)
    return cas, op == "mul"  # cas native; mul always a CAS loop


def amdgcn_expected(op, dtype, gfx):
    """(instruction, is a CAS loop) per the spec's AMDGPU column and footnote 2."""
    x2 = "_x2" if _width(dtype) == "64" else ""
    cas = f"global_atomic_cmpswap{x2}"
    float_native = gfx == "gfx942"
    if op in ("add", "sub"):
        if dtype in INTS:
            return f"global_atomic_{op}{x2}", False
        return (f"global_atomic_add_{dtype}", False) if float_native and dtype != "f16" else (cas, True)
    if op in ("min", "max"):
        if dtype in INTS:
            return f"global_atomic_{dtype[0].replace('i', 's')}{op}{x2}", False
        return (f"global_atomic_{op}_f64", False) if float_native and dtype == "f64" else (cas, True)
    if op in ("and", "or", "xor"):
        return f"global_atomic_{op}{x2}", False
    if op == "exchange":
        return (f"global_atomic_swap{x2}", False) if dtype != "f16" else (cas, True)
    return cas, op == "mul"


def table_kind(backend, op, dtype, features):
    return _core.atomic_lowering(backend, op, getattr(qd, dtype).core, False, list(features))[0]


# ------------------------------------------------------------------------------- atomics: CUDA
@pytest.mark.parametrize("op, dtype", CASES, ids=[f"{o}-{t}" for o, t in CASES])
def test_cuda_atomic_instruction(op, dtype):
    instr, loop = ptx_expected(op, dtype)
    assert table_kind("cuda", op, dtype, []) == ("cas" if loop else "native")
    for sm in SMS:
        art = compile_atomic(op, dtype, qd.cuda, features=[sm])
        ptx = art.ptx
        assert f".target {sm}" in ptx
        assert has(ptx, instr), f"{instr} not in the PTX:\n{ptx}"
        atoms = set(re.findall(r"\batom\.global\.[\w.]+", ptx))
        if loop:
            assert atoms == {instr} and in_loop(ptx, instr), ptx
        else:
            assert atoms == {instr}, atoms
            assert not in_loop(ptx, instr), f"a native {op} must not retry:\n{ptx}"
        # Spec, "Atomic visibility scope": CUDA keeps LLVM's default (system) scope.
        assert "syncscope" not in art.llvm_ir
        ptxas(ptx, sm)


@pytest.mark.parametrize("op, dtype", REJECTED, ids=[f"{o}-{t}" for o, t in REJECTED])
@pytest.mark.parametrize("arch", ["cuda", "amdgpu"])
def test_gpu_rejects_float_bitwise_and_cas(op, dtype, arch):
    with pytest.raises(qd.QuadrantsTypeError, match=f"atomic_{op}"):
        compile_atomic(op, dtype, getattr(qd, arch))


# ----------------------------------------------------------------------------- atomics: AMDGPU
@pytest.mark.parametrize("gfx", ["gfx942", "gfx90a"])
@pytest.mark.parametrize("op, dtype", CASES, ids=[f"{o}-{t}" for o, t in CASES])
def test_amdgpu_atomic_instruction(op, dtype, gfx):
    instr, loop = amdgcn_expected(op, dtype, gfx)
    assert table_kind("amdgpu", op, dtype, [gfx]) == ("cas" if loop else "native")
    art = compile_atomic(op, dtype, qd.amdgpu, features=[gfx])
    asm = art.amdgcn
    assert f"amdgcn-amd-amdhsa--{gfx}" in asm
    assert has(asm, instr), f"{instr} not in the {gfx} assembly"
    atomics = set(re.findall(r"\bglobal_atomic_\w+", asm))
    assert atomics == {instr}, atomics
    assert in_loop(asm, instr) == loop, asm
    # Every atomic access at syncscope("agent"): at system scope LLVM would fall back to CAS loops.
    ir = art.llvm_ir
    accesses = [line for line in ir.splitlines() if re.search(r"\b(atomicrmw|cmpxchg|load atomic)\b", line)]
    assert accesses, ir
    for line in accesses:
        assert 'syncscope("agent")' in line, line


def test_amdgpu_gfx90a_float_add_decision():
    # LLVM 19 would make f32/f64 add native on gfx90a only with "amdgpu-unsafe-fp-atomics"; per
    # footnote 2 Quadrants keeps them CAS loops there, so the attribute is not set.
    art = compile_atomic("add", "f32", qd.amdgpu, features=["gfx90a"])
    assert "amdgpu-unsafe-fp-atomics" not in art.llvm_ir
    assert "atomicrmw" not in art.llvm_ir and "cmpxchg" in art.llvm_ir
    assert '"amdgpu-unsafe-fp-atomics"="true"' in compile_atomic("max", "f64", qd.amdgpu).llvm_ir


# ---------------------------------------------------------------------------------- volatile
def spin_kernel():
    @qd.kernel
    def spin(flags: qd.types.ndarray(dtype=qd.i32, ndim=1), out: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(out.shape[0]):
            while qd.volatile_load(flags[0]) == 0:  # must re-read memory on every iteration
                pass
            out[i] = qd.volatile_load(flags[1]) + flags[2]

    return spin


def test_cuda_volatile_load_is_ld_volatile_global():
    a = np.zeros(4, np.int32)
    for sm in SMS:
        ptx = qd.compile(spin_kernel(), a, a, arch=qd.cuda, features=[sm]).ptx
        assert has(ptx, "ld.volatile.global.u32") and in_loop(ptx, "ld.volatile.global.u32"), ptx
        assert ".nc" not in ptx  # never served from the read-only cache
        ptxas(ptx, sm)


def test_amdgpu_volatile_load_stays_in_the_loop():
    a = np.zeros(4, np.int32)
    art = qd.compile(spin_kernel(), a, a, arch=qd.amdgpu)
    assert "load volatile" in art.llvm_ir
    spin_loads = [line for line in art.amdgcn.splitlines() if "global_load_dword" in line and "sc0 sc1" in line]
    assert spin_loads, art.amdgcn
    assert in_loop(art.amdgcn, "global_load_dword"), art.amdgcn


# ---------------------------------------------------------------------------------- task ABI
def three_tasks():
    @qd.kernel
    def tasks(x: qd.types.ndarray(dtype=qd.f32, ndim=1), n: qd.i32) -> qd.f32:
        x[0] = 1.0                    # serial task
        for i in range(n):            # parallel, bounds from an argument
            x[i] += 2.0
        qd.loop_config(block_dim=64)
        for i in range(16):           # parallel, constant bounds, block_dim honoured
            x[i] *= 3.0
        return x[1]

    return tasks


def test_cuda_task_abi():
    a = np.zeros(16, np.float32)
    ptx = qd.compile(three_tasks(), a, 16, arch=qd.cuda).ptx
    entries = re.findall(r"\.entry (tasks_t\d+)\(\s*\.param \.u64 \w+,\s*\.param \.u64 \w+\s*\)", ptx)
    assert len(entries) >= 3, ptx  # each task a kernel of (buffer table, argument slots)
    serial = ptx[ptx.index(".entry tasks_t0"):ptx.index(".entry tasks_t1")]
    # One thread of block 0 (with .maxntid 1 LLVM knows %tid.x is 0 and drops that half of the guard).
    assert "%ctaid.x" in serial and ".maxntid 1, 1, 1" in serial
    assert "%nctaid.x" in ptx  # grid-stride loops
    assert ".maxntid 64, 1, 1" in ptx and ".maxntid 128, 1, 1" in ptx  # block_dim, and the default
    for sm in SMS:
        ptxas(qd.compile(three_tasks(), a, 16, arch=qd.cuda, features=[sm]).ptx, sm)


def test_amdgpu_task_abi_and_private_allocas():
    a = np.zeros(16, np.float32)
    art = qd.compile(three_tasks(), a, 16, arch=qd.amdgpu)
    ir = art.llvm_ir
    assert re.search(r"define amdgpu_kernel void @tasks_t0\(ptr addrspace\(1\)[^,]*, ptr addrspace\(1\)", ir), ir
    assert '"amdgpu-flat-work-group-size"="1,64"' in ir and '"amdgpu-flat-work-group-size"="1,256"' in ir
    assert "-A5" in ir  # the data layout puts allocas in the private address space
    assert all("addrspace(5)" in line for line in ir.splitlines() if " alloca " in line)
    assert ".amdhsa_kernel tasks_t0" in art.amdgcn


@pytest.mark.parametrize("arch", ["cuda", "amdgpu"])
def test_block_dim_out_of_range(arch):
    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=2048)
        for i in range(x.shape[0]):
            x[i] = 1.0

    a = np.zeros(4, np.float32)
    with pytest.raises(qd.QuadrantsSyntaxError, match="block_dim=2048"):
        qd.compile(k, a, arch=getattr(qd, arch))


# ------------------------------------------------------------------------------------- math
def math_kernel(dtype):
    d = getattr(qd, dtype)

    @qd.kernel
    def m(x: qd.types.ndarray(dtype=d, ndim=1), y: qd.types.ndarray(dtype=d, ndim=1)):
        for i in range(x.shape[0]):
            v = x[i]
            y[i] = (qd.sqrt(v) + qd.sin(v) + qd.cos(v) + qd.tan(v) + qd.exp(v) + qd.log(v) + qd.tanh(v)
                    + qd.asin(v) + qd.acos(v) + qd.atan(v) + qd.atan2(v, v + 1) + v ** v + qd.floor(v)
                    + qd.ceil(v) + qd.round(v) + qd.abs(v) + v % 3 + v // 2 + qd.min(v, 1) + qd.max(v, 2))

    return m


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_math_functions_compile_without_libm(dtype):
    a = np.zeros(4, NP[dtype])
    for sm in SMS:
        art = qd.compile(math_kernel(dtype), a, a, arch=qd.cuda, features=[sm])
        declared = re.findall(r"^declare .*@([\w.]+)\(", art.llvm_ir, re.M)
        assert all(name.startswith("llvm.") for name in declared), declared  # no libm to call on a GPU
        assert ".extern" not in art.ptx
        ptxas(art.ptx, sm)
    art = qd.compile(math_kernel(dtype), a, a, arch=qd.amdgpu)
    declared = re.findall(r"^declare .*@([\w.]+)\(", art.llvm_ir, re.M)
    assert all(name.startswith("llvm.") for name in declared), declared
    assert ".amdhsa_kernel" in art.amdgcn


# ---------------------------------------------------------------------------- arch options
def test_cuda_arch_option_and_env(monkeypatch):
    a = np.zeros(4, np.float32)
    assert ".target sm_75" in compile_atomic("add", "f32", qd.cuda).ptx  # the default
    assert ".target sm_80" in compile_atomic("add", "f32", qd.cuda, features=["sm_80"]).ptx
    monkeypatch.setenv("QD_CUDA_ARCH", "86")
    assert ".target sm_86" in compile_atomic("add", "f32", qd.cuda).ptx
    monkeypatch.setenv("QD_CUDA_ARCH", "sm_99")
    with pytest.raises(RuntimeError, match="sm_99"):
        compile_atomic("add", "f32", qd.cuda)
    del a


def test_amdgpu_arch_env(monkeypatch):
    assert has(compile_atomic("add", "f32", qd.amdgpu).amdgcn, "global_atomic_add_f32")  # gfx942
    monkeypatch.setenv("QD_AMDGPU_ARCH", "gfx90a")
    asm = compile_atomic("add", "f32", qd.amdgpu).amdgcn
    assert "gfx90a" in asm and not has(asm, "global_atomic_add_f32") and in_loop(asm, "global_atomic_cmpswap")


# ------------------------------------------------------------------------------- runtimes
@pytest.mark.parametrize("arch, driver", [("cuda", "CUDA"), ("amdgpu", "HIP")])
def test_init_without_a_driver_is_a_clear_error(arch, driver):
    a = getattr(qd, arch)
    if qd.is_arch_available(a):
        pytest.skip(f"{arch} is available here")
    with pytest.raises(RuntimeError, match=f"{arch}: {driver} unavailable"):
        qd.init(arch=a, enable_fallback=False)
    qd.init(arch=[a, qd.cpu])  # a list falls through to the next arch
    x = qd.field(qd.i32, shape=2)

    @qd.kernel
    def k():
        x[1] = 5

    k()
    assert x[1] == 5


# ------------------------------------------------------------------------ the whole test suite
def test_every_kernel_of_the_suite_compiles_for_gpus(tmp_path):
    """Runs the other kernel test files on cpu with gpu_compile_plugin: every kernel they compile
    is also compiled for cuda (PTX through ptxas) and amdgpu. A subprocess, so that an LLVM abort
    would fail this test rather than end the session."""
    # The SIMT tests (which run on cpu too) check their own PTX / AMDGCN; compiling each of their
    # many kernels for both GPUs again would add minutes to CI.
    files = sorted(f for f in glob.glob(os.path.join(HERE, "test_*.py"))
                   if not f.endswith(("test_gpu_codegen.py", "test_simt_block.py", "test_simt_subgroup.py")))
    report = tmp_path / "report.json"
    env = dict(os.environ, QD_WANTED_ARCHS="cpu", QD_GPU_COMPILE_REPORT=str(report),
               PYTHONPATH=os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "gpu_compile_plugin", "-p",
                        "no:cacheprovider", *files], cwd=os.path.dirname(os.path.dirname(HERE)), env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    rep = json.loads(report.read_text())
    assert rep["compiled"] >= 100, rep
    assert PTXAS is None or rep["ptxas"] * 2 == rep["compiled"], rep
    # A kernel the cpu takes may be refused on a GPU only for a GPU limit (a block's size), or by
    # deterministic mode, which rejects qd.algorithms' subgroup operations there (docs/atomics.md).
    assert all("block_dim" in why or "deterministic mode" in why for why in rep["rejected"]), rep["rejected"]
