"""qd.raw_mod / qd.raw_div: C's remainder and division (the sign of the dividend, truncation toward
zero), next to Python's % and // (the sign of the divisor, floor) in kernels and in Python scope."""
import math

import numpy as np
import pytest

import quadrants as qd
from test_utils import test


def c_mod(a, b):
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def c_div(a, b):
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


@test()
def test_raw_mod_and_div_of_integers_every_sign():
    @qd.kernel
    def k(x: qd.i32, y: qd.i32) -> qd.types.vector(4, qd.i32):
        return qd.Vector([qd.raw_mod(x, y), qd.raw_div(x, y), x % y, x // y])

    for a in range(-9, 10):
        for b in (-4, -3, -1, 1, 2, 5):
            assert list(k(a, b)) == [c_mod(a, b), c_div(a, b), a % b, a // b], (a, b)
    mn = -(1 << 31)
    assert list(k(mn, 3)) == [c_mod(mn, 3), c_div(mn, 3), mn % 3, mn // 3]


@test()
def test_raw_mod_of_floats_is_fmod():
    @qd.kernel
    def k(x: qd.f32, y: qd.f32) -> qd.f32:
        return qd.raw_mod(x, y)

    for a, b in [(-4.5, 2.0), (4.5, -2.0), (-4.5, -2.0), (5.25, 2.0), (1.0, 3.0)]:
        assert k(a, b) == pytest.approx(math.fmod(a, b)), (a, b)


@test()
def test_raw_div_of_a_float_divides():
    @qd.kernel
    def k(x: qd.i32) -> qd.f32:
        return qd.raw_div(x, 4.0)

    assert k(-5) == -1.25


@test()
def test_raw_mod_elementwise_on_vectors():
    @qd.kernel
    def k() -> qd.types.vector(3, qd.i32):
        return qd.raw_mod(qd.Vector([-7, 7, -7]), qd.Vector([2, -2, -2]))

    assert list(k()) == [-1, 1, -1]


def test_raw_mod_and_div_in_python_scope():
    assert qd.raw_mod(-4, 3) == -1 and qd.raw_mod(4, -3) == 1
    assert qd.raw_div(-7, 2) == -3 and qd.raw_div(7, -2) == -3 and qd.raw_div(5, 4.0) == 1.25
    assert qd.raw_mod(-4.5, 2.0) == -0.5
    assert list(qd.raw_mod(np.array([-7, 7]), 2)) == [-1, 1]
    assert list(qd.raw_div(np.array([-7, 7]), 2)) == [-3, 3]
    with pytest.raises(ZeroDivisionError):
        qd.raw_mod(1, 0)
