"""Kernels from source text: kernels are compiled from their source file, so a test that builds a
kernel's text writes it to a temporary module and imports that."""
import contextlib
import importlib.util
import os
import sys
import tempfile


def import_kernel_from_file(kernel_filepath, kernel_name):
    """Imports the file as module `kernel_name` and returns its attribute of that name."""
    spec = importlib.util.spec_from_file_location(kernel_name, kernel_filepath)
    module = importlib.util.module_from_spec(spec)
    sys.modules[kernel_name] = module
    spec.loader.exec_module(module)
    return getattr(module, kernel_name)


@contextlib.contextmanager
def load_kernel_from_string(kernel_str, kernel_name):
    """with load_kernel_from_string(text, "k") as k: the object `k` that `text` defines, the module
    removed again on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{kernel_name}.py")
        with open(path, "w") as f:
            f.write(kernel_str)
        try:
            yield import_kernel_from_file(path, kernel_name)
        finally:
            sys.modules.pop(kernel_name, None)
