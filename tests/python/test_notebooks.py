"""Kernels defined in Jupyter/IPython cells, and qd.atomic_support (used by examples/atomics_tour.ipynb).

CI executes the notebooks themselves with scripts/run_notebooks.py.
"""
import pytest

import quadrants as qd
from quadrants import _core
from test_utils import test

interactiveshell = pytest.importorskip("IPython.core.interactiveshell")


@pytest.fixture
def shell():
    sh = interactiveshell.InteractiveShell.instance()
    yield sh
    interactiveshell.InteractiveShell.clear_instance()


def run(shell, code):
    result = shell.run_cell(code, store_history=True)
    return result.error_before_exec or result.error_in_exec, shell.execution_count - 1


@test(arch=qd.cpu)
def test_kernels_and_funcs_defined_in_cells(shell):
    err, _ = run(shell, "import quadrants as qd\nx = qd.field(qd.i32, shape=8)\n"
                        "@qd.func\ndef twice(v):\n    return 2 * v\n")
    assert err is None
    err, _ = run(shell, "@qd.kernel\ndef fill() -> qd.i32:\n    for i in range(8):\n        x[i] = twice(i)\n"
                        "    return x[7]\nresult = fill()\n")
    assert err is None
    assert shell.user_ns["result"] == 14
    assert list(shell.user_ns["x"].to_numpy()) == [0, 2, 4, 6, 8, 10, 12, 14]


@test(arch=qd.cpu)
def test_errors_name_the_cell_and_line(shell):
    run(shell, "import quadrants as qd\nweights = qd.field(qd.f32, shape=4)\n")
    err, count = run(shell, "@qd.kernel\ndef bad():\n    for i in range(4):\n        qd.atomic_or(weights[i % 2], 1)\n"
                            "bad()\n")
    assert isinstance(err, qd.QuadrantsTypeError)
    assert f'File "Cell In[{count}]", line 4, in bad:' in str(err), str(err)
    assert "qd.atomic_or(weights[i % 2], 1)" in str(err)

    err, count = run(shell, "\n@qd.kernel\ndef bad2():\n    for i in range(4):\n        qd.atomic_add(3, 1)\nbad2()\n")
    assert isinstance(err, qd.QuadrantsSyntaxError)
    assert f'File "Cell In[{count}]", line 4, in bad2:\n        qd.atomic_add(3, 1)\n        ^' in str(err), str(err)


@test(arch=qd.cpu)
def test_atomic_support_reads_the_compiler_table():
    assert qd.atomic_support("add", qd.i32) == "native"
    assert qd.atomic_support("atomic_mul", "f32") == "CAS loop"
    assert qd.atomic_support("and", qd.f32) == "rejected"
    assert qd.atomic_support("add", "f16", arch=qd.metal) == "rejected"
    table = qd.atomic_support()
    assert list(table) == [row["name"] for row in _core.atomic_ops()]
    assert list(table["cas"]) == ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "f32", "f64"]
    assert qd.atomic_support("or", "u8") == "word CAS loop"
    # The same cells as the generated table in docs/atomics.md.
    doc = _core.atomic_support_markdown().split("#### cuda")[0]
    for op, kinds in table.items():
        assert f"| `atomic_{op}` | " + " | ".join(kinds.values()) + " |" in doc
    assert qd.atomic_support(op="xor") == {"xor": table["xor"]}
    with pytest.raises(ValueError, match="unknown atomic op"):
        qd.atomic_support("nand", qd.i32)
    with pytest.raises(ValueError, match="unknown dtype"):
        qd.atomic_support("add", "f8")
