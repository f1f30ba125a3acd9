"""The one timing loop of the benchmarks: best of `repeat` synchronised calls after a warm-up."""
import time


def best_of(fn, repeat, sync=lambda: None, reset=None):
    """Seconds of the fastest of `repeat` calls of fn() (one untimed warm-up call first, which also
    compiles). sync() waits for the device after each call; reset(), untimed, runs before each."""
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        if reset is not None:
            reset()
            sync()
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best
