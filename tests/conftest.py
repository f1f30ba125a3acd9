import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

# The host line, crash reports that name the kernel and device, `-p no:xdist` (tests/qd_pytest_plugin.py).
pytest_plugins = ["qd_pytest_plugin"]

# The on-disk kernel cache (on by default) goes to a directory of this test session, not the user's
# ~/.cache: each session starts cold, and kernels compiled again by later tests load from it. The
# controller makes it before it starts the xdist workers, which inherit the variable and share the
# directory (entries are written with an atomic rename); only the process that made it removes it,
# at its exit, after its workers are gone.
if "QD_OFFLINE_CACHE_FILE_PATH" not in os.environ:
    os.environ["QD_OFFLINE_CACHE_FILE_PATH"] = tempfile.mkdtemp(prefix="qd-test-cache-")
    atexit.register(shutil.rmtree, os.environ["QD_OFFLINE_CACHE_FILE_PATH"], ignore_errors=True)
