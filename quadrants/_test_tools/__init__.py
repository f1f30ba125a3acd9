"""Helpers for tests written against Quadrants (the module path they import them from). It uses the
kernel language namespace as a user uses `qd`, and nothing in the package imports it."""
from quadrants import language as qd  # the kernel language namespace (nothing imports `quadrants` back)


def qd_init_same_arch(**options):
    """qd.init(**options) again on the arch of the current qd.init() (a test re-initialising with other
    options, e.g. a fresh offline cache directory, stays on the arch it was parametrised with)."""
    cfg = qd._current_config()
    if cfg is None:
        raise RuntimeError("qd_init_same_arch: call qd.init() first")
    qd.init(**dict(options, arch=cfg.arch))


__all__ = ["qd_init_same_arch"]
