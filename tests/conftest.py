import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

# The on-disk kernel cache (on by default) goes to a directory of this test session, not the user's
# ~/.cache: each session starts cold, and kernels compiled again by later tests load from it.
if "QD_OFFLINE_CACHE_FILE_PATH" not in os.environ:
    os.environ["QD_OFFLINE_CACHE_FILE_PATH"] = tempfile.mkdtemp(prefix="qd-test-cache-")
    atexit.register(shutil.rmtree, os.environ["QD_OFFLINE_CACHE_FILE_PATH"], ignore_errors=True)
