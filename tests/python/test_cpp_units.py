"""Runs the C++ unit tests (Catch2, built by scripts/setup.sh) as part of the pytest suite."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.path.join(ROOT, "build", "qd_cpp_tests")


def test_cpp_unit_tests_pass():
    assert os.path.exists(BINARY), f"{BINARY} is missing: run scripts/setup.sh"
    result = subprocess.run([BINARY], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "All tests passed" in result.stdout
