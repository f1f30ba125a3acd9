"""A parallel sum and max of 10 million floats, each thread accumulating with atomics."""
import numpy as np

import quadrants as qd

qd.init(arch=qd.cpu)

total = qd.field(qd.f64, shape=())
biggest = qd.field(qd.f32, shape=())


@qd.kernel
def reduce(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):
    for i in range(x.shape[0]):
        total[None] += x[i]                  # `+=` on global memory is an atomic add
        qd.atomic_max(biggest[None], x[i])   # float max: a CAS loop, NaN-aware (maxNum)


x = np.random.default_rng(1).standard_normal(10**7).astype(np.float32)
biggest[None] = -np.inf
reduce(x)
print(f"sum = {total[None]:.3f} (numpy: {x.astype(np.float64).sum():.3f}); max = {biggest[None]} (numpy: {x.max()})")
