"""A 256-bin histogram of 10 million random bytes, with qd.atomic_add on a field."""
import time

import numpy as np

import quadrants as qd

qd.init(arch=qd.cpu)

hist = qd.field(qd.i32, shape=256)


@qd.kernel
def histogram(data: qd.types.ndarray(dtype=qd.u8, ndim=1)):
    for i in range(data.shape[0]):  # the outermost loop runs in parallel
        qd.atomic_add(hist[data[i]], 1)  # returns the old value; `hist[data[i]] += 1` is the same


data = np.random.default_rng(0).integers(0, 256, 10**7, dtype=np.uint8)
histogram(data)  # the first call compiles
hist.fill(0)
t = time.perf_counter()
histogram(data)
elapsed = time.perf_counter() - t
counts = hist.to_numpy()
assert (counts == np.bincount(data, minlength=256)).all()
print(f"histogram of {data.size} bytes in {elapsed * 1e3:.1f} ms; bins 0..4: {counts[:5]}")
