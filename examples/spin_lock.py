"""A spin lock from qd.atomic_cas (Acquire) and qd.atomic_exchange (Release) protecting a plain
read-modify-write: no update is lost. docs/atomics.md, "Memory order and scope".

    python3 examples/spin_lock.py [cpu|vulkan|cuda|amdgpu]
"""
import sys

import quadrants as qd

arch = getattr(qd, sys.argv[1]) if len(sys.argv) > 1 else qd.cpu
qd.init(arch=arch)

CONTENDERS, ROUNDS = 16, 10_000
# On GPUs the lanes of one subgroup (warp) run in lockstep, with no forward progress between them:
# a lane spinning on a lock another lane of its subgroup holds may never let that lane run. So one
# thread per block contends (a block of 128 threads holds whole subgroups).
STRIDE = 1 if arch == qd.cpu else 128

lock = qd.field(qd.i32, shape=())
counter = qd.field(qd.i32, shape=())


@qd.kernel
def contend(stride: qd.i32, rounds: qd.i32):
    for t in range(CONTENDERS * stride):  # the outermost loop runs in parallel
        if t % stride == 0:
            for _ in range(rounds):
                # take the lock: 0 -> 1; Acquire makes the previous holder's writes visible
                while qd.atomic_cas(lock[None], 0, 1, memory_order=qd.MemoryOrder.Acquire) != 0:
                    pass
                counter[None] = counter[None] + 1  # a plain read-modify-write: safe under the lock
                # give it back; Release publishes the write above to the next holder
                qd.atomic_exchange(lock[None], 0, memory_order=qd.MemoryOrder.Release)


contend(STRIDE, ROUNDS)
print(f"{CONTENDERS} contenders x {ROUNDS} rounds: counter = {counter[None]}")
assert counter[None] == CONTENDERS * ROUNDS, "an update was lost"
