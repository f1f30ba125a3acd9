"""Differential fuzzer, long runs: random kernels on every available arch vs the numpy reference.

    python3 benchmarks/fuzz.py --cases 2000 [--seed 1] [--arch cpu,vulkan] [--shrink-known]

Prints, per arch, the cases run, the values compared, the cases steered around each known limit
(tests/fuzzer.py LIMITS), the mismatches per known bug (KNOWN_BUGS) and every mismatch no known bug
explains (a wrong value, or a generated kernel that fails to compile), shrunk to a minimal kernel (a
standalone script; --shrink-known: one per known bug too). A crash (the process killed by a signal)
is bisected to its case in child processes and shrunk the same way. Cases include Python-scope
values captured by the kernel and by @qd.func helpers; --layouts N fields laid out by nested dense()
calls over axes in random order are checked too (a failing one is shrunk to a script as well). The
generator, the reference and the limits live in tests/fuzzer.py; tests/python/test_fuzz_differential.py
is the bounded run of the test suite.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import fuzzer as F  # noqa: E402
import quadrants as qd  # noqa: E402


def signature(case):
    """What a shrunk case is made of: mismatches with the same signature are one class."""
    parts = set()
    for s in F.walk_stmts(case.stmts):
        parts.add(s.kind if s.kind != "atomic" else f"atomic_{s.op}")
        if s.kind == "cset":
            parts.add(f"cset:{s.op[0]}" + (f":{s.op[1]}" if s.op[0] in ("bin", "aug") else ""))
        if s.kind == "clet":
            parts.add(f"clet:{case.caps[s.val[0]].kind}" if s.val[0] in case.caps else "clet")
        for e in s.exprs:
            for n in F.walk_exprs(e):
                if n.kind in ("un", "bin", "math") or n.kind == "chain":
                    parts.add(f"{n.op}:{n.dtype}")
                elif n.kind in ("cast", "bitcast"):
                    parts.add(f"{n.kind}:{n.args[0].dtype}->{n.dtype}")
                elif n.kind == "cap":
                    parts.add("cap")
    return tuple(sorted(parts))


def report_case(case, arch, what, budget, pred=None):
    t = time.time()
    small = F.shrink(case, arch, budget_s=budget, pred=pred)
    print(f"--- {what} on {arch} (shrunk in {time.time() - t:.0f} s; signature {', '.join(signature(small))})")
    print(F.repro(small, arch))
    if pred is not F.crashes:
        for m in F.run_group([small], arch):
            print(f"    {m}")
    sys.stdout.flush()
    return small


def worker(args):
    """Runs one arch in this process; `--skip` batches crashed in an earlier worker."""
    arch = args.arch
    qd.init(arch=getattr(qd, arch), offline_cache=False)  # one-off kernels: keep them out of the disk cache
    off = args.off
    cases, regen = F.generate(args.seed, args.cases, off=off, arch=arch, size=args.size)
    stats = F.Stats()
    stats.regenerated = regen
    groups = list(F.batches(cases, args.batch or F.batch_size(arch)))
    skip = set(args.skip)
    mismatches = []
    t0 = time.time()
    for i, group in enumerate(groups):
        if i in skip:
            continue
        print(f"BATCH {i}", file=sys.stderr, flush=True)
        mismatches += F.run_cases(group, arch, stats, batch=args.batch)
    failed = F.run_contended(arch, args.seed, args.contended if args.contended is not None else args.cases // 20,
                             stats)
    layouts = F.run_layouts(arch, args.seed, args.layouts if args.layouts is not None else args.cases // 10, stats)
    elapsed = time.time() - t0
    print(stats.report())
    for c, problems in failed:
        print(f"--- contended atomics mismatch on {arch}: {c.n} x atomic_{c.op} on {c.m} {c.dtype} cell(s), "
              f"form {c.form}: {'; '.join(problems[:3])}")
        print(c.source())
    layouts.sort(key=lambda lp: lp[1][0].startswith("error"))  # wrong values first, then compile errors
    errors = sum(lp[1][0].startswith("error") for lp in layouts)
    print(f"{arch}: {len(layouts)} nested-dense layout(s) failing ({len(layouts) - errors} wrong values, "
          f"{errors} compile errors)")
    for k, (lay, problems) in enumerate(layouts):
        print(f"--- nested-dense layout mismatch on {arch}: {lay.describe()}: {'; '.join(problems[:3])}")
        if k < args.max_shrinks:
            t = time.time()
            small = F.shrink_layout(lay, arch, budget_s=min(args.shrink_budget, 60))
            probs = F.run_layout_group([small], arch)
            print(f"    shrunk in {time.time() - t:.0f} s to {small.describe()}: "
                  f"{'; '.join(probs[0][1][:3]) if probs else '(no longer fails)'}")
            print(F.layout_script(small, arch))
        sys.stdout.flush()
    by_case = {}
    for m in mismatches:
        by_case.setdefault(id(m.case), []).append(m)
    new = [ms for ms in by_case.values() if any(not m.known for m in ms)]
    per_class = {}
    for ms in by_case.values():
        for name in {n for m in ms for n in m.known}:
            per_class.setdefault(name, []).append(ms)
    # wrong values first (silent), then kernels that fail to compile
    new.sort(key=lambda ms: not any(m.cell is not None and not m.known for m in ms))
    wrong = sum(any(m.cell is not None and not m.known for m in ms) for ms in new)
    print(f"{arch}: {len(mismatches)} mismatching values in {len(by_case)} cases; {len(new)} case(s) with a NEW "
          f"mismatch ({wrong} wrong values, {len(new) - wrong} compile errors); known (KNOWN_BUGS): " +
          (", ".join(f"{k} {len(v)}" for k, v in sorted(per_class.items())) or "none"))
    # shrink every new failure (up to --max-shrinks), then one case per known class
    todo = []
    for ms in new[:args.max_shrinks]:  # shrink to the same kind of failure: a wrong value, or the same error
        first = next(m for m in sorted(ms, key=lambda m: m.cell is None) if not m.known)
        todo.append(("NEW mismatch" if first.cell is not None else "NEW error", ms, F.like(first)))
    for name, v in sorted(per_class.items()) if args.shrink_known else []:
        alone = [ms for ms in v if any(m.known == [name] for m in ms)]  # a case where only this class explains it
        todo.append((f"known: {name}", (alone or v)[0],
                     (lambda m, name=name: m.known == [name]) if alone else (lambda m, name=name: name in m.known)))
    seen = set()
    for what, ms, want in todo:
        for m in ms[:3]:
            print(f"    {m}")
        small = report_case(ms[0].case, arch, what, args.shrink_budget,
                            pred=lambda c, a, want=want: F.fails(c, a, want))
        sig = signature(small)
        if sig in seen:
            print("    (same signature as a kernel above)")
        seen.add(sig)
    print("STATS " + json.dumps({"arch": arch, "cases": stats.cases[arch], "seconds": elapsed,
                                 "mismatching_cases": len(by_case), "new": len(new) + len(failed) + len(layouts),
                                 "layouts": stats.layouts[arch], "failing_layouts": len(layouts)}))


def crash_batch(args):
    """Finds the case of batch `--crash-batch` that kills the process and shrinks it."""
    arch = args.arch
    qd.init(arch=getattr(qd, arch), offline_cache=False)  # one-off kernels: keep them out of the disk cache
    off = args.off
    cases, _ = F.generate(args.seed, args.cases, off=off, arch=arch, size=args.size)
    group = list(F.batches(cases, args.batch or F.batch_size(arch)))[args.crash_batch]
    for c in group:
        if F.crashes(c, arch):
            report_case(c, arch, "crash", args.shrink_budget, pred=F.crashes)
            return
    print(f"batch {args.crash_batch} crashed on {arch}, but none of its cases does alone")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=500, help="cases per arch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--contended", type=int, default=None, help="contended-atomic kernels per arch (default cases/20)")
    p.add_argument("--layouts", type=int, default=None, help="nested-dense layouts per arch (default cases/10)")
    p.add_argument("--arch", default=None, help="comma-separated arches (default: every available one)")
    p.add_argument("--batch", type=int, default=None, help="cases per kernel (default: tests/fuzzer.py batch_size)")
    p.add_argument("--shrink-budget", type=float, default=120, help="seconds to shrink one failing case")
    p.add_argument("--max-shrinks", type=int, default=10, help="cases with a new mismatch to shrink per arch")
    p.add_argument("--shrink-known", action="store_true", help="also shrink one case per KNOWN_BUGS class hit")
    p.add_argument("--size", default="normal", choices=["small", "normal"], help="case size")
    p.add_argument("--off", default="", help="generator features to leave out: float_floordiv_mod, f64_round, "
                                               "captured (Python-scope values)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--skip", type=int, action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--crash-batch", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.off = [o for o in args.off.split(",") if o]
    if args.worker:
        return crash_batch(args) if args.crash_batch is not None else worker(args)
    arches = args.arch.split(",") if args.arch else F.available_arches()
    print(f"fuzz: {args.cases} cases per arch, seed {args.seed}, arches {arches}")
    rest, argv = [], sys.argv[1:]
    for i, a in enumerate(argv):  # the user's options, less --arch
        if not (a.startswith("--arch") or (i > 0 and argv[i - 1] == "--arch")):
            rest.append(a)
    totals = []
    for arch in arches:
        base = [sys.executable, os.path.abspath(__file__), "--worker", "--arch", arch] + rest
        skip = []
        while True:  # one child process per arch; a batch that crashes it is bisected, then skipped
            r = subprocess.run(base + sum((["--skip", str(b)] for b in skip), []),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            print("\n".join(line for line in r.stdout.splitlines() if not line.startswith("STATS ")))
            if r.returncode < 0:
                done = [int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("BATCH ")]
                bad = done[-1] if done else 0
                print(f"!!! {arch}: the process died (signal {-r.returncode}) in batch {bad}; bisecting", flush=True)
                subprocess.run(base + ["--crash-batch", str(bad)], check=False)
                skip.append(bad)
                continue
            if r.returncode != 0:
                print(r.stderr[-4000:])
            totals += [json.loads(line[6:]) for line in r.stdout.splitlines() if line.startswith("STATS ")]
            break
    for t in totals:
        print(f"{t['arch']}: {t['cases']} cases and {t['layouts']} layouts in {t['seconds']:.1f} s, "
              f"{t['mismatching_cases']} mismatching case(s), {t['failing_layouts']} failing layout(s), "
              f"{t['new']} with a mismatch no KNOWN_BUGS row explains")


if __name__ == "__main__":
    main()
