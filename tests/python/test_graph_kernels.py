"""@qd.kernel(graph=True) and `while qd.graph.do_while(flag):`: the kernel launches as any other, the
loop runs its body, then again while flag[()] != 0 (a do-while), inside the kernel."""
import numpy as np
import pytest

import quadrants as qd
from test_utils import test


@test()
def test_do_while_repeats_until_the_flag_is_zero():
    @qd.kernel(graph=True)
    def solve(x: qd.types.ndarray(qd.f32, ndim=1), counter: qd.types.ndarray(qd.i32, ndim=0)):
        for i in range(x.shape[0]):
            x[i] = x[i] + 100.0  # before the loop: once
        while qd.graph.do_while(counter):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1.0
            counter[()] = counter[()] - 1

    x = qd.ndarray(qd.f32, shape=(5,))
    counter = qd.ndarray(qd.i32, shape=())
    counter.from_numpy(np.array(10, dtype=np.int32))
    solve(x, counter)
    assert list(x.to_numpy()) == [110.0] * 5 and int(counter.to_numpy()) == 0

    @qd.kernel(graph=True)
    def once(x: qd.types.ndarray(qd.f32, ndim=1), keep_going: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(keep_going):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1.0
            keep_going[()] = 0

    counter.from_numpy(np.array(0, dtype=np.int32))  # do-while: one pass even when the flag starts at 0
    once(x, counter)
    assert list(x.to_numpy()) == [111.0] * 5


@test(arch=qd.cpu)
def test_graph_kernel_rules():
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"graph=True\) 'k' cannot return a value"):
        @qd.kernel(graph=True)
        def k() -> qd.i32:
            return 1

    @qd.kernel
    def not_graph(c: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(c):
            c[()] = 0

    @qd.kernel(graph=True)
    def in_for(c: qd.types.ndarray(qd.i32, ndim=0)):
        for _ in range(2):
            while qd.graph.do_while(c):
                c[()] = 0

    @qd.kernel(graph=True)
    def field_flag():
        while qd.graph.do_while(f):
            f[None] = 0

    f = qd.field(qd.i32, shape=())
    c = qd.ndarray(qd.i32, shape=())
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"qd.graph.do_while\(\) requires @qd.kernel\(graph=True\)"):
        not_graph(c)
    with pytest.raises(qd.QuadrantsSyntaxError, match="it cannot appear inside a for-loop"):
        in_for(c)
    with pytest.raises(qd.QuadrantsSyntaxError, match="flag must be a scalar"):
        field_flag()
    assert qd.graph.do_while(1) is True  # Python scope: bool(condition)


@test(arch=qd.cpu)
def test_nested_do_while():
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), outer: qd.types.ndarray(qd.i32, ndim=0),
          inner: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(outer):
            inner[()] = 3
            while qd.graph.do_while(inner):
                for i in range(x.shape[0]):
                    x[i] = x[i] + 1
                inner[()] = inner[()] - 1
            outer[()] = outer[()] - 1

    x = np.zeros(4, np.int32)
    outer, inner = np.array(2, np.int32), np.array(0, np.int32)
    k(x, outer, inner)
    assert list(x) == [6] * 4 and int(outer) == 0
