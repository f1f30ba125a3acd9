"""The CUDA runtime's launch path without a GPU: a subprocess runs qd.init(arch=qd.cuda) against a
stand-in driver (tests/cuda_stub/libcuda_stub.c, built here with the system C compiler) that
records the calls. Kernels compile to real PTX; launching them does nothing, so only the calls
are checked: dynamic shared memory above 48 KiB sets the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES
once and passes the size to every launch; smaller kernels launch with none; fill() sets device memory."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STUB = os.path.join(ROOT, "tests", "cuda_stub", "libcuda_stub.c")

SCRIPT = textwrap.dedent("""
    import numpy as np
    import quadrants as qd

    qd.init(arch=qd.cuda)
    assert qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=False) == 232448

    @qd.kernel
    def big(out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(128):
            s = qd.simt.block.SharedArray((16384,), qd.f32)  # 64 KiB
            t = qd.simt.block.SharedArray((16,), qd.i32)
            s[qd.simt.block.thread_idx()] = 1.0
            t[0] = 1
            qd.simt.block.sync()
            out[i] = s[0] + t[0]

    @qd.kernel
    def small(out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(128):
            s = qd.simt.block.SharedArray((64,), qd.f32)
            s[qd.simt.block.thread_idx()] = 1.0
            qd.simt.block.sync()
            out[i] = s[0]

    @qd.kernel
    def too_big(out: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(128):
            s = qd.simt.block.SharedArray((60000,), qd.f32)
            out[i] = s[i]

    out = np.zeros(128, np.float32)
    big(out)
    big(out)
    small(out)
    try:
        too_big(out)
        raise SystemExit("no error for 240000 bytes of shared memory")
    except RuntimeError as e:
        assert "more than the 232448 bytes" in str(e), e
    print("ok")
""")


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in CUDA driver")
    d = tmp_path_factory.mktemp("cuda_stub")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(d / "libcuda.so.1"), STUB], check=True)
    return d


def run_on_stub(stub_dir, name, text, *args):
    """Runs `text` as the script stub_dir/name.py (kernels are compiled from their source file)
    against the stand-in driver; returns the driver calls it logged."""
    log = stub_dir / f"{name}.log"
    env = dict(os.environ, LD_LIBRARY_PATH=f"{stub_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               QD_FAKE_CUDA_LOG=str(log), PYTHONPATH=ROOT)
    env.pop("QD_CUDA_ARCH", None)
    script = stub_dir / f"{name}.py"
    script.write_text(text)
    r = subprocess.run([sys.executable, str(script), *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    return log.read_text().splitlines() if log.exists() else []


def test_cuda_launch_sets_dynamic_shared_memory(stub_dir):
    calls = run_on_stub(stub_dir, "launch", SCRIPT)
    dynamic = 65536 + 64  # the 64 KiB array, then the 16 i32 (16-byte aligned)
    big = [c for c in calls if c.split()[1].startswith("big_")]
    # once per kernel: the opt-in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8), then the
    # launches, each with the dynamic size
    assert big == [f"attribute {big[0].split()[1]} 8 {dynamic}"] + [f"launch {big[0].split()[1]} block=64 shared={dynamic}"] * 2, calls
    small = [c for c in calls if c.split()[1].startswith("small_")]
    assert small and all(c.startswith("launch ") and c.endswith(" shared=0") for c in small), calls


STACK_SCRIPT = textwrap.dedent("""
    import sys
    import quadrants as qd

    qd.init(arch=qd.cuda, **({"cuda_stack_limit": int(sys.argv[1])} if sys.argv[1] != "0" else {}))

    @qd.real_func
    def sum_to(n: qd.i32) -> qd.i32:
        r = 0
        if n > 0:
            r = sum_to(n - 1) * 3 + n
        return r

    @qd.kernel
    def deep(n: qd.i32) -> qd.i32:
        return sum_to(n)

    deep(100)  # the stand-in driver runs nothing: only its calls are checked
    print("ok")
""")


@pytest.mark.parametrize("limit", [0, 32768])
def test_cuda_stack_limit_sets_the_thread_stack(stub_dir, limit):
    """qd.init(cuda_stack_limit=n) sets the context's per-thread stack (CU_LIMIT_STACK_SIZE = 0)
    once, before any launch; without it the driver's default stays."""
    calls = run_on_stub(stub_dir, f"stack{limit}", STACK_SCRIPT, limit)
    launches = [i for i, c in enumerate(calls) if c.startswith("launch deep_")]
    assert launches, calls
    limits = [i for i, c in enumerate(calls) if c.startswith("limit ")]
    if limit:
        assert [calls[i] for i in limits] == [f"limit 0 {limit}"] and limits[0] < launches[0], calls
    else:
        assert limits == [], calls


FILL_SCRIPT = textwrap.dedent("""
    import numpy as np
    import quadrants as qd

    qd.init(arch=qd.cuda)  # the stand-in driver's device memory is host memory: copies and memsets work
    x = qd.field(qd.f32, shape=50000)
    x.from_numpy(np.arange(50000, dtype=np.float32))
    x.fill(0)  # a device memset
    assert not x.to_numpy().any()
    x.fill(-2.5)  # a repeated word, written in pieces
    assert (x.to_numpy() == -2.5).all()
    print("ok")
""")


def test_cuda_fill_sets_device_memory(stub_dir):
    run_on_stub(stub_dir, "fill", FILL_SCRIPT)
