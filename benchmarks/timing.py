"""The one timing loop of the benchmarks: best of `repeat` synchronised calls after a warm-up."""
import time


def best_of(fn, repeat, sync=lambda: None, reset=None, clock=time.perf_counter):
    """Seconds of the fastest of `repeat` calls of fn() (one untimed warm-up call first, which also
    compiles). sync() waits for the device after each call; reset(), untimed, runs before each.
    clock: wall time by default; time.thread_time / time.process_time count CPU seconds instead,
    which other work on a shared machine disturbs less."""
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        if reset is not None:
            reset()
            sync()
        t = clock()
        fn()
        sync()
        best = min(best, clock() - t)
    return best
