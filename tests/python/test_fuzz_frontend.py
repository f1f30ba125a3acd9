"""A bounded run of the front-end fuzzer (benchmarks/fuzz_frontend.py): mutated kernels raise a
Quadrants error or run; never a crash, a hang, or an internal error."""
import collections
import importlib.util
import os

import pytest

from test_utils import expected_archs

import quadrants as qd

_path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "fuzz_frontend.py")
_spec = importlib.util.spec_from_file_location("qd_fuzz_frontend", _path)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

CASES = {"cpu": 60, "vulkan": 30}  # the benchmark runs thousands


def _archs():
    return [a.name for a in expected_archs() if a.name in CASES]


@pytest.mark.parametrize("arch", _archs())
def test_seed_programs_run(arch, tmp_path):
    sources = [(f"seed{k}", fuzz.HEADER.format(arch=arch) + src) for k, src in enumerate(fuzz.SEEDS)]
    results = fuzz.run_mutants(sources, arch, timeout=120, workdir=str(tmp_path))
    assert {name: r for name, r in results.items() if r[0] != "ran"} == {}


@pytest.mark.parametrize("arch", _archs())
def test_mutated_kernels_fail_cleanly(arch, tmp_path):
    cases = list(fuzz.mutants(CASES[arch], seed=7, arch=arch))
    assert len(cases) == CASES[arch]
    results = fuzz.run_mutants([(f"m{i}", src) for i, _, _, src in cases], arch, timeout=120, workdir=str(tmp_path))
    counts = collections.Counter(r[0] for r in results.values())
    failures = {f"m{i} ({d})": results[f"m{i}"] for i, _, d, _ in cases if results[f"m{i}"][0] in fuzz.FAILURES}
    assert failures == {}, counts
    assert counts["compile_error"] > CASES[arch] // 4 and counts["ran"] > 0, counts  # the mutants mean something


def test_mutants_are_reproducible():
    a = [src for _, _, _, src in fuzz.mutants(20, seed=3)]
    b = [src for _, _, _, src in fuzz.mutants(20, seed=3)]
    assert a == b and len(set(a)) == 20
