"""Kernels and funcs in a module with `from __future__ import annotations` (PEP 563): the annotations
are strings, evaluated in the module."""
from __future__ import annotations

import numpy as np

import quadrants as qd
from test_utils import test


@qd.func
def twice(x: qd.f32) -> qd.f32:
    return x * 2


@qd.kernel
def add(a: qd.types.NDArray[qd.i32, 1], b: qd.types.ndarray(dtype=qd.f32, ndim=1), k: qd.i32) -> qd.f32:
    for i in a:
        a[i] += k
    return twice(b[0])


@test(arch=[qd.cpu, qd.vulkan])
def test_string_annotations_are_evaluated():
    a = np.arange(4, dtype=np.int32)
    b = np.array([1.25], dtype=np.float32)
    assert add(a, b, 10) == 2.5
    assert a.tolist() == [10, 11, 12, 13]
