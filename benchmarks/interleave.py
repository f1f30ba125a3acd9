#!/usr/bin/env python3
"""Interleaved iterations on the cpu (docs/backends.md, transforms/interleave.cpp): all-pairs loops
with qd.init(interleave_iterations=True), the default, and False, in one run, checked to give the
same bits.

    python3 benchmarks/interleave.py [-n 4096] [--repeat 7] [--threads 1] [--fast-math]

Kernels (n bodies):
  forces f32 / f64   examples/nbody.py's force loop: acc += m[j] * d / (r2 * sqrt(r2)) over j
  potential f32      s += m[j] / sqrt(|x[j] - x[i]|^2 + eps^2) over j

Cells: ms per call, the best of --repeat, in CPU seconds of the process (other work on a shared
machine disturbs them less than wall time); --threads 1 by default (the calling thread's work).
"""
import argparse
import json
import os
import subprocess
import sys

from timing import best_of

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(interleave, n, repeat, threads, fast_math):
    import time

    import numpy as np

    import quadrants as qd

    qd.init(arch=qd.cpu, offline_cache=False, cpu_max_num_threads=threads, fast_math=fast_math,
            interleave_iterations=interleave)
    out = {}
    for name, fp in (("forces f32", qd.f32), ("forces f64", qd.f64), ("potential f32", qd.f32)):
        np_fp = np.float32 if fp == qd.f32 else np.float64
        rng = np.random.default_rng(0)
        x = qd.Vector.field(3, fp, shape=n)
        m = qd.field(fp, shape=n)
        a = qd.Vector.field(3, fp, shape=n)
        p = qd.field(fp, shape=n)
        x.from_numpy(rng.random((n, 3)).astype(np_fp))
        m.from_numpy((rng.random(n) + 0.5).astype(np_fp))

        @qd.kernel
        def forces():
            for i in x:
                xi = x[i]
                acc = qd.Vector.zero(fp, 3)
                for j in range(n):
                    d = x[j] - xi
                    r2 = d.dot(d) + 0.0025
                    acc += m[j] * d / (r2 * qd.sqrt(r2))
                a[i] = acc

        @qd.kernel
        def potential():
            for i in x:
                s = qd.cast(0, fp)
                for j in range(n):
                    s += m[j] / qd.sqrt((x[j] - x[i]).norm_sqr() + 0.0025)
                p[i] = s

        k, res = (potential, p) if name.startswith("potential") else (forces, a)
        assert ("interleaved iterations" in qd.compile(k).ir) == interleave
        t = best_of(k, repeat, qd.sync, clock=time.process_time)
        out[name] = {"ms": t * 1e3, "bits": res.to_numpy().tobytes().hex()}
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fast-math", action="store_true")
    p.add_argument("--worker", choices=["on", "off"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker == "on", a.n, a.repeat, a.threads, a.fast_math)
    runs = {}
    for mode in ("on", "off"):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, "-n", str(a.n), "--repeat", str(a.repeat),
               "--threads", str(a.threads)] + (["--fast-math"] if a.fast_math else [])
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
        if r.returncode:
            sys.exit(f"worker {mode} failed:\n{r.stderr}")
        runs[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"n = {a.n}, {a.threads} thread(s), fast_math={a.fast_math}; ms per call (CPU time, best of {a.repeat})\n")
    print("| kernel | interleaved ms | one by one ms | speed-up | same bits |")
    print("|---|---|---|---|---|")
    for name, on in runs["on"].items():
        off = runs["off"][name]
        print(f"| {name} | {on['ms']:.2f} | {off['ms']:.2f} | {off['ms'] / on['ms']:.2f}x | "
              f"{'yes' if on['bits'] == off['bits'] else 'NO'} |")


if __name__ == "__main__":
    main()
