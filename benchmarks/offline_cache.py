#!/usr/bin/env python3
"""The on-disk kernel cache: the first calls of a fresh process with an empty cache, then with a
warm one (every kernel loaded from disk, nothing compiled).

    python3 benchmarks/offline_cache.py [--runs 5]

Each process calls six kernels of examples/atomics_tour.ipynb's kinds once and reports the total
time of those first calls (front end + compile or load + launch). The goal (issue 17): a warm
process's first calls take at most 1/5 of a cold one's.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROGRAM = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    import quadrants as qd
    from quadrants._lib import offline_cache

    qd.init(arch=qd.cpu, offline_cache_file_path=sys.argv[1])
    n = 4096
    hist = qd.field(qd.i32, shape=64)
    counter = qd.field(qd.i32, shape=())
    ticket = qd.field(qd.i32, shape=n)
    best = qd.field(qd.f32, shape=())
    lock = qd.field(qd.i32, shape=())
    best_at = qd.field(qd.i32, shape=())
    kept = qd.field(qd.i32, shape=())

    @qd.kernel
    def histogram(s: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(s.shape[0]):
            b = qd.cast((s[i] + 4.0) / 8.0 * 64, qd.i32)
            if 0 <= b < 64:
                qd.atomic_add(hist[b], 1)

    @qd.kernel
    def tickets():
        for i in range(n):
            ticket[i] = qd.atomic_add(counter[None], 1)

    @qd.kernel
    def argmax(v: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(v.shape[0]):
            if v[i] > qd.volatile_load(best[None]):
                while qd.atomic_cas(lock[None], 0, 1) != 0:
                    pass
                if v[i] > best[None]:
                    best[None] = v[i]
                    best_at[None] = i
                qd.atomic_exchange(lock[None], 0)

    @qd.kernel
    def compact(src: qd.types.ndarray(dtype=qd.f32, ndim=1), dst: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(src.shape[0]):
            if src[i] > 0.5:
                dst[qd.atomic_add(kept[None], 1)] = src[i]

    @qd.kernel
    def reduce(x: qd.types.ndarray(dtype=qd.f64, ndim=1)) -> qd.f64:
        s = 0.0
        for i in range(x.shape[0]):
            a = qd.sin(x[i]) * qd.exp(-x[i]) + qd.atan2(x[i], 1.5) + qd.sqrt(qd.abs(x[i]))
            for j in range(4):
                a = a * 0.5 + qd.cos(a + j)
            s += a
        return s

    @qd.kernel
    def family(y: qd.i32) -> qd.i32:
        t = 0
        for i in range(n):
            t += qd.atomic_min(ticket[i], y) + qd.atomic_max(ticket[i], y) + qd.atomic_xor(ticket[i], y)
            t += qd.atomic_mul(ticket[i], 1) + qd.atomic_and(ticket[i], -1) + qd.atomic_or(ticket[i], 0)
        return t

    f32 = np.random.default_rng(0).random(n, dtype=np.float32)
    calls = [lambda: histogram(f32), tickets, lambda: argmax(f32), lambda: compact(f32, np.zeros_like(f32)),
             lambda: reduce(f32.astype(np.float64)), lambda: family(7)]
    start = time.perf_counter()
    for c in calls:
        c()
    print(json.dumps({"seconds": time.perf_counter() - start, "stats": offline_cache.stats()}))
''')


def run(script, cache):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(script), str(cache)], capture_output=True, text=True, env=env,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = pathlib.Path(tmp) / "prog.py"
        script.write_text(PROGRAM)
        cold, warm = [], []
        for r in range(args.runs):
            cache = pathlib.Path(tmp) / f"cache{r}"
            c = run(script, cache)
            w = run(script, cache)
            assert c["stats"]["hits"] == 0 and w["stats"]["misses"] == 0, (c, w)
            cold.append(c["seconds"])
            warm.append(w["seconds"])
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"first calls of 6 kernels in a fresh process, median of {args.runs}: "
          f"empty cache {c * 1e3:.1f} ms, warm cache {w * 1e3:.1f} ms ({w / c:.2f} of cold)")


if __name__ == "__main__":
    main()
